#!/usr/bin/env bash
# Differential checks against PyTorch (CPU): builds the three drivers with g++ and runs the harnesses.
#
#   tests/pytorch/run.sh [SEED] [CASES]     (defaults 1 and 3000)
#
# Needs python3 with torch (`pip install torch`); not part of the test suite, which must not
# depend on it. Prints every kind of mismatch; the differences docs/architecture.md lists
# ("Against PyTorch") are the expected ones: anything else is a bug in one of the two.
# Environment: KILN_PYTORCH_BUILD_DIR, where the drivers go (default: build-pytorch at the root).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${KILN_PYTORCH_BUILD_DIR:-$root/build-pytorch}"
seed="${1:-1}" cases="${2:-3000}"
python3 -c 'import torch' 2>/dev/null || { echo "tests/pytorch: needs torch (pip install torch)" >&2; exit 2; }
mkdir -p "$build"
# reductions.cpp as users compile: the vector paths, and FMAs where the compiler contracts them.
declare -A flags=([ops]="-O1" [composite]="-O1" [reductions]="-O2 -march=native")
for driver in ops composite reductions; do
  if [ ! -x "$build/$driver" ] || [ -n "$(find "$root/include" "$here/$driver.cpp" -newer "$build/$driver" -print -quit)" ]; then
    echo "building $driver (a few minutes)" >&2
    # shellcheck disable=SC2086  # (the flags split on purpose)
    g++ -std=c++20 ${flags[$driver]} -I"$root/include" "$here/$driver.cpp" -o "$build/$driver"
  fi
done
cd "$build"
echo "== elementwise ops and their gradients, float and double, $cases cases"
python3 "$here/ops.py" ./ops "$seed" "$cases"
for dtype in d f; do
  for special in 0.0 0.3; do
    echo "== composite expressions ($dtype), share of special values $special, $((cases / 4)) cases"
    python3 "$here/composite.py" ./composite "$dtype" "$seed" "$((cases / 4))" "$special"
  done
done
for dtype in d f; do
  echo "== reductions inside expressions over strided views ($dtype), $cases cases"
  python3 "$here/reductions.py" ./reductions "$dtype" "$seed" "$cases"
done

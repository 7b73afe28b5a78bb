#!/usr/bin/env bash
# Compile-time and compiler-memory benchmark of kiln against Eigen (see compile_bench.py).
#
#   bench/compile/run.sh [--runs N] [--keep DIR] [--table FILE] [--cxx g++]
#
# Environment: KILN_BENCH_CPU pins the compiles to one core with taskset (default: the last one).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# GNU time for "Maximum resident set size"; the shell's `time` keyword does not report it.
if [[ ! -x /usr/bin/time ]]; then
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends time
fi

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
pin=()
command -v taskset >/dev/null 2>&1 && pin=(taskset -c "${KILN_BENCH_CPU:-$(($(nproc) - 1))}")
"${pin[@]}" python3 "$here/compile_bench.py" "$@"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

#!/usr/bin/env bash
# Builds and runs the quickstart example (examples/quickstart.cpp).
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"
kiln_install_deps
cd "$KILN_ROOT"

if [[ ! -f examples/quickstart.cpp ]]; then
  echo "kiln: examples/quickstart.cpp does not exist yet" >&2
  exit 1
fi

cmake -S . -B build
cmake --build build -j"$(nproc)" --target kiln_quickstart
./build/examples/kiln_quickstart

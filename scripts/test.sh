#!/usr/bin/env bash
# Builds kiln and runs the whole test suite.
#   KILN_BUILD_DIR   build directory, relative to the repository root (default: build)
#   KILN_CMAKE_ARGS  extra arguments for the cmake configure step, split on whitespace
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"
kiln_install_deps
cd "$KILN_ROOT"

build_dir=${KILN_BUILD_DIR:-build}
read -r -a cmake_args <<<"${KILN_CMAKE_ARGS:-}"

# Re-running configure on an existing tree is cheap and picks up newly added test sources.
cmake -S . -B "$build_dir" "${cmake_args[@]}"
cmake --build "$build_dir" -j"$(nproc)"
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j"$(nproc)"

#!/usr/bin/env bash
# A/B timing of kiln revisions in one process (runner.cpp): each revision's include/ is built with
# workloads.cpp into its own shared library (-O3 -march=native -falign-loops=64, tensors on page
# boundaries as in the benchmarks: ../page_aligned_new.cpp), and the runner
# times them round by round, pinned to one core: every candidate sees the same phases of a shared
# host's load. Repeat a comparison; trust differences that repeat (bench/README.md).
#
#   bench/ab/run.sh [-n N] [-w WORKLOADS] [-r ROUNDS] REV...
#       REV: a git revision, or "." for the working tree; WORKLOADS: digits of W1-W4, W6-W9,
#       t for W4t (rows of 255), r for W4 at rank 3 ([N/512, 2, 256]), l for W9 at rank 3 (the same
#       shape) (default 123467),
#       N: elements (default 1024), ROUNDS (default 300).
#   e.g. bench/ab/run.sh -w 46 HEAD~3 .
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
n=1024 workloads=123467 rounds=300
while getopts "n:w:r:" opt; do
  case $opt in
    n) n=$OPTARG ;; w) workloads=$OPTARG ;; r) rounds=$OPTARG ;; *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -ge 1 ]] || { echo "usage: $0 [-n N] [-w WORKLOADS] [-r ROUNDS] REV..." >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cxx="${CXX:-g++}"
libs=() pids=()
for rev in "$@"; do
  name="$(printf %s "$rev" | tr -c 'A-Za-z0-9_.~^-' _)"
  [[ $rev == . ]] && name=worktree
  inc="$work/$name/include"
  mkdir -p "$inc"
  if [[ $rev == . ]]; then
    cp -r "$root/include/." "$inc"
  else
    git -C "$root" archive "$rev" include | tar -x -C "$work/$name"
  fi
  "$cxx" -std=c++20 -O3 -march=native -DNDEBUG -falign-loops=64 -fPIC -shared -I"$inc" \
    "$here/workloads.cpp" "$here/../page_aligned_new.cpp" -o "$work/$name.so" &
  pids+=($!)
  libs+=("$work/$name.so")
done
"$cxx" -std=c++17 -O2 "$here/runner.cpp" -o "$work/runner" -ldl &
pids+=($!)
for pid in "${pids[@]}"; do wait "$pid"; done
pin=()
command -v taskset >/dev/null 2>&1 && pin=(taskset -c "${KILN_BENCH_CPU:-$(($(nproc) - 1))}")
"${pin[@]}" "$work/runner" "$n" "$workloads" "$rounds" "${libs[@]}" | sed "s|$work/||"

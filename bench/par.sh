#!/usr/bin/env bash
# Builds bench/par.cpp and prints kiln::par against kiln::simd (and the hand-written OpenMP loops)
# as one markdown table of wall-clock times and speedups. Not pinned: it uses every core.
#
#   bench/par.sh [extra Google Benchmark flags...]     e.g. bench/par.sh --benchmark_filter=W2
#
# Environment: KILN_BENCH_BUILD_DIR (default build-bench), KILN_BENCH_MIN_TIME (default 0.5),
# KILN_BENCH_REPS (default 5; the table shows the median), KILN_BENCH_TABLE (also write the table
# there), OMP_NUM_THREADS (the threads kiln::par may use; default: every core).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/${KILN_BENCH_BUILD_DIR:-build-bench}"
json="$build/bench-par.json"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target kiln_bench_par -j"$(nproc)"

echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)" >&2
"$build/bench/kiln_bench_par" --benchmark_repetitions="${KILN_BENCH_REPS:-5}" \
  --benchmark_report_aggregates_only=true --benchmark_min_time="${KILN_BENCH_MIN_TIME:-0.5}" \
  --benchmark_out="$json" --benchmark_out_format=json "$@" >&2
echo "load after the run:  $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "${KILN_BENCH_TABLE:-}" "$json" <<'PY'
import json, sys
table_out, path = sys.argv[1], sys.argv[2]
units = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
median = {}
for b in json.load(open(path))["benchmarks"]:
    if b.get("aggregate_name") != "median":
        continue
    workload, impl, n = b["run_name"].split("/")[:3]
    median[(workload, impl, int(n))] = b["real_time"] * units[b["time_unit"]]

def size(n):
    return f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K"

def time(ns):
    return f"{ns / 1e3:.2f} us" if ns < 1e6 else f"{ns / 1e6:.2f} ms"

lines = ["| workload | N | simd | par | par speedup | hand OpenMP speedup |", "|---|---|---|---|---|---|"]
for (w, n) in sorted({(w, n) for (w, i, n) in median}):
    simd, par, hand = (median.get((w, i, n)) for i in ("simd", "par", "hand_omp"))
    if simd is None or par is None:
        continue
    hand_cell = f"{simd / hand:.2f}x" if hand else "-"
    lines.append(f"| {w} | {size(n)} | {time(simd)} | {time(par)} | {simd / par:.2f}x | {hand_cell} |")
text = "\n".join(lines)
print(text)
if table_out:
    open(table_out, "w").write(text + "\n")
PY

#!/usr/bin/env bash
# Builds the benchmarks (bench/elementwise.cpp, bench/reduce.cpp, bench/grad.cpp) in their own tree and prints
# the results as one markdown table.
#
#   bench/run.sh [extra Google Benchmark flags...]     e.g. bench/run.sh --benchmark_filter=W1
#
# Environment:
#   KILN_BENCH_BUILD_DIR  build tree, relative to the repository root (default: build-bench)
#   KILN_BENCH_CPU        the core the benchmark is pinned to with taskset (default: the last one)
#   KILN_BENCH_MIN_TIME   --benchmark_min_time in seconds per repetition (default: 0.5)
#   KILN_BENCH_REPS       --benchmark_repetitions (default: 5; the table shows the median)
#   KILN_BENCH_INTERLEAVE --benchmark_enable_random_interleaving (default: true): the repetitions of
#                         all benchmarks run in random order, so a burst of load on the shared
#                         machine spreads over every implementation instead of hitting one
#   KILN_BENCH_JSON       where the raw JSON goes (default: <build dir>/bench.json; one file per
#                         binary: bench-elementwise.json, bench-reduce.json, bench-grad.json)
#   KILN_BENCH_TABLE      if set, the table is also written to this file
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/${KILN_BENCH_BUILD_DIR:-build-bench}"
cpu="${KILN_BENCH_CPU:-$(($(nproc) - 1))}"
min_time="${KILN_BENCH_MIN_TIME:-0.5}"
reps="${KILN_BENCH_REPS:-5}"
interleave="${KILN_BENCH_INTERLEAVE:-true}"
json="${KILN_BENCH_JSON:-$build/bench.json}"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target kiln_bench_elementwise kiln_bench_reduce kiln_bench_grad -j"$(nproc)"

echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)" >&2
pin=()
if command -v taskset >/dev/null 2>&1; then pin=(taskset -c "$cpu"); else echo "taskset not found: not pinned" >&2; fi

# Google Benchmark 1.7 takes --benchmark_min_time as plain seconds (1.8 also accepts "0.5s").
jsons=()
for bench in elementwise reduce grad; do
  out="${json%.json}-$bench.json"
  "${pin[@]}" "$build/bench/kiln_bench_$bench" \
    --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
    --benchmark_min_time="$min_time" --benchmark_enable_random_interleaving="$interleave" \
    --benchmark_out="$out" --benchmark_out_format=json "$@" >&2
  jsons+=("$out")
done
echo "load after the run:  $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "${KILN_BENCH_TABLE:-}" "$reps" "${jsons[@]}" <<'EOF'
import json, math, os, sys
from collections import defaultdict

table_out, reps, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
# A binary whose benchmarks the filter excludes writes an empty file.
data = {"benchmarks": [b for p in paths if os.path.getsize(p) > 0 for b in json.load(open(p))["benchmarks"]]}
ns = {}       # (workload, impl, n) -> median ns per element
cv = {}       # (workload, impl, n) -> coefficient of variation of the time, in %
extras = defaultdict(dict)
units = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
for b in data["benchmarks"]:
    name = b.get("run_name", b["name"])
    parts = name.split("/")
    if len(parts) != 3:
        continue
    workload, impl, n = parts[0], parts[1], int(parts[2])
    agg = b.get("aggregate_name")
    # CPU time: the benchmark is single-threaded, and CPU time leaves out the time the process
    # was descheduled when another engineer's build shares the core.
    t = b["cpu_time"] * units[b["time_unit"]]
    if agg == "median" or (agg is None and (workload, impl, n) not in ns):
        ns[(workload, impl, n)] = t / n
    elif agg == "cv":
        cv[(workload, impl, n)] = 100.0 * b["cpu_time"]

impls = ["kiln", "scalar", "xsimd", "eigen"]
rows = sorted({(w, n) for (w, i, n) in ns}, key=lambda r: (r[0], r[1]))

def size(n):
    return f"{n >> 20}M" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10}K" if n % 1024 == 0 else str(n)

def ratio(kiln, other):
    if kiln is None or other is None:
        return "n/a"
    r = other / kiln
    return f"{r:.2f}x faster" if r >= 1 else f"{1 / r:.2f}x slower"

# The issues' targets per workload: (label, verdict) with verdict "met", "noise" or "missed".
# "noise": the ratio misses the bound by less than twice its standard error, estimated from the
# two implementations' coefficients of variation over the repetitions (a median's standard error
# taken as 1.25 sigma / sqrt(reps)); such a row cannot tell the two apart.
def targets(w, n, v):
    k, e, x, fwd = v["kiln"], v["eigen"], v["xsimd"], v.get("kiln_fwd")
    def faster(other_impl, other, bound):
        if k is None or other is None:
            return "missed"
        r = other / k
        if r >= bound:
            return "met"
        spread = math.hypot(cv.get((w, "kiln", n), 0.0), cv.get((w, other_impl, n), 0.0)) / 100
        return "noise" if r * (1 + 2 * 1.25 * spread / math.sqrt(max(reps, 1))) >= bound else "missed"
    if w == "W5":
        return [("xsimd >= 0.8x", faster("xsimd", x, 0.8))]
    if w == "W5chain":
        return [("grad / fwd < 2", "met" if k is not None and fwd is not None and k / fwd < 2 else "missed")]
    if w.startswith("AD_") or w in ("W8", "W9"):  # no target set: compared, not judged
        return []
    return [("Eigen", faster("eigen", e, 1.0)), ("xsimd", faster("xsimd", x, 1 / 1.3 if w == "W7" else 0.9))]

lines = []
lines.append("CPU ns per element, median of the repetitions (lower is better; ± shows the coefficient of "
             "variation where it is 5% or more). Ratios: time of the other implementation / time of kiln; "
             "grad / fwd: kiln's gradient time over its forward time.")
lines.append("")
lines.append("Targets: W1-W4, W6 at least as fast as Eigen and 0.9x the xsimd hand loop; W7 within 1.3x of it; "
             "W5 at least 0.8x it; W5chain gradient under 2x the forward. \"within noise\": short of the bound by "
             "less than twice the ratio's standard error over the repetitions.")
lines.append("")
lines.append("| workload | N | " + " | ".join(impls) + " | kiln vs Eigen | kiln vs xsimd hand | grad / fwd | targets |")
lines.append("|---|---:|" + "---:|" * len(impls) + "---|---|---:|---|")
met_all = True
for w, n in rows:
    vals = {i: ns.get((w, i, n)) for i in impls + ["kiln_fwd"]}
    cells = []
    for i in impls:
        v = vals[i]
        c = cv.get((w, i, n))
        cells.append("-" if v is None else f"{v:.3f}" + (f" (±{c:.0f}%)" if c is not None and c >= 5 else ""))
    k, e, x, fwd = vals["kiln"], vals["eigen"], vals["xsimd"], vals["kiln_fwd"]
    checks = targets(w, n, vals)
    missed = [t for t, r in checks if r == "missed"]
    noise = [t for t, r in checks if r == "noise"]
    met_all = met_all and not missed and not noise
    verdict = ("-" if not checks else "MISSED: " + ", ".join(missed) if missed else
               "within noise: " + ", ".join(noise) if noise else "met")
    grad_ratio = f"{k / fwd:.2f}" if k is not None and fwd is not None else "-"
    lines.append(f"| {w} | {size(n)} | " + " | ".join(cells) + f" | {ratio(k, e)} | {ratio(k, x)} | {grad_ratio} | {verdict} |")

other = sorted({(w, i, n) for (w, i, n) in ns if i not in impls and i != "kiln_fwd"})
if other:
    lines.append("")
    lines.append("Other variants (ns per element): " + ", ".join(f"{w}/{i}/{size(n)} {ns[(w, i, n)]:.3f}" for w, i, n in other))
lines.append("")
lines.append("All targets met." if met_all else "Some targets missed or within noise (see the last column).")
text = "\n".join(lines)
print(text)
if table_out:
    open(table_out, "w").write(text + "\n")
EOF

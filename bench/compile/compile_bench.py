#!/usr/bin/env python3
"""Compile-time benchmark: kiln against Eigen, run through bench/compile/run.sh.

Measures, for generated translation units compiled with
    g++ -std=c++20 -O2 -march=native -c
the wall time (median of --runs compiles, default 3) and the peak memory of the compiler
(/usr/bin/time -v, "Maximum resident set size"):

  (a) an empty TU, a TU that only includes <kiln/kiln.hpp>, one that only includes <Eigen/Core>
      (and, to split kiln's cost, one that only includes <xsimd/xsimd.hpp>, which kiln includes);
  (b) TUs that assign one elementwise expression of 4, 16 and 64 op nodes to a tensor, the same
      expression in kiln and in Eigen, in two shapes:
        chain: a chain cycling through  *0.5  +y  tanh  *y  -0.25  exp  +x  relu
               (4 nodes: tanh(x * 0.5f + y) * y),
        sum:   a sum of independent 4-node terms tanh(x * a + y) * y (a balanced-ish tree,
               closer to how long formulas are written), 4 nodes per term plus the + between terms.

Prints a markdown table; the "expr cost" column subtracts the include-only TU of the same library,
and "per node" divides it by the node count, so linear growth shows as a flat per-node cost.
"""
import argparse
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
SIZES = (4, 16, 64)

CHAIN_OPS = [  # (kiln, eigen) templates; {e} is the operand so far
    ("({e} * 0.5f)", "({e} * 0.5f)"),
    ("({e} + y)", "({e} + y)"),
    ("kiln::tanh({e})", "({e}).tanh()"),
    ("({e} * y)", "({e} * y)"),
    ("({e} - 0.25f)", "({e} - 0.25f)"),
    ("kiln::exp({e})", "({e}).exp()"),
    ("({e} + x)", "({e} + x)"),
    ("kiln::relu({e})", "({e}).max(0.f)"),
]


def chain(nodes, lib):
    e = "x"
    for k in range(nodes):
        e = CHAIN_OPS[k % len(CHAIN_OPS)][0 if lib == "kiln" else 1].format(e=e)
    return e


def term(k, lib):
    a = f"{0.5 + 0.125 * k:.3f}f"
    if lib == "kiln":
        return f"kiln::tanh(x * {a} + y) * y"
    return f"(x * {a} + y).tanh() * y"


def summed(nodes, lib):
    # t terms of 4 nodes and t - 1 additions: 4t + t - 1 nodes; pick t so that it is the closest.
    t = max(1, round((nodes + 1) / 5))
    return " + ".join(f"({term(k, lib)})" for k in range(t)), 5 * t - 1


# Per library: the include, and the parameters of f (None: an include-only translation unit).
SOURCES = {
    "kiln": ("#include <kiln/kiln.hpp>\n",
             "kiln::tensor<float, 1>& z, kiln::tensor<float, 1> const& x, kiln::tensor<float, 1> const& y"),
    "xsimd": ("#include <xsimd/xsimd.hpp>\n", None),
    "eigen": ("#include <Eigen/Core>\n", "Eigen::ArrayXf& z, Eigen::ArrayXf const& x, Eigen::ArrayXf const& y"),
}


def source(lib, body):
    if lib not in SOURCES:
        return "// empty translation unit\n"
    head, params = SOURCES[lib]
    if body is None or params is None:
        return head
    return head + f"void f({params}) {{\n  z = {body};\n}}\n"


def compile_once(cxx, flags, path, obj):
    cmd = ["/usr/bin/time", "-v", cxx, *flags, "-c", str(path), "-o", str(obj)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"compile failed: {path}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    user = re.search(r"User time \(seconds\): ([\d.]+)", proc.stderr)
    system = re.search(r"System time \(seconds\): ([\d.]+)", proc.stderr)
    cpu = float(user.group(1)) + float(system.group(1)) if user and system else float("nan")
    return wall, int(m.group(1)) if m else 0, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    ap.add_argument("--keep", help="write the generated sources to this directory")
    ap.add_argument("--table", help="also write the table to this file")
    args = ap.parse_args()

    flags = ["-std=c++20", "-O2", "-march=native", f"-I{ROOT / 'include'}", "-isystem", "/usr/include/eigen3"]
    cases = [("baseline", "empty TU", "none", None, 0),
             ("include", "#include <kiln/kiln.hpp>", "kiln", None, 0),
             ("include", "#include <Eigen/Core>", "eigen", None, 0),
             ("include", "#include <xsimd/xsimd.hpp> (part of kiln's cost)", "xsimd", None, 0)]
    for shape in ("chain", "sum"):
        for n in SIZES:
            for lib in ("kiln", "eigen"):
                if shape == "chain":
                    body, nodes = chain(n, lib), n
                else:
                    body, nodes = summed(n, lib)
                cases.append((shape, f"{nodes} nodes", lib, body, nodes))

    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="kiln-compile-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    cpu = {}  # case index -> median user + system seconds (robust when other jobs share the CPU)
    sources = []
    for idx, (kind, label, lib, body, nodes) in enumerate(cases):
        src = work / f"tu{idx:02d}_{kind}_{lib}_{nodes}.cpp"
        src.write_text(source(lib, body))
        sources.append((src, work / (src.stem + ".o")))
    # Rounds over every TU rather than all runs of one TU in a row: a stretch of load on the shared
    # machine then spreads over kiln and Eigen alike instead of landing on one of them.
    runs = [[] for _ in cases]
    for r in range(args.runs):
        for idx, (src, obj) in enumerate(sources):
            runs[idx].append(compile_once(args.cxx, flags, src, obj))
        print(f"  round {r + 1} of {args.runs} done", file=sys.stderr)
    for idx, (kind, label, lib, body, nodes) in enumerate(cases):
        src, obj = sources[idx]
        wall = statistics.median(x[0] for x in runs[idx])
        rss = max(x[1] for x in runs[idx])
        cpu[idx] = statistics.median(x[2] for x in runs[idx])
        results.append((kind, label, lib, nodes, wall, rss, obj.stat().st_size))
        print(f"  {src.name}: {wall:.2f} s wall, {cpu[idx]:.2f} s cpu, {rss / 1024:.0f} MiB", file=sys.stderr)

    base = {lib: wall for kind, _, lib, _, wall, _, _ in results if kind == "include"}
    base_rss = {lib: rss for kind, _, lib, _, _, rss, _ in results if kind == "include"}
    empty = next(w for kind, _, _, _, w, _, _ in results if kind == "baseline")
    empty_rss = next(r for kind, _, _, _, _, r, _ in results if kind == "baseline")

    out = []
    out.append(f"`{args.cxx} {' '.join(f for f in flags if not f.startswith('-I') and f != '-isystem' and not f.startswith('/'))} -c`, "
               f"wall time median of {args.runs} interleaved rounds, peak RSS the largest of the runs.")
    out.append("")
    out.append("| TU | library | wall (s) | over empty TU (s) | CPU user+sys (s) | peak RSS (MiB) | .o (KiB) |")
    out.append("|---|---|---:|---:|---:|---:|---:|")
    for idx, (kind, label, lib, nodes, wall, rss, size) in enumerate(results):
        if kind in ("baseline", "include"):
            out.append(f"| {label} | {lib if lib != 'none' else '-'} | {wall:.2f} | {wall - empty:+.2f} | {cpu[idx]:.2f} | {rss / 1024:.0f} | {size / 1024:.0f} |")
    out.append("")
    out.append("| shape | nodes | library | wall (s) | expr cost over include-only (s) | per node (ms) | CPU user+sys (s) | peak RSS (MiB) | RSS over include-only (MiB) | .o (KiB) |")
    out.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for idx, (kind, label, lib, nodes, wall, rss, size) in enumerate(results):
        if kind in ("chain", "sum"):
            cost = wall - base[lib]
            out.append(f"| {kind} | {nodes} | {lib} | {wall:.2f} | {cost:+.2f} | {1000 * cost / nodes:.1f} | {cpu[idx]:.2f} | "
                       f"{rss / 1024:.0f} | {(rss - base_rss[lib]) / 1024:+.0f} | {size / 1024:.0f} |")

    # Targets.
    out.append("")
    k_inc, e_inc = base["kiln"] - empty, base["eigen"] - empty
    out.append(f"Include cost over the empty TU: kiln {k_inc:.2f} s, Eigen {e_inc:.2f} s -> "
               + ("target met (kiln <= Eigen)." if k_inc <= e_inc else f"target MISSED (kiln {k_inc / e_inc:.2f}x Eigen)."))
    # Linearity: the marginal cost of a node between consecutive sizes. Linear growth keeps it
    # flat; a rising marginal cost is superlinear. CPU time is shown too: on a shared machine it
    # is steadier than wall time.
    cpu_base = {lib: cpu[i] for i, (kind, _, lib, _, _, _, _) in enumerate(results) if kind == "include"}
    out.append("")
    out.append("Marginal cost per added node, between consecutive sizes (flat = linear growth):")
    out.append("")
    out.append("| shape | library | smaller step: ms per node, wall / CPU | larger step: ms per node, wall / CPU | rise of the CPU cost |")
    out.append("|---|---|---:|---:|---|")
    for shape in ("chain", "sum"):
        for lib in ("kiln", "eigen"):
            rows = [(i, n, w) for i, (kind, _, l, n, w, _, _) in enumerate(results) if kind == shape and l == lib]
            steps = []
            for (i0, n0, w0), (i1, n1, w1) in zip(rows, rows[1:]):
                steps.append((1000 * (w1 - w0) / (n1 - n0), 1000 * (cpu[i1] - cpu[i0]) / (n1 - n0), n0, n1))
            cells = [f"{n0}->{n1}: {w:.0f} / {c:.0f}" for w, c, n0, n1 in steps]
            rise = (f"x{steps[1][1] / steps[0][1]:.1f} (CPU)" if len(steps) == 2 and steps[0][1] > 5 else "n/a (first step within noise)")
            out.append(f"| {shape} | {lib} | " + " | ".join(cells) + f" | {rise} |")
    text = "\n".join(out)
    print(text)
    if args.table:
        pathlib.Path(args.table).write_text(text + "\n")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Builds and runs kiln's CUDA tests and benchmarks on a machine with an NVIDIA GPU, then prints
# one table: workload, size, time per call, GB/s and share of the card's peak memory bandwidth, of
# kiln and of a hand-written kernel. Fails (non-zero) when there is no GPU, when a test fails or is
# skipped, or when the benchmark's verification fails.
#   KILN_GPU_BUILD_DIR  build directory (default: build-gpu)
#   KILN_GPU_NO_BUILD   1: run the binaries already in the build directory (tests/kiln_test_cuda,
#                       bench/kiln_bench_cuda), e.g. built for this GPU's architecture elsewhere
#   KILN_SKIP_DEPS      1: install no Debian packages (the dependencies come from CMAKE_PREFIX_PATH)
#   CUDACXX             nvcc to use (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
set -euo pipefail
started=$SECONDS

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"
cd "$KILN_ROOT"

fail() {
  echo "gpu-check: $*" >&2
  exit 1
}

find_nvcc() {
  [[ -z ${CUDACXX:-} ]] || return 0
  if command -v nvcc >/dev/null 2>&1; then
    CUDACXX=$(command -v nvcc)
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
    CUDACXX=/usr/local/cuda/bin/nvcc
  else
    fail "no nvcc (looked on PATH and in /usr/local/cuda/bin)"
  fi
  export CUDACXX
}

command -v nvidia-smi >/dev/null 2>&1 || fail "no nvidia-smi: this machine has no NVIDIA driver"
gpu=$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -n1) ||
  fail "nvidia-smi found no GPU"
[[ -n $gpu ]] || fail "nvidia-smi found no GPU"
IFS=, read -r gpu_name compute_cap driver <<<"$gpu"
arch=$(echo "$compute_cap" | tr -d ' .')  # "9.0" -> 90: build for this GPU only
echo "gpu-check: $gpu_name (sm_$arch), driver$driver"

build_dir=${KILN_GPU_BUILD_DIR:-build-gpu}
if [[ ${KILN_GPU_NO_BUILD:-0} == 1 ]]; then
  echo "gpu-check: running the binaries already in $build_dir"
else
  find_nvcc
  echo "gpu-check: $("$CUDACXX" --version | tail -n1)"
  [[ ${KILN_SKIP_DEPS:-0} == 1 ]] || kiln_install_deps
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DKILN_ENABLE_CUDA=ON -DKILN_BUILD_EXAMPLES=OFF \
    -DKILN_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
  cmake --build "$build_dir" -j"$(nproc)" --target kiln_test_cuda kiln_bench_cuda
  echo "gpu-check: built in $((SECONDS - started)) s"
fi

echo "=== gpu-check: tests ==="
status=0
"$build_dir/tests/kiln_test_cuda" || status=$?
((status != 77)) || fail "kiln_test_cuda skipped itself: the CUDA runtime sees no device"
((status == 0)) || fail "kiln_test_cuda failed (exit $status)"

echo "=== gpu-check: benchmarks ==="
json="$build_dir/bench-cuda.json"
"$build_dir/bench/kiln_bench_cuda" --benchmark_out="$json" --benchmark_out_format=json ||
  fail "kiln_bench_cuda failed"

python3 - "$json" <<'EOF'
import json, sys
runs = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("run_type") != "aggregate"]
def row(w, impl, size):
    return next(b for b in runs if b["name"].startswith(f"{w}/{impl}/{size}/"))
def us(b):
    return b["real_time"] * {"ms": 1e3, "us": 1, "ns": 1e-3}[b["time_unit"]]
sizes = sorted({int(b["name"].split("/")[2]) for b in runs}, reverse=True)
print(f"{'workload':<9}{'size':>10}{'kiln us':>10}{'hand us':>10}{'kiln GB/s':>11}{'hand GB/s':>11}"
      f"{'kiln % peak':>13}{'hand % peak':>13}")
for size in sizes:
    for w in ("W1", "W2", "W5"):
        kiln, hand = row(w, "kiln", size), row(w, "hand", size)
        print(f"{w:<9}{size:>10}{us(kiln):>10.1f}{us(hand):>10.1f}{kiln['GB/s']:>11.1f}{hand['GB/s']:>11.1f}"
              f"{kiln['peak%']:>12.1f}%{hand['peak%']:>12.1f}%")
alone = [b for b in runs if b["name"].split("/")[0] not in ("W1", "W2", "W5")]
if alone:
    print(f"\n{'kiln alone':<12}{'size':>10}{'us':>10}{'GB/s':>10}{'% peak':>9}")
    for b in alone:
        print(f"{b['name'].split('/')[0]:<12}{b['name'].split('/')[2]:>10}{us(b):>10.1f}{b['GB/s']:>10.1f}{b['peak%']:>8.1f}%")
EOF
echo "gpu-check: done in $((SECONDS - started)) s"

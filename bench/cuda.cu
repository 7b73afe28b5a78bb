// kiln CUDA benchmarks: W1, W2 and W5 of bench/README.md at 256M floats, and at 4K floats, where
// the time is what a call costs (the host's work and the launches), each by kiln::cuda{} and by a
// hand-written kernel doing the same work, timed with CUDA events (Google Benchmark's manual
// time). Counters: GB/s (bytes the workload must move, per second) and peak% (of the card's
// memory bandwidth, from its memory clock and bus width).
//   W1  z = 2.5 x + y                                       12 bytes per element
//   W2  z = tanh(0.7 x + 0.1) sigmoid(y) + exp(-x x)        12 bytes per element
//   W5  L = sum(x sigmoid(x) y), dL/dx and dL/dy            16 bytes per element
// and, by kiln alone, amax and argmax of x over every element and along rows of 256 (4 bytes per
// element).
// Before timing, every kiln result is checked against the hand-written kernel's at 1M elements.
// Without a device the binary says so and exits with 1.
#include <kiln/kiln.hpp>

#include <benchmark/benchmark.h>
#include <cub/block/block_reduce.cuh>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using kiln::index_t;
using kiln::detail::check;

constexpr index_t kElements = index_t(1) << 28;  // 256M floats
constexpr index_t kSmallElements = index_t(1) << 12;  // 4K floats: launch-bound, the cost of a call
constexpr index_t kVerifyElements = index_t(1) << 20;
constexpr int kBlock = 256;

double peak_bytes_per_second() {
  int device = 0, clock_khz = 0, bus_bits = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device), "cudaDeviceGetAttribute");
  return 2.0 * clock_khz * 1e3 * bus_bits / 8;  // double data rate
}

// Blocks for the hand kernels over n floats (one float4 per thread per step): the launch shape
// kiln's own kernels take, kiln::detail::grid_size.
unsigned grid_for(index_t n) {
  return kiln::detail::grid_size(n / 4, kBlock);
}

// --- hand-written kernels: the same arithmetic, written out, 16-byte loads and stores ----------
// (n is a multiple of 4 and cudaMalloc's memory is aligned, so float4 covers every element.)

template <class F>
__device__ float4 lanes(F f, float4 a, float4 b) {
  return {f(a.x, b.x), f(a.y, b.y), f(a.z, b.z), f(a.w, b.w)};
}

__global__ void w1_hand(float4* z, float4 const* x, float4 const* y, index_t n4) {
  for (index_t i = index_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += index_t(blockDim.x) * gridDim.x)
    z[i] = lanes([](float a, float b) { return 2.5f * a + b; }, x[i], y[i]);
}

__device__ float sigmoid(float v) {
  float const e = expf(-fabsf(v)), r = 1.f / (1.f + e);
  return v >= 0.f ? r : e * r;
}

__global__ void w2_hand(float4* z, float4 const* x, float4 const* y, index_t n4) {
  for (index_t i = index_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += index_t(blockDim.x) * gridDim.x)
    z[i] = lanes([](float a, float b) { return tanhf(0.7f * a + 0.1f) * sigmoid(b) + expf(-a * a); }, x[i], y[i]);
}

__global__ void w5_hand(float4* gx, float4* gy, float* block_sums, float4 const* x, float4 const* y, index_t n4) {
  float sum = 0;
  for (index_t i = index_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += index_t(blockDim.x) * gridDim.x) {
    float4 const a = x[i], b = y[i];
    // dL/dx = y (s + x s (1 - s)), dL/dy = x s, L += x s y
    auto const xs = lanes([](float u, float) { return u * sigmoid(u); }, a, a);
    gx[i] = lanes([](float u, float v) { float const s = sigmoid(u); return v * (s + u * s * (1.f - s)); }, a, b);
    gy[i] = xs;
    sum += xs.x * b.x + xs.y * b.y + xs.z * b.z + xs.w * b.w;
  }
  using block_reduce = cub::BlockReduce<float, kBlock>;
  __shared__ typename block_reduce::TempStorage temp;
  float const total = block_reduce(temp).Sum(sum);
  if (threadIdx.x == 0) block_sums[blockIdx.x] = total;
}

float4* as4(float* p) { return reinterpret_cast<float4*>(p); }

// --- the data and the workloads ---------------------------------------------------------------------

struct data {
  explicit data(index_t n)
      : x(kiln::to_device(kiln::eval(kiln::rand<float>({n}, 1) * 4.f - 2.f))),
        y(kiln::to_device(kiln::rand<float>({n}, 2))), z(kiln::extents<1>{n}), gx(kiln::extents<1>{n}),
        gy(kiln::extents<1>{n}), block_sums(kiln::extents<1>{index_t(grid_for(n))}) {}
  index_t n() const { return x.size(); }
  kiln::cuda_tensor<float, 1> x, y, z, gx, gy, block_sums;
  float loss = 0;
};

data& data_for(index_t n) {
  static std::vector<std::unique_ptr<data>> cache;
  for (auto& d : cache)
    if (d->n() == n) return *d;
  return *cache.emplace_back(std::make_unique<data>(n));
}

void w1_kiln(data& d) { kiln::eval(kiln::cuda{}, d.z, 2.5f * d.x + d.y); }
void w1_hand_run(data& d) {
  w1_hand<<<grid_for(d.n()), kBlock, 0, kiln::detail::stream()>>>(as4(d.z.data()), as4(d.x.data()), as4(d.y.data()),
                                                                   d.n() / 4);
  kiln::detail::check_launch("w1_hand");
}
void w2_kiln(data& d) {
  kiln::eval(kiln::cuda{}, d.z, kiln::tanh(0.7f * d.x + 0.1f) * kiln::sigmoid(d.y) + kiln::exp(-(d.x * d.x)));
}
void w2_hand_run(data& d) {
  w2_hand<<<grid_for(d.n()), kBlock, 0, kiln::detail::stream()>>>(as4(d.z.data()), as4(d.x.data()), as4(d.y.data()),
                                                                   d.n() / 4);
  kiln::detail::check_launch("w2_hand");
}
void w5_kiln(data& d) {
  auto [loss, grads] = kiln::value_and_grad(
      kiln::cuda{}, [](auto const& x, auto const& y) { return kiln::sum(x * kiln::sigmoid(x) * y); }, d.x, d.y);
  d.loss = loss;
  d.gx = std::get<0>(grads);
  d.gy = std::get<1>(grads);
}
void w5_hand_run(data& d) {
  unsigned const grid = grid_for(d.n());
  w5_hand<<<grid, kBlock, 0, kiln::detail::stream()>>>(as4(d.gx.data()), as4(d.gy.data()), d.block_sums.data(),
                                                      as4(d.x.data()), as4(d.y.data()), d.n() / 4);
  kiln::detail::check_launch("w5_hand");
  std::vector<float> sums(grid);  // the loss reaches the host, as kiln's does
  check(cudaMemcpyAsync(sums.data(), d.block_sums.data(), grid * sizeof(float), cudaMemcpyDeviceToHost,
                        kiln::detail::stream()),
        "cudaMemcpyAsync");
  kiln::detail::synchronize();
  double total = 0;
  for (float s : sums) total += s;
  d.loss = float(total);
}

struct workload {
  char const* name;
  index_t bytes_per_element;
  void (*kiln_run)(data&);
  void (*hand_run)(data&);
};
workload const workloads[] = {
    {"W1", 12, w1_kiln, w1_hand_run},
    {"W2", 12, w2_kiln, w2_hand_run},
    {"W5", 16, w5_kiln, w5_hand_run},
};

// Reductions by kiln alone (no hand-written kernel; tests/cuda_reduce.cu checks them against the
// host): the maximum and its index, over every element (CUB) and along rows of 256 (the axis
// kernel). Each reads x once: 4 bytes per element.
auto rows_of(data& d) { return kiln::reshape(d.x, {d.n() / 256, 256}); }
struct reduction_workload {
  char const* name;
  void (*run)(data&);
};
reduction_workload const reductions[] = {
    {"amax", [](data& d) { benchmark::DoNotOptimize(kiln::eval(kiln::cuda{}, kiln::amax(d.x)).data()); }},
    {"argmax", [](data& d) { benchmark::DoNotOptimize(kiln::eval(kiln::cuda{}, kiln::argmax(d.x)).data()); }},
    {"amax_rows", [](data& d) { benchmark::DoNotOptimize(kiln::eval(kiln::cuda{}, kiln::amax(rows_of(d), 1)).data()); }},
    {"argmax_rows",
     [](data& d) { benchmark::DoNotOptimize(kiln::eval(kiln::cuda{}, kiln::argmax(rows_of(d), 1)).data()); }},
};

void run(benchmark::State& state, void (*fn)(data&), index_t bytes_per_element) {
  data& d = data_for(state.range(0));
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  fn(d);  // warm: allocations pooled, kernels loaded
  for (auto _ : state) {
    check(cudaEventRecord(start, kiln::detail::stream()), "cudaEventRecord");
    fn(d);
    check(cudaEventRecord(stop, kiln::detail::stream()), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  double const bytes = double(bytes_per_element) * double(d.n()) * double(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["peak%"] = benchmark::Counter(bytes / peak_bytes_per_second() * 100, benchmark::Counter::kIsRate);
}

// kiln's outputs against the hand-written kernel's.
bool verify() {
  data& d = data_for(kVerifyElements);
  bool ok = true;
  for (workload const& w : workloads) {
    w.hand_run(d);
    auto const z = kiln::to_host(d.z), gx = kiln::to_host(d.gx), gy = kiln::to_host(d.gy);
    float const loss = d.loss;
    w.kiln_run(d);
    auto close = [](kiln::tensor<float, 1> const& a, kiln::tensor<float, 1> const& b) {
      for (index_t i = 0; i < a.size(); ++i)
        if (!(std::abs(a.data()[i] - b.data()[i]) <= 1e-5f + 1e-5f * std::abs(b.data()[i]))) return false;
      return true;
    };
    bool const same = std::string_view(w.name) == "W5"
                          ? close(kiln::to_host(d.gx), gx) && close(kiln::to_host(d.gy), gy) &&
                                std::abs(d.loss - loss) <= 1e-4f * std::abs(loss)
                          : close(kiln::to_host(d.z), z);
    if (!same) std::fprintf(stderr, "verify: %s/kiln differs from %s/hand\n", w.name, w.name);
    ok = ok && same;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "kiln_bench_cuda: no CUDA device\n");
    return 1;
  }
  // Freed memory stays in the pool between iterations instead of going back to the driver.
  cudaMemPool_t pool;
  check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
  std::uint64_t keep = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  if (!verify()) {
    std::fprintf(stderr, "verify: implementations disagree; not benchmarking\n");
    return 2;
  }
  std::fprintf(stderr, "verify: kiln matches the hand-written kernels (W1, W2, W5 at %td elements); peak %.0f GB/s\n",
               kVerifyElements, peak_bytes_per_second() / 1e9);
  for (workload const& w : workloads) {
    for (auto [impl, fn] : {std::pair{"kiln", w.kiln_run}, std::pair{"hand", w.hand_run}}) {
      std::string const name = std::string(w.name) + "/" + impl;
      benchmark::RegisterBenchmark(name.c_str(), [fn, bytes = w.bytes_per_element](benchmark::State& s) { run(s, fn, bytes); })
          ->Arg(kSmallElements)
          ->Arg(kElements)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5);
    }
  }
  for (reduction_workload const& r : reductions)
    benchmark::RegisterBenchmark((std::string(r.name) + "/kiln").c_str(), [fn = r.run](benchmark::State& s) { run(s, fn, 4); })
        ->Arg(kElements)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.5);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

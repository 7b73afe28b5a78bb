// kiln benchmark harness: what every bench/*.cpp shares. Each workload is four functions over one
// data struct (kiln, a scalar loop, an xsimd loop, Eigen), registered as W<k>/<impl>/<N> so that
// bench/run.sh reads the results as a table of ratios.
#pragma once

#include <kiln/kiln.hpp>

#include <Eigen/Core>
#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln_bench {
using index_t = kiln::index_t;
using B = xsimd::batch<float>;
constexpr index_t W = static_cast<index_t>(B::size);

constexpr index_t kSizes[] = {1 << 10, 1 << 16, 1 << 22};
constexpr index_t kCols = 256;  // W4's row length

using EigenRowMajor = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

enum impl { kiln_impl, scalar_impl, xsimd_impl, eigen_impl };
constexpr char const* impl_names[] = {"kiln", "scalar", "xsimd", "eigen"};

// Eigen reads and writes kiln-allocated buffers through Maps, so that all four implementations of a
// workload see the same memory layout. Where a workload's buffers fall modulo 4 KiB decides how
// often a load waits on an unrelated store (4K aliasing): with Eigen on copies of its own, W1 at
// 1K measured Eigen 1.5x ahead of kiln and of the hand loops in one run and level in the next.
// Every kiln allocation starts on a page (page_aligned_new.cpp, linked into each binary), so the
// layout is also the same from run to run.
using EigenIn = Eigen::Map<Eigen::ArrayXf const>;
using EigenOut = Eigen::Map<Eigen::ArrayXf>;
using EigenRowsIn = Eigen::Map<EigenRowMajor const>;
using EigenRowsOut = Eigen::Map<EigenRowMajor>;
template <int R>
EigenIn eigen_in(kiln::tensor<float, R> const& t) {
  return EigenIn(t.data(), t.size());
}
template <int R>
EigenOut eigen_out(kiln::tensor<float, R>& t) {
  return EigenOut(t.data(), t.size());
}

// --- shared data, registration, verification ------------------------------------------------

template <class Data>
Data& data_for(index_t n) {
  static std::map<index_t, std::unique_ptr<Data>> cache;
  auto& slot = cache[n];
  if (!slot) slot = std::make_unique<Data>(n);
  return *slot;
}

template <class Data>
void run_bench(benchmark::State& state, void (*fn)(Data&)) {
  Data& d = data_for<Data>(state.range(0));
  fn(d);  // warm: pages touched, caches primed as for every later iteration
  for (auto _ : state) {
    fn(d);
    benchmark::DoNotOptimize(d);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * d.n());
  state.SetBytesProcessed(state.iterations() * d.bytes());
}

template <class Data>
void register_workload(char const* workload, void (*const (&fns)[4])(Data&)) {
  for (int i = 0; i < 4; ++i) {
    std::string const name = std::string(workload) + "/" + impl_names[i];
    auto* bm = benchmark::RegisterBenchmark(name.c_str(), [fn = fns[i]](benchmark::State& s) { run_bench<Data>(s, fn); });
    for (index_t n : kSizes) bm->Arg(n);
  }
}

template <class Data>
void register_extra(char const* name, void (*fn)(Data&)) {
  auto* bm = benchmark::RegisterBenchmark(name, [fn](benchmark::State& s) { run_bench<Data>(s, fn); });
  for (index_t n : kSizes) bm->Arg(n);
}

// Runs every implementation at size n and compares its output with the scalar loop's.
template <class Data, class Out>
bool verify(char const* workload, index_t n, void (*const (&fns)[4])(Data&), Out out,
            std::vector<std::pair<char const*, void (*)(Data&)>> extras = {}) {
  Data& d = data_for<Data>(n);
  fns[scalar_impl](d);
  std::vector<float> const reference(out(d, scalar_impl), out(d, scalar_impl) + d.n());
  auto check = [&](char const* name, impl where) {
    float const* got = out(d, where);
    double worst = 0;
    index_t worst_at = 0;
    for (index_t i = 0; i < d.n(); ++i) {
      double const err = std::abs(double(got[i]) - double(reference[i])) / (1e-5 + 1e-5 * std::abs(double(reference[i])));
      if (!(err <= worst)) worst = err, worst_at = i;  // NaN counts as the worst
    }
    if (!(worst <= 1.0)) {
      std::fprintf(stderr, "verify: %s/%s/%td differs from the scalar loop at element %td: %.9g vs %.9g\n", workload,
                   name, n, worst_at, double(got[worst_at]), double(reference[worst_at]));
      return false;
    }
    return true;
  };
  bool ok = true;
  for (impl i : {kiln_impl, xsimd_impl, eigen_impl}) {
    std::fill_n(const_cast<float*>(out(d, i)), d.n(), -12345.f);  // no stale result can pass
    fns[i](d);
    ok = check(impl_names[i], i) && ok;
  }
  for (auto [name, fn] : extras) {
    std::fill_n(const_cast<float*>(out(d, eigen_impl)), d.n(), -12345.f);
    fn(d);
    ok = check(name, eigen_impl) && ok;
  }
  return ok;
}

// A bench binary's main(): Google Benchmark's flags, then verify() (every implementation against
// the scalar loop); only if it passes are the benchmarks registered and run. `checked` says what
// was verified.
template <class Verify, class Register>
int bench_main(int argc, char** argv, char const* checked, Verify verify, Register register_all) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!verify()) {
    std::fprintf(stderr, "verify: implementations disagree; not benchmarking\n");
    return 2;
  }
  std::fprintf(stderr, "verify: %s\n", checked);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace kiln_bench

// kiln::par against kiln::simd (one thread) on the same expressions, and against a hand-written
// OpenMP loop over the hand-written xsimd loop where one is short to write (W1, W2). Eigen has no
// multi-threaded elementwise evaluation (its threads are for products), so it has no row here.
//
// Workloads (float; names read W<k>/<impl>/<N>, impl = simd | par | hand_omp):
//   W1  z = 2.5 x + y                                    memory-bound elementwise
//   W2  z = tanh(0.7 x + 0.1) * sigmoid(y) + exp(-x*x)   compute-bound elementwise
//   W3  s = sum(exp(x - 0.5))                            full reduction (per-thread partials)
//   W4  out = relu(A + b) * c, A [N/256, 256]            broadcasting (rows split)
//   W5  L = sum(x * sigmoid(x) * y), dL/dx and dL/dy     fused single-pass gradient
//   W7  softmax over the rows of A [N/256, 256]          rows split
//
// Times are wall-clock (UseRealTime): the point is how long the caller waits. Before any timing,
// main() checks every par result against simd's at every size (bitwise where kiln promises it,
// within 1e-5 relative for the partial sums), so the ratios never compare wrong code.
#include "harness.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <cstring>
#include <functional>

namespace {
using namespace kiln_bench;

constexpr index_t kParSizes[] = {1 << 10, 1 << 22, 1 << 26};

struct par_data {
  explicit par_data(index_t n)
      : x(kiln::randn<float>({n}, 1)), y(kiln::randn<float>({n}, 2)), z(kiln::zeros<float>({n})),
        gx(kiln::zeros<float>({n})), gy(kiln::zeros<float>({n})), A(kiln::randn<float>({n / kCols, kCols}, 3)),
        b(kiln::randn<float>({kCols}, 4)), c(kiln::randn<float>({n / kCols, 1}, 5)),
        out(kiln::zeros<float>({n / kCols, kCols})) {}
  kiln::tensor<float, 1> x, y, z, gx, gy;
  kiln::tensor<float, 2> A;
  kiln::tensor<float, 1> b;
  kiln::tensor<float, 2> c, out;
  float s = 0;
};

struct w1 {
  template <class P>
  static void run(P const& p, par_data& d) { kiln::eval(p, d.z, 2.5f * d.x + d.y); }
};
struct w2 {
  template <class P>
  static void run(P const& p, par_data& d) {
    kiln::eval(p, d.z, kiln::tanh(0.7f * d.x + 0.1f) * kiln::sigmoid(d.y) + kiln::exp(-d.x * d.x));
  }
};
struct w3 {
  template <class P>
  static void run(P const& p, par_data& d) { d.s = kiln::eval(p, kiln::sum(kiln::exp(d.x - 0.5f))).item(); }
};
struct w4 {
  template <class P>
  static void run(P const& p, par_data& d) { kiln::eval(p, d.out, kiln::relu(d.A + d.b) * d.c); }
};
struct w5 {
  template <class P>
  static void run(P const& p, par_data& d) {
    d.s = kiln::value_and_grad(p, [](auto const& x, auto const& y) { return kiln::sum(x * kiln::sigmoid(x) * y); },
                               kiln::into(d.gx, d.gy), d.x, d.y);
  }
};
struct w7 {
  template <class P>
  static void run(P const& p, par_data& d) { kiln::eval(p, d.out, kiln::softmax(d.A, 1)); }
};

// The hand-written loops: bench/elementwise.cpp's xsimd loops, each thread on a contiguous share.
template <class Body>
void hand_omp(index_t n, Body const& body) {
#if defined(_OPENMP)
#pragma omp parallel
  {
    index_t const t = omp_get_thread_num(), parts = omp_get_num_threads();
    index_t const lo = n * t / parts / W * W, hi = t + 1 == parts ? n : n * (t + 1) / parts / W * W;
    body(lo, hi);
  }
#else
  body(0, n);
#endif
}
void w1_hand(par_data& d) {
  float const* x = d.x.data();
  float const* y = d.y.data();
  float* z = d.z.data();
  hand_omp(d.x.size(), [=](index_t lo, index_t hi) {
    B const a(2.5f);
    index_t i = lo;
    for (; i + W <= hi; i += W) xsimd::fma(a, B::load_unaligned(x + i), B::load_unaligned(y + i)).store_unaligned(z + i);
    for (; i < hi; ++i) z[i] = 2.5f * x[i] + y[i];
  });
}
template <class V>
V w2_value(V x, V y) {
  using std::abs, std::exp, std::tanh;
  V const e = exp(-abs(y)), r = V(1.f) / (V(1.f) + e);
  V sig;
  if constexpr (std::is_same_v<V, float>) sig = y >= 0 ? r : e * r;
  else sig = xsimd::select(y >= V(0.f), r, e * r);
  return tanh(V(0.7f) * x + V(0.1f)) * sig + exp(-x * x);
}
void w2_hand(par_data& d) {
  float const* x = d.x.data();
  float const* y = d.y.data();
  float* z = d.z.data();
  hand_omp(d.x.size(), [=](index_t lo, index_t hi) {
    index_t i = lo;
    for (; i + W <= hi; i += W) w2_value(B::load_unaligned(x + i), B::load_unaligned(y + i)).store_unaligned(z + i);
    for (; i < hi; ++i) z[i] = w2_value(x[i], y[i]);
  });
}

using run_fn = std::function<void(par_data&)>;
struct workload {
  char const* name;
  run_fn simd, par, hand;
  std::function<std::vector<float>(par_data const&)> result;
  bool bitwise;
};

template <class W>
workload make_workload(char const* name, run_fn hand, std::function<std::vector<float>(par_data const&)> result,
                       bool bitwise) {
  return {name, [](par_data& d) { W::run(kiln::simd, d); }, [](par_data& d) { W::run(kiln::par, d); },
          std::move(hand), std::move(result), bitwise};
}

std::vector<workload> const& workloads() {
  auto elementwise = [](par_data const& d) { return std::vector<float>(d.z.data(), d.z.data() + d.z.size()); };
  auto scalar = [](par_data const& d) { return std::vector<float>{d.s}; };
  auto matrix = [](par_data const& d) { return std::vector<float>(d.out.data(), d.out.data() + d.out.size()); };
  auto grads = [](par_data const& d) {
    std::vector<float> all(d.gx.data(), d.gx.data() + d.gx.size());
    all.insert(all.end(), d.gy.data(), d.gy.data() + d.gy.size());
    all.push_back(d.s);
    return all;
  };
  static std::vector<workload> const all = {
      make_workload<w1>("W1", w1_hand, elementwise, true), make_workload<w2>("W2", w2_hand, elementwise, true),
      make_workload<w3>("W3", nullptr, scalar, false),     make_workload<w4>("W4", nullptr, matrix, true),
      make_workload<w5>("W5", nullptr, grads, false),      make_workload<w7>("W7", nullptr, matrix, true),
  };
  return all;
}

bool verify_par() {
  bool ok = true;
  for (index_t n : kParSizes) {
    par_data& d = data_for<par_data>(n);
    for (auto const& w : workloads()) {
      w.simd(d);
      std::vector<float> const want = w.result(d);
      for (auto const& [impl, fn] : {std::pair{"par", w.par}, std::pair{"hand_omp", w.hand}}) {
        if (!fn) continue;
        fn(d);
        std::vector<float> const got = w.result(d);
        bool same = got.size() == want.size();
        for (std::size_t i = 0; same && i < got.size(); ++i)
          same = w.bitwise && impl == std::string("par")
                     ? std::memcmp(&got[i], &want[i], sizeof(float)) == 0
                     : std::abs(double(got[i]) - double(want[i])) <= 1e-5 * (1 + std::abs(double(want[i])));
        if (!same) std::fprintf(stderr, "verify: %s/%s/%td differs from %s/simd\n", w.name, impl, n, w.name);
        ok = ok && same;
      }
    }
  }
  return ok;
}

void register_all() {
  for (auto const& w : workloads()) {
    for (auto const& [impl, fn] : {std::pair{"simd", w.simd}, std::pair{"par", w.par}, std::pair{"hand_omp", w.hand}}) {
      if (!fn) continue;
      std::string const name = std::string(w.name) + "/" + impl;
      auto* bm = benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& s) {
        par_data& d = data_for<par_data>(s.range(0));
        fn(d);
        for (auto _ : s) {
          fn(d);
          benchmark::ClobberMemory();
        }
        s.SetItemsProcessed(s.iterations() * s.range(0));
      });
      for (index_t n : kParSizes) bm->Arg(n);
      bm->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return bench_main(argc, argv, "every par result equals simd's (bitwise for W1, W2, W4, W7; 1e-5 for W3, W5)",
                    verify_par, register_all);
}

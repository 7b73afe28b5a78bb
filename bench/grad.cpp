// kiln gradient benchmarks: reverse-mode autodiff against hand-written gradient loops and against
// kiln's own forward pass, in one binary (see harness.hpp). Implementations (<workload>/<impl>/<N>):
//
//   kiln      kiln::value_and_grad(f, kiln::into(gradients...), inputs...) on plain tensors: the
//             gradients are written into the data struct's tensors, as the hand loops write
//             theirs; a loss that is one sum of an elementwise tree runs forward and backward as
//             one loop (kiln's single-pass path)
//   kiln_fwd  the same f on the same tensors, forward only: the denominator of gradient/forward
//   scalar    a hand-written gradient loop (std:: math, sums in double): the reference
//   xsimd     the same loop on xsimd batches: each block of 1024 elements summed in a batch, the
//             blocks in double (as kiln::sum blocks); xsimd::exp called directly, without kiln's
//             gradual-underflow branch (as in elementwise.cpp)
//   torch     libtorch autograd (W5 only), when CMake found Torch (KILN_BENCH_HAVE_TORCH)
//
// Workloads:
//   W5       L = sum(x * sigmoid(x) * y), dL/dx and dL/dy; float, N = 1K, 64K, 4M, x, y ~ N(0, 1).
//            Hand loops: one pass, s = sigmoid(x), L += x s y, gx = y s (1 + x (1 - s)), gy = x s.
//   W5chain  L = sum(tanh(0.7 a + 0.1) * sigmoid(a) + exp(-a*a)) (W2's expression on one input,
//            summed), dL/da; float, same sizes. Target: kiln gradient / kiln forward < 2.
//   AD_*     the gradient workloads of ADBench as FastAD's author wrote them
//            (github.com/JamesYang007/ADBenchmark, benchmark/functor/*.hpp), double, at its largest
//            size N = 16384, data as its fill() (Eigen's Random: uniform on [-1, 1]):
//     AD_sum         sum(x)
//     AD_prod        prod(x), x ~ U[0, 2]. The product underflows to 0 at N = 16384 (so do all the
//                    gradients, in every implementation); it is also checked at N = 1000, where it
//                    does not. Hand loops: product of the non-zeros and count of zeros, then the
//                    gradient with kiln's (PyTorch's) zero rule.
//     AD_lse         log(sum(exp(x))) as written (no max shift); kiln_logsumexp is kiln::logsumexp(x).
//     AD_normal      normal_log_density(x | mu = -0.56, sigma = 1.37) with constant mu and sigma,
//                    -0.5 sum((x - mu)^2) / sigma^2 - N log(sigma), d/dx; kiln as written (a scalar
//                    expression around the sum), kiln_fused as one sum of an elementwise tree.
//     AD_regression  N = 16384 means K = (log2 N + 1) * 10 = 150 weights and X [1000, 150]:
//                    normal(y | X w + b, sigma) + normal(w | 0, 1) + normal(b | 0, 1) - log(9.9),
//                    gradient w.r.t. w, b and sigma. kiln has no matmul: X w is
//                    sum(X * w, axes<1>) over the broadcast [1000, 150] product.
//     AD_sv          stochastic volatility, N = 16384 means 8192 time steps. h is an AR(1) recurrence,
//                    h[i] = mu + sigma h_std[i] + phi (h[i-1] - mu): kiln writes h - mu as
//                    kiln::linear_recurrence(sigma h_std w, phi, 0), with w = 1 except w[0] =
//                    1 / sqrt(1 - phi^2) (a constant one-hot tensor selects h[0]'s scale), and h as a
//                    var statement since the density reads it twice. Hand-written: forward
//                    scalar_fwd, gradient scalar (one backward loop over the stored h). Parameters
//                    h_std, phi, sigma, mu (ADBench's x also holds h, which it overwrites: scratch,
//                    not a parameter).
//
// Before any timing, main() runs every implementation and compares it with the scalar loop: the
// loss and each gradient element within rtol (float 1e-4, double 1e-10) of the reference, plus an
// absolute floor of rtol / 100 times the gradient's RMS (where a gradient crosses 0 the formulas
// round differently). AD_sv's hand gradient is also checked against central differences. A
// mismatch aborts the run.
#include "harness.hpp"

#ifdef KILN_BENCH_HAVE_TORCH
#include <torch/torch.h>
#endif

#include <functional>
#include <limits>
#include <span>

namespace {
using namespace kiln_bench;

// --- hand-loop helpers: one body for the scalar (V = T) and the xsimd (V = batch) loop --------

template <class V>
struct as {};

template <class V, class T>
V load(T const* p) {
  if constexpr (std::is_same_v<V, T>) return *p;
  else return V::load_unaligned(p);
}
template <class T, class V>
void store(T* p, V const& v) {
  if constexpr (std::is_same_v<V, T>) *p = v;
  else v.store_unaligned(p);
}
template <class M, class V>
V pick(M const& m, V const& a, V const& b) {
  if constexpr (std::is_same_v<M, bool>) return m ? a : b;
  else return xsimd::select(m, a, b);
}
// kiln's stable sigmoid (ops/activation.hpp sigmoid_op): e = exp(-|x|), r = 1 / (1 + e), x >= 0 ? r : e r.
template <class V>
V sigmoid(V const& x) {
  using std::abs, std::exp;
  V const one(1.f), e = exp(-abs(x)), r = one / (one + e);
  return pick(x >= V(0.f), r, e * r);
}

// The hand loop over n elements: step(i, as<V>{}) handles the element (V = T) or batch at i and
// returns its loss terms (or nothing). Simd: batches, then a scalar tail; the batches' terms are
// summed per block of 1024 elements in a batch, the blocks in double. Scalar: summed in double.
template <class T, bool Simd, class Step>
double hand_loop(index_t n, Step step) {
  using V = xsimd::batch<T>;
  constexpr bool sums = !std::is_void_v<decltype(step(0, as<T>{}))>;
  constexpr index_t w = V::size;
  double total = 0;
  index_t i = 0;
  if constexpr (Simd) {
    while (i + w <= n) {
      index_t const end = std::min(n, i + 1024);
      V acc(T(0));
      for (; i + w <= end; i += w) {
        if constexpr (sums) acc += step(i, as<V>{});
        else step(i, as<V>{});
      }
      if constexpr (sums) total += xsimd::hadd(acc);
    }
  }
  for (; i < n; ++i) {
    if constexpr (sums) total += step(i, as<T>{});
    else step(i, as<T>{});
  }
  return total;
}

// A rank-0 kiln expression's value, as a user writes it: a reduction converts, other expressions
// are assigned to a rank-0 tensor.
template <class E>
auto value_of(E const& e) {
  using T = typename E::value_type;
  if constexpr (std::is_convertible_v<E const&, T>) return static_cast<T>(e);
  else return kiln::tensor<T, 0>(e).item();
}

template <class T>
kiln::tensor<T, 1> uniform(index_t n, std::uint64_t seed, T lo, T hi) {  // Eigen's Random is U[-1, 1]
  auto const u = kiln::rand<T>({n}, seed);
  return kiln::tensor<T, 1>(lo + (hi - lo) * u);
}

// --- W5: L = sum(x * sigmoid(x) * y) ----------------------------------------------------------

struct w5_data {
  explicit w5_data(index_t n)
      : x(kiln::randn<float>({n}, 501)), y(kiln::randn<float>({n}, 502)), gx(kiln::zeros<float>({n})),
        gy(kiln::zeros<float>({n})) {}
  kiln::tensor<float, 1> x, y, gx, gy;
  float value = 0;
#ifdef KILN_BENCH_HAVE_TORCH
  std::vector<torch::Tensor> torch_grads;
#endif
  index_t n() const { return x.size(); }
  std::int64_t bytes() const { return 4 * n() * std::int64_t(sizeof(float)); }
  std::vector<std::span<float>> grads() { return {{gx.data(), std::size_t(n())}, {gy.data(), std::size_t(n())}}; }
};

constexpr auto w5_f = [](auto const& x, auto const& y) { return kiln::sum(x * kiln::sigmoid(x) * y); };

void w5_kiln(w5_data& d) {
  d.value = kiln::value_and_grad(w5_f, kiln::into(d.gx, d.gy), d.x, d.y);
}
void w5_fwd(w5_data& d) { d.value = kiln::sum(d.x * kiln::sigmoid(d.x) * d.y); }

template <bool Simd>
void w5_hand(w5_data& d) {
  float const* x = d.x.data();
  float const* y = d.y.data();
  float* gx = d.gx.data();
  float* gy = d.gy.data();
  d.value = float(hand_loop<float, Simd>(d.n(), [=]<class V>(index_t i, as<V>) {
    V const xv = load<V>(x + i), yv = load<V>(y + i), one(1.f);
    V const s = sigmoid(xv), xs = xv * s;
    store(gx + i, yv * s * (one + xv * (one - s)));
    store(gy + i, xs);
    return xs * yv;
  }));
}

#ifdef KILN_BENCH_HAVE_TORCH
// libtorch autograd on one thread, the inputs borrowed (from_blob); the gradients stay torch
// tensors (w5_torch_checked copies them out for the verification only).
void w5_torch(w5_data& d) {
  auto const options = torch::TensorOptions().dtype(torch::kFloat);
  torch::Tensor x = torch::from_blob(d.x.data(), {d.n()}, options).requires_grad_(true);
  torch::Tensor y = torch::from_blob(d.y.data(), {d.n()}, options).requires_grad_(true);
  torch::Tensor L = (x * torch::sigmoid(x) * y).sum();
  d.torch_grads = torch::autograd::grad({L}, {x, y});
  d.value = L.item<float>();
}
void w5_torch_checked(w5_data& d) {
  w5_torch(d);
  std::copy_n(d.torch_grads[0].data_ptr<float>(), d.n(), d.gx.data());
  std::copy_n(d.torch_grads[1].data_ptr<float>(), d.n(), d.gy.data());
}
#endif

// --- one-input workloads: W5chain and the ADBench vector functions ----------------------------
// W supplies the type, the data (fill), the kiln function f (and optionally f_alt), and the hand
// loop hand<Simd>.

template <class W>
struct vec_data {
  using T = typename W::type;
  explicit vec_data(index_t n) : x(W::fill(n)), g(kiln::zeros<T>({n})) {}
  kiln::tensor<T, 1> x, g;
  T value = 0;
  index_t n() const { return x.size(); }
  std::int64_t bytes() const { return 2 * n() * std::int64_t(sizeof(T)); }
  std::vector<std::span<T>> grads() { return {{g.data(), std::size_t(n())}}; }
};

template <class W, bool Alt = false>
void vec_kiln(vec_data<W>& d) {
  d.value = kiln::value_and_grad([] { if constexpr (Alt) return W::f_alt; else return W::f; }(), kiln::into(d.g), d.x);
}
template <class W>
void vec_fwd(vec_data<W>& d) { d.value = value_of(W::f(d.x)); }
template <class W, bool Simd>
void vec_hand(vec_data<W>& d) { W::template hand<Simd>(d); }

struct w5chain {
  using type = float;
  static kiln::tensor<float, 1> fill(index_t n) { return kiln::randn<float>({n}, 511); }
  static constexpr auto f = [](auto const& a) {
    return kiln::sum(kiln::tanh(0.7f * a + 0.1f) * kiln::sigmoid(a) + kiln::exp(-a * a));
  };
  template <bool Simd>
  static void hand(vec_data<w5chain>& d) {
    float const* a = d.x.data();
    float* g = d.g.data();
    d.value = float(hand_loop<float, Simd>(d.n(), [=]<class V>(index_t i, as<V>) {
      using std::exp, std::fma, std::tanh;
      V const av = load<V>(a + i), one(1.f);
      V const t = tanh(fma(V(0.7f), av, V(0.1f))), s = sigmoid(av), e = exp(-(av * av));
      store(g + i, V(0.7f) * (one - t * t) * s + t * s * (one - s) - V(2.f) * av * e);
      return t * s + e;
    }));
  }
};

struct ad_sum {
  using type = double;
  static kiln::tensor<double, 1> fill(index_t n) { return uniform(n, 801, -1.0, 1.0); }
  static constexpr auto f = [](auto const& x) { return kiln::sum(x); };
  template <bool Simd>
  static void hand(vec_data<ad_sum>& d) {
    double const* x = d.x.data();
    double* g = d.g.data();
    d.value = hand_loop<double, Simd>(d.n(), [=]<class V>(index_t i, as<V>) {
      store(g + i, V(1.0));
      return load<V>(x + i);
    });
  }
};

struct ad_prod {
  using type = double;
  static kiln::tensor<double, 1> fill(index_t n) { return uniform(n, 802, 0.0, 2.0); }
  static constexpr auto f = [](auto const& x) { return kiln::prod(x); };
  // The product of the non-zeros and the count of zeros, then (as kiln and PyTorch) g = out / x
  // without zeros, the product of the others at a single zero, 0 elsewhere.
  template <bool Simd>
  static void hand(vec_data<ad_prod>& d) {
    using B = xsimd::batch<double>;
    double const* x = d.x.data();
    double* g = d.g.data();
    index_t const n = d.n();
    double p = 1, zeros = 0;
    index_t i = 0;
    if constexpr (Simd) {
      B pv(1.0), zv(0.0);
      for (; i + index_t(B::size) <= n; i += B::size) {
        B const v = B::load_unaligned(x + i);
        auto const z = v == B(0.0);
        pv *= xsimd::select(z, B(1.0), v);
        zv += xsimd::select(z, B(1.0), B(0.0));
      }
      alignas(64) double lanes[B::size];
      pv.store_aligned(lanes);
      for (double l : lanes) p *= l;
      zeros = xsimd::hadd(zv);
    }
    for (; i < n; ++i) {
      if (x[i] == 0) ++zeros;
      else p *= x[i];
    }
    double const out = zeros == 0 ? p : 0.0;
    d.value = out;
    if (zeros == 0) hand_loop<double, Simd>(n, [=]<class V>(index_t k, as<V>) { store(g + k, V(out) / load<V>(x + k)); });
    else for (index_t k = 0; k < n; ++k) g[k] = zeros == 1 && x[k] == 0 ? p : 0.0;
  }
};

struct ad_lse {
  using type = double;
  static kiln::tensor<double, 1> fill(index_t n) { return uniform(n, 803, -1.0, 1.0); }
  static constexpr auto f = [](auto const& x) { return kiln::log(kiln::sum(kiln::exp(x))); };
  static constexpr auto f_alt = [](auto const& x) { return kiln::logsumexp(x); };
  // exp(x) stored while summed, then scaled by 1 / sum (softmax's two passes).
  template <bool Simd>
  static void hand(vec_data<ad_lse>& d) {
    double const* x = d.x.data();
    double* g = d.g.data();
    double const s = hand_loop<double, Simd>(d.n(), [=]<class V>(index_t i, as<V>) {
      using std::exp;
      V const e = exp(load<V>(x + i));
      store(g + i, e);
      return e;
    });
    d.value = std::log(s);
    double const inv = 1 / s;
    hand_loop<double, Simd>(d.n(), [=]<class V>(index_t i, as<V>) { store(g + i, load<V>(g + i) * V(inv)); });
  }
};

struct ad_normal {
  using type = double;
  static constexpr double mu = -0.56, sigma = 1.37;
  static kiln::tensor<double, 1> fill(index_t n) { return uniform(n, 804, -1.0, 1.0); }
  // ADBench's normal_log_density: -0.5 * squaredNorm(y - mu) / sigma^2 - size * log(sigma).
  static constexpr auto f = [](auto const& x) {
    return -0.5 * kiln::sum(kiln::square(x - mu)) / (sigma * sigma) - double(x.size()) * std::log(sigma);
  };
  static constexpr auto f_alt = [](auto const& x) {
    return kiln::sum(kiln::square(x - mu) * (-0.5 / (sigma * sigma)) - std::log(sigma));
  };
  template <bool Simd>
  static void hand(vec_data<ad_normal>& d) {
    double const* x = d.x.data();
    double* g = d.g.data();
    double const inv_s2 = 1 / (sigma * sigma);
    double const sq = hand_loop<double, Simd>(d.n(), [=]<class V>(index_t i, as<V>) {
      V const z = load<V>(x + i) - V(mu);
      store(g + i, -z * V(inv_s2));
      return z * z;
    });
    d.value = -0.5 * sq * inv_s2 - double(d.n()) * std::log(sigma);
  }
};

// --- AD_regression -----------------------------------------------------------------------------

struct reg_data {
  explicit reg_data(index_t adbench_n)
      : K(index_t(std::log2(double(adbench_n)) + 1) * 10), X(2.0 * kiln::rand<double>({rows, K}, 811) - 1.0),
        y(uniform(rows, 812, -1.0, 1.0)), w(uniform(K, 813, -1.0, 1.0)), b(0.3), sigma(0.1 + 0.64),
        gw(kiln::zeros<double>({K})) {}
  static constexpr index_t rows = 1000;
  index_t K;
  kiln::tensor<double, 2> X;
  kiln::tensor<double, 1> y, w;
  kiln::tensor<double, 0> b, sigma;  // ADBench: b ~ U[-1, 1], sigma = |U[-1, 1]| + 0.1
  kiln::tensor<double, 1> gw;
  kiln::tensor<double, 0> gb, gsigma;
  double value = 0;
  index_t n() const { return rows * K; }
  std::int64_t bytes() const { return (rows * K + rows) * std::int64_t(sizeof(double)); }
  std::vector<std::span<double>> grads() {
    return {{gw.data(), std::size_t(K)}, {gb.data(), 1}, {gsigma.data(), 1}};
  }
  auto f() const {
    return [&X = X, &y = y](auto const& w, auto const& b, auto const& sigma) {
      double const n = double(y.size());
      auto const z = y - kiln::sum(X * w, kiln::axes<1>) - b;
      return -0.5 * kiln::sum(kiln::square(z)) / (sigma * sigma) - n * kiln::log(sigma) -
             0.5 * kiln::sum(kiln::square(w)) - 0.5 * b * b - std::log(10.0 - 0.1);
    };
  }
};

void reg_kiln(reg_data& d) {
  d.value = kiln::value_and_grad(d.f(), kiln::into(d.gw, d.gb, d.gsigma), d.w, d.b, d.sigma);
}
void reg_fwd(reg_data& d) { d.value = value_of(d.f()(d.w, d.b, d.sigma)); }

// Per row: z = y - X_r w - b (a dot), then gw += z / sigma^2 X_r (an axpy) while the row is in L1.
template <bool Simd>
void reg_hand(reg_data& d) {
  index_t const K = d.K;
  double const* w = d.w.data();
  double* gw = d.gw.data();
  double const b = d.b.item(), sigma = d.sigma.item(), inv_s2 = 1 / (sigma * sigma);
  double sq = 0, sum_z = 0;
  hand_loop<double, Simd>(K, [=]<class V>(index_t k, as<V>) { store(gw + k, -load<V>(w + k)); });
  for (index_t r = 0; r < reg_data::rows; ++r) {
    double const* xr = d.X.data() + r * K;
    double const z = d.y.data()[r] - b -
                     hand_loop<double, Simd>(K, [=]<class V>(index_t k, as<V>) { return load<V>(xr + k) * load<V>(w + k); });
    sq += z * z;
    sum_z += z;
    double const c = z * inv_s2;
    hand_loop<double, Simd>(K, [=]<class V>(index_t k, as<V>) { store(gw + k, load<V>(gw + k) + V(c) * load<V>(xr + k)); });
  }
  double const ww = hand_loop<double, Simd>(K, [=]<class V>(index_t k, as<V>) { return load<V>(w + k) * load<V>(w + k); });
  double const n = double(reg_data::rows);
  d.value = -0.5 * sq * inv_s2 - n * std::log(sigma) - 0.5 * ww - 0.5 * b * b - std::log(10.0 - 0.1);
  d.gb.data()[0] = sum_z * inv_s2 - b;
  d.gsigma.data()[0] = sq * inv_s2 / sigma - n / sigma;
}

// --- AD_sv: stochastic volatility -------------------------------------------------------------
//   h[0] = mu + sigma h_std[0] / sqrt(1 - phi^2),  h[i] = mu + sigma h_std[i] + phi (h[i-1] - mu)
//   L = normal(y | 0, exp(h / 2)) + normal(h_std | 0, 1) + cauchy(sigma | 0, 5) + cauchy(mu | 0, 10)
//       + uniform(phi | -1, 1)
//     = sum(-y^2 exp(-h) / 2 - h / 2) - sum(h_std^2) / 2 - log(5 (1 + (sigma/5)^2))
//       - log(10 (1 + (mu/10)^2)) - log 2

struct sv_data {
  explicit sv_data(index_t adbench_n)
      : steps(std::max<index_t>(adbench_n / 2, 2)), h_std(uniform(steps, 821, -1.0, 1.0)),
        y(uniform(steps, 822, -1.0, 1.0)), h(kiln::zeros<double>({steps})), g_hstd(kiln::zeros<double>({steps})),
        first(kiln::zeros<double>({steps})) {
    first.data()[0] = 1;
  }
  index_t steps;
  kiln::tensor<double, 1> h_std, y, h, g_hstd;
  kiln::tensor<double, 1> first;  // 1 at t = 0, else 0: where h[0]'s stationary scale applies
  // ADBench: U[-1, 1], |U[-1, 1]| + 0.1, U[-1, 1]
  kiln::tensor<double, 0> phi = scalar(0.62), sigma = scalar(0.1 + 0.47), mu = scalar(-0.35);
  kiln::tensor<double, 0> g_phi, g_sigma, g_mu;
  double value = 0;
  index_t n() const { return steps; }
  std::int64_t bytes() const { return 3 * steps * std::int64_t(sizeof(double)); }
  std::vector<std::span<double>> grads() {
    return {{g_hstd.data(), std::size_t(steps)}, {g_phi.data(), 1}, {g_sigma.data(), 1}, {g_mu.data(), 1}};
  }
  static kiln::tensor<double, 0> scalar(double v) { return kiln::full<double>(kiln::extents<0>{}, v); }

  auto f() const {
    return [&y = y, &first = first](auto const& h_std, auto const& phi, auto const& sigma, auto const& mu) {
      auto const w = 1.0 + first * (kiln::rsqrt(1.0 - phi * phi) - 1.0);
      // A statement of its own: the density reads h twice, and each read of an unevaluated
      // recurrence would run it again.
      kiln::var<double, 1> const h = kiln::linear_recurrence(sigma * h_std * w, phi, 0) + mu;
      return kiln::sum(-0.5 * kiln::square(y) * kiln::exp(-h) - 0.5 * h - 0.5 * kiln::square(h_std)) -
             kiln::log(5.0 * (1.0 + sigma * sigma / 25.0)) - kiln::log(10.0 * (1.0 + mu * mu / 100.0)) - std::log(2.0);
    };
  }
};

void sv_kiln(sv_data& d) {
  d.value = kiln::value_and_grad(d.f(), kiln::into(d.g_hstd, d.g_phi, d.g_sigma, d.g_mu), d.h_std, d.phi, d.sigma, d.mu);
}
void sv_kiln_fwd(sv_data& d) { d.value = value_of(d.f()(d.h_std, d.phi, d.sigma, d.mu)); }

double sv_log_density(sv_data& d) {  // also leaves h in d.h
  double const* hs = d.h_std.data();
  double const* y = d.y.data();
  double* h = d.h.data();
  double const phi = d.phi.item(), sigma = d.sigma.item(), mu = d.mu.item();
  h[0] = mu + sigma * hs[0] / std::sqrt(1 - phi * phi);
  for (index_t i = 1; i < d.steps; ++i) h[i] = mu + sigma * hs[i] + phi * (h[i - 1] - mu);
  double L = 0;
  for (index_t i = 0; i < d.steps; ++i) L += -0.5 * y[i] * y[i] * std::exp(-h[i]) - 0.5 * h[i] - 0.5 * hs[i] * hs[i];
  return L - std::log(5 * (1 + sigma * sigma / 25)) - std::log(10 * (1 + mu * mu / 100)) - std::log(2.0);
}

void sv_fwd(sv_data& d) { d.value = sv_log_density(d); }

// The forward pass keeps h; the adjoint of h runs backwards: hb[i] = dL/dh[i] + phi hb[i+1].
void sv_grad(sv_data& d) {
  d.value = sv_log_density(d);
  double const* hs = d.h_std.data();
  double const* y = d.y.data();
  double const* h = d.h.data();
  double* ghs = d.g_hstd.data();
  double const phi = d.phi.item(), sigma = d.sigma.item(), mu = d.mu.item();
  double const a = 1 / std::sqrt(1 - phi * phi);
  double hb = 0, g_phi = 0, g_sigma = 0, g_mu = 0;
  for (index_t i = d.steps; i-- > 0;) {
    hb = 0.5 * y[i] * y[i] * std::exp(-h[i]) - 0.5 + phi * hb;
    double const scale = i == 0 ? a : 1.0;
    ghs[i] = hb * sigma * scale - hs[i];
    g_sigma += hb * hs[i] * scale;
    if (i > 0) {
      g_phi += hb * (h[i - 1] - mu);
      g_mu += hb * (1 - phi);
    } else {
      g_phi += hb * sigma * hs[0] * phi * a * a * a;
      g_mu += hb;
    }
  }
  d.g_phi.data()[0] = g_phi;
  d.g_sigma.data()[0] = g_sigma - 2 * sigma / (25 + sigma * sigma);
  d.g_mu.data()[0] = g_mu - 2 * mu / (100 + mu * mu);
}

// Central differences at a few coordinates (the parameters, h_std at both ends and the middle).
bool sv_verify(index_t n) {
  sv_data& d = data_for<sv_data>(n);
  sv_grad(d);
  double const* analytic_hs = d.g_hstd.data();
  std::vector<std::pair<double*, double>> const checks = {
      {d.phi.data(), d.g_phi.item()},
      {d.sigma.data(), d.g_sigma.item()},
      {d.mu.data(), d.g_mu.item()},
      {d.h_std.data(), analytic_hs[0]},
      {d.h_std.data() + d.steps / 2, analytic_hs[d.steps / 2]},
      {d.h_std.data() + d.steps - 1, analytic_hs[d.steps - 1]}};
  bool ok = true;
  for (auto [at, analytic] : checks) {
    double const saved = *at, eps = 1e-5;
    *at = saved + eps;
    double const up = sv_log_density(d);
    *at = saved - eps;
    double const down = sv_log_density(d);
    *at = saved;
    double const numerical = (up - down) / (2 * eps);
    if (!(std::abs(analytic - numerical) <= 1e-6 * (1 + std::abs(numerical)))) {
      std::fprintf(stderr, "verify: AD_sv/scalar at N=%td: gradient %.12g vs central difference %.12g\n", n, analytic,
                   numerical);
      ok = false;
    }
  }
  return ok;
}

// --- verification and registration ------------------------------------------------------------

template <class Data>
struct impl_entry {
  char const* name;
  void (*fn)(Data&);
  bool grads = true;                   // false: forward only, the loss is checked
  void (*verify_fn)(Data&) = nullptr;  // what the verification runs instead of fn, if set
};

// Every implementation at size n against impls[0] (the scalar loop).
template <class Data>
bool verify(char const* workload, index_t n, std::vector<impl_entry<Data>> const& impls) {
  Data& d = data_for<Data>(n);
  using T = decltype(d.value);
  double const rtol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  T const nan = std::numeric_limits<T>::quiet_NaN();
  impls[0].fn(d);
  double const ref_value = d.value;
  std::vector<std::vector<T>> ref;
  for (auto g : d.grads()) ref.emplace_back(g.begin(), g.end());
  bool ok = true;
  for (std::size_t k = 1; k < impls.size(); ++k) {
    auto const& e = impls[k];
    d.value = nan;
    for (auto g : d.grads()) std::fill(g.begin(), g.end(), nan);  // no stale result can pass
    (e.verify_fn ? e.verify_fn : e.fn)(d);
    auto fail = [&](char const* what, index_t at, double got, double want) {
      std::fprintf(stderr, "verify: %s/%s at N=%td differs from the scalar loop in %s[%td]: %.12g vs %.12g\n", workload,
                   e.name, n, what, at, got, want);
      ok = false;
    };
    if (!(std::abs(d.value - ref_value) <= rtol * std::abs(ref_value))) fail("the loss", 0, d.value, ref_value);
    if (!e.grads) continue;
    auto const got = d.grads();
    for (std::size_t j = 0; j < ref.size(); ++j) {
      double rms = 0;
      for (T v : ref[j]) rms += double(v) * v;
      double const floor = rtol / 100 * std::sqrt(rms / double(ref[j].size()));
      for (std::size_t i = 0; i < ref[j].size(); ++i)
        if (!(std::abs(double(got[j][i]) - ref[j][i]) <= rtol * std::abs(double(ref[j][i])) + floor)) {
          fail(("gradient " + std::to_string(j)).c_str(), index_t(i), got[j][i], ref[j][i]);
          break;
        }
    }
  }
  return ok;
}

template <class Data>
void add(char const* workload, std::vector<impl_entry<Data>> const& impls, std::vector<index_t> const& sizes) {
  for (auto const& e : impls) {
    std::string const name = std::string(workload) + "/" + e.name;
    auto* bm = benchmark::RegisterBenchmark(name.c_str(), [fn = e.fn](benchmark::State& s) { run_bench<Data>(s, fn); });
    for (index_t n : sizes) bm->Arg(n);
  }
}

template <class W>
std::vector<impl_entry<vec_data<W>>> vec_impls(std::vector<impl_entry<vec_data<W>>> extra = {}) {
  std::vector<impl_entry<vec_data<W>>> impls = {{"scalar", vec_hand<W, false>},
                                                {"xsimd", vec_hand<W, true>},
                                                {"kiln", vec_kiln<W>},
                                                {"kiln_fwd", vec_fwd<W>, false}};
  impls.insert(impls.end(), extra.begin(), extra.end());
  return impls;
}

}  // namespace

int main(int argc, char** argv) {
  bool ok = true;
  std::vector<std::function<void()>> registrations;
  // Verifies at the benchmarked sizes and the extra ones (tails, a product that does not
  // underflow), then queues the registration.
  auto workload = [&]<class Data>(char const* name, std::vector<impl_entry<Data>> const& impls,
                                  std::vector<index_t> const& sizes, std::vector<index_t> const& extra) {
    for (auto const& list : {sizes, extra})
      for (index_t n : list) ok = verify(name, n, impls) && ok;
    registrations.push_back([=] { add(name, impls, sizes); });
  };
  std::vector<index_t> const sizes(std::begin(kSizes), std::end(kSizes)), ad = {16384};
  auto verify_all = [&] {
    std::vector<impl_entry<w5_data>> w5 = {{"scalar", w5_hand<false>}, {"xsimd", w5_hand<true>}, {"kiln", w5_kiln},
                                           {"kiln_fwd", w5_fwd, false}};
#ifdef KILN_BENCH_HAVE_TORCH
    torch::set_num_threads(1);
    w5.push_back({"torch", w5_torch, true, w5_torch_checked});
#endif
    workload("W5", w5, sizes, {13, 1027});
    workload("W5chain", vec_impls<w5chain>(), sizes, {13, 1027});
    workload("AD_sum", vec_impls<ad_sum>(), ad, {13});
    workload("AD_prod", vec_impls<ad_prod>(), ad, {13, 1000});
    workload("AD_lse", vec_impls<ad_lse>({{"kiln_logsumexp", vec_kiln<ad_lse, true>}}), ad, {13});
    workload("AD_normal", vec_impls<ad_normal>({{"kiln_fused", vec_kiln<ad_normal, true>}}), ad, {13});
    workload("AD_regression",
             std::vector<impl_entry<reg_data>>{
                 {"scalar", reg_hand<false>}, {"xsimd", reg_hand<true>}, {"kiln", reg_kiln}, {"kiln_fwd", reg_fwd, false}},
             ad, {2});
    for (index_t n : {index_t(16384), index_t(14)}) ok = sv_verify(n) && ok;
    workload("AD_sv",
             std::vector<impl_entry<sv_data>>{{"scalar", sv_grad},
                                              {"scalar_fwd", sv_fwd, false},
                                              {"kiln", sv_kiln},
                                              {"kiln_fwd", sv_kiln_fwd, false}},
             ad, {14});
    return ok;
  };
  return bench_main(
      argc, argv, "every implementation agrees with the scalar loop (W5, W5chain, AD_*; AD_sv's also with central differences)",
      verify_all, [&] {
        for (auto const& r : registrations) r();
      });
}

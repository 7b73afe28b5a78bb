// kiln reduction benchmarks, four ways in one binary as in elementwise.cpp (see harness.hpp):
//   W3  s = sum(exp(x - 0.5))                 a full reduction fused with its producer
//   W6  row sums of A * A, A [N/256, 256]     an inner-axis reduction, one output per row
//       (and W6/kiln_square: the same written with kiln::square)
//   W7  softmax over the rows of A            max, exp, sum and scale
//   W8  A - amax(A, 1, keepdim)               a reduction inside an elementwise expression
//   W9  layer norm over the rows of A         (A - mean) / sqrt(var + 1e-5), two reductions inside
// The scalar loops are the references (W3 accumulates in double). The xsimd loops are what a
// careful hand writes: four accumulators for the sums; for W7 the two-pass softmax (max, then
// exp stored while summed, then one scale). Eigen: Array expressions with rowwise()/colwise().
//
// kiln's exp keeps gradual underflow (results below FLT_MIN are subnormal, not 0), which costs a
// compare and a branch per batch that the xsimd loop, calling xsimd::exp directly, does not pay.
#include "harness.hpp"

namespace {
using namespace kiln_bench;

// --- W3: s = sum(exp(x - 0.5)) ----------------------------------------------------------------

struct w3_data {
  explicit w3_data(index_t n) : x(kiln::rand<float>({n}, 301)), ex(eigen_in(x)) {}
  kiln::tensor<float, 1> x;
  EigenIn ex;
  float result[4] = {};
  index_t n() const { return x.size(); }
  std::int64_t bytes() const { return n() * std::int64_t(sizeof(float)); }
};

void w3_kiln(w3_data& d) { d.result[kiln_impl] = kiln::sum(kiln::exp(d.x - 0.5f)); }

void w3_scalar(w3_data& d) {
  float const* __restrict x = d.x.data();
  double s = 0;  // the reference: double accumulation
  for (index_t i = 0; i < d.n(); ++i) s += std::exp(x[i] - 0.5f);
  d.result[scalar_impl] = float(s);
}

void w3_xsimd(w3_data& d) {
  float const* x = d.x.data();
  index_t const n = d.n();
  B const half(0.5f);
  B a0(0.f), a1(0.f), a2(0.f), a3(0.f);
  index_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    a0 += xsimd::exp(B::load_unaligned(x + i) - half);
    a1 += xsimd::exp(B::load_unaligned(x + i + W) - half);
    a2 += xsimd::exp(B::load_unaligned(x + i + 2 * W) - half);
    a3 += xsimd::exp(B::load_unaligned(x + i + 3 * W) - half);
  }
  for (; i + W <= n; i += W) a0 += xsimd::exp(B::load_unaligned(x + i) - half);
  float s = xsimd::hadd((a0 + a1) + (a2 + a3));
  for (; i < n; ++i) s += std::exp(x[i] - 0.5f);
  d.result[xsimd_impl] = s;
}

void w3_eigen(w3_data& d) { d.result[eigen_impl] = (d.ex - 0.5f).exp().sum(); }

// --- W6: row sums of A * A, A [N/256, 256] ----------------------------------------------------

struct w6_data {
  explicit w6_data(index_t n)
      : rows(n / kCols), A(kiln::randn<float>({rows, kCols}, 601)), out(kiln::zeros<float>({rows})),
        eA(A.data(), rows, kCols), eout(eigen_out(out)) {}
  index_t rows;
  kiln::tensor<float, 2> A;
  kiln::tensor<float, 1> out;
  EigenRowsIn eA;
  EigenOut eout;
  index_t n() const { return rows * kCols; }
  float const* result(impl) const { return out.data(); }
  std::int64_t bytes() const { return (n() + rows) * std::int64_t(sizeof(float)); }
};

void w6_kiln(w6_data& d) { d.out = kiln::sum(d.A * d.A, kiln::axes<1>); }

// The same with kiln::square: A * A has two leaves over A, and the loop loads each element twice
// (the hand loop and Eigen's square() load it once). Outside the table, as W6/kiln_square.
void w6_kiln_square(w6_data& d) { d.out = kiln::sum(kiln::square(d.A), kiln::axes<1>); }

void w6_scalar(w6_data& d) {
  float const* __restrict A = d.A.data();
  float* __restrict out = d.out.data();
  for (index_t r = 0; r < d.rows; ++r) {
    float s = 0;
    for (index_t j = 0; j < kCols; ++j) s += A[r * kCols + j] * A[r * kCols + j];
    out[r] = s;
  }
}

void w6_xsimd(w6_data& d) {
  float const* A = d.A.data();
  float* out = d.out.data();
  for (index_t r = 0; r < d.rows; ++r) {
    float const* a = A + r * kCols;
    B a0(0.f), a1(0.f), a2(0.f), a3(0.f);
    index_t j = 0;
    for (; j + 4 * W <= kCols; j += 4 * W) {
      B const v0 = B::load_unaligned(a + j), v1 = B::load_unaligned(a + j + W);
      B const v2 = B::load_unaligned(a + j + 2 * W), v3 = B::load_unaligned(a + j + 3 * W);
      a0 = xsimd::fma(v0, v0, a0);
      a1 = xsimd::fma(v1, v1, a1);
      a2 = xsimd::fma(v2, v2, a2);
      a3 = xsimd::fma(v3, v3, a3);
    }
    float s = xsimd::hadd((a0 + a1) + (a2 + a3));
    for (; j < kCols; ++j) s += a[j] * a[j];
    out[r] = s;
  }
}

void w6_eigen(w6_data& d) { d.eout = d.eA.square().rowwise().sum(); }

// --- W7: softmax over the rows of A [N/256, 256] ----------------------------------------------

struct w7_data {
  explicit w7_data(index_t n)
      : rows(n / kCols), A(kiln::randn<float>({rows, kCols}, 701)), out(kiln::zeros<float>({rows, kCols})),
        eA(A.data(), rows, kCols), eout(out.data(), rows, kCols) {}
  index_t rows;
  kiln::tensor<float, 2> A, out;
  EigenRowsIn eA;
  EigenRowsOut eout;
  index_t n() const { return rows * kCols; }
  float const* result(impl) const { return out.data(); }
  std::int64_t bytes() const { return 2 * n() * std::int64_t(sizeof(float)); }
};

void w7_kiln(w7_data& d) { d.out = kiln::softmax(d.A, 1); }

void w7_scalar(w7_data& d) {
  for (index_t r = 0; r < d.rows; ++r) {
    float const* __restrict a = d.A.data() + r * kCols;
    float* __restrict o = d.out.data() + r * kCols;
    float m = a[0];
    for (index_t j = 1; j < kCols; ++j) m = std::max(m, a[j]);
    float s = 0;
    for (index_t j = 0; j < kCols; ++j) s += (o[j] = std::exp(a[j] - m));
    float const inv = 1.f / s;
    for (index_t j = 0; j < kCols; ++j) o[j] *= inv;
  }
}

// The hand-written two-pass softmax: max, then exp stored while summed, then a scale.
void w7_xsimd(w7_data& d) {
  for (index_t r = 0; r < d.rows; ++r) {
    float const* a = d.A.data() + r * kCols;
    float* o = d.out.data() + r * kCols;
    B mv = B::load_unaligned(a);
    for (index_t j = W; j < kCols; j += W) mv = xsimd::max(mv, B::load_unaligned(a + j));
    alignas(64) float lanes[W];
    mv.store_aligned(lanes);
    B const m(*std::max_element(lanes, lanes + W));
    B s0(0.f), s1(0.f);
    for (index_t j = 0; j < kCols; j += 2 * W) {
      B const e0 = xsimd::exp(B::load_unaligned(a + j) - m), e1 = xsimd::exp(B::load_unaligned(a + j + W) - m);
      e0.store_unaligned(o + j);
      e1.store_unaligned(o + j + W);
      s0 += e0;
      s1 += e1;
    }
    B const inv(1.f / xsimd::hadd(s0 + s1));
    for (index_t j = 0; j < kCols; j += W) (B::load_unaligned(o + j) * inv).store_unaligned(o + j);
  }
}

void w7_eigen(w7_data& d) {
  Eigen::ArrayXf const m = d.eA.rowwise().maxCoeff();
  d.eout = (d.eA.colwise() - m).exp();
  Eigen::ArrayXf const inv = d.eout.rowwise().sum().inverse();
  d.eout.colwise() *= inv;
}

// --- W8: A - amax(A, axes<1>, keepdim), on W7's data ------------------------------------------
// A reduction inside an elementwise expression: kiln runs it a block of rows at a time
// (eval/row_blocks.hpp); the hand loops go row by row, the row's maximum and then the
// subtraction; Eigen evaluates the maxima into a temporary first.

void w8_kiln(w7_data& d) { d.out = d.A - kiln::amax(d.A, kiln::axes<1>, kiln::keepdim); }

void w8_scalar(w7_data& d) {
  for (index_t r = 0; r < d.rows; ++r) {
    float const* __restrict a = d.A.data() + r * kCols;
    float* __restrict o = d.out.data() + r * kCols;
    float m = a[0];
    for (index_t j = 1; j < kCols; ++j) m = std::max(m, a[j]);
    for (index_t j = 0; j < kCols; ++j) o[j] = a[j] - m;
  }
}

void w8_xsimd(w7_data& d) {
  for (index_t r = 0; r < d.rows; ++r) {
    float const* a = d.A.data() + r * kCols;
    float* o = d.out.data() + r * kCols;
    B m0 = B::load_unaligned(a), m1 = B::load_unaligned(a + W);  // two chains of max
    for (index_t j = 2 * W; j < kCols; j += 2 * W) {
      m0 = xsimd::max(m0, B::load_unaligned(a + j));
      m1 = xsimd::max(m1, B::load_unaligned(a + j + W));
    }
    alignas(64) float lanes[W];
    xsimd::max(m0, m1).store_aligned(lanes);
    B const m(*std::max_element(lanes, lanes + W));
    for (index_t j = 0; j < kCols; j += W) (B::load_unaligned(a + j) - m).store_unaligned(o + j);
  }
}

void w8_eigen(w7_data& d) {
  Eigen::ArrayXf const m = d.eA.rowwise().maxCoeff();
  d.eout = d.eA.colwise() - m;
}

// --- W9: layer norm over the rows of A, on W7's data -----------------------------------------
// (A - mean(A, 1, keepdim)) / sqrt(var(A, 1, keepdim, correction 0) + 1e-5): two reductions inside
// an expression. The hand loops go row by row: the mean, the variance of the deviations (two
// passes, as kiln and PyTorch), then the write. Eigen: the statistics into temporaries first.

constexpr float kEps = 1e-5f;

void w9_kiln(w7_data& d) {
  d.out = (d.A - kiln::mean(d.A, kiln::axes<1>, kiln::keepdim)) /
          kiln::sqrt(kiln::variance(d.A, kiln::axes<1>, kiln::keepdim, kiln::correction{0}) + kEps);
}

void w9_scalar(w7_data& d) {
  for (index_t r = 0; r < d.rows; ++r) {
    float const* __restrict a = d.A.data() + r * kCols;
    float* __restrict o = d.out.data() + r * kCols;
    float s = 0;
    for (index_t j = 0; j < kCols; ++j) s += a[j];
    float const mean = s / kCols;
    float q = 0;
    for (index_t j = 0; j < kCols; ++j) q += (a[j] - mean) * (a[j] - mean);
    float const scale = std::sqrt(q / kCols + kEps);
    for (index_t j = 0; j < kCols; ++j) o[j] = (a[j] - mean) / scale;
  }
}

void w9_xsimd(w7_data& d) {
  for (index_t r = 0; r < d.rows; ++r) {
    float const* a = d.A.data() + r * kCols;
    float* o = d.out.data() + r * kCols;
    B s0(0.f), s1(0.f);
    for (index_t j = 0; j < kCols; j += 2 * W) {
      s0 += B::load_unaligned(a + j);
      s1 += B::load_unaligned(a + j + W);
    }
    B const mean(xsimd::hadd(s0 + s1) / kCols);
    B q0(0.f), q1(0.f);
    for (index_t j = 0; j < kCols; j += 2 * W) {
      B const d0 = B::load_unaligned(a + j) - mean, d1 = B::load_unaligned(a + j + W) - mean;
      q0 = xsimd::fma(d0, d0, q0);
      q1 = xsimd::fma(d1, d1, q1);
    }
    B const scale(std::sqrt(xsimd::hadd(q0 + q1) / kCols + kEps));
    for (index_t j = 0; j < kCols; j += W) ((B::load_unaligned(a + j) - mean) / scale).store_unaligned(o + j);
  }
}

void w9_eigen(w7_data& d) {
  Eigen::ArrayXf const mean = d.eA.rowwise().mean();
  Eigen::ArrayXf const scale = ((d.eA.colwise() - mean).square().rowwise().mean() + kEps).sqrt();
  d.eout = (d.eA.colwise() - mean).colwise() / scale;
}

void (*const w3_fns[4])(w3_data&) = {w3_kiln, w3_scalar, w3_xsimd, w3_eigen};
void (*const w6_fns[4])(w6_data&) = {w6_kiln, w6_scalar, w6_xsimd, w6_eigen};
void (*const w7_fns[4])(w7_data&) = {w7_kiln, w7_scalar, w7_xsimd, w7_eigen};
void (*const w8_fns[4])(w7_data&) = {w8_kiln, w8_scalar, w8_xsimd, w8_eigen};
void (*const w9_fns[4])(w7_data&) = {w9_kiln, w9_scalar, w9_xsimd, w9_eigen};

// Every implementation against the scalar reference, within rtol; a mismatch stops the run.
bool near(char const* what, index_t n, float const* got, float const* want, index_t count, double rtol, double atol = 1e-7) {
  for (index_t i = 0; i < count; ++i)
    if (!(std::abs(double(got[i]) - double(want[i])) <= rtol * (1e-30 + std::abs(double(want[i]))) + atol)) {
      std::fprintf(stderr, "verify: %s at N=%td differs at %td: %.9g vs %.9g\n", what, n, i, double(got[i]), double(want[i]));
      return false;
    }
  return true;
}

bool verify_all(index_t n) {
  bool ok = true;
  auto& d3 = data_for<w3_data>(n);
  for (auto fn : w3_fns) fn(d3);
  for (impl i : {kiln_impl, xsimd_impl, eigen_impl})
    ok = near((std::string("W3/") + impl_names[i]).c_str(), n, &d3.result[i], &d3.result[scalar_impl], 1, 1e-5) && ok;
  // Each implementation against the scalar loop's result, the shared destination first filled with
  // a sentinel so that none can pass on another's result.
  auto each = [&](char const* workload, auto& d, auto const& fns, index_t count, double tol, double atol = 1e-7) {
    fns[scalar_impl](d);
    std::vector<float> const reference(d.out.data(), d.out.data() + count);
    for (impl i : {kiln_impl, xsimd_impl, eigen_impl}) {
      std::fill_n(d.out.data(), count, -12345.f);
      fns[i](d);
      ok = near((std::string(workload) + "/" + impl_names[i]).c_str(), n, d.result(i), reference.data(), count, tol, atol) && ok;
    }
    return reference;
  };
  auto& d6 = data_for<w6_data>(n);
  std::vector<float> const r6 = each("W6", d6, w6_fns, d6.rows, 1e-5);
  std::fill_n(d6.out.data(), d6.rows, -12345.f);
  w6_kiln_square(d6);
  ok = near("W6/kiln_square", n, d6.result(kiln_impl), r6.data(), d6.rows, 1e-5) && ok;
  auto& d7 = data_for<w7_data>(n);
  each("W7", d7, w7_fns, d7.n(), 1e-5);
  each("W8", d7, w8_fns, d7.n(), 0);
  each("W9", d7, w9_fns, d7.n(), 1e-4, 1e-5);  // (outputs near 0 carry the mean's rounding)
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return bench_main(argc, argv, "all implementations agree with the scalar loop (W3, W6, W7, W8, W9 at every N)",
                    [] {
                      bool ok = true;
                      for (index_t n : kSizes) ok = verify_all(n) && ok;
                      return ok;
                    },
                    [] {
                      register_workload("W3", w3_fns);
                      register_workload("W6", w6_fns);
                      register_extra<w6_data>("W6/kiln_square", w6_kiln_square);
                      register_workload("W7", w7_fns);
                      register_workload("W8", w8_fns);
                      register_workload("W9", w9_fns);
                    });
}

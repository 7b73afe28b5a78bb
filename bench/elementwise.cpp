// kiln elementwise benchmarks: every workload four ways in one binary, so results read as ratios.
//
//   kiln    the library: `out = expr` (default policy kiln::simd), shape check and planning included
//   scalar  a hand-written scalar loop (std:: math, what -O3 -march=native makes of it)
//   xsimd   a hand-written xsimd loop: xsimd::batch<float>, load/store_unaligned, scalar tail
//   eigen   Eigen 3.4 Arrays, written the way an Eigen user would for speed
//
// Extra rows outside the four-way table: W4/eigen_rowloop (the other way to write W4 in Eigen),
// W4/xsimd_runtime (the xsimd loop with its row length a run-time value, as kiln has it).
//
// Workloads (float, N elements; names read W<k>/<impl>/<N>):
//   W1  z = 2.5 x + y
//   W2  z = tanh(0.7 x + 0.1) * sigmoid(y) + exp(-x*x)
//   W4  out = relu(A + b) * c,  A [N/256, 256], b [256], c [N/256, 1], row-major
//   W4t W4 with rows of 255: A [N/256, 255], b [255]; every row ends in a partial batch (its times
//       per element divide by N, 256/255 of the elements)
//
// Math used by each implementation (W2):
//   sigmoid: kiln, scalar and xsimd use the stable form (kiln's own formula):
//              e = exp(-|y|), r = 1 / (1 + e), sigmoid = y >= 0 ? r : e * r
//            eigen uses ArrayXf::logistic(), Eigen's own vectorised float sigmoid (a rational
//            approximation on [-9, 15.7], exp(x) below), the fastest Eigen offers.
//   tanh:    kiln and xsimd: xsimd::tanh; scalar: std::tanh; eigen: Array::tanh(), which for
//            float is Eigen's fast rational approximation (EIGEN_FAST_MATH, the default).
//   exp:     kiln and xsimd: xsimd::exp; scalar: std::exp; eigen: Array::exp() (pexp).
//
// Before any timing, main() runs every implementation once at every size and checks it against
// the scalar loop (|a - b| <= 1e-5 + 1e-5 |b|); a mismatch aborts the run, so the benchmark never
// compares wrong code.
#include "harness.hpp"

#include <type_traits>

namespace {
using namespace kiln_bench;

// --- W1: z = 2.5 x + y -------------------------------------------------------------------

struct w1_data {
  explicit w1_data(index_t n)
      : x(kiln::randn<float>({n}, 101)), y(kiln::randn<float>({n}, 102)), z(kiln::zeros<float>({n})),
        ex(eigen_in(x)), ey(eigen_in(y)), ez(eigen_out(z)) {}
  kiln::tensor<float, 1> x, y, z;
  EigenIn ex, ey;
  EigenOut ez;
  index_t n() const { return x.size(); }
  float const* out(impl) const { return z.data(); }
  std::int64_t bytes() const { return 3 * n() * std::int64_t(sizeof(float)); }
};

void w1_kiln(w1_data& d) { d.z = 2.5f * d.x + d.y; }

void w1_scalar(w1_data& d) {
  float const* __restrict x = d.x.data();
  float const* __restrict y = d.y.data();
  float* __restrict z = d.z.data();
  index_t const n = d.n();
  for (index_t i = 0; i < n; ++i) z[i] = 2.5f * x[i] + y[i];
}

void w1_xsimd(w1_data& d) {
  float const* x = d.x.data();
  float const* y = d.y.data();
  float* z = d.z.data();
  index_t const n = d.n();
  B const a(2.5f);
  index_t i = 0;
  for (; i + W <= n; i += W) xsimd::fma(a, B::load_unaligned(x + i), B::load_unaligned(y + i)).store_unaligned(z + i);
  for (; i < n; ++i) z[i] = 2.5f * x[i] + y[i];
}

void w1_eigen(w1_data& d) { d.ez = 2.5f * d.ex + d.ey; }

// --- W2: z = tanh(0.7 x + 0.1) * sigmoid(y) + exp(-x*x) --------------------------------------

struct w2_data : w1_data {
  using w1_data::w1_data;
};

void w2_kiln(w2_data& d) { d.z = kiln::tanh(0.7f * d.x + 0.1f) * kiln::sigmoid(d.y) + kiln::exp(-d.x * d.x); }

inline float sigmoid_stable(float y) {
  float const e = std::exp(-std::abs(y));
  float const r = 1.f / (1.f + e);
  return y >= 0.f ? r : e * r;
}

void w2_scalar(w2_data& d) {
  float const* __restrict x = d.x.data();
  float const* __restrict y = d.y.data();
  float* __restrict z = d.z.data();
  index_t const n = d.n();
  for (index_t i = 0; i < n; ++i)
    z[i] = std::tanh(0.7f * x[i] + 0.1f) * sigmoid_stable(y[i]) + std::exp(-x[i] * x[i]);
}

void w2_xsimd(w2_data& d) {
  float const* x = d.x.data();
  float const* y = d.y.data();
  float* z = d.z.data();
  index_t const n = d.n();
  B const a(0.7f), c(0.1f), one(1.f), zero(0.f);
  index_t i = 0;
  for (; i + W <= n; i += W) {
    B const xv = B::load_unaligned(x + i);
    B const yv = B::load_unaligned(y + i);
    B const t = xsimd::tanh(xsimd::fma(a, xv, c));
    B const e = xsimd::exp(-xsimd::abs(yv));
    B const r = one / (one + e);
    B const s = xsimd::select(yv >= zero, r, e * r);
    B const g = xsimd::exp(-(xv * xv));
    xsimd::fma(t, s, g).store_unaligned(z + i);
  }
  for (; i < n; ++i) z[i] = std::tanh(0.7f * x[i] + 0.1f) * sigmoid_stable(y[i]) + std::exp(-x[i] * x[i]);
}

void w2_eigen(w2_data& d) {
  d.ez = (0.7f * d.ex + 0.1f).tanh() * d.ey.logistic() + (-d.ex.square()).exp();
}

// --- W4: out = relu(A + b) * c ---------------------------------------------------------------

// Cols: the row length, 256 for W4, 255 for W4t (every row ends in a partial batch).
template <index_t Cols>
struct w4_data {
  explicit w4_data(index_t n)
      : rows(n / kCols),  // W4's rows at every row length
        A(kiln::randn<float>({rows, Cols}, 401)), b(kiln::randn<float>({Cols}, 402)),
        c(kiln::randn<float>({rows, 1}, 403)), out(kiln::zeros<float>({rows, Cols})),
        eA(A.data(), rows, Cols), eb(b.data(), Cols), ec(eigen_in(c)), eout(out.data(), rows, Cols) {}
  index_t rows;
  kiln::tensor<float, 2> A;
  kiln::tensor<float, 1> b;
  kiln::tensor<float, 2> c;
  kiln::tensor<float, 2> out;
  EigenRowsIn eA;
  Eigen::Map<Eigen::Array<float, 1, Eigen::Dynamic> const> eb;  // a row, for .rowwise()
  EigenIn ec;                                                   // a column, for .colwise()
  EigenRowsOut eout;
  index_t n() const { return rows * Cols; }
  float const* result(impl) const { return out.data(); }
  std::int64_t bytes() const { return (2 * n() + Cols + rows) * std::int64_t(sizeof(float)); }
};

template <index_t Cols>
void w4_kiln(w4_data<Cols>& d) { d.out = kiln::relu(d.A + d.b) * d.c; }

template <index_t Cols>
void w4_scalar(w4_data<Cols>& d) {
  float const* __restrict A = d.A.data();
  float const* __restrict b = d.b.data();
  float const* __restrict c = d.c.data();
  float* __restrict out = d.out.data();
  for (index_t r = 0; r < d.rows; ++r) {
    float const cr = c[r];
    float const* __restrict a = A + r * Cols;
    float* __restrict o = out + r * Cols;
    for (index_t j = 0; j < Cols; ++j) {
      float const v = a[j] + b[j];
      o[j] = (v < 0.f ? 0.f : v) * cr;
    }
  }
}

// The xsimd loop over rows of `cols` elements: a compile-time constant (std::integral_constant)
// in the table's loop, or an index_t.
template <index_t Cols, class RowLength>
void w4_xsimd_rows(w4_data<Cols>& d, RowLength cols) {
  float const* A = d.A.data();
  float const* b = d.b.data();
  float const* c = d.c.data();
  float* out = d.out.data();
  B const zero(0.f);
  for (index_t r = 0; r < d.rows; ++r) {
    B const cr(c[r]);
    float const* a = A + r * cols;
    float* o = out + r * cols;
    index_t j = 0;
    for (; j + W <= cols; j += W)
      (xsimd::max(B::load_unaligned(a + j) + B::load_unaligned(b + j), zero) * cr).store_unaligned(o + j);
    for (; j < cols; ++j) o[j] = std::max(a[j] + b[j], 0.f) * c[r];
  }
}

template <index_t Cols>
void w4_xsimd(w4_data<Cols>& d) { w4_xsimd_rows(d, std::integral_constant<index_t, Cols>{}); }

// w4_xsimd with the row length read at run time, as a loop written for any shape reads it: the
// table's loop has a compile-time row length of 256, which GCC unrolls whole (16 batches per row
// with AVX-512, no loop and no tail code). kiln reads its shapes at run time; this row shows how
// much of the gap at 1K elements that knowledge is.
void w4_xsimd_runtime(w4_data<256>& d) { w4_xsimd_rows(d, d.b.size()); }

// The broadcasting one-liner an Eigen expert writes. Eigen vectorises it (the row-vector
// Replicate becomes plain packet loads of eb, the column-vector one a per-row broadcast of ec) and
// it measured faster than the explicit row loop below, which is kept as W4/eigen_rowloop so the
// choice can be re-checked on another machine.
template <index_t Cols>
void w4_eigen(w4_data<Cols>& d) { d.eout = (d.eA.rowwise() + d.eb).max(0.f).colwise() * d.ec; }
void w4_eigen_rowloop(w4_data<256>& d) {
  for (index_t r = 0; r < d.rows; ++r) d.eout.row(r) = (d.eA.row(r) + d.eb).max(0.f) * d.ec(r);
}

void (*const w1_fns[4])(w1_data&) = {w1_kiln, w1_scalar, w1_xsimd, w1_eigen};
void (*const w2_fns[4])(w2_data&) = {w2_kiln, w2_scalar, w2_xsimd, w2_eigen};
template <index_t Cols>
void (*const w4_fns[4])(w4_data<Cols>&) = {w4_kiln<Cols>, w4_scalar<Cols>, w4_xsimd<Cols>, w4_eigen<Cols>};

}  // namespace

int main(int argc, char** argv) {
  auto verify_all = [] {
    bool ok = true;
    // The benchmarked sizes, plus sizes that leave a scalar/vector tail (W1, W2) or few rows (W4).
    for (index_t n : {index_t(1027), index_t(13)}) {
      ok = verify("W1", n, w1_fns, [](w1_data const& d, impl i) { return d.out(i); }) && ok;
      ok = verify("W2", n, w2_fns, [](w2_data const& d, impl i) { return d.out(i); }) && ok;
    }
    auto w4_out = [](auto const& d, impl i) { return d.result(i); };
    ok = verify("W4", 3 * 256, w4_fns<256>, w4_out) && ok;
    ok = verify("W4t", 3 * 256, w4_fns<255>, w4_out) && ok;
    for (index_t n : kSizes) {
      ok = verify("W1", n, w1_fns, [](w1_data const& d, impl i) { return d.out(i); }) && ok;
      ok = verify("W2", n, w2_fns, [](w2_data const& d, impl i) { return d.out(i); }) && ok;
      ok = verify("W4", n, w4_fns<256>, w4_out, {{"eigen_rowloop", w4_eigen_rowloop}, {"xsimd_runtime", w4_xsimd_runtime}}) && ok;
      ok = verify("W4t", n, w4_fns<255>, w4_out) && ok;
    }
    return ok;
  };
  return bench_main(argc, argv, "all implementations agree with the scalar loop (W1, W2, W4, W4t at every N)", verify_all, [] {
    register_workload("W1", w1_fns);
    register_workload("W2", w2_fns);
    register_workload("W4", w4_fns<256>);
    register_workload("W4t", w4_fns<255>);
    register_extra<w4_data<256>>("W4/eigen_rowloop", w4_eigen_rowloop);
    register_extra<w4_data<256>>("W4/xsimd_runtime", w4_xsimd_runtime);
  });
}

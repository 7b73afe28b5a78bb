// kiln/ops/activation.hpp: neural-network activations, in the formulas PyTorch uses so that
// values at the edges (±inf, NaN, large magnitudes) agree.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/expr/map.hpp>
#include <kiln/ops/math.hpp>

#include <array>
#include <cmath>
#include <limits>

namespace kiln {
namespace ops {
using math::lit;
using math::select;

// Derivative rules (grad: see arithmetic.hpp) as torch's *_backward kernels.

// 1 / (1 + e^-x) through e = e^-|x|, so neither branch overflows: 1 / (1 + e) for x >= 0 and
// e / (1 + e) below, one division for both. sigmoid(-1000) = 0 exactly, sigmoid(-100) is the
// subnormal it should be in float, and the relative error stays small all the way down: float
// batches, with kiln's float exp, are within 3 ulp over all 2^32 floats (12 inputs at 3 ulp,
// 99.99% within 1; measured exhaustively against double). The cheaper
// 0.5 + 0.5 tanh(x/2) of the fast tanh is not used: for x < 0 it cancels, and its absolute error
// (~1e-7) is already 8 ulp of sigmoid(-2) = 0.12, thousands of ulp near -9 (Eigen's logistic,
// a rational shifted by 0.5, behaves the same way).
struct sigmoid_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "sigmoid";
  template <class T> KILN_OP T operator()(T x) const {
    T const e = math::exp(math::minus_abs(x));
    return select(x >= lit<T>(0), lit<T>(1), e) / (lit<T>(1) + e);
  }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T out, T) const { return {g * (lit<T>(1) - out) * out}; }
};
// log(x / (1 - x)), PyTorch's formula (without eps): logit(0) = -inf, logit(1) = inf, NaN outside
// [0, 1]. Near x = 1/2 the quotient is close to 1 and its rounding swamps the small result (53 float
// ulps at 0.499998), so from x = 1/4 on it is log1p((2x - 1) / (1 - x)), where 2x - 1 is exact.
struct logit_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "logit";
  template <class T> KILN_OP T operator()(T x) const {
    T const one_minus_x = lit<T>(1) - x;
    return select(x < lit<T>(0.25), math::log(x / one_minus_x),
                  math::log1p((x + x - lit<T>(1)) / one_minus_x));
  }
  // As torch's logit_backward without eps: NaN outside [0, 1], infinite at its ends, +inf at -0
  // too (the + 0 makes x (1 - x) = -0 a +0; it changes no other value).
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    T const nan(std::numeric_limits<math::element_t<T>>::quiet_NaN());
    return {select(math::either(x < lit<T>(0), x > lit<T>(1)), nan, g / (x * (lit<T>(1) - x) + T(0)))};
  }
};
// max(x, 0) that keeps NaN; relu'(0) = 0 (gradients issue).
struct relu_op : math::op_base<1, op_kind::same> {
  static constexpr std::string_view name = "relu";
  template <class T> KILN_OP T operator()(T x) const {
    // On batches, max(0, x) is one instruction with the same result: it returns its second
    // operand when either is NaN or both are zeros, so NaN and -0 pass through.
    if constexpr (simd_detail::is_batch<T>) return simd_detail::max_else_second(T(0), x);
    else return select(x < T(0), T(0), x);
  }
  // torch's threshold_backward on the result: 0 where out <= 0, so at 0 too; a NaN passes g.
  template <class T> KILN_HD std::array<T, 1> grad(T g, T out, T) const { return {select(out <= T(0), T(0), g)}; }
};
// The exact (erf) form, x/2 (1 + erf(x / sqrt 2)) as PyTorch writes it, computed as
// x/2 erfc(-x / sqrt 2): equal, but without the cancellation in 1 + erf for x < 0, where PyTorch's
// form loses most digits (gelu(-3) was off by 120 float ulps). Floats are computed in double,
// vectorised (see math::erfc_to_float_accuracy); doubles lane by lane through std::erfc, with the
// rounding error of x / sqrt 2 corrected to first order where erfc magnifies it (25 ulp at
// x = -10 otherwise). gelu(-inf) is NaN, as in PyTorch.
struct gelu_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "gelu";
  template <class T> KILN_OP T operator()(T x) const {
    if constexpr (std::is_same_v<math::element_t<T>, float>) {
      return math::in_double(x, [](auto const& v) {
        using D = std::remove_cvref_t<decltype(v)>;
        return v * lit<D>(0.5) * math::erfc_to_float_accuracy(v * lit<D>(-0.70710678118654752440));
      });
    } else {
      return math::per_lane(x, [](double v) {
        double const c = -0.70710678118654757, c_low = 4.8336466567264565e-17;  // -1/sqrt 2 = c + c_low
        double const y = v * c;
        double e = std::erfc(y);
        if (y > 0.5) {  // erfc(y + dy) = erfc(y) - 2/sqrt(pi) e^(-y^2) dy
          double const dy = std::fma(v, c, -y) + v * c_low;
          e -= 1.1283791670955126 * std::exp(-y * y) * dy;
        }
        return v * 0.5 * e;
      });
    }
  }
  // Phi(x) + x phi(x), torch's gelu_backward, with Phi(x) = erfc(-x / sqrt 2) / 2 as in the forward:
  // torch's (1 + erf(x / sqrt 2)) / 2 loses most digits for x < 0.
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    T const cdf = lit<T>(0.5) * math::erfc(x * lit<T>(-0.70710678118654752440));
    T const pdf = lit<T>(0.39894228040143267794) * math::exp(lit<T>(-0.5) * x * x);  // 1 / sqrt(2 pi)
    return {g * (cdf + x * pdf)};
  }
};
// x sigmoid(x), with the stable sigmoid. PyTorch's x / (1 + e^-x) gives -0 once e^-x overflows
// (x < -88.7 in float) where the value is still a normal number.
struct silu_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "silu";
  template <class T> KILN_OP T operator()(T x) const { return x * sigmoid_op{}(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    T const s = sigmoid_op{}(x);
    return {g * s * (lit<T>(1) + x * (lit<T>(1) - s))};
  }
};
// log(1 + e^(beta x)) / beta, and x itself once beta x > threshold (torch defaults 1 and 20).
struct softplus_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "softplus";
  double beta = 1, threshold = 20;
  template <class T> KILN_OP T operator()(T x) const {
    T const bx = x * lit<T>(beta);
    return select(bx > lit<T>(threshold), x, math::log1p(math::exp(bx)) / lit<T>(beta));
  }
  // torch's softplus_backward, its e^(bx) / (e^(bx) + 1) taken as the stable sigmoid(bx): the same
  // value, but not NaN once e^(bx) overflows (a threshold above 88 in float).
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    T const bx = x * lit<T>(beta);
    return {select(bx > lit<T>(threshold), g, g * sigmoid_op{}(bx))};
  }
};
// x for x > 0, alpha (e^x - 1) otherwise (so elu(-0) = -0 and elu(NaN) = NaN).
struct elu_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "elu";
  double alpha = 1;
  template <class T> KILN_OP T operator()(T x) const {
    return select(x <= lit<T>(0), lit<T>(alpha) * math::expm1(x), x);
  }
  // torch's elu_backward from the input: alpha e^x, not out + alpha, which cancels as x -> -inf.
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    return {select(x <= lit<T>(0), g * lit<T>(alpha) * math::exp(x), g)};
  }
};
struct leaky_relu_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "leaky_relu";
  double negative_slope = 0.01;
  template <class T> KILN_OP T operator()(T x) const { return select(x > lit<T>(0), x, x * lit<T>(negative_slope)); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    return {select(x > lit<T>(0), g, g * lit<T>(negative_slope))};
  }
};
// clamp(x, min_val, max_val), as PyTorch computes it: NaN stays NaN, and min_val > max_val gives
// max_val.
struct hardtanh_op : math::op_base<1, op_kind::same> {
  static constexpr std::string_view name = "hardtanh";
  double min_val = -1, max_val = 1;
  template <class T> KILN_OP T operator()(T x) const {
    T const at_least_min = select(x < lit<T>(min_val), lit<T>(min_val), x);
    return select(lit<T>(max_val) < at_least_min, lit<T>(max_val), at_least_min);
  }
  // torch's hardtanh_backward: 0 at the bounds as beyond them (clamp's passes g at its bounds).
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    return {select(math::either(x <= lit<T>(min_val), x >= lit<T>(max_val)), T(0), g)};
  }
};

}  // namespace ops

inline constexpr elementwise_fn<ops::sigmoid_op> sigmoid{};
inline constexpr elementwise_fn<ops::logit_op> logit{};
inline constexpr elementwise_fn<ops::relu_op> relu{};
inline constexpr elementwise_fn<ops::gelu_op> gelu{};
inline constexpr elementwise_fn<ops::silu_op> silu{};

template <operand X> requires expression<X>
auto softplus(X&& x, double beta = 1, double threshold = 20) {
  return make_map(ops::softplus_op{{}, beta, threshold}, std::forward<X>(x));
}
template <operand X> requires expression<X>
auto elu(X&& x, double alpha = 1) {
  return make_map(ops::elu_op{{}, alpha}, std::forward<X>(x));
}
template <operand X> requires expression<X>
auto leaky_relu(X&& x, double negative_slope = 0.01) {
  return make_map(ops::leaky_relu_op{{}, negative_slope}, std::forward<X>(x));
}
template <operand X> requires expression<X>
auto hardtanh(X&& x, double min_val = -1, double max_val = 1) {
  return make_map(ops::hardtanh_op{{}, min_val, max_val}, std::forward<X>(x));
}

}  // namespace kiln

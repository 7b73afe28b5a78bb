// kiln/ops/activation.hpp: neural-network activations, in the formulas PyTorch uses so that
// values at the edges (±inf, NaN, large magnitudes) agree.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/expr/map.hpp>
#include <kiln/ops/math.hpp>

namespace kiln {
namespace ops {
using math::lit;
using math::select;

// 1 / (1 + e^-x) through e = e^-|x|, so neither branch overflows: sigmoid(-1000) = 0 exactly.
struct sigmoid_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "sigmoid";
  template <class T> T operator()(T x) const {
    using std::abs, std::exp;
    T const e = exp(-abs(x));
    T const r = lit<T>(1) / (lit<T>(1) + e);
    return select(x >= lit<T>(0), r, e * r);
  }
};
struct logit_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "logit";
  template <class T> T operator()(T x) const { using std::log; return log(x / (lit<T>(1) - x)); }
};
// max(x, 0) that keeps NaN; relu'(0) = 0 (gradients issue).
struct relu_op : math::op_base<1, op_kind::same> {
  static constexpr std::string_view name = "relu";
  template <class T> T operator()(T x) const { return select(x < T(0), T(0), x); }
};
// The exact (erf) form: x/2 (1 + erf(x / sqrt 2)).
struct gelu_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "gelu";
  template <class T> T operator()(T x) const {
    using std::erf;
    return x * lit<T>(0.5) * (lit<T>(1) + erf(x * lit<T>(0.70710678118654752440)));
  }
};
struct silu_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "silu";
  template <class T> T operator()(T x) const { using std::exp; return x / (lit<T>(1) + exp(-x)); }
};
// log(1 + e^(beta x)) / beta, and x itself once beta x > threshold (torch defaults 1 and 20).
struct softplus_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "softplus";
  double beta = 1, threshold = 20;
  template <class T> T operator()(T x) const {
    using std::exp, std::log1p;
    T const bx = x * lit<T>(beta);
    return select(bx > lit<T>(threshold), x, log1p(exp(bx)) / lit<T>(beta));
  }
};
struct elu_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "elu";
  double alpha = 1;
  template <class T> T operator()(T x) const {
    using std::expm1;
    return select(x <= lit<T>(0), lit<T>(alpha) * expm1(x), x);
  }
};
struct leaky_relu_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "leaky_relu";
  double negative_slope = 0.01;
  template <class T> T operator()(T x) const { return select(x > lit<T>(0), x, x * lit<T>(negative_slope)); }
};
// clamp(x, min_val, max_val); NaN stays NaN.
struct hardtanh_op : math::op_base<1, op_kind::same> {
  static constexpr std::string_view name = "hardtanh";
  double min_val = -1, max_val = 1;
  template <class T> T operator()(T x) const {
    return select(x < lit<T>(min_val), lit<T>(min_val), select(x > lit<T>(max_val), lit<T>(max_val), x));
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

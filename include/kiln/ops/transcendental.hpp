// kiln/ops/transcendental.hpp: roots, exponentials, logarithms, trigonometric, hyperbolic and
// error functions. All compute in floating point (integer inputs become float). Scalars call
// <cmath>; batches find xsimd's vectorised versions through the same unqualified call, or go
// through kiln::math where xsimd needs help at an edge (see math.hpp).
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/expr/map.hpp>
#include <kiln/ops/math.hpp>

#include <array>
#include <limits>

namespace kiln {
namespace ops {
using unary_floating = math::op_base<1, op_kind::floating>;

// Derivative rules (grad: see arithmetic.hpp) as torch's derivatives.yaml, except that torch's
// 1 - x^2 and x^2 - 1 (asin, acos, atanh, acosh) are factored as (1 - x)(1 + x) and (x - 1)(x + 1):
// the same values without the cancellation next to ±1.

struct sqrt_op : unary_floating {
  static constexpr std::string_view name = "sqrt";
  template <class T> KILN_OP T operator()(T x) const { using std::sqrt; return sqrt(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T out, T) const { return {g / (math::lit<T>(2) * out)}; }
};
// 1 / sqrt(x) to full precision (not the 12-bit rsqrtps estimate).
struct rsqrt_op : unary_floating {
  static constexpr std::string_view name = "rsqrt";
  template <class T> KILN_OP T operator()(T x) const { using std::sqrt; return math::lit<T>(1) / sqrt(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T out, T) const {
    return {math::lit<T>(-0.5) * g * (out * out * out)};
  }
};
struct exp_op : unary_floating {
  static constexpr std::string_view name = "exp";
  template <class T> KILN_OP T operator()(T x) const { return math::exp(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T out, T) const { return {g * out}; }
};
struct exp2_op : unary_floating {
  static constexpr std::string_view name = "exp2";
  template <class T> KILN_OP T operator()(T x) const { return math::exp2(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T out, T) const {
    return {g * out * math::lit<T>(0.69314718055994530942)};  // ln 2
  }
};
struct expm1_op : unary_floating {
  static constexpr std::string_view name = "expm1";
  template <class T> KILN_OP T operator()(T x) const { return math::expm1(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T out, T) const { return {g * (out + math::lit<T>(1))}; }
};
struct log_op : unary_floating {
  static constexpr std::string_view name = "log";
  template <class T> KILN_OP T operator()(T x) const { return math::log(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const { return {g / x}; }
};
struct log2_op : unary_floating {
  static constexpr std::string_view name = "log2";
  template <class T> KILN_OP T operator()(T x) const { return math::log2(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    return {g / (x * math::lit<T>(0.69314718055994530942))};  // ln 2
  }
};
struct log10_op : unary_floating {
  static constexpr std::string_view name = "log10";
  template <class T> KILN_OP T operator()(T x) const { return math::log10(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    return {g / (x * math::lit<T>(2.30258509299404568402))};  // ln 10
  }
};
struct log1p_op : unary_floating {
  static constexpr std::string_view name = "log1p";
  template <class T> KILN_OP T operator()(T x) const { return math::log1p(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const { return {g / (x + math::lit<T>(1))}; }
};
// xsimd's sin, cos and tan are within 2 ulp, except in double next to multiples of pi/2, where its
// argument reduction runs a few bits short (7 ulp at sin(fl(pi)), 11 at tan(fl(pi/2))): accepted,
// a correct reduction there would cost every input.
struct sin_op : unary_floating {
  static constexpr std::string_view name = "sin";
  template <class T> KILN_OP T operator()(T x) const { using std::sin; return sin(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const { using std::cos; return {g * cos(x)}; }
};
struct cos_op : unary_floating {
  static constexpr std::string_view name = "cos";
  template <class T> KILN_OP T operator()(T x) const { using std::cos; return cos(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const { using std::sin; return {g * math::negative(sin(x))}; }
};
struct tan_op : unary_floating {
  static constexpr std::string_view name = "tan";
  template <class T> KILN_OP T operator()(T x) const { using std::tan; return tan(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T out, T) const {
    return {g * (math::lit<T>(1) + out * out)};
  }
};
struct asin_op : unary_floating {
  static constexpr std::string_view name = "asin";
  template <class T> KILN_OP T operator()(T x) const { using std::asin; return asin(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    using std::sqrt;
    return {g / sqrt((math::lit<T>(1) - x) * (math::lit<T>(1) + x))};
  }
};
struct acos_op : unary_floating {
  static constexpr std::string_view name = "acos";
  template <class T> KILN_OP T operator()(T x) const { using std::acos; return acos(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    using std::sqrt;
    return {math::negative(g) / sqrt((math::lit<T>(1) - x) * (math::lit<T>(1) + x))};
  }
};
struct atan_op : unary_floating {
  static constexpr std::string_view name = "atan";
  template <class T> KILN_OP T operator()(T x) const { using std::atan; return atan(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const { return {g / (x * x + math::lit<T>(1))}; }
};
struct sinh_op : unary_floating {
  static constexpr std::string_view name = "sinh";
  template <class T> KILN_OP T operator()(T x) const { using std::sinh; return sinh(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const { using std::cosh; return {g * cosh(x)}; }
};
struct cosh_op : unary_floating {
  static constexpr std::string_view name = "cosh";
  template <class T> KILN_OP T operator()(T x) const { using std::cosh; return cosh(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const { using std::sinh; return {g * sinh(x)}; }
};
struct tanh_op : unary_floating {
  static constexpr std::string_view name = "tanh";
  template <class T> KILN_OP T operator()(T x) const { return math::tanh(x); }
  // 1 - tanh^2 as (1 - out)(1 + out): exact factors where out nears ±1, and no multiply-add a
  // compiler may fuse in one path and not the other (Clang fuses `1 - out * out` in scalar code,
  // never across xsimd's operators), so batches and scalars agree under every compiler.
  template <class T> KILN_HD std::array<T, 1> grad(T g, T out, T) const {
    return {g * ((math::lit<T>(1) - out) * (math::lit<T>(1) + out))};
  }
};
struct asinh_op : unary_floating {
  static constexpr std::string_view name = "asinh";
  template <class T> KILN_OP T operator()(T x) const { using std::asinh; return asinh(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    using std::sqrt;
    return {g / sqrt(x * x + math::lit<T>(1))};
  }
};
// NaN below 1: xsimd's acosh takes its large-argument branch for large negative x as well
// (acosh(-1e4) came out as -inf, acosh(-1e30) as +inf).
struct acosh_op : unary_floating {
  static constexpr std::string_view name = "acosh";
  template <class T> KILN_OP T operator()(T x) const {
    using std::acosh;
    if constexpr (simd_detail::is_batch<T>)
      return math::select(x < T(1), T(std::numeric_limits<math::element_t<T>>::quiet_NaN()), acosh(x));
    else
      return acosh(x);
  }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    using std::sqrt;
    // (x - 1)(x + 1) rather than x^2 - 1, which cancels near 1; + 0 makes its -0 at x = -1 a +0,
    // so that the derivative there is +inf, as 1 / sqrt(x^2 - 1) and PyTorch give it.
    return {g / sqrt((x - math::lit<T>(1)) * (x + math::lit<T>(1)) + T(0))};
  }
};
struct atanh_op : unary_floating {
  static constexpr std::string_view name = "atanh";
  template <class T> KILN_OP T operator()(T x) const { using std::atanh; return atanh(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    return {g / ((math::lit<T>(1) - x) * (math::lit<T>(1) + x))};
  }
};
struct erf_op : unary_floating {
  static constexpr std::string_view name = "erf";
  template <class T> KILN_OP T operator()(T x) const { return math::erf(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    return {math::lit<T>(1.12837916709551257390) * math::exp(-(x * x)) * g};  // 2 / sqrt(pi)
  }
};
struct erfc_op : unary_floating {
  static constexpr std::string_view name = "erfc";
  template <class T> KILN_OP T operator()(T x) const { return math::erfc(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    return {math::lit<T>(-1.12837916709551257390) * math::exp(-(x * x)) * g};  // -2 / sqrt(pi)
  }
};

}  // namespace ops

inline constexpr elementwise_fn<ops::sqrt_op> sqrt{};
inline constexpr elementwise_fn<ops::rsqrt_op> rsqrt{};
inline constexpr elementwise_fn<ops::exp_op> exp{};
inline constexpr elementwise_fn<ops::exp2_op> exp2{};
inline constexpr elementwise_fn<ops::expm1_op> expm1{};
inline constexpr elementwise_fn<ops::log_op> log{};
inline constexpr elementwise_fn<ops::log2_op> log2{};
inline constexpr elementwise_fn<ops::log10_op> log10{};
inline constexpr elementwise_fn<ops::log1p_op> log1p{};
inline constexpr elementwise_fn<ops::sin_op> sin{};
inline constexpr elementwise_fn<ops::cos_op> cos{};
inline constexpr elementwise_fn<ops::tan_op> tan{};
inline constexpr elementwise_fn<ops::asin_op> asin{};
inline constexpr elementwise_fn<ops::acos_op> acos{};
inline constexpr elementwise_fn<ops::atan_op> atan{};
inline constexpr elementwise_fn<ops::sinh_op> sinh{};
inline constexpr elementwise_fn<ops::cosh_op> cosh{};
inline constexpr elementwise_fn<ops::tanh_op> tanh{};
inline constexpr elementwise_fn<ops::asinh_op> asinh{};
inline constexpr elementwise_fn<ops::acosh_op> acosh{};
inline constexpr elementwise_fn<ops::atanh_op> atanh{};
inline constexpr elementwise_fn<ops::erf_op> erf{};
inline constexpr elementwise_fn<ops::erfc_op> erfc{};

}  // namespace kiln

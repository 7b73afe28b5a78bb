// kiln/ops/arithmetic.hpp: + - * / and the other arithmetic ops, with PyTorch's edge semantics.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/function_objects.hpp>
#include <kiln/expr/map.hpp>
#include <kiln/ops/math.hpp>

#include <array>
#include <cmath>

namespace kiln {
namespace ops {
using math::op_base;
using math::select;

// Derivative rules: each op's grad(g, out, x...) returns g * d(out)/d(x_k) for every argument k,
// where out = op(x...) and g is the upstream gradient. They follow PyTorch's derivatives.yaml
// (including its choices at kinks and ties), are only used with floating compute types, and read
// the same on scalars and batches unless the op is not vectorized.

struct add_op : op_base<2, op_kind::same> {
  static constexpr std::string_view name = "add";
  template <class T> KILN_HD T operator()(T a, T b) const { return math::wrapping(a, b, math::plus{}); }
  template <class T> KILN_HD std::array<T, 2> grad(T g, T, T, T) const { return {g, g}; }
};
// -x; integers wrap (-INT_MIN = INT_MIN). Floats negate, not subtract from 0: neg(0) = -0.
struct neg_op : op_base<1, op_kind::same> {
  static constexpr std::string_view name = "neg";
  static constexpr bool takes_bool = false;  // -true: PyTorch points to logical_not
  template <class T> KILN_HD T operator()(T x) const {
    if constexpr (math::is_integer<T>) return math::wrapping(T(0), x, math::minus{});
    else return math::negative(x);
  }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T) const { return {(*this)(g)}; }
};
struct sub_op : op_base<2, op_kind::same> {
  static constexpr std::string_view name = "sub";
  static constexpr bool takes_bool = false;  // neither operand bool, as in PyTorch
  template <class T> KILN_HD T operator()(T a, T b) const { return math::wrapping(a, b, math::minus{}); }
  template <class T> KILN_HD std::array<T, 2> grad(T g, T, T, T) const { return {g, neg_op{}(g)}; }
};
struct mul_op : op_base<2, op_kind::same> {
  static constexpr std::string_view name = "mul";
  template <class T> KILN_HD T operator()(T a, T b) const { return math::wrapping(a, b, math::multiplies{}); }
  template <class T> KILN_HD std::array<T, 2> grad(T g, T, T a, T b) const { return {g * b, g * a}; }
};
// True division: integer inputs divide as float, as in PyTorch.
struct div_op : op_base<2, op_kind::floating> {
  static constexpr std::string_view name = "div";
  template <class T> KILN_HD T operator()(T a, T b) const { return a / b; }
  // -g a / b^2 as torch stages it, -g ((a / b) / b), which overflows only where the result does.
  template <class T> KILN_HD std::array<T, 2> grad(T g, T out, T, T b) const { return {g / b, math::negative(g) * (out / b)}; }
};
struct abs_op : op_base<1, op_kind::same> {
  static constexpr std::string_view name = "abs";
  template <class T> KILN_HD T operator()(T x) const {
    if constexpr (math::is_integer<T>) return x < 0 ? math::wrapping(T(0), x, math::minus{}) : x;
    else if constexpr (std::is_same_v<T, bool>) return x;
    else { using std::abs; return abs(x); }
  }
  // g * sign(x), as torch: 0 at 0 (and at NaN).
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const {
    return {g * select(x < T(0), math::lit<T>(-1), select(T(0) < x, math::lit<T>(1), T(0)))};
  }
};
// -1, 0 or 1; sign(NaN) = 0 as PyTorch's (0 < x) - (x < 0).
struct sign_op : op_base<1, op_kind::same> {
  static constexpr std::string_view name = "sign";
  template <class T> KILN_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) return x;
    else return select(T(0) < x, math::lit<T>(1), math::lit<T>(0)) - select(x < T(0), math::lit<T>(1), math::lit<T>(0));
  }
  template <class T> KILN_HD std::array<T, 1> grad(T, T, T) const { return {T(0)}; }
};
struct reciprocal_op : op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "reciprocal";
  template <class T> KILN_HD T operator()(T x) const { return math::lit<T>(1) / x; }  // exact, unlike rcpps
  template <class T> KILN_HD std::array<T, 1> grad(T g, T out, T) const { return {math::negative(g) * (out * out)}; }
};
struct square_op : op_base<1, op_kind::same> {
  static constexpr std::string_view name = "square";
  template <class T> KILN_HD T operator()(T x) const { return math::wrapping(x, x, math::multiplies{}); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T x) const { return {g * (math::lit<T>(2) * x)}; }
};
// C's pow at every edge, as torch.pow: pow(x, ±0) = 1 and pow(1, y) = 1 even for NaN,
// pow(-1, ±inf) = 1, pow(0, y < 0) = inf, pow(-8, 1/3) = NaN. Lane by lane through std::pow:
// xsimd's pow is exp(y log|x|), which breaks most of those edges (pow(0, 0) = 0, pow(NaN, 0) =
// NaN, pow(0, -1) = 0...) and loses accuracy as |y log x| grows (pow(2, 15) = 32767.98 in float).
// Integers: exact, wrapping, and a negative exponent gives 0 unless the base is ±1 (PyTorch
// raises an error there).
struct pow_op : op_base<2, op_kind::same> {
  static constexpr std::string_view name = "pow";
  // An integer tensor's scalar exponent must fit its type and not be negative, as in PyTorch
  // (op_checks_integer_exponent); a tensor of negative exponents gives the rule below.
  static constexpr bool checks_integer_exponent = true;
  static constexpr bool vectorized = false;
  template <class T> KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else if constexpr (math::is_integer<T>) {
      if (b < 0) return a == 1 ? T(1) : a == -1 ? (b % 2 == 0 ? T(1) : T(-1)) : T(0);
      T result = 1;
      for (T base = a; b != 0; b /= 2) {
        if (b % 2 != 0) result = math::wrapping(result, base, math::multiplies{});
        base = math::wrapping(base, base, math::multiplies{});
      }
      return result;
    } else {
      return std::pow(a, b);
    }
  }
  // As torch's pow_backward_self and pow_backward_exponent: nothing flows to the base where the
  // exponent is 0 (pow(x, 0) = 1 for every x, NaN included), nor to the exponent where the base is
  // 0 and the exponent >= 0 (out * log(0) would be NaN or -inf there).
  template <class T> KILN_HD std::array<T, 2> grad(T g, T out, T a, T b) const {
    using std::pow;
    return {select(b == T(0), T(0), g * (b * pow(a, b - math::lit<T>(1)))),
            g * select(math::both(a == T(0), b >= T(0)), T(0), out * math::log(a))};
  }
};
// C's fmod: the result has the sign of the dividend. Exact, so computed lane by lane (xsimd's
// fmod rounds through a division). Integers: x % 0 is 0 where PyTorch raises ZeroDivisionError
// (kiln's loops cannot throw), and INT_MIN % -1 is 0 rather than a trap.
struct fmod_op : op_base<2, op_kind::same> {
  static constexpr std::string_view name = "fmod";
  static constexpr bool vectorized = false;
  template <class T> KILN_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return T(0);
      return static_cast<T>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
  // d/db = -trunc(a / b), as torch (div with rounding_mode "trunc").
  template <class T> KILN_HD std::array<T, 2> grad(T g, T, T a, T b) const {
    using std::trunc;
    return {g, math::negative(g) * trunc(a / b)};
  }
};
// Python's modulo: the result has the sign of the divisor. Integer division by zero gives 0, as
// fmod.
struct remainder_op : op_base<2, op_kind::same> {
  static constexpr std::string_view name = "remainder";
  static constexpr bool vectorized = false;
  template <class T> KILN_HD T operator()(T a, T b) const {
    T r = fmod_op{}(a, b);
    if constexpr (std::is_same_v<T, bool>) return r;
    else return (r != 0 && ((b < 0) != (r < 0))) ? static_cast<T>(r + b) : r;
  }
  // d/db = -(a // b), with torch's floor division (rounding_mode "floor"), not floor(a / b).
  template <class T> KILN_HD std::array<T, 2> grad(T g, T, T a, T b) const { return {g, math::negative(g) * floor_divide(a, b)}; }
  // Python's a // b as c10::div_floor_floating computes it: from the exact fmod, so that it matches
  // this remainder where the rounded a / b lands on the next integer (1 // 0.1 = 9; floor(1 / 0.1)
  // = 10).
  template <class T> KILN_HD static T floor_divide(T a, T b) {
    if (b == 0) return a / b;
    T const mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
    if (div == 0) return std::copysign(T(0), a / b);
    T const floor_div = std::floor(div);
    return div - floor_div > T(0.5) ? floor_div + 1 : floor_div;
  }
};
// NaN-propagating minimum and maximum (torch.minimum / torch.maximum).
struct minimum_op : op_base<2, op_kind::same> {
  static constexpr std::string_view name = "minimum";
  template <class T> KILN_HD T operator()(T a, T b) const { return math::minimum(a, b); }
  // As torch: a tie splits g evenly; with a NaN both sides get g.
  template <class T> KILN_HD std::array<T, 2> grad(T g, T, T a, T b) const {
    T const half = g * math::lit<T>(0.5);
    return {select(a == b, half, select(a > b, T(0), g)), select(a == b, half, select(a < b, T(0), g))};
  }
};
struct maximum_op : op_base<2, op_kind::same> {
  static constexpr std::string_view name = "maximum";
  template <class T> KILN_HD T operator()(T a, T b) const { return math::maximum(a, b); }
  // As torch: a tie splits g evenly; with a NaN both sides get g.
  template <class T> KILN_HD std::array<T, 2> grad(T g, T, T a, T b) const {
    T const half = g * math::lit<T>(0.5);
    return {select(a == b, half, select(a < b, T(0), g)), select(a == b, half, select(a > b, T(0), g))};
  }
};
// NaN-ignoring minimum and maximum (torch.fmin / torch.fmax): a NaN loses to a number.
// Their adjoints: half of g to each side of a tie, else all of g to a where `to_a`, to b elsewhere.
template <class T, class Mask>
KILN_ALWAYS_INLINE KILN_HD std::array<T, 2> nan_losing_grad(T g, Mask const& tie, Mask const& to_a) {
  T const half = g * math::lit<T>(0.5);
  return {select(tie, half, select(to_a, g, T(0))), select(tie, half, select(to_a, T(0), g))};
}
struct fmin_op : op_base<2, op_kind::same> {
  static constexpr std::string_view name = "fmin";
  template <class T> KILN_HD T operator()(T a, T b) const {
    return select(math::is_nan(a), b, select(math::is_nan(b), a, select(b < a, b, a)));
  }
  // As torch: a tie splits g evenly (as minimum's); otherwise all of g to the side chosen, a
  // when b is NaN.
  template <class T> KILN_HD std::array<T, 2> grad(T g, T, T a, T b) const {
    return nan_losing_grad(g, a == b, math::either(a < b, math::is_nan(b)));
  }
};
struct fmax_op : op_base<2, op_kind::same> {
  static constexpr std::string_view name = "fmax";
  template <class T> KILN_HD T operator()(T a, T b) const {
    return select(math::is_nan(a), b, select(math::is_nan(b), a, select(a < b, b, a)));
  }
  // As fmin's.
  template <class T> KILN_HD std::array<T, 2> grad(T g, T, T a, T b) const {
    return nan_losing_grad(g, a == b, math::either(a > b, math::is_nan(b)));
  }
};
// Without undue overflow or underflow (hypot(1e30f, 1e30f) is finite): lane by lane through
// std::hypot, since xsimd's squares its inputs.
struct hypot_op : op_base<2, op_kind::floating> {
  static constexpr std::string_view name = "hypot";
  static constexpr bool vectorized = false;
  template <class T> KILN_HD T operator()(T a, T b) const { return std::hypot(a, b); }
  template <class T> KILN_HD std::array<T, 2> grad(T g, T out, T a, T b) const { return {g * a / out, g * b / out}; }
};
struct copysign_op : op_base<2, op_kind::floating> {
  static constexpr std::string_view name = "copysign";
  template <class T> KILN_HD T operator()(T a, T b) const { using std::copysign; return copysign(a, b); }
  // As torch's copysign_tensor_self_backward: g * out / a, 0 where a is 0 (NaN where a is inf).
  template <class T> KILN_HD std::array<T, 2> grad(T g, T out, T a, T) const {
    return {g * select(a == T(0), T(0), out / a), T(0)};
  }
};
// std::atan2, signed zeros and infinities included. xsimd's atan2 goes through |a / b|, which is
// NaN for 0/0 and inf/inf; those cases are selected back in: atan2(±0, ±0) is ±0 or ±pi, and
// atan2(±inf, ±inf) is ±pi/4 or ±3pi/4, by the sign of b.
struct atan2_op : op_base<2, op_kind::floating> {
  static constexpr std::string_view name = "atan2";
  template <class T> KILN_HD T operator()(T a, T b) const {
    using std::atan2;
    if constexpr (simd_detail::is_batch<T>) {
      using xsimd::copysign, xsimd::isinf;
      using math::lit;
      auto const b_negative = copysign(T(1), b) < T(0);  // -0 included
      T const both_zero = copysign(select(b_negative, lit<T>(3.14159265358979323846), T(0)), a);
      T const both_inf =
          copysign(select(b_negative, lit<T>(2.35619449019234492885), lit<T>(0.78539816339744830962)), a);
      return select(a == T(0) && b == T(0), both_zero,
                    select(isinf(a) && isinf(b), both_inf, atan2(a, b)));
    } else {
      return atan2(a, b);
    }
  }
  // b / (a^2 + b^2) and -a / (a^2 + b^2), 0 where a^2 + b^2 is 0 (at the origin, or where both
  // squares underflow), as torch: an infinite reciprocal there would make them NaN or infinite.
  template <class T> KILN_HD std::array<T, 2> grad(T g, T, T a, T b) const {
    T const squares = a * a + b * b;
    T const r = select(squares == T(0), T(0), math::lit<T>(1) / squares);
    return {g * b * r, g * math::negative(a) * r};
  }
};
// a * b + c with one rounding: batches where the architecture fuses it (simd_detail::fused_fma),
// lane by lane through std::fma otherwise. Integers wrap.
struct fma_op : op_base<3, op_kind::same> {
  static constexpr std::string_view name = "fma";
  static constexpr bool vectorized = simd_detail::fused_fma;
  template <class T> KILN_HD T operator()(T a, T b, T c) const {
    if constexpr (simd_detail::is_batch<T>) return simd_detail::fma(a, b, c);
    else if constexpr (std::is_floating_point_v<T>) { using std::fma; return fma(a, b, c); }
    else return math::wrapping(math::wrapping(a, b, math::multiplies{}), c, math::plus{});
  }
  template <class T> KILN_HD std::array<T, 3> grad(T g, T, T a, T b, T) const { return {g * b, g * a, g}; }
};
// torch.lerp: a + w (b - a), in the form that is exact at both ends (chosen by |w| < 0.5, as
// PyTorch's is_lerp_weight_small).
struct lerp_op : op_base<3, op_kind::floating> {
  static constexpr std::string_view name = "lerp";
  template <class T> KILN_HD T operator()(T a, T b, T w) const {
    using std::abs;
    T const d = b - a;
    return select(abs(w) < math::lit<T>(0.5), a + w * d, b - d * (math::lit<T>(1) - w));
  }
  template <class T> KILN_HD std::array<T, 3> grad(T g, T, T a, T b, T w) const {
    return {g * (math::lit<T>(1) - w), g * w, g * (b - a)};
  }
};
// torch.clamp(x, lo, hi) = minimum(maximum(x, lo), hi): NaN propagates, lo > hi gives hi.
// Integer scalar bounds saturate into an integer x's type: one beyond its range does not bind.
struct clamp_op : op_base<3, op_kind::same> {
  static constexpr std::string_view name = "clamp";
  static constexpr bool saturates_scalars = true;
  template <class T> KILN_HD T operator()(T x, T lo, T hi) const { return minimum_op{}(maximum_op{}(x, lo), hi); }
  // As torch's clamp_backward and clamp_backward_min_max: x gets g where lo <= x <= hi (at the
  // bounds too), lo where x < lo < hi, hi where x > hi or hi < lo (then out = hi whatever x is).
  // So with lo == hi and x < lo, nothing flows anywhere, as in torch.
  template <class T> KILN_HD std::array<T, 3> grad(T g, T, T x, T lo, T hi) const {
    return {select(math::both(lo <= x, x <= hi), g, T(0)), select(math::both(x < lo, lo < hi), g, T(0)),
            select(math::either(hi < x, hi < lo), g, T(0))};
  }
};
// torch.addcmul: a + value * t1 * t2, in that order. Integers wrap; with integer tensors `value` is
// truncated to an integer (0.5 adds nothing, as in PyTorch) of the tensors' type, which must hold
// it, negative values aside for an unsigned type (they wrap); in floating point it must be within
// the type's range (kiln::addcmul checks both, as PyTorch does). In floating point the last
// multiply and the add are one fma where the compiler fuses them: GCC does, Clang does not
// (docs/architecture.md, "Tests").
struct addcmul_op : op_base<3, op_kind::same> {
  static constexpr std::string_view name = "addcmul";
  double value = 1;
  template <class T> KILN_HD T operator()(T a, T t1, T t2) const {
    math::multiplies const times;
    T const product = math::wrapping(math::wrapping(scale<T>(), t1, times), t2, times);
    return math::wrapping(a, product, math::plus{});
  }
  // value as a T, converted as an assignment converts it (detail::convert: a negative value into an
  // unsigned type wraps; static_cast would leave it undefined).
  template <class T> KILN_HD T scale() const { return T(detail::convert<math::element_t<T>>(value)); }
  template <class T> KILN_HD std::array<T, 3> grad(T g, T, T, T t1, T t2) const {
    return {g, g * (t2 * math::lit<T>(value)), g * (t1 * math::lit<T>(value))};
  }
};

}  // namespace ops

inline constexpr elementwise_fn<ops::add_op> add{};
inline constexpr elementwise_fn<ops::sub_op> sub{};
inline constexpr elementwise_fn<ops::mul_op> mul{};
inline constexpr elementwise_fn<ops::div_op> div{};
inline constexpr elementwise_fn<ops::neg_op> neg{};
inline constexpr elementwise_fn<ops::abs_op> abs{};
inline constexpr elementwise_fn<ops::sign_op> sign{};
inline constexpr elementwise_fn<ops::reciprocal_op> reciprocal{};
inline constexpr elementwise_fn<ops::square_op> square{};
inline constexpr elementwise_fn<ops::pow_op> pow{};
inline constexpr elementwise_fn<ops::fmod_op> fmod{};
inline constexpr elementwise_fn<ops::remainder_op> remainder{};
inline constexpr elementwise_fn<ops::minimum_op> minimum{};
inline constexpr elementwise_fn<ops::maximum_op> maximum{};
inline constexpr elementwise_fn<ops::fmin_op> fmin{};
inline constexpr elementwise_fn<ops::fmax_op> fmax{};
inline constexpr elementwise_fn<ops::hypot_op> hypot{};
inline constexpr elementwise_fn<ops::copysign_op> copysign{};
inline constexpr elementwise_fn<ops::atan2_op> atan2{};
inline constexpr elementwise_fn<ops::fma_op> fma{};
inline constexpr elementwise_fn<ops::lerp_op> lerp{};
inline constexpr elementwise_fn<ops::clamp_op> clamp{};

// kiln::addcmul(a, t1, t2, value = 1)
template <operand A, operand T1, operand T2>
  requires(expression<A> || expression<T1> || expression<T2>)
auto addcmul(A&& a, T1&& t1, T2&& t2, double value = 1) {
  auto node = make_map(ops::addcmul_op{{}, value}, std::forward<A>(a), std::forward<T1>(t1), std::forward<T2>(t2));
  using T = typename decltype(node)::value_type;
  // Checked as PyTorch checks it: a whole number as an integer (for an unsigned T, -1 is allowed:
  // it wraps), anything else as a floating value, NaN refused for an integer T.
  if (math::is_integer<T> && value == std::trunc(value) && std::abs(value) < 0x1p63)
    detail::check_scalar_fits<T>("addcmul", static_cast<std::int64_t>(value));
  else
    detail::check_scalar_fits<T>("addcmul", value);
  return node;
}

// Operators. Each needs an expression on at least one side; the other may be a C++ scalar.
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator+(A&& a, B&& b) { return add(std::forward<A>(a), std::forward<B>(b)); }
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator-(A&& a, B&& b) { return sub(std::forward<A>(a), std::forward<B>(b)); }
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator*(A&& a, B&& b) { return mul(std::forward<A>(a), std::forward<B>(b)); }
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator/(A&& a, B&& b) { return div(std::forward<A>(a), std::forward<B>(b)); }
template <expression A>
auto operator-(A&& a) { return neg(std::forward<A>(a)); }

}  // namespace kiln

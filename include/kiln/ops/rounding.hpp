// kiln/ops/rounding.hpp: floor, ceil, round (half to even, as torch.round), trunc, frac.
// Integer inputs pass through floor/ceil/round/trunc unchanged, as in PyTorch. Results keep the
// input's sign on every build (math::signed_round).
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/expr/map.hpp>
#include <kiln/ops/math.hpp>

#include <array>

namespace kiln {
namespace ops {
using unary_same = math::op_base<1, op_kind::same>;

// Integers pass through; floating values round with Rounding::apply and keep their sign.
template <class Rounding>
struct rounding_op : unary_same {
  template <class T> KILN_OP T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x;
    else return math::signed_round(Rounding::apply(x), x);
  }
  // Piecewise constant: zero, as torch (also at the jumps).
  template <class T> KILN_HD std::array<T, 1> grad(T, T, T) const { return {T(0)}; }
};
struct floor_op : rounding_op<floor_op> {
  static constexpr std::string_view name = "floor";
  template <class T> KILN_HD static T apply(T x) { using std::floor; return floor(x); }
};
struct ceil_op : rounding_op<ceil_op> {
  static constexpr std::string_view name = "ceil";
  template <class T> KILN_HD static T apply(T x) { using std::ceil; return ceil(x); }
};
struct round_op : rounding_op<round_op> {
  static constexpr std::string_view name = "round";
  template <class T> KILN_HD static T apply(T x) { using std::nearbyint; return nearbyint(x); }
};
struct trunc_op : rounding_op<trunc_op> {
  static constexpr std::string_view name = "trunc";
  template <class T> KILN_HD static T apply(T x) { using std::trunc; return trunc(x); }
};
struct frac_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "frac";
  template <class T> KILN_OP T operator()(T x) const { return x - trunc_op{}(x); }
  template <class T> KILN_HD std::array<T, 1> grad(T g, T, T) const { return {g}; }
};

}  // namespace ops

inline constexpr elementwise_fn<ops::floor_op> floor{};
inline constexpr elementwise_fn<ops::ceil_op> ceil{};
inline constexpr elementwise_fn<ops::round_op> round{};
inline constexpr elementwise_fn<ops::trunc_op> trunc{};
inline constexpr elementwise_fn<ops::frac_op> frac{};

}  // namespace kiln

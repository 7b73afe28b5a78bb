// kiln/ops/compare.hpp: comparisons, classification, logical ops and where. Results are bool.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/expr/map.hpp>
#include <kiln/ops/math.hpp>

#include <array>

namespace kiln {
namespace ops {
using binary_predicate = math::op_base<2, op_kind::predicate>;
using unary_predicate = math::op_base<1, op_kind::predicate>;

struct eq_op : binary_predicate {
  static constexpr std::string_view name = "eq";
  template <class T> KILN_OP auto operator()(T a, T b) const { return a == b; }
};
// True when either side is NaN. Batches compute !(a == b): xsimd 8's AVX and AVX-512 `!=` is the
// ordered comparison, false for NaN.
struct ne_op : binary_predicate {
  static constexpr std::string_view name = "ne";
  template <class T> KILN_OP auto operator()(T a, T b) const {
    if constexpr (simd_detail::is_batch<T>) return math::negate(a == b);
    else return a != b;
  }
};
struct lt_op : binary_predicate {
  static constexpr std::string_view name = "lt";
  template <class T> KILN_OP auto operator()(T a, T b) const { return a < b; }
};
struct le_op : binary_predicate {
  static constexpr std::string_view name = "le";
  template <class T> KILN_OP auto operator()(T a, T b) const { return a <= b; }
};
struct gt_op : binary_predicate {
  static constexpr std::string_view name = "gt";
  template <class T> KILN_OP auto operator()(T a, T b) const { return a > b; }
};
struct ge_op : binary_predicate {
  static constexpr std::string_view name = "ge";
  template <class T> KILN_OP auto operator()(T a, T b) const { return a >= b; }
};
struct isnan_op : unary_predicate {
  static constexpr std::string_view name = "isnan";
  template <class T> KILN_OP auto operator()(T x) const { return math::is_nan(x); }
};
struct isinf_op : unary_predicate {
  static constexpr std::string_view name = "isinf";
  template <class T> KILN_OP auto operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return false;
    else { using std::isinf; return isinf(x); }
  }
};
struct isfinite_op : unary_predicate {
  static constexpr std::string_view name = "isfinite";
  template <class T> KILN_OP auto operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return true;
    else { using std::isfinite; return isfinite(x); }
  }
};

// Inputs of logical ops and where's condition arrive as truth values (non-zero is true).
struct logical_and_op : math::op_base<2, op_kind::logical> {
  static constexpr std::string_view name = "logical_and";
  template <class M> KILN_OP M operator()(M a, M b) const { return math::both(a, b); }
};
struct logical_or_op : math::op_base<2, op_kind::logical> {
  static constexpr std::string_view name = "logical_or";
  template <class M> KILN_OP M operator()(M a, M b) const { return math::either(a, b); }
};
struct logical_not_op : math::op_base<1, op_kind::logical> {
  static constexpr std::string_view name = "logical_not";
  template <class M> KILN_OP M operator()(M a) const { return math::negate(a); }
};
struct where_op : math::op_base<3, op_kind::select> {
  static constexpr std::string_view name = "where";
  // A scalar branch the result's type cannot hold is refused, as in PyTorch (op_checks_scalar).
  static constexpr std::array<bool, 3> checked_scalars{false, true, true};
  template <class M, class T> KILN_OP T operator()(M c, T a, T b) const { return math::select(c, a, b); }
  // g to the chosen side, exactly 0 to the other: selected, since g times a 0/1 mask would be NaN
  // wherever g is inf or NaN. The condition gets no gradient (entry 0).
  template <class M, class T> KILN_HD std::array<T, 3> grad(T g, T, M c, T, T) const {
    return {T(0), math::select(c, g, T(0)), math::select(c, T(0), g)};
  }
};

}  // namespace ops

inline constexpr elementwise_fn<ops::eq_op> eq{};
inline constexpr elementwise_fn<ops::ne_op> ne{};
inline constexpr elementwise_fn<ops::lt_op> lt{};
inline constexpr elementwise_fn<ops::le_op> le{};
inline constexpr elementwise_fn<ops::gt_op> gt{};
inline constexpr elementwise_fn<ops::ge_op> ge{};
inline constexpr elementwise_fn<ops::isnan_op> isnan{};
inline constexpr elementwise_fn<ops::isinf_op> isinf{};
inline constexpr elementwise_fn<ops::isfinite_op> isfinite{};
inline constexpr elementwise_fn<ops::logical_and_op> logical_and{};
inline constexpr elementwise_fn<ops::logical_or_op> logical_or{};
inline constexpr elementwise_fn<ops::logical_not_op> logical_not{};
// where(condition, a, b): a where condition holds, b elsewhere.
inline constexpr elementwise_fn<ops::where_op> where{};

template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator==(A&& a, B&& b) { return eq(std::forward<A>(a), std::forward<B>(b)); }
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator!=(A&& a, B&& b) { return ne(std::forward<A>(a), std::forward<B>(b)); }
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator<(A&& a, B&& b) { return lt(std::forward<A>(a), std::forward<B>(b)); }
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator<=(A&& a, B&& b) { return le(std::forward<A>(a), std::forward<B>(b)); }
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator>(A&& a, B&& b) { return gt(std::forward<A>(a), std::forward<B>(b)); }
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator>=(A&& a, B&& b) { return ge(std::forward<A>(a), std::forward<B>(b)); }
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator&&(A&& a, B&& b) { return logical_and(std::forward<A>(a), std::forward<B>(b)); }
template <operand A, operand B> requires(expression<A> || expression<B>)
auto operator||(A&& a, B&& b) { return logical_or(std::forward<A>(a), std::forward<B>(b)); }
template <expression A>
auto operator!(A&& a) { return logical_not(std::forward<A>(a)); }

}  // namespace kiln

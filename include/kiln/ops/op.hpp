// kiln/ops/op.hpp: what an op is, and the result-type rules each kind of op follows.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/dtype.hpp>

#include <concepts>
#include <string_view>

namespace kiln {

// How an op's inputs are promoted and what it returns (PyTorch's categories):
//   same      - computes in the promoted input type and returns it (add, abs, floor, where's data)
//   floating  - like same, but integer and bool inputs compute in float (exp, div, sigmoid)
//   predicate - computes in the promoted type, returns bool (eq, lt, isnan)
//   logical   - reads every input as "non-zero", returns bool (logical_and, logical_not)
//   select    - the first input is read as a mask, the rest as `same` (where)
enum class op_kind { same, floating, predicate, logical, select };

// An op is one struct: its name, arity and kind as static members, and a call operator that works
// on scalars and, unless `vectorized` is false, on xsimd batches. Its derivative rule sits beside
// the forward (gradients issue); parameters (a slope, bounds) are data members.
template <class Op>
concept op = requires {
  { Op::name } -> std::convertible_to<std::string_view>;
  { Op::arity } -> std::convertible_to<int>;
  { Op::kind } -> std::convertible_to<op_kind>;
};

// Whether an op takes bool operands. `sub` and `neg` say no (`static constexpr bool takes_bool =
// false`): in bool, true - true and -true have no arithmetic meaning, and PyTorch refuses them too.
template <class Op>
inline constexpr bool op_takes_bool = !requires { requires !Op::takes_bool; };

// Whether an op's call operator accepts xsimd batches; otherwise it is applied lane by lane.
template <class Op>
inline constexpr bool op_vectorized = requires { requires Op::vectorized; } || !requires { Op::vectorized; };

// Whether an integer C++ scalar given to Op saturates into the integer type it meets instead of
// wrapping. An op says yes (`static constexpr bool saturates_scalars = true`) where its scalars are
// only compared with the other inputs (clamp's bounds): saturated, a bound orders against every
// value of the type as its true value does, so `clamp(u8, -1, 300)` leaves u8 alone, as in PyTorch.
template <class Op>
inline constexpr bool op_saturates_scalars = requires { requires Op::saturates_scalars; };

// Whether a C++ scalar at operand position I of Op is checked against the type it converts to, as
// PyTorch checks it: a value that type cannot hold throws kiln::value_error instead of wrapping
// (`where(mask, int8_tensor, 200)`). An op lists the positions in `checked_scalars`.
template <class Op, std::size_t I>
inline constexpr bool op_checks_scalar = [] {
  if constexpr (requires { Op::checked_scalars[I]; }) return Op::checked_scalars[I];
  else return false;
}();
// Whether Op's second operand, a C++ integer scalar given as the exponent of an integer tensor, is
// checked so (pow), and refused when negative: PyTorch refuses integers to negative integer powers.
template <class Op>
inline constexpr bool op_checks_integer_exponent = requires { requires Op::checks_integer_exponent; };

namespace detail {
template <op_kind K, class... Ts>
struct op_types {
  using compute = promote_t<Ts...>;
  using result = compute;
};
template <class... Ts>
struct op_types<op_kind::floating, Ts...> {
  using compute = floating_t<promote_t<Ts...>>;
  using result = compute;
};
template <class... Ts>
struct op_types<op_kind::predicate, Ts...> {
  using compute = promote_t<Ts...>;
  using result = bool;
};
template <class... Ts>
struct op_types<op_kind::logical, Ts...> {
  using compute = bool;
  using result = bool;
};
template <class Mask, class... Ts>
struct op_types<op_kind::select, Mask, Ts...> {
  using compute = promote_t<Ts...>;
  using result = compute;
};
}  // namespace detail

// The type Op computes in, and the type it returns, for inputs of the given element types.
template <class Op, class... Ts>
using op_compute_t = typename detail::op_types<Op::kind, Ts...>::compute;
template <class Op, class... Ts>
using op_result_t = typename detail::op_types<Op::kind, Ts...>::result;

// Whether argument I of Op is read as a truth value rather than converted to the compute type.
template <class Op>
constexpr bool reads_as_mask(int i) {
  return Op::kind == op_kind::logical || (Op::kind == op_kind::select && i == 0);
}

}  // namespace kiln

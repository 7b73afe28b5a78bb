// kiln/expr/map.hpp: the one node type for all elementwise work, and how operands become nodes.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/indexed_pack.hpp>
#include <kiln/expr/leaf.hpp>
#include <kiln/ops/op.hpp>

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <utility>

namespace kiln {
namespace detail {
template <class Strong, class Op = void, class Compute = void, class X>
auto as_node(X&& x);
// Tags map's constructor from the user's operands: Strong is their tensors' promoted type,
// Compute the type the op computes in.
template <class Strong, class Compute = void>
struct operands_t {};
}  // namespace detail

// map<Op, Args...> applies Op elementwise to its broadcast arguments. It only holds the op, the
// children and its shape (checked on construction, so a bad broadcast throws at the user's line);
// the loops that read it live in eval/.
template <class Op, class... Args>
class map {
  static_assert(sizeof...(Args) == Op::arity, "kiln: wrong number of arguments for this operation");
  static_assert(op_takes_bool<Op> || !(std::is_same_v<typename Args::value_type, bool> || ...),
                "kiln: subtraction and negation of bool tensors are not supported (as in PyTorch): use "
                "ne(a, b) for exclusive or, logical_not(a) to invert a mask");

 public:
  using op_type = Op;
  using compute_type = op_compute_t<Op, typename Args::value_type...>;
  using value_type = op_result_t<Op, typename Args::value_type...>;
  static constexpr int rank = std::max({0, Args::rank...});
  static constexpr bool is_kiln_expression = true;

  // The children, an aggregate: slot<I>(args()), detail::apply_pack(f, args()).
  using args_type = detail::indexed_pack<std::index_sequence_for<Args...>, Args...>;

  explicit map(Op op, Args... args) : op_(op), args_{{std::move(args)}...}, shape_(broadcast_all(args_)) {}
  // From the user's operands (make_map): each child is built where it is stored, not copied there.
  template <class Strong, class Compute, class... X>
  map(Op op, detail::operands_t<Strong, Compute>, X&&... x)
      : op_(op), args_{{detail::as_node<Strong, Op, Compute>(std::forward<X>(x))}...}, shape_(broadcast_all(args_)) {}

  Op const& op() const noexcept { return op_; }
  args_type const& args() const noexcept { return args_; }
  extents<rank> const& shape() const noexcept { return shape_; }

 private:
  // The first argument of the node's full rank (there is one: the rank is the largest).
  static constexpr std::size_t full_rank_arg = [] {
    constexpr int ranks[] = {Args::rank...};
    std::size_t i = 0;
    while (ranks[i] != rank) ++i;
    return i;
  }();
  // Right-aligned broadcast of every argument; on a conflict the message names every shape.
  static extents<rank> broadcast_all(args_type const& children) {
    extents<rank> const& start = detail::slot<full_rank_arg>(children).shape();
    return detail::apply_pack([&](Args const&... args) { return broadcast_shapes(start, args...); }, children);
  }
  // Starts from the shape of an argument of full rank, copied whole, and writes a dimension only
  // where another argument is larger there. Most nodes (all of `relu(A + b) * c`, `A * A`) then
  // write none: their shape is one whole copy, which the copies of the node that follow read
  // back whole. Filled with ones and written dimension by dimension, each shape was a few narrow
  // stores read back at once by a wider load a moment later, which stalls (store-to-load
  // forwarding fails): W6's `sum(A * A, axes<1>)` built its tree in 8.6 ns, `sum(square(A), ...)`
  // in 1.2 (Intel Xeon, 4 rows of 256).
  static extents<rank> broadcast_shapes(extents<rank> const& start, Args const&... args) {
    extents<rank> shape = start;
    bool ok = true;
    auto merge = [&]<std::size_t A>(std::array<index_t, A> const& s) {
      for (int d = 0; d < int(A); ++d) {
        index_t& out = shape[d + (rank - int(A))];
        if (s[d] == out || s[d] == 1) continue;
        if (out == 1) out = s[d];
        else ok = false;
      }
    };
    (merge(args.shape()), ...);
    if (!ok) throw_broadcast_error({std::span<const index_t>(args.shape())...});
    return shape;
  }

  Op op_;
  args_type args_;  // before shape_, which is computed from it
  extents<rank> shape_;
};

// An operand of an elementwise operation: an expression or a C++ arithmetic scalar.
template <class X>
concept operand = expression<X> || element<std::remove_cvref_t<X>>;

namespace detail {

template <class X>
struct strong_type {
  using type = void;
};
template <expression X>
struct strong_type<X> {
  using type = typename std::remove_cvref_t<X>::value_type;
};

// The promoted type of the expression operands; scalars do not take part (they are weak).
template <class... X>
struct strong_promote;
template <>
struct strong_promote<> {
  using type = void;
};
template <class X, class... Xs>
struct strong_promote<X, Xs...> {
  using head = typename strong_type<X>::type;
  using tail = typename strong_promote<Xs...>::type;
  using type = typename std::conditional_t<
      std::is_void_v<head>, std::type_identity<tail>,
      std::conditional_t<std::is_void_v<tail>, std::type_identity<head>, promote<head, tail>>>::type;
};

// The type an operand takes part in promotion with: an expression's own, a scalar's weak type.
template <class Strong, class X>
struct operand_type : strong_type<X> {};
template <class Strong, class X>
  requires element<std::remove_cvref_t<X>>
struct operand_type<Strong, X> {
  using type = weak_promote_t<Strong, std::remove_cvref_t<X>>;
};

// The constant a C++ scalar x becomes as an operand of Op (void: of no op in particular) that
// computes in Compute, beside expressions of type Strong. Its type is the weak one, but it keeps
// its value up to Compute, as PyTorch's Python numbers do: where integer tensors compute in float
// (a floating op, or a float scalar beside), it is converted to float directly (`u8 / -2` divides
// by -2.f, not by uint8(-2) = 254), and where the op saturates its scalars (clamp's bounds), an
// integer one saturates into the integer type. Elsewhere it is converted to the weak type, an
// integer one wrapping as in PyTorch (`u8 + 300` adds 44, `u8 == -1` is u8 == 255).
template <class Strong, class Op, class Compute, class D>
auto scalar_node(D x) {
  using W = weak_promote_t<Strong, D>;
  if constexpr (std::is_floating_point_v<Compute> && !std::is_floating_point_v<W>)
    return constant<Compute>(static_cast<Compute>(x));
  else if constexpr (op_saturates_scalars<Op> && std::is_integral_v<D> && std::is_integral_v<W> &&
                     !std::is_same_v<W, bool>)
    return constant<W>(saturate<W>(x));
  else
    return constant<W>(static_cast<W>(x));
}

// Turns one operand into a node: tensors become leaves (viewed if lvalue, taken over if rvalue),
// views become leaves, vars become var leaves, nodes are stored by value, scalars become constants
// (scalar_node).
template <class Strong, class Op, class Compute, class X>
auto as_node(X&& x) {
  using D = std::remove_cvref_t<X>;
  if constexpr (element<D>) {
    return scalar_node<Strong, Op, Compute>(x);
  } else if constexpr (requires { D::is_kiln_var; }) {  // a var: a leaf that knows its adjoint
    return x.as_leaf();
  } else if constexpr (requires { typename D::element_type; }) {  // tensor or view
    using T = typename D::value_type;
    constexpr bool whole = std::is_same_v<D, tensor<T, D::rank>>;
    if constexpr (whole && !std::is_lvalue_reference_v<X>)
      return owned_leaf<T, D::rank>(std::move(x));
    else
      return leaf<T, D::rank>(tensor_view<T const, D::rank>(x), whole);
  } else {
    return D(std::forward<X>(x));
  }
}

// The message of a kiln::value_error: "where: 200 cannot be converted to int8 without overflow".
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_value_error(std::string_view op, std::string_view value,
                                                                      std::string_view why) {
  throw value_error(std::string(op) + ": " + std::string(value) + " " + std::string(why));
}
template <class V>
std::string scalar_string(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    char text[32];
    return std::string(text, std::to_chars(text, text + sizeof text, v).ptr);
  } else if constexpr (std::is_same_v<V, bool>) {
    return v ? "true" : "false";
  } else {
    return std::to_string(std::conditional_t<std::is_signed_v<V>, long long, unsigned long long>(v));
  }
}
// Throws kiln::value_error unless PyTorch would take `value` as a T where it checks it.
template <class T, class V>
void check_scalar_fits(std::string_view op, V value) {
  if (!scalar_fits<T>(value))
    throw_value_error(op, scalar_string(value),
                      "cannot be converted to " + std::string(type_name<T>) + " without overflow");
}

// PyTorch's checks of the C++ scalars among an op's operands (op_checks_scalar,
// op_checks_integer_exponent), against the type each converts to (scalar_node).
template <class Strong, class Op, class Compute, std::size_t... I, class... X>
void check_scalars(std::index_sequence<I...>, X const&... x) {
  auto check = [&]<std::size_t P, class D>(std::integral_constant<std::size_t, P>, D const& v) {
    if constexpr (element<D>) {
      using C = typename decltype(scalar_node<Strong, Op, Compute>(v))::value_type;
      if constexpr (op_checks_scalar<Op, P>) check_scalar_fits<C>(Op::name, v);
      if constexpr (P == 1 && op_checks_integer_exponent<Op> && std::is_integral_v<C> && std::is_integral_v<D>) {
        check_scalar_fits<C>(Op::name, v);
        if constexpr (std::is_signed_v<D>)
          if (v < 0)
            throw_value_error(Op::name, scalar_string(v),
                              "is a negative integer power of an integer tensor, refused as in PyTorch (a floating "
                              "exponent gives a floating result)");
      }
    }
  };
  (check(std::integral_constant<std::size_t, I>{}, x), ...);
}

}  // namespace detail

// Builds map<Op, ...> from operands, applying PyTorch's promotion between tensors and scalars.
template <class Op, operand... X>
  requires(expression<X> || ...)
auto make_map(Op op, X&&... x) {
  using strong = typename detail::strong_promote<X...>::type;
  using compute = op_compute_t<Op, typename detail::operand_type<strong, X>::type...>;
  if constexpr (requires { Op::checked_scalars; } || op_checks_integer_exponent<Op>)
    detail::check_scalars<strong, Op, compute>(std::index_sequence_for<X...>{}, x...);
  return map<Op, decltype(detail::as_node<strong, Op, compute>(std::forward<X>(x)))...>(
      op, detail::operands_t<strong, compute>{}, std::forward<X>(x)...);
}

}  // namespace kiln

namespace kiln {

// The callable behind kiln::exp, kiln::add, ...: builds a map node from Op::arity operands, at
// least one of which is an expression. Ops with parameters have builders of their own.
template <op Op>
struct elementwise_fn {
  template <operand... X>
    requires(sizeof...(X) == Op::arity && (expression<X> || ...))
  auto operator()(X&&... x) const {
    return make_map(Op{}, std::forward<X>(x)...);
  }
};

}  // namespace kiln

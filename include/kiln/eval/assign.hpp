// kiln/eval/assign.hpp: assignment, the one place kiln computes: shape check, aliasing check,
// planning, and the policy's loop.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/views.hpp>
#include <kiln/eval/aliasing.hpp>
#include <kiln/eval/kernels.hpp>
#include <kiln/eval/reduce.hpp>
#include <kiln/eval/row_blocks.hpp>
#include <kiln/ops/arithmetic.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

namespace kiln {
namespace detail {

// What the types say of assigning an expression X to a destination of T with rank R.
template <class X, class T, int R>
constexpr void check_assignable_types() {
  static_assert(X::rank <= R,
                "kiln: the expression has a higher rank than the destination, so it cannot broadcast into it");
  static_assert(std::is_convertible_v<typename X::value_type, T>,
                "kiln: the expression's element type does not convert to the destination's");
}

// Throws shape_error unless an expression of `shape` broadcasts into a destination of `dst`. The
// check is inline, its message out of line (as throw_broadcast_error).
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_assign_error(std::span<index_t const> shape,
                                                                       std::span<index_t const> dst) {
  throw shape_error("cannot assign an expression of shape " + shape_string(shape) + " to a destination of shape " +
                    shape_string(dst));
}
template <std::size_t RE, std::size_t R>
KILN_ALWAYS_INLINE void check_assignable(std::array<index_t, RE> const& shape, std::array<index_t, R> const& dst) {
  for (int d = 0; d < int(RE); ++d) {
    index_t const want = dst[std::size_t(d) + (R - RE)];
    if (shape[d] != want && shape[d] != 1) throw_assign_error(shape, dst);
  }
}

template <class Policy, class T, int R, class Root>
void run(Policy const& policy, tensor_view<T, R> const& dst, Root const& root) {
  using Ev = evaluator<Root, R>;
  if constexpr (R >= 2 && std::is_same_v<Policy, simd_policy>) {
    Ev rows(root, dst.shape());  // its own evaluator: see run_two_dimensional and run_planned_rows
    if (inline_tree<Ev>([&]() KILN_INLINE_LAMBDA {
          if constexpr (R == 2) return run_two_dimensional(dst, rows);
          else return run_planned_rows(dst, rows);
        }))
      return;
    // What remains reads some leaf or the destination with strides along its rows, or is a single
    // element: the scalar loop (the planner keeps the dimensions' order, so no such plan is
    // contiguous).
    Ev ev(root, dst.shape());
    run_rows(seq_policy{}, make_plan<R>(dst.shape(), dst.strides(), ev), dst.data(), ev);
    return;
  }
  Ev ev(root, dst.shape());
  loop_plan<R> const plan = make_plan<R>(dst.shape(), dst.strides(), ev);
  if constexpr (large_tree<Ev>)
    flattened([&] { run_rows(policy, plan, dst.data(), ev); });
  else
    run_rows(policy, plan, dst.data(), ev);
}

template <class Policy, class T, int R, class Root>
void assign_node(Policy const& policy, tensor_view<T, R> const& dst, Root const& root, destination kind);

template <class Policy, class T, int R, class E>
void assign(Policy const& policy, tensor_view<T, R> const& dst, E const& e, destination kind) {
  using X = std::remove_cvref_t<E>;
  static_assert(!std::is_const_v<T>, "kiln: cannot assign to a read-only view");
  check_assignable_types<X, T, R>();
  check_assignable(e.shape(), dst.shape());
  if (dst.size() == 0) return;
  if constexpr (requires { typename X::element_type; } || requires { e.as_leaf(); })
    assign_node(policy, dst, as_node<typename X::value_type>(e), kind);  // a tensor, view or var: its leaf
  else
    assign_node(policy, dst, e, kind);
}

// A boundary evaluated into a temporary, then copied into dst. A call of its own: inline, the
// temporary made assign_node save six registers and align a stack frame on every call, where its
// direct case alone saves two and tail-calls the fold (W6 at 1K elements: 0.4 ns).
template <class Policy, class T, int R, class Root>
[[gnu::noinline]] void run_lowered(Policy const& policy, tensor_view<T, R> const& dst, Root const& root) {
  run(policy, dst, lower(policy, root));
}

// assign, once the shapes are checked, for a node (not a tensor or view).
template <class Policy, class T, int R, class Root>
void assign_node(Policy const& policy, tensor_view<T, R> const& dst, Root const& root, destination kind) {
  if constexpr (is_materialized<Root>) {
    // A reduction or softmax writes its destination while it reads its inputs: straight into dst
    // only when dst is exactly its result (type, shape, contiguous) and shares no memory with them.
    if constexpr (std::is_same_v<typename Root::value_type, T> && Root::rank == R) {
      bool direct = same_extents(dst.shape(), root.shape()) && dst.is_contiguous();
      for_each_leaf_node(root, [&](auto const& leaf_node) {
        direct = direct && (whole_tensors(kind, leaf_node)
                                ? static_cast<void const*>(leaf_node.view().data()) != static_cast<void const*>(dst.data())
                                : disjoint(dst, leaf_node.view()));
      });
      if (direct) return materialize(policy, dst, root);
    }
    run_lowered(policy, dst, root);
  } else if constexpr (contains_materialized<Root>::value) {
    if constexpr (row_blockable<Root, R>::value && (std::is_same_v<Policy, seq_policy> || std::is_same_v<Policy, simd_policy>))
      if (run_row_blocks(policy, dst, root, kind)) return;
    assign_node(policy, dst, lower(policy, root), kind);
  } else if (needs_temporary(dst, root, kind)) {
    tensor<std::remove_const_t<T>, R> temporary(dst.shape(), uninitialized);
    run(policy, temporary.view(), root);
    run(policy, dst, leaf<T, R>(std::as_const(temporary).view()));
  } else {
    run(policy, dst, root);
  }
}

}  // namespace detail

// Evaluates `e` into `dst` (a tensor or a mutable view) under `policy`: kiln::eval(kiln::seq, y, x * 2).
template <policy P, viewable Dst, expression E>
void eval(P const& policy, Dst&& dst, E const& e) {
  detail::assign(policy, as_view(dst), e,
                 detail::is_tensor<std::remove_cvref_t<Dst>> ? detail::destination::whole_tensor : detail::destination::view);
}

// Materialises an expression into a new tensor of its shape and type.
template <expression E>
auto eval(E const& e) {
  using X = std::remove_cvref_t<E>;
  return tensor<typename X::value_type, X::rank>(e);
}
template <policy P, expression E>
auto eval(P const& policy, E const& e) {
  using X = std::remove_cvref_t<E>;
  tensor<typename X::value_type, X::rank> out(e.shape(), uninitialized);
  detail::assign(policy, out.view(), e, detail::destination::whole_tensor);
  return out;
}

// Compound assignment: `x op= e` evaluates `x op e` into x in place. x is a tensor or a mutable
// view (`kiln::slice(x, 0, 0, 2) += 1.f`); e broadcasts to x's shape. As PyTorch's in-place ops,
// the result's type may not fall to a lower category than x's (`i /= 2` for an integer i does not
// compile: the quotient is float); `x = x op e` converts.
template <class D>
concept assignable = viewable<D> && !std::is_const_v<std::remove_reference_t<D>> &&
                     !std::is_const_v<typename std::remove_cvref_t<D>::element_type>;

namespace detail {
template <class Fn, class D, class E>
decltype(auto) compound_assign(Fn const& fn, D&& d, E&& e) {
  auto const target = as_view(d);
  using T = typename decltype(target)::value_type;
  auto const result = fn(tensor_view<T const, decltype(target)::rank>(target), std::forward<E>(e));
  static_assert(can_cast<typename decltype(result)::value_type, T>,
                "kiln: x op= e would write a floating result into an integer tensor, or a number into a bool "
                "one, which PyTorch refuses; write x = x op e to convert explicitly");
  assign(default_policy{}, target, result,
         is_tensor<std::remove_cvref_t<D>> ? destination::whole_tensor : destination::view);
  return std::forward<D>(d);
}
}  // namespace detail

template <assignable D, operand E>
decltype(auto) operator+=(D&& d, E&& e) { return detail::compound_assign(add, std::forward<D>(d), std::forward<E>(e)); }
template <assignable D, operand E>
decltype(auto) operator-=(D&& d, E&& e) { return detail::compound_assign(sub, std::forward<D>(d), std::forward<E>(e)); }
template <assignable D, operand E>
decltype(auto) operator*=(D&& d, E&& e) { return detail::compound_assign(mul, std::forward<D>(d), std::forward<E>(e)); }
template <assignable D, operand E>
decltype(auto) operator/=(D&& d, E&& e) { return detail::compound_assign(div, std::forward<D>(d), std::forward<E>(e)); }

}  // namespace kiln

// kiln/autodiff/record.hpp: turning a statement over vars into a tape entry. A statement's tree is
// split at its fusion boundaries (reductions, softmax): each boundary over vars becomes a var of
// its own with its own entry, so every entry is either one fused elementwise loop or one boundary.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/autodiff/backward.hpp>

#include <algorithm>
#include <memory>

namespace kiln::detail {

// Whether any var below `node` requires gradients.
template <class Node>
bool any_requires_grad(Node const& node) {
  bool any = false;
  for_each_leaf_node(node, [&](auto const& leaf_node) {
    if constexpr (is_var_leaf<std::remove_cvref_t<decltype(leaf_node)>>) any = any || leaf_node.node().requires_grad;
  });
  return any;
}

// A linear recurrence also reads its coefficient's vars.
template <class B, class A>
bool any_requires_grad(linear_recurrence_node<B, A> const& node) {
  return any_requires_grad(node.arg()) || any_requires_grad(node.coefficient());
}

// A boundary node with its argument replaced.
template <class Op, class Arg, int N, bool Keep, class NewArg>
auto with_arg(reduction<Op, Arg, N, Keep> const& node, NewArg arg) {
  return reduction<Op, NewArg, N, Keep>(node.op(), std::move(arg), node.reduced_axes());
}
template <class Arg, bool Log, class NewArg>
auto with_arg(softmax_node<Arg, Log> const& node, NewArg arg) {
  return softmax_node<NewArg, Log>(std::move(arg), node.dim());
}

// A boundary node with each operand x replaced by f(x).
template <class Node, class F>
auto with_operands(Node const& node, F const& f) {
  return with_arg(node, f(node.arg()));
}
template <class B, class A, class F>
auto with_operands(linear_recurrence_node<B, A> const& node, F const& f) {
  return linear_recurrence_node<decltype(f(node.arg())), decltype(f(node.coefficient()))>(f(node.arg()),
                                                                                        f(node.coefficient()), node.dim());
}

// The axes a boundary reduces (softmax: its dimension), and the rule that differentiates it.
template <class Op, class Arg, int N, bool Keep>
std::array<int, N> boundary_axes(reduction<Op, Arg, N, Keep> const& node) {
  return node.reduced_axes();
}
template <class Arg, bool Log>
std::array<int, 1> boundary_axes(softmax_node<Arg, Log> const& node) {
  return {node.dim()};
}
template <class Op, class Arg, int N, bool Keep>
Op const& boundary_rule(reduction<Op, Arg, N, Keep> const& node) {
  return node.op();
}
template <class Arg, bool Log>
softmax_node<Arg, Log> const& boundary_rule(softmax_node<Arg, Log> const& node) {
  return node;
}

// dL/dx of a boundary's input from its grad rule: rule.grad(x, out, g, n, aux...).
template <class Rule>
struct boundary_upstream {
  Rule rule;
  double n;
  template <class P, class... E>
  KILN_ALWAYS_INLINE P operator()(P const& x, E const&... e) const {
    return std::apply([&](auto const& out, auto const& g, auto const&... aux) {
      return rule.grad(x, static_cast<P>(out), static_cast<P>(g), math::lit<P>(n), static_cast<P>(aux)...);
    }, std::tuple<E const&...>(e...));
  }
};

// dL/dx = 1 everywhere, known at compile time (multiplications by it vanish): a single-pass sum.
struct unit_upstream {
  template <class P>
  KILN_ALWAYS_INLINE P operator()(P const&) const noexcept {
    return P(1);
  }
};
// The same dL/dx everywhere: a single-pass mean (1 / n).
template <class T>
struct constant_upstream {
  T value;
  template <class P>
  KILN_ALWAYS_INLINE P operator()(P const&) const noexcept {
    return P(value);
  }
};

// Sends a boundary's output adjoint g to its input's vars: the auxiliary reductions its rule
// needs, then one fused loop over the input.
template <class Policy, class Node, class T, int R>
void boundary_backward(Policy const& policy, Node const& node, tensor_view<T const, R> out, tensor_view<T const, R> g) {
  auto const& arg = node.arg();
  using Arg = std::remove_cvref_t<decltype(arg)>;
  constexpr int RA = Arg::rank;
  auto const axes = boundary_axes(node);
  auto const& rule = boundary_rule(node);
  using Rule = std::remove_cvref_t<decltype(rule)>;
  // out and g seen with the input's rank: a reduction's reduced dimensions kept with extent 1, so
  // that they broadcast back over the input.
  extents<RA> reduced = arg.shape();
  index_t n = 1;
  for (int a : axes) n *= std::exchange(reduced[a], 1);
  extents<RA> const out_shape = requires { node.reduced_axes(); } ? reduced : arg.shape();
  leaf<T, RA> const out_in(tensor_view<T const, RA>(out.data(), out_shape));
  leaf<T, RA> const g_in(tensor_view<T const, RA>(g.data(), out_shape));
  // The auxiliary reductions the rule reads, kept dimensions too.
  auto aux_reduction = [&]<class Input, class Fold>(ops::grad_aux_t<Input, Fold>) {
    auto const inputs = make_map(Input{}, arg, out_in, g_in);
    tensor<T, RA> result(reduced, uninitialized);
    assign(policy, result.view(),
           reduction<Fold, decltype(inputs), int(std::tuple_size_v<decltype(axes)>), true>(Fold{}, inputs, axes));
    return result;
  };
  auto const specs = [] {
    if constexpr (requires { typename Rule::grad_aux; }) return typename Rule::grad_aux{};
    else return std::tuple<>{};
  }();
  // The backward loop of grad_rule over the auxiliaries already reduced (done) and those of the
  // specs given, reduced now.
  auto const run = [&]<class GradRule>(GradRule const& grad_rule, auto const& done, auto... spec) {
    auto const aux = std::tuple_cat(done, std::tuple{aux_reduction(spec)...});
    boundary_upstream<GradRule> const upstream{grad_rule, static_cast<double>(n)};
    std::apply([&](auto const&... a) { backward_pass(policy, arg, upstream, out_in, g_in, leaf<T, RA>(a.view())...); },
               aux);
  };
  if constexpr (requires { typename Rule::where_first_aux_is_zero; }) {
    // The first auxiliary reduction decides: 0 everywhere (prod: no slice holds a zero), and the
    // simpler rule runs without the others.
    auto const first = aux_reduction(std::get<0>(specs));
    if (std::all_of(first.data(), first.data() + first.size(), [](T v) { return v == T(0); }))
      return run(typename Rule::where_first_aux_is_zero{}, std::tuple{});
    std::apply([&](auto, auto... rest) { run(rule, std::forward_as_tuple(first), rest...); }, specs);
  } else {
    std::apply([&](auto... spec) { run(rule, std::tuple{}, spec...); }, specs);
  }
}

// A linear recurrence's adjoints (linear_recurrence_node::adjoint) sent into its operands: dL/db
// through one fused loop over b, dL/da through a's (rank-0) tree.
template <class Policy, class B, class A, class T, int R>
void boundary_backward(Policy const& policy, linear_recurrence_node<B, A> const& node, tensor_view<T const, R> out,
                       tensor_view<T const, R> g) {
  tensor<T, R> gb(out.shape(), uninitialized);
  T const ga = node.adjoint(policy, node.coefficient_value(policy), out.data(), g.data(), gb.data(), node.around_dim());
  if constexpr (differentiable<B>) backward_pass(policy, node.arg(), pass_upstream{}, leaf<T, R>(std::as_const(gb).view()));
  if constexpr (differentiable<A>)
    backward_pass(policy, node.coefficient(), pass_upstream{}, leaf<T, 0>(tensor_view<T const, 0>(&ga, extents<0>{})));
}

// One recorded statement: its tree (boundaries inside already split off) and its output.
template <class Policy, class Node, class T, int R>
class statement_entry final : public tape_entry {
 public:
  statement_entry(Policy const& policy, Node node, std::shared_ptr<var_node<T, R>> const& out)
      : policy_(policy), node_(std::move(node)), out_(out) {}

  void backward() override {
    auto const out = out_.lock();
    if (!out || !out->has_adjoint) return;
    tensor_view<T const, R> const g = std::as_const(out->adjoint).view();
    if constexpr (is_materialized<Node>)
      boundary_backward(policy_, node_, tensor_view<T const, R>(out->value), g);
    else
      backward_pass(policy_, node_, pass_upstream{}, leaf<T, R>(g));
    // As PyTorch, a computed var does not keep its gradient: the memory goes back now.
    out->release_adjoint();
  }
  bool expired() const noexcept override { return out_.expired(); }

 private:
  Policy policy_;
  Node node_;
  std::weak_ptr<var_node<T, R>> out_;
};

template <class T, int R, class Policy, class Node>
var<T, R> record_statement(Policy const& policy, Node const& node);

// The tree with every boundary over vars recorded as a var of its own (read back as a var leaf),
// and every other boundary evaluated into a plain leaf.
template <class Policy, class Node>
auto lower_recording(Policy const& policy, Node const& node) {
  return replace_boundaries(node, [&]<class Boundary>(Boundary const& boundary) {
    if constexpr (differentiable<Boundary>)
      return record_statement<typename Boundary::value_type, Boundary::rank>(policy, boundary).as_leaf();
    else
      return evaluate_boundary(policy, boundary);
  });
}

// Evaluates a statement over vars and, when it needs gradients, records it on the thread's tape.
template <class T, int R, class Policy, class Node>
var<T, R> record_statement(Policy const& policy, Node const& node) {
  static_assert(std::is_same_v<typename Node::value_type, T>,
                "kiln: a var computed from vars has the expression's element type (a float expression gives a "
                "var<float, R>); convert the inputs instead");
  auto const lowered = [&] {
    if constexpr (is_materialized<Node>)
      return with_operands(node, [&](auto const& operand) { return lower_recording(policy, operand); });
    else return lower_recording(policy, node);
  }();
  tensor<T, R> value(node.shape(), uninitialized);
  assign(policy, value.view(), lowered);
  var<T, R> out(std::move(value));
  auto& out_node = *out.node();
  if (grad_mode_disabled() || !any_requires_grad(lowered)) {
    out_node.requires_grad = false;
    return out;
  }
  tape& t = tape::active();
  out_node.tape_id = t.id();
  t.record(std::make_unique<statement_entry<Policy, std::remove_const_t<decltype(lowered)>, T, R>>(policy, lowered,
                                                                                                  out.node()));
  return out;
}

template <class T, int R, class E>
void record_into(var<T, R>& out, E const& e) {
  using Node = decltype(as_node<void>(e));
  if constexpr (differentiable<Node>)
    out = record_statement<T, R>(default_policy{}, as_node<void>(e));
  else  // data: a leaf that requires gradients
    out.node_ = std::make_shared<var_node<T, R>>(tensor<T, R>(e));
}

template <class T, int R>
void backward_from(var<T, R> const& out, tensor_view<T const, R> cotangent) {
  auto& node = *out.node();
  if (!node.requires_grad)
    throw gradient_error(
        "backward: this var does not require gradients (none of its inputs does, or it was computed under "
        "kiln::no_grad_guard)");
  tape& t = tape::active();
  if (!node.is_leaf() && node.tape_id != t.id())
    throw gradient_error(
        "backward: this var's tape is gone: an earlier backward() consumed it, or the var was computed on another "
        "thread or inside a finished kiln::value_and_grad; compute it again");
  node.grad() += cotangent;
  if (!node.is_leaf()) t.backward_and_clear();
}

}  // namespace kiln::detail

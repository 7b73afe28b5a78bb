// kiln/autodiff/backward.hpp: the fused backward loop. For a statement's tree it is derived at
// compile time: per element (or batch) it recomputes the forward values in registers (`record`),
// then walks the tree in reverse applying each op's grad rule (`backprop`), and adds the result
// into every var leaf's adjoint. Broadcast leaves get their adjoint summed back to their own
// shape in the same loop.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/autodiff/var.hpp>
#include <kiln/core/indexed_pack.hpp>
#include <kiln/eval/reduce.hpp>
#include <kiln/expr/scan.hpp>

#include <vector>

namespace kiln::detail {

// How one step of the loop reads its operands: element i, or the batch at i (n valid lanes).
struct scalar_read {
  index_t i;
};
template <class Lane, inner_mode Mode, batch_cover Cover>
struct batch_read {
  index_t i, n;
};

template <class Ev>
KILN_ALWAYS_INLINE auto read(Ev const& ev, scalar_read r) {
  return ev.scalar(r.i);
}
template <class Ev, class Lane, inner_mode Mode, batch_cover Cover>
KILN_ALWAYS_INLINE auto read(Ev const& ev, batch_read<Lane, Mode, Cover> r) {
  return ev.template packet<Lane, Mode, Cover>(r.i, r.n);
}

// Whether gradients flow through a node: a floating-point value with a var somewhere below.
template <class Node>
inline constexpr bool differentiable = false;
template <class T, int R>
inline constexpr bool differentiable<var_leaf<T, R>> = true;
template <class Op, class... Args>
inline constexpr bool differentiable<map<Op, Args...>> =
    std::is_floating_point_v<typename map<Op, Args...>::value_type> && (differentiable<Args> || ...);
template <class Op, class Arg, int N, bool Keep>
inline constexpr bool differentiable<reduction<Op, Arg, N, Keep>> =
    std::is_floating_point_v<typename reduction<Op, Arg, N, Keep>::value_type> && differentiable<Arg>;
template <class Arg, bool Log>
inline constexpr bool differentiable<softmax_node<Arg, Log>> = differentiable<Arg>;
template <class B, class A>
inline constexpr bool differentiable<linear_recurrence_node<B, A>> = differentiable<B> || differentiable<A>;

template <class Node>
inline constexpr bool is_var_leaf = false;
template <class T, int R>
inline constexpr bool is_var_leaf<var_leaf<T, R>> = true;

// How a backward loop writes a var leaf's adjoint: not at all (it does not require gradients),
// by overwriting (the adjoint is fresh and this leaf is the first to reach each of its elements
// exactly once: no zero fill, no read), or by adding.
enum class adjoint_mode : unsigned char { none, overwrite, accumulate };

// A var leaf reads its value like any leaf; in a backward loop it also adds into its adjoint,
// which has the value's (contiguous) layout, so the same offsets address both.
template <class T, int LeafRank, int R>
struct evaluator<var_leaf<T, LeafRank>, R> : evaluator<leaf<T, LeafRank>, R> {
  using value_evaluator = evaluator<leaf<T, LeafRank>, R>;
  using node_type = var_leaf<T, LeafRank>;

  template <class Reading>  // extents<R> or contiguous_reading
  evaluator(var_leaf<T, LeafRank> const& node, Reading const& reading) : value_evaluator(node, reading) {}

  void start_row(plan_strides<R> const& index, int outer_dims) noexcept {
    value_evaluator::start_row(index, outer_dims);
    if (adjoint) adjoint_row = adjoint + (this->row - this->base);
  }
  void start_rows_at(index_t offset) noexcept
    requires(R >= 2)
  {
    value_evaluator::start_rows_at(offset);
    if (adjoint) adjoint_row = adjoint + offset;
  }
  void next_row(int d) noexcept {
    value_evaluator::next_row(d);
    if (adjoint) adjoint_row += this->strides[d];
  }
  void skip_columns(int inner_dim, index_t count) noexcept {
    value_evaluator::skip_columns(inner_dim, count);
    if (adjoint) adjoint += count * this->strides[inner_dim];
  }

  void accumulate(T g, scalar_read r) const noexcept {
    if (mode == adjoint_mode::none) return;
    T& a = adjoint_row[r.i * this->inner];
    a = mode == adjoint_mode::overwrite ? g : a + g;
  }
  template <class Lane, inner_mode Mode, batch_cover Cover>
    requires(Cover != batch_cover::whole_or_tail)  // (stores need a whole batch or a tail)
  KILN_ALWAYS_INLINE void accumulate(simd_detail::batch<T> const& g, batch_read<Lane, Mode, Cover> r) noexcept {
    constexpr bool tail = Cover == batch_cover::tail;
    using B = simd_detail::batch<T>;
    if (mode == adjoint_mode::none) return;
    if (Mode == inner_mode::mixed && this->inner == 0) {  // broadcast along the row: sum it up
      if constexpr (tail) pending += first_lanes(g, r.n, B(T(0)));
      else pending += g;
      return;
    }
    T* const at = adjoint_row + r.i;
    if constexpr (tail) {
      std::size_t const n = std::size_t(r.n);
      simd_detail::store_partial(at, mode == adjoint_mode::overwrite ? g : simd_detail::load_partial<B>(at, n) + g, n);
    } else {
      (mode == adjoint_mode::overwrite ? g : B::load_unaligned(at) + g).store_unaligned(at);
    }
  }
  // A broadcast leaf's row sum is kept per block in a batch, then in double across blocks, so a
  // scalar broadcast over millions of elements gets its gradient without float accumulation error.
  void end_block() noexcept {
    if (this->inner != 0 || mode == adjoint_mode::none) return;
    row_total += static_cast<double>(simd_detail::reduce_add(pending));
    pending = simd_detail::batch<T>(T(0));
  }
  void end_row() noexcept {
    if (this->inner != 0 || mode == adjoint_mode::none) return;
    T& a = *adjoint_row;
    a = static_cast<T>((mode == adjoint_mode::overwrite ? 0.0 : static_cast<double>(a)) + row_total);
    row_total = 0;
  }

  T* adjoint = nullptr;
  T* adjoint_row = nullptr;
  adjoint_mode mode = adjoint_mode::none;
  index_t adjoint_size = 0;
  bool broadcast = false;  // several elements of the loop add into one element of the adjoint
  simd_detail::batch<T> pending = simd_detail::batch<T>(T(0));
  double row_total = 0;
};

// The forward values of one step, kept for the reverse walk: a node's value and its children's
// tapes (an indexed_pack). Subtrees without vars keep only their value. Plain aggregates built in
// place (prvalues straight into their slots): the whole tape stays in registers.
template <class V, class Children>
struct value_tape {
  Children children;
  V value;
};
template <class X>
KILN_ALWAYS_INLINE KILN_HD auto const& value_of(X const& x) noexcept {
  if constexpr (requires { x.children; }) return x.value;
  else return x;
}

template <class Ev, class Read>
KILN_ALWAYS_INLINE auto record(Ev const& ev, Read r);

template <class Ev, class Read, std::size_t... I>
KILN_ALWAYS_INLINE auto record_map(Ev const& ev, Read r, std::index_sequence<I...> seq) {
  using Children = indexed_pack<decltype(seq), decltype(record(slot<I>(ev.args), r))...>;
  using V = decltype(ev.apply(value_of(slot<I>(std::declval<Children const&>()))...));
  value_tape<V, Children> tape{Children{{record(slot<I>(ev.args), r)}...}, V{}};
  tape.value = ev.apply(value_of(slot<I>(tape.children))...);
  return tape;
}

template <class Ev, class Read>
KILN_ALWAYS_INLINE auto record(Ev const& ev, Read r) {
  using Node = typename Ev::node_type;
  if constexpr (differentiable<Node> && !is_var_leaf<Node>)
    return record_map(ev, r, std::make_index_sequence<pack_size_v<decltype(ev.args)>>{});
  else
    return read(ev, r);
}

template <class Op>
// (The address is taken in an unevaluated operand: nvcc rejects it as a bare requirement.)
concept has_grad_rule = requires { decltype(&Op::template grad<float>){}; } ||
                        requires { decltype(&Op::template grad<bool, float>){}; };

// g times the partial derivatives of the op at the recorded values, one per argument.
template <class Ev, class G, class Out, class... V, std::size_t... I>
KILN_ALWAYS_INLINE auto partials(Ev const& ev, G const& g, Out const& out, std::index_sequence<I...>, V const&... v) {
  using Op = typename Ev::node_type::op_type;
  using C = typename Ev::compute_type;
  static_assert(has_grad_rule<Op>,
                "kiln: an op in this expression has no grad rule, so it cannot be differentiated (give its struct a "
                "`grad` member, see ops/arithmetic.hpp)");
  if constexpr (simd_detail::is_batch<G> && !op_vectorized<Op>)
    return lanes_apply<C>([&ev](auto const&... a) { return ev.op.grad(a...); }, g, out,
                          as_argument<Op, I, C>(v)...);
  else
    return ev.op.grad(g, out, as_argument<Op, I, C>(v)...);
}

// The lanes a gradient may reach. Below a `where`, only the chosen side's lanes: whatever its
// subtree computes at the other lanes (log'(0) = inf, sqrt'(-1) = NaN, times a zero gradient)
// never reaches a leaf, so a NaN in the branch not taken does not leak.
struct all_lanes {};
template <class M>
KILN_ALWAYS_INLINE M narrow(all_lanes, M const& m) noexcept {
  return m;
}
template <class M>
KILN_ALWAYS_INLINE M narrow(M const& a, M const& b) noexcept {
  return math::both(a, b);
}
template <class G>
KILN_ALWAYS_INLINE G masked(G const& g, all_lanes) noexcept {
  return g;
}
template <class G, class M>
KILN_ALWAYS_INLINE G masked(G const& g, M const& m) noexcept {
  return math::select(m, g, G(0));
}

template <class Ev, class Tape, class G, class Read, class Mask = all_lanes>
KILN_ALWAYS_INLINE void backprop(Ev& ev, Tape const& tape, G const& g, Read r, Mask mask = {});

template <class Ev, class Tape, class G, class Read, class Mask, std::size_t... I>
KILN_ALWAYS_INLINE void backprop_map(Ev& ev, Tape const& tape, G const& g, Read r, Mask mask,
                                     std::index_sequence<I...> seq) {
  using Op = typename Ev::node_type::op_type;
  using C = typename Ev::compute_type;
  auto const d = partials(ev, static_cast<std::conditional_t<simd_detail::is_batch<G>, G, C>>(g), tape.value, seq,
                          value_of(slot<I>(tape.children))...);
  auto child = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    auto& child_ev = slot<K>(ev.args);
    using Child = typename std::remove_cvref_t<decltype(child_ev)>::node_type;
    if constexpr (differentiable<Child>) {
      auto const& below = slot<K>(tape.children);
      auto const child_g = [&] {
        if constexpr (simd_detail::is_batch<G>) return d[K];
        else return static_cast<typename Child::value_type>(d[K]);
      }();
      if constexpr (Op::kind == op_kind::select) {
        auto const chosen = as_argument<Op, 0, C>(value_of(slot<0>(tape.children)));
        backprop(child_ev, below, child_g, r, narrow(mask, K == 1 ? chosen : math::negate(chosen)));
      } else {
        backprop(child_ev, below, child_g, r, mask);
      }
    }
  };
  (child(std::integral_constant<std::size_t, I>{}), ...);
}

template <class Ev, class Tape, class G, class Read, class Mask>
KILN_ALWAYS_INLINE void backprop(Ev& ev, Tape const& tape, G const& g, Read r, Mask mask) {
  if constexpr (is_var_leaf<typename Ev::node_type>)
    ev.accumulate(masked(g, mask), r);
  else
    backprop_map(ev, tape, g, r, mask, std::make_index_sequence<pack_size_v<decltype(ev.args)>>{});
}

// The root of a backward loop: the producer's evaluator and those of the extra operands the
// upstream gradient is computed from (the statement's output adjoint; for a reduction also its
// result and auxiliary reductions, broadcast back). Upstream(p, extras...) gives dL/dp.
template <class Upstream, class Producer, class... Extras>
struct backward_root;
template <class Upstream, class Producer, class... Extras>
inline constexpr std::size_t subtree_nodes<backward_root<Upstream, Producer, Extras...>> =
    (subtree_nodes<Producer> + ... + subtree_nodes<Extras>);
template <class Upstream, class Producer, class... Extras>
struct backward_root {
  using value_type = typename Producer::value_type;
  static constexpr bool is_leaf = false;
  static constexpr std::size_t leaf_count = (Producer::leaf_count + ... + Extras::leaf_count);
  // Whether the loop can run on batches: one lane type throughout, with vector registers.
  static constexpr bool batches = [] {
    using L = lane_t<typename Producer::node_type>;
    if constexpr (std::is_void_v<L> || std::is_same_v<L, mixed_lanes>) return false;
    else return simd_detail::has_batch<L> && std::is_same_v<L, value_type> &&
                (std::is_same_v<typename Extras::value_type, value_type> && ...);
  }();

  Upstream upstream;
  indexed_pack<std::index_sequence_for<Producer, Extras...>, Producer, Extras...> args;

  // One step: forward values, dL/dp, the reverse walk. Returns the producer's value.
  template <class Read>
  KILN_ALWAYS_INLINE auto step(Read r) {
    auto const tape = record(slot<0>(args), r);
    auto const p = value_of(tape);
    auto const u = apply_pack([&](auto const&, auto const&... extra) { return upstream(p, read(extra, r)...); }, args);
    backprop(slot<0>(args), tape, static_cast<std::remove_const_t<decltype(p)>>(u), r);
    return p;
  }
};

template <class Ev, class F>
void for_each_var_leaf(Ev& ev, F&& f) {
  for_each_leaf(ev, [&](auto& leaf) {
    if constexpr (is_var_leaf<typename std::remove_cvref_t<decltype(leaf)>::node_type>) f(leaf);
  });
}

// Points every var leaf's evaluator at its adjoint and chooses how to write it. A var's first
// leaf overwrites a fresh adjoint when it covers it exactly once (no broadcasting); later leaves
// of the same var, and broadcast ones, add.
template <class Node, class Ev>
void bind_adjoints(Node const& node, Ev& ev, index_t size) {
  if constexpr (is_var_leaf<Node>) {
    auto& v = node.node();
    if (!v.requires_grad) return;
    bool const exact = size > 0 && v.value.size() == size;
    ev.mode = exact && v.prepare_overwrite() ? adjoint_mode::overwrite : adjoint_mode::accumulate;
    ev.adjoint = v.grad().data();
    ev.adjoint_size = v.value.size();
    ev.broadcast = v.value.size() != size;
  } else if constexpr (differentiable<Node>) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (bind_adjoints(slot<I>(node.args()), slot<I>(ev.args), size), ...);
    }(std::make_index_sequence<pack_size_v<decltype(node.args())>>{});
  }
}

// The rows of a backward loop with batches. Returns the sum of the producer's values when Sum.
template <class Lane, inner_mode Mode, bool Sum, class Root>
void backward_row_simd(Root const& shared, index_t n, cascade<Lane, ops::sum_red>& total) {
  Root root = shared;  // a local copy: pointers and broadcast sums stay in registers (see simd_row)
  using B = simd_detail::batch<Lane>;
  constexpr index_t W = B::size;
  inline_tree<Root>([&]() KILN_INLINE_LAMBDA {
    for (index_t start = 0; start < n; start += fold_block) {
      index_t const end = std::min(n, start + fold_block);
      B acc(Lane(0));
      index_t i = start;
      for (; i + W <= end; i += W) {
        B const p = root.step(batch_read<Lane, Mode, batch_cover::whole>{i, W});
        if constexpr (Sum) acc += p;
      }
      if (i < end) {
        B const p = root.step(batch_read<Lane, Mode, batch_cover::tail>{i, end - i});
        if constexpr (Sum) acc += first_lanes(p, end - i, B(Lane(0)));
      }
      if constexpr (Sum) total.push(simd_detail::reduce_add(acc));
      if constexpr (Mode == inner_mode::mixed) for_each_var_leaf(root, [](auto& leaf) { leaf.end_block(); });
    }
  });
  if constexpr (Mode == inner_mode::mixed) for_each_var_leaf(root, [](auto& leaf) { leaf.end_row(); });
}

// Runs the backward loop over a plan (or its part) on one thread. With Sum, also returns the sum
// of the producer's values, summed in blocks and pairwise like kiln::sum.
template <bool Sum, int R, class Policy, class Root>
auto backward_rows(Policy const&, loop_plan<R> const& plan, Root& root) {
  using T = typename Root::value_type;
  cascade<T, ops::sum_red> total;
  index_t const n = plan.shape[plan.dims - 1];
  constexpr bool vector = std::is_base_of_v<simd_policy, Policy> && Root::batches;
  if constexpr (vector) {
    inner_reads const reads = leaf_reads(plan, root);
    if (reads == inner_reads::contiguous) {
      for_each_row(plan, root, [&](index_t, auto const&) { backward_row_simd<T, inner_mode::contiguous, Sum>(root, n, total); });
      return total.total();
    }
    if (reads == inner_reads::mixed) {
      for_each_row(plan, root, [&](index_t, auto const&) { backward_row_simd<T, inner_mode::mixed, Sum>(root, n, total); });
      return total.total();
    }
  }
  for_each_row(plan, root, [&](index_t, auto const&) {
    T acc = 0;
    for (index_t i = 0; i < n; ++i) {
      T const p = root.step(scalar_read{i});
      if constexpr (Sum) acc += p;
    }
    if constexpr (Sum) total.push(acc);
  });
  return total.total();
}

// The same on all cores. Each thread runs its part of the plan on its own copy of the loop; a
// broadcast leaf's adjoint, which elements of every part add into, is summed per thread into a
// zeroed buffer of its own, and the buffers are added into the adjoint in thread order afterwards
// (no races, and the same result for the same thread count). So is the loss.
template <bool Sum, int R, class Root>
auto backward_rows(par_policy const& policy, loop_plan<R> const& plan, Root& root) {
  using T = typename Root::value_type;
  simd_policy const& single = policy;
  int const threads = par_threads(plan_rows(plan) * plan.shape[plan.dims - 1]);
  if (threads == 1) return backward_rows<Sum>(single, plan, root);
  auto const summed = [](auto const& leaf) { return leaf.mode != adjoint_mode::none && leaf.broadcast; };
  std::vector<index_t> sizes;  // the broadcast leaves' adjoint sizes, in visiting order
  for_each_var_leaf(root, [&](auto& leaf) {
    if (summed(leaf)) sizes.push_back(leaf.adjoint_size);
  });
  std::vector<std::vector<T>> buffers(sizes.size() * static_cast<std::size_t>(threads));
  for (std::size_t k = 0; k < buffers.size(); ++k) buffers[k].assign(static_cast<std::size_t>(sizes[k % sizes.size()]), T(0));
  std::vector<T> totals(static_cast<std::size_t>(threads), T(0));
  int used = 1;
  par_run(threads, [&](int part, int parts) {
    if (part == 0) used = parts;
    plan_part const mine = split_plan(plan, part, parts, sizeof(T));
    if (mine.count == 0) return;
    Root local = root;
    std::size_t k = static_cast<std::size_t>(part) * sizes.size();
    for_each_var_leaf(local, [&](auto& leaf) {
      if (!summed(leaf)) return;
      leaf.adjoint = buffers[k++].data();
      leaf.mode = adjoint_mode::accumulate;
    });
    loop_plan<R> narrowed = plan;
    T* no_destination = nullptr;
    narrow_to(mine, narrowed, local, no_destination);
    totals[static_cast<std::size_t>(part)] = backward_rows<Sum>(single, narrowed, local);
  });
  std::size_t k = 0;
  for_each_var_leaf(root, [&](auto& leaf) {
    if (!summed(leaf)) return;
    for (int t = 0; t < used; ++t) {
      T const* from = buffers[static_cast<std::size_t>(t) * sizes.size() + k].data();
      for (index_t i = 0; i < leaf.adjoint_size; ++i) leaf.adjoint[i] += from[i];
    }
    ++k;
  });
  cascade<T, ops::sum_red> total;
  for (int t = 0; t < used; ++t) total.push(totals[static_cast<std::size_t>(t)]);
  return total.total();
}

// Runs the backward loop over `shape` (the producer's). With Sum, also returns the sum of the
// producer's values.
template <bool Sum, int R, class Policy, class Root>
auto backward_loop(Policy const& policy, extents<R> const& shape, Root& root) {
  using T = typename Root::value_type;
  if (element_count<R>(shape) == 0) return T(0);
  // No destination: planned as if writing a contiguous one, which takes make_plan's flat path
  // whenever the leaves allow it.
  loop_plan<R> const plan = make_plan<R>(shape, contiguous_strides<R>(shape), root);
  return backward_rows<Sum>(policy, plan, root);
}

// Back-propagates through `producer` (a tree of maps and leaves, no boundaries) over its shape:
// dL/dp = upstream(p, extras...), extras broadcast to the producer's shape. Returns the sum of
// the producer's values when Sum (the single-pass loss).
template <bool Sum = false, class Policy, class Producer, class Upstream, class... Extras>
auto backward_pass(Policy const& policy, Producer const& producer, Upstream const& upstream, Extras const&... extras) {
  constexpr int R = Producer::rank;
  auto const& shape = producer.shape();
  backward_root<Upstream, evaluator<Producer, R>, evaluator<Extras, R>...> root{
      upstream, {{evaluator<Producer, R>(producer, shape)}, {evaluator<Extras, R>(extras, shape)}...}};
  bind_adjoints(producer, slot<0>(root.args), element_count<R>(shape));
  return backward_loop<Sum, R>(policy, shape, root);
}

// The upstream gradient of an elementwise statement: its output's adjoint, as it is.
struct pass_upstream {
  template <class P, class G>
  KILN_ALWAYS_INLINE G operator()(P const&, G const& g) const noexcept {
    return g;
  }
};

}  // namespace kiln::detail

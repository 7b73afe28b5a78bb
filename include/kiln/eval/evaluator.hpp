// kiln/eval/evaluator.hpp: the loop-side mirror of an expression tree. make_evaluator turns the
// user's nodes into small objects holding only pointers, strides and op values; the kernels in
// eval/ call `scalar(i)` or `packet(i)` on the root, and everything below inlines into one loop
// body.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/simd.hpp>
#include <kiln/expr/map.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <tuple>
#include <utility>

namespace kiln::detail {

// How the innermost loop reads each leaf when it runs on batches: every leaf contiguous (plain
// vector loads), or each leaf contiguous or broadcast along the row (stride 0: a splat of the
// element read once per row). In the mixed mode each leaf tests its stride per batch, a branch
// that is always predicted; one loop per combination of leaf kinds measured a few percent faster
// but compiled 50% slower, so kiln keeps the two loops. `twins` is the contiguous mode in which
// the two operands of an op that are one leaf read the same way (`A * A`) are loaded once: the
// reductions' loops take it when a tree has such an op (sums of squares are common, and a fold's
// loop is bound by its loads), so trees without one compile no third loop.
enum class inner_mode { contiguous, mixed, twins };
using simd_detail::batch_cover;  // how many elements of a row a batch read takes

// Strides are kept in arrays of at least one entry so that rank-0 expressions plan like rank 1.
template <int R>
inline constexpr int plan_dims = R > 0 ? R : 1;
template <int R>
using plan_strides = std::array<index_t, plan_dims<R>>;

template <class Node, int R>
struct evaluator;

// The nodes of the tree under an evaluator (1 for a leaf or a constant).
template <class Ev>
inline constexpr std::size_t subtree_nodes = 1;
template <class Op, class... Args, int R>
inline constexpr std::size_t subtree_nodes<evaluator<map<Op, Args...>, R>> = 1 + (std::size_t{0} + ... + subtree_nodes<evaluator<Args, R>>);

// Trees of up to this many nodes are inlined into their loop node by node, each packet() forced
// inline into its parent's. A larger tree's packet() is an ordinary inline function, and the loops
// that read it run inside `flattened`, which inlines everything below it at once: forced inline at
// every level, each node's packet() was compiled with its whole subtree inlined first, and compile
// time grew with the square of the depth (a 64-node chain took 27 s; 9 s flattened). Small trees
// keep the forced path: flattening their loops too cost W1 8% and W4 9% at 1K elements.
inline constexpr std::size_t forced_inline_nodes = 16;
template <class Ev>
inline constexpr bool large_tree = subtree_nodes<Ev> > forced_inline_nodes;

// f() with every call below it inlined.
template <class F>
KILN_FLATTEN decltype(auto) flattened(F const& f) {
  return f();
}
// f() where it reads Ev's tree with batches: flattened for a large tree, as it is for a small one
// (f's call operator KILN_INLINE_LAMBDA). `run` and softmax_plan_rows spell the two paths out
// instead, so that small trees there (W1, W2, W4, W7) compile to exactly the code they had before
// large trees were flattened: through the lambda GCC schedules their set-up differently.
template <class Ev, class F>
KILN_ALWAYS_INLINE decltype(auto) inline_tree(F const& f) {
  if constexpr (large_tree<Ev>) return flattened(f);
  else return f();
}

// Builds an evaluator whose leaves read one contiguous row from their first element (stride 1, the
// plan of one dimension), for a tree the caller has checked reads every leaf contiguously over its
// whole shape: the contiguous fold (eval/reduce.hpp) skips each leaf's broadcast strides, which it
// would overwrite (W6 at 1K elements, AVX2: 30 of its 166 instructions outside the rows).
struct contiguous_reading {};

template <class T, int LeafRank, int R>
struct evaluator<leaf<T, LeafRank>, R> {
  using node_type = leaf<T, LeafRank>;
  using value_type = T;
  static constexpr bool is_leaf = true;
  static constexpr std::size_t leaf_count = 1;

  evaluator(leaf<T, LeafRank> const& node, extents<R> const& out_shape) : base(node.view().data()) {
    extents<R> const s =
        broadcast_strides<R, LeafRank>(node.view().shape(), node.view().strides(), out_shape);
    // Element by element, not std::copy: GCC turns that copy into one 16-byte move, which its
    // scalar replacement does not split, so every leaf's strides stayed in memory and with them the
    // evaluator of the rows loops (AVX2 builds copied it to the stack once per row). Element by
    // element the evaluator lives in registers: W4 at 1K elements -4%, W7 -4.5%.
    for (int d = 0; d < R; ++d) strides[d] = s[d];
  }
  evaluator(leaf<T, LeafRank> const& node, contiguous_reading) noexcept : base(node.view().data()) { strides[0] = 1; }

  // Points the leaf at the row of the plan's outer indices `index` (planned strides). The row's
  // first element is copied to `splat`, whatever the stride: the mixed loop's batches read it when
  // the leaf is broadcast along the row (read once per row, as a store to the destination could
  // alias it for all the compiler knows). No loop runs an empty row, so the element is always
  // there; testing the stride first cost a branch per leaf per row (on Zen 5, W4 at 1K 13% in a
  // program of W4 alone, within noise in bench/ab; 4-9% together with simd_row's unrolling).
  void start_row(plan_strides<R> const& index, int outer_dims) noexcept {
    row = base;
    for (int d = 0; d < outer_dims; ++d) row += index[d] * strides[d];
    inner = strides[outer_dims];
    splat = *row;
  }
  // Points the leaf at element `offset` from its start as the first of a run of rows read with
  // strides[0] between rows and strides[1] along them (run_planned_rows, kernels.hpp), the row's
  // first element copied to `splat` as above.
  void start_rows_at(index_t offset) noexcept
    requires(R >= 2)
  {
    row = base + offset;
    inner = strides[1];
    splat = *row;
  }
  // Moves to the next row along outer dimension d, the innermost one (for_each_row's common step).
  // For a plan of one row for_each_row names d = -1 here but never steps; GCC's
  // -Wmaybe-uninitialized reads strides[-1] into that path in users' -O2 -Wall builds. Silenced
  // here rather than avoided: a branch or a separate one-row loop there cost W1 or W4 3% at 1K.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  void next_row(int d) noexcept {
    row += strides[d];
    splat = *row;
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  // Moves the leaf `count` elements along the plan's inner dimension (kiln::par's column parts).
  void skip_columns(int inner_dim, index_t count) noexcept { base += count * strides[inner_dim]; }
  T scalar(index_t i) const noexcept { return row[i * inner]; }

  // A batch starting at element i of the row, of n elements as Cover says (the others are zero).
  template <class Lane, inner_mode Mode, batch_cover Cover>
  KILN_ALWAYS_INLINE auto packet(index_t i, index_t n) const noexcept {
    using B = std::conditional_t<std::is_same_v<T, bool>, simd_detail::batch_bool<Lane>, simd_detail::batch<T>>;
    if (Mode == inner_mode::mixed && inner == 0) return B(splat);
    return simd_detail::load_covered<B, Cover>(row + i, std::size_t(n));
  }

  T const* base;
  plan_strides<R> strides{};
  T const* row = nullptr;
  index_t inner = 0;
  T splat{};  // the row's element when the leaf is broadcast along it
};

// An owned leaf reads as any leaf.
template <class T, int LeafRank, int R>
struct evaluator<owned_leaf<T, LeafRank>, R> : evaluator<leaf<T, LeafRank>, R> {
  using node_type = owned_leaf<T, LeafRank>;
  using evaluator<leaf<T, LeafRank>, R>::evaluator;
};

template <class T, int R>
struct evaluator<constant<T>, R> {
  using node_type = constant<T>;
  using value_type = T;
  static constexpr bool is_leaf = false;
  static constexpr std::size_t leaf_count = 0;

  template <class Reading>  // extents<R> or contiguous_reading
  evaluator(constant<T> const& node, Reading const&) : value(node.value()) {}

  T scalar(index_t) const noexcept { return value; }
  template <class Lane, inner_mode, batch_cover>
  KILN_ALWAYS_INLINE auto packet(index_t, index_t) const noexcept {
    if constexpr (std::is_same_v<T, bool>)
      return simd_detail::batch_bool<Lane>(value);
    else
      return simd_detail::batch<T>(value);
  }

  T value;
};

// Converts a child's value to what argument I of Op expects: a truth value for mask arguments,
// the op's compute type otherwise.
template <class Op, std::size_t I, class Compute, class V>
KILN_ALWAYS_INLINE auto as_argument(V const& v) {
  if constexpr (reads_as_mask<Op>(I)) {
    if constexpr (std::is_same_v<V, bool> || simd_detail::is_batch_bool<V>)
      return v;
    else if constexpr (simd_detail::is_batch<V>)
      return ~(v == V(0));  // NaN is true, as in C++ and PyTorch (xsimd's != is ordered)
    else
      return v != V(0);
  } else if constexpr (simd_detail::is_batch_bool<V>) {  // a bool operand in arithmetic: 1 or 0
    using B = simd_detail::batch<Compute>;
    return xsimd::select(v, B(Compute(1)), B(Compute(0)));
  } else if constexpr (simd_detail::is_batch<V>) {
    return v;
  } else {
    return static_cast<Compute>(v);
  }
}

// For code without a batch form: spills the batches p, calls f on each lane's scalars, and loads
// the results back: a batch, or an array of batches when f returns an array.
template <class Lane, class F, class... P>
auto lanes_apply(F const& f, P const&... p) noexcept {
  constexpr std::size_t W = simd_detail::batch<Lane>::size;
  auto spill = [](auto const& b) {
    using E = std::conditional_t<simd_detail::is_batch_bool<std::remove_cvref_t<decltype(b)>>, bool, Lane>;
    std::array<E, W> out;
    b.store_unaligned(out.data());
    return out;
  };
  std::tuple<decltype(spill(p))...> lanes{spill(p)...};
  auto at = [&](std::size_t k) { return std::apply([&](auto const&... a) { return f(a[k]...); }, lanes); };
  using Result = decltype(at(0));
  auto load = []<class E>(E const* values) {
    if constexpr (std::is_same_v<E, bool>) return simd_detail::batch_bool<Lane>::load_unaligned(values);
    else return simd_detail::batch<E>::load_unaligned(values);
  };
  if constexpr (requires { std::tuple_size<Result>::value; }) {
    constexpr std::size_t N = std::tuple_size_v<Result>;
    std::array<std::array<typename Result::value_type, W>, N> columns;
    for (std::size_t k = 0; k < W; ++k) {
      Result const r = at(k);
      for (std::size_t j = 0; j < N; ++j) columns[j][k] = r[j];
    }
    return [&]<std::size_t... J>(std::index_sequence<J...>) {
      return std::array{load(columns[J].data())...};
    }(std::make_index_sequence<N>{});
  } else {
    std::array<Result, W> results;
    for (std::size_t k = 0; k < W; ++k) results[k] = at(k);
    return load(results.data());
  }
}

// The lane type of a batch of values or of truth values; batch_lane_t<V...> is the first one's.
template <class V>
struct batch_lane;
template <class T, class A>
struct batch_lane<xsimd::batch<T, A>> {
  using type = T;
};
template <class T, class A>
struct batch_lane<xsimd::batch_bool<T, A>> {
  using type = T;
};
template <class... V>
using batch_lane_t = typename batch_lane<std::tuple_element_t<0, std::tuple<V...>>>::type;

template <class Op, class... Args, int R>
struct evaluator<map<Op, Args...>, R> {
  using node_type = map<Op, Args...>;
  using value_type = typename node_type::value_type;
  using compute_type = typename node_type::compute_type;
  static constexpr bool is_leaf = false;
  static constexpr std::size_t leaf_count = (std::size_t{0} + ... + evaluator<Args, R>::leaf_count);

  template <class Reading>  // the output's extents<R>, or contiguous_reading
  evaluator(node_type const& node, Reading const& reading)
      : op(node.op()), args(detail::apply_pack([&](Args const&... a) { return children{{evaluator<Args, R>(a, reading)}...}; },
                                                node.args())) {
    if constexpr (twin_leaves) {
      auto const &first = slot<0>(args), &second = slot<1>(args);
      twins = first.base == second.base && same_extents(first.strides, second.strides);
    }
  }

  value_type scalar(index_t i) const noexcept {
    return scalar_impl(i, std::index_sequence_for<Args...>{});
  }
  template <class Lane, inner_mode Mode, batch_cover Cover>
    requires(subtree_nodes<evaluator> <= forced_inline_nodes)
  KILN_ALWAYS_INLINE auto packet(index_t i, index_t n) const noexcept {
    return packet_impl<Lane, Mode, Cover>(i, n, std::index_sequence_for<Args...>{});
  }
  template <class Lane, inner_mode Mode, batch_cover Cover>
    requires(subtree_nodes<evaluator> > forced_inline_nodes)
  auto packet(index_t i, index_t n) const noexcept {
    return packet_impl<Lane, Mode, Cover>(i, n, std::index_sequence_for<Args...>{});
  }

  // Op applied to values already read from the children (scalars, or batches of one lane type),
  // each converted as the op reads it. The result is in the op's compute type.
  template <class... V>
  KILN_ALWAYS_INLINE auto apply(V const&... v) const noexcept {
    return apply_impl(std::index_sequence_for<Args...>{}, v...);
  }

  using children = indexed_pack<std::index_sequence_for<Args...>, evaluator<Args, R>...>;
  Op op;
  children args;
  // Whether the op's two operands are leaves of one type, and (`twins`) the same elements read the
  // same way: inner_mode::twins loads them once. Planning keeps twins alike: it rewrites equal
  // strides equally.
  static constexpr bool twin_leaves = [] {
    if constexpr (sizeof...(Args) == 2) {
      using First = evaluator<std::tuple_element_t<0, std::tuple<Args...>>, R>;
      return First::is_leaf && requires(First const& e) { e.base == e.base && e.strides == e.strides; } &&
             (std::is_same_v<First, evaluator<Args, R>> && ...);
    } else {
      return false;
    }
  }();
  bool twins = false;

 private:
  template <std::size_t... I>
  KILN_ALWAYS_INLINE value_type scalar_impl(index_t i, std::index_sequence<I...>) const noexcept {
    return static_cast<value_type>(apply(slot<I>(args).scalar(i)...));
  }
  template <class Lane, inner_mode Mode, batch_cover Cover, std::size_t... I>
  KILN_ALWAYS_INLINE auto packet_impl(index_t i, index_t n, std::index_sequence<I...>) const noexcept {
    if constexpr (Mode == inner_mode::twins && twin_leaves) {
      if (twins) {
        auto const x = slot<0>(args).template packet<Lane, Mode, Cover>(i, n);
        return apply(x, x);
      }
    }
    return apply(slot<I>(args).template packet<Lane, Mode, Cover>(i, n)...);
  }
  template <std::size_t... I, class... V>
  KILN_ALWAYS_INLINE auto apply_impl(std::index_sequence<I...>, V const&... v) const noexcept {
    if constexpr (!(simd_detail::is_batch<V> || ...) && !(simd_detail::is_batch_bool<V> || ...))
      return op(as_argument<Op, I, compute_type>(v)...);
    else if constexpr (op_vectorized<Op>)
      return op(as_argument<Op, I, compute_type>(v)...);
    else
      return lane_by_lane<batch_lane_t<V...>>(as_argument<Op, I, compute_type>(v)...);
  }
  template <class Lane, class... P>
  auto lane_by_lane(P const&... p) const noexcept {
    return lanes_apply<Lane>([this](auto const&... a) { return static_cast<value_type>(op(a...)); }, p...);
  }
};

// Whether a tree may have twin leaves (evaluator<map>::twin_leaves), and whether it has.
template <class Ev>
inline constexpr bool may_have_twins = false;
template <class Op, class... Args, int R>
inline constexpr bool may_have_twins<evaluator<map<Op, Args...>, R>> =
    evaluator<map<Op, Args...>, R>::twin_leaves || (may_have_twins<evaluator<Args, R>> || ...);
template <class Ev>
KILN_ALWAYS_INLINE bool has_twins(Ev const& ev) noexcept;
template <class Ev, std::size_t... I>
KILN_ALWAYS_INLINE bool has_twins_below(Ev const& ev, std::index_sequence<I...>) noexcept {
  bool found = false;
  if constexpr (Ev::twin_leaves) found = ev.twins;
  return (found || ... || has_twins(slot<I>(ev.args)));
}
template <class Ev>
KILN_ALWAYS_INLINE bool has_twins(Ev const& ev) noexcept {
  if constexpr (!may_have_twins<Ev>) return false;
  else return has_twins_below(ev, std::make_index_sequence<pack_size_v<decltype(ev.args)>>{});
}

// Calls f on every tensor leaf's evaluator, depth first, left to right.
template <class Ev, class F>
void for_each_leaf(Ev& ev, F&& f) {
  if constexpr (Ev::is_leaf) {
    f(ev);
  } else if constexpr (requires { ev.args; }) {
    apply_pack([&](auto&... child) { (for_each_leaf(child, f), ...); }, ev.args);
  }
}

// Calls f(node, evaluator) on every tensor leaf, walking the user's tree and its evaluator together.
template <class Node, class Ev, class F>
void visit_leaf_pairs(Node const& node, Ev const& ev, F&& f) {
  if constexpr (Ev::is_leaf) {
    f(node, ev);
  } else if constexpr (requires { ev.args; }) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (visit_leaf_pairs(slot<I>(node.args()), slot<I>(ev.args), f), ...);
    }(std::make_index_sequence<pack_size_v<decltype(ev.args)>>{});
  }
}

// The single type a tree's batches hold, if it has one: every tensor, constant and intermediate
// value is that type or bool. `void` means no opinion (only bools below); `mixed_lanes` means the
// tree mixes types and runs on the scalar path.
struct mixed_lanes {};
template <class A, class B>
using merge_lane_t = std::conditional_t<
    std::is_void_v<A>, B,
    std::conditional_t<std::is_void_v<B> || std::is_same_v<A, B>, A, mixed_lanes>>;
template <class T>
using lane_of_type_t = std::conditional_t<std::is_same_v<T, bool>, void, T>;

template <class A, class B>
constexpr auto operator|(std::type_identity<A>, std::type_identity<B>) {
  return std::type_identity<merge_lane_t<A, B>>{};
}

template <class Node>
struct lane_of {
  using type = lane_of_type_t<typename Node::value_type>;
};
template <class Op, class... Args>
struct lane_of<map<Op, Args...>> {
  using node = map<Op, Args...>;
  using children = typename decltype((std::type_identity<void>{} | ... |
                                      std::type_identity<typename lane_of<Args>::type>{}))::type;
  using type = merge_lane_t<merge_lane_t<children, lane_of_type_t<typename node::compute_type>>,
                            lane_of_type_t<typename node::value_type>>;
};
template <class Node>
using lane_t = typename lane_of<Node>::type;

}  // namespace kiln::detail

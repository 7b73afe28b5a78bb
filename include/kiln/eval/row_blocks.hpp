// kiln/eval/row_blocks.hpp: an elementwise expression over reductions that keep dimension 0,
// `x - kiln::amax(x, kiln::axes<1>, kiln::keepdim)` or a layer norm's
// `(x - mean(x, 1, keepdim)) / std(x, 1, keepdim)`, run a block of rows at a time: the
// reductions of a block into buffers on the stack, then the expression over the same rows, while
// they are still in cache. Evaluated whole, each reduction is a heap temporary of every row's
// result, and the rows are read once by the reductions and once more, from memory, by the
// expression (at 4M elements 357-434 us against 251-307 for a hand-written loop row by row).
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/eval/aliasing.hpp>
#include <kiln/eval/reduce.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kiln::detail {

template <class Policy, class T, int R, class Root>
void run(Policy const& policy, tensor_view<T, R> const& dst, Root const& root);

// Whether the blocks take Node, part of an expression of rank R: leaves, constants and maps of
// them, and as boundaries only reductions that keep their dimensions, of an argument of rank R
// without boundaries of its own (whether they keep dimension 0 is known when they run).
template <class Node, int R>
struct row_blockable : std::bool_constant<!is_materialized<Node> && !requires(Node const& n) { n.arg(); }> {};
template <class Op, class... Args, int R>
struct row_blockable<map<Op, Args...>, R> : std::bool_constant<(row_blockable<Args, R>::value && ...)> {};
template <class Op, class Arg, int N, int R>
struct row_blockable<reduction<Op, Arg, N, true>, R>
    : std::bool_constant<Arg::rank == R && R >= 2 && !contains_materialized<Arg>::value> {};

// Calls on_leaf on every leaf outside the boundaries and on_boundary on every boundary.
template <class Node, class OnLeaf, class OnBoundary>
void for_each_part(Node const& node, OnLeaf const& on_leaf, OnBoundary const& on_boundary) {
  if constexpr (is_materialized<Node>)
    on_boundary(node);
  else if constexpr (requires { node.view(); })
    on_leaf(node);
  else if constexpr (requires { node.args(); })
    apply_pack([&](auto const&... a) { (for_each_part(a, on_leaf, on_boundary), ...); }, node.args());
}

// Stack room for one boundary's result over a block.
inline constexpr std::size_t row_block_buffer_bytes = 2048;
// Bytes of the destination per block: its rows, with those of an argument of its type and shape
// (what a reduction reads and the expression reads again), take 32 KB, the first-level cache of
// most cores. At 64 KB of each, twice Zen 5's L1, the second pass read from L2: W8 at 64K and 1M
// elements 1.2x slower, at 4M 1.1x (bench/README.md, Findings).
inline constexpr std::size_t row_block_bytes = 16384;

template <class Node>
inline constexpr std::size_t boundary_count = is_materialized<Node> ? 1 : 0;
template <class Op, class... Args>
inline constexpr std::size_t boundary_count<map<Op, Args...>> = (boundary_count<Args> + ... + 0);

// The block's tree: Root's outer leaves narrowed, each boundary evaluated over the block into its
// buffer and replaced by a leaf over it, the type `lower` gives, so that the assignment's loop is
// the one compiled for the whole-tensor evaluation.
template <int R, class Policy, class Node>
auto block_tree(Policy const& policy, Node const& node, index_t rows, index_t start, index_t count,
                std::byte (*buffers)[row_block_buffer_bytes], std::size_t& k) {
  if constexpr (is_materialized<Node>) {
    using V = typename Node::value_type;
    extents<R> shape = node.shape();
    shape[0] = count;
    tensor_view<V, R> const result(reinterpret_cast<V*>(buffers[k++]), shape);
    materialize_reduction(policy, result, node, rows_of<R>(node.arg(), rows, start, count));
    return owned_leaf<V, R>::borrowing(result);
  } else if constexpr (contains_materialized<Node>::value) {
    return apply_pack(
        [&](auto const&... a) {
          // (Braced: the operands' boundaries are evaluated in order, into buffers 0, 1, ...)
          return map<typename Node::op_type, decltype(block_tree<R>(policy, a, rows, start, count, buffers, k))...>{
              node.op(), block_tree<R>(policy, a, rows, start, count, buffers, k)...};
        },
        node.args());
  } else {
    return rows_of<R>(node, rows, start, count);
  }
}

// --- Rows fused (run_fused_rows below) -----------------------------------------------------------

// The boundaries of a tree in order, as pointers.
template <class Node>
auto boundaries_of(Node const& node) {
  if constexpr (is_materialized<Node>)
    return std::tuple<Node const*>(&node);
  else if constexpr (contains_materialized<Node>::value)
    return apply_pack([](auto const&... a) { return std::tuple_cat(boundaries_of(a)...); }, node.args());
  else
    return std::tuple<>();
}

// The tree with boundary k read from slots[k], the same element for every row ([rows, 1] with
// strides 0), which the rows loop rewrites before each row: block_tree's type.
template <class L, class Node>
auto fused_tree(Node const& node, L* slots, index_t rows) {
  std::size_t k = 0;
  return replace_boundaries(node, [&](auto const&) {
    return owned_leaf<L, 2>::borrowing(tensor_view<L const, 2>(slots + k++, extents<2>{rows, 1}, extents<2>{0, 0}));
  });
}

// f(x, m) with m fixed: the second pass of var, std and logsumexp (mapped_evaluator). Named and
// inlined, as shifted_exp.
template <class F, class M>
struct with_second {
  F f;
  M m;
  template <class V>
  KILN_ALWAYS_INLINE V operator()(V v) const { return f(v, V(m)); }
};

// f(s, m) as the vector code computes it: the blocks finish their results in batches, and a
// scalar log (logsumexp) may round differently.
template <class L, class F>
KILN_ALWAYS_INLINE L on_batch(F const& f, L s, L m) {
  using B = simd_detail::batch<L>;
  alignas(storage_alignment) L lanes[B::size];
  f(B(s), B(m)).store_aligned(lanes);
  return lanes[0];
}

template <class L, class Node>
inline constexpr bool fuses_by_rows = false;
template <class L, class Op, class Arg, int N>
inline constexpr bool fuses_by_rows<L, reduction<Op, Arg, N, true>> =
    folds_in_batches<L, Arg> && std::is_same_v<typename reduction<Op, Arg, N, true>::value_type, L> &&
    !ops::index_picking<Op, typename Arg::value_type>;

// A row folded as the blocks' contiguous fold folds it (fold_contiguous_rows): the same inline
// block for rows of one block, a large tree's flattened, twin leaves (`x * x`) loaded once. GCC
// contracts multiplies and adds into FMAs within what it inlines, so a fold compiled another way
// can differ in the last bit (through fold_row_simd's call, row sums of x * x did).
template <class Op, class L, inner_mode Mode, class Ev>
KILN_ALWAYS_INLINE L fold_row_in_mode(Ev const& ev, index_t n) {
  if (n > fold_block) {
    Ev const copy = ev;  // (only the copy's address leaves: the loop keeps ev in registers)
    return fold_span_simd<Op, L, Mode>(copy, 0, n);
  }
  L value;
  inline_tree<Ev>([&]() KILN_INLINE_LAMBDA { fold_consecutive_rows<Op, L, Mode, true, true>(ev, &value, 1, 1, n); });
  return value;
}
template <class Op, class L, class Ev>
KILN_ALWAYS_INLINE L fold_row_read_once(Ev const& ev, index_t n) {
  if constexpr (may_have_twins<Ev>)
    if (has_twins(ev)) return fold_row_in_mode<Op, L, inner_mode::twins>(ev, n);
  return fold_row_in_mode<Op, L, inner_mode::contiguous>(ev, n);
}

// The boundary's value over row `row` of `rows`, of n elements, where its evaluator points.
template <class L, class Op, class Arg, int N, class Ev>
KILN_ALWAYS_INLINE L fused_row_value(reduction<Op, Arg, N, true> const& node, Ev const& ev, index_t n, index_t row,
                                     index_t rows) {
  if constexpr (requires { typename Op::pre; }) {
    using Pre = typename Op::pre;
    L m = fold_row_read_once<Pre, L>(ev, n);
    if constexpr (requires { Pre::finalizes; }) m = Pre::finalize(m, n);
    L const s = fold_row_in_mode<typename Op::fold, L, inner_mode::contiguous>(
        mapped_evaluator{ev, with_second<typename Op::input, L>{{}, m}}, n);
    L value = on_batch(node.op().make_output(n), s, m);
    if constexpr (std::is_base_of_v<ops::var_red, Op> && std::is_same_v<L, float>)
      if (value == std::numeric_limits<L>::infinity())  // computed again in double, as the blocks do
        materialize_in_double(simd_policy{}, tensor_view<L, 2>(&value, extents<2>{1, 1}), node,
                              rows_of<2>(node.arg(), rows, row, 1));
    return value;
  } else {
    L const value = fold_row_read_once<Op, L>(ev, n);
    if constexpr (requires { Op::finalizes; }) return Op::finalize(value, n);
    else return value;
  }
}

// The types of Root's fused rows: its boundaries (pointers, in order), the type of their slots,
// and the tree that reads the slots.
template <class Root>
struct fused_rows_types {
  using parts = decltype(boundaries_of(std::declval<Root const&>()));
  using slot = typename std::remove_pointer_t<std::tuple_element_t<0, parts>>::value_type;
  using tree = decltype(fused_tree(std::declval<Root const&>(), static_cast<slot*>(nullptr), index_t{}));
};

// Whether run_fused_rows can take Root into a destination of T, as far as the types tell.
template <class T, class Root>
inline constexpr bool rows_fuse = [] {
  using Parts = typename fused_rows_types<Root>::parts;
  using L = typename fused_rows_types<Root>::slot;
  return vectorizable<typename fused_rows_types<Root>::tree, T> && []<std::size_t... I>(std::index_sequence<I...>) {
    return (fuses_by_rows<L, std::remove_cvref_t<std::remove_pointer_t<std::tuple_element_t<I, Parts>>>> && ...);
  }(std::make_index_sequence<std::tuple_size_v<Parts>>{});
}();

// Rank 2 under kiln::simd, every boundary a reduction along dimension 1 (`x - amax(x, 1,
// keepdim)`, a layer norm's mean and variance): one row at a time, each boundary's value for the
// row folded, then the expression's row, while the row is in L1. The blocks below pay each
// boundary's reduction and the expression's assignment their set-up once per block, which over a
// few rows cost more than the rows (a layer norm over [4, 256] 1.4x this, bench/README.md).
// Each boundary's argument must read its rows contiguously and the expression its own as the rows
// loop does (contiguous or broadcast along them); otherwise this returns false having run
// nothing. Every value has the blocks' bits: a row's fold depends only on its elements, and the
// finishing steps run in the vector form the blocks give them.
template <class T, class Root>
bool run_fused_rows(tensor_view<T, 2> const& dst, Root const& root) {
  if constexpr (!rows_fuse<T, Root>) {
    return false;
  } else {
    using Parts = typename fused_rows_types<Root>::parts;
    using L = typename fused_rows_types<Root>::slot;
    using Tree = typename fused_rows_types<Root>::tree;
    constexpr std::size_t K = std::tuple_size_v<Parts>;
    using Ev = evaluator<Tree, 2>;
    index_t const rows = dst.extent(0), n = dst.extent(1), step = dst.strides()[0];
    bool readable = dst.strides()[1] == 1;
    Parts const parts = boundaries_of(root);
    // Each boundary's argument, its rows read contiguously, and its row length.
    auto boundary_evs = std::apply(
        [](auto const*... b) { return std::tuple{evaluator<std::remove_cvref_t<decltype(b->arg())>, 2>(b->arg(), b->arg().shape())...}; },
        parts);
    std::array<index_t, K> lengths;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((lengths[I] = std::get<I>(parts)->arg().shape()[1]), ...);
      (visit_leaves(std::get<I>(boundary_evs), [&](auto const& leaf) { readable = readable && leaf.strides[1] == 1; }), ...);
    }(std::make_index_sequence<K>{});
    for (index_t length : lengths) readable = readable && length > 1;  // (a norm of one element is |x|)
    std::array<L, K> slots{};
    Ev outer(fused_tree(root, slots.data(), rows), dst.shape());
    visit_leaves(outer, [&](auto const& leaf) { readable = readable && (leaf.strides[1] == 0 || leaf.strides[1] == 1); });
    if (!readable) return false;
    T* const out = opaque(dst.data());
    inline_tree<Ev>([&]() KILN_INLINE_LAMBDA {
      for (index_t r = 0; r < rows; ++r) {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          if (r == 0) (visit_leaves(std::get<I>(boundary_evs), start_leaf_rows<2>{plan_strides<2>{}, 1}), ...);
          else (visit_leaves(std::get<I>(boundary_evs), next_leaf_rows{0}), ...);
          ((slots[I] = fused_row_value<L>(*std::get<I>(parts), std::get<I>(boundary_evs), lengths[I], r, rows)), ...);
        }(std::make_index_sequence<K>{});
        if (r == 0) visit_leaves(outer, start_leaf_rows<2>{plan_strides<2>{}, 1});
        else visit_leaves(outer, next_leaf_rows{0});
        simd_row<lane_t<Tree>, inner_mode::mixed>(out + r * step, n, outer);
      }
    });
    return true;
  }
}

// --- Rows fused above rank 2 ----------------------------------------------------------------------

// An expression of rank R > 2 over reductions of its last N dimensions (a layer norm over
// [B, T, C] along C, an instance norm over [B, C, H, W] along H and W) is the rank-2 expression
// over [rows, cols] when the dimensions before the reduced ones merge into rows and the reduced
// ones into a row: in the destination and in every leaf each of the two groups is one run, a
// fixed step apart, or the leaf has extent 1 throughout it (one row for all, or one element along
// the row). That rank-2 tree runs through run_fused_rows, row by row. Through the blocks, a block
// was a batch of dimension 0, its reductions and its expression each planned at rank R (a layer
// norm over [1, 4, 256] took 2.1x its time over [4, 256], over [16, 256, 256] 1.23x), and a batch
// of more than 512 rows left the blocks for temporaries.

// N where every boundary of Root reduces N dimensions (merged_rows_tree checks that they are the
// last N), 0 where they differ.
template <class Root>
inline constexpr int common_reduced = [] {
  using Parts = decltype(boundaries_of(std::declval<Root const&>()));
  return []<std::size_t... I>(std::index_sequence<I...>) {
    constexpr int counts[] = {std::remove_pointer_t<std::tuple_element_t<I, Parts>>::reduced_count...};
    for (int c : counts)
      if (c != counts[0]) return 0;
    return counts[0];
  }(std::make_index_sequence<std::tuple_size_v<Parts>>{});
}();

// Dimensions [From, To) of a view of rank LR, right-aligned in an expression of `shape`, as one:
// {extent, step}, or nothing where they do not merge; {1, 0} where the view's extents there are
// all 1 (it repeats along them). Inline with its bounds known, for every leaf of every statement:
// out of line over run-time bounds, merging a layer norm over [2, 2, 256] took about 1000
// instructions a statement, 500 now (its rows about 2600).
template <int From, int To, std::size_t R, class T, int LR>
KILN_ALWAYS_INLINE std::optional<std::array<index_t, 2>> merged_dims(tensor_view<T, LR> const& v,
                                                                     std::array<index_t, R> const& shape) {
  constexpr int missing = int(R) - LR;  // leading dimensions the view does not have
  bool repeats = true;
  for (int d = std::max(From, missing); d < To; ++d) repeats = repeats && v.shape()[d - missing] == 1;
  if (repeats) return std::array<index_t, 2>{1, 0};
  index_t extent = 1, step = 0, next = 0;
  bool first = true;
  for (int d = To - 1; d >= From; --d) {  // from the innermost dimension out
    extent *= shape[d];
    if (shape[d] == 1) continue;
    int const k = d - missing;
    if (k < 0 || v.shape()[k] != shape[d] || (!first && v.strides()[k] != next)) return std::nullopt;
    if (first) step = v.strides()[k], first = false;
    next = v.strides()[k] * shape[d];
  }
  return std::array<index_t, 2>{extent, step};
}

// `node`, of `shape`, at rank 2: leaves over their dimensions before `k` merged into rows and
// from `k` on into a row (plain leaves: the original tree keeps any owner alive), reductions along
// dimension 1, the rest as it is. In one pass, each leaf's merge computed once: `merges` turns
// false where that does not hold, a leaf whose dimensions do not merge or a boundary that does not
// reduce dimensions k... R - 1 of a result of the outer shape (its argument merges over its own
// shape: its rows may be of another length). From there on every leaf is a placeholder of shape
// [1, 1], which broadcasts with anything, so that building the rest cannot throw; such a tree
// must not run.
template <int K, std::size_t R, class Node>
auto merged_rows_tree(Node const& node, std::array<index_t, R> const& shape, bool& merges) {
  if constexpr (requires { node.view(); }) {
    using T = typename Node::value_type;
    auto const& v = node.view();
    if constexpr (Node::rank == 0) {
      return leaf<T, 0>(v);
    } else {
      std::optional<std::array<index_t, 2>> rows, cols;
      if (merges) rows = merged_dims<0, K>(v, shape), cols = merged_dims<K, int(R)>(v, shape);
      merges = merges && rows && cols;
      if (!merges) return leaf<T, 2>(tensor_view<T const, 2>(v.data(), extents<2>{1, 1}, extents<2>{0, 0}));
      extents<2> const shape2{(*rows)[0], (*cols)[0]}, strides2{(*rows)[1], (*cols)[1]};
      return leaf<T, 2>(tensor_view<T const, 2>(v.data(), shape2, strides2));
    }
  } else if constexpr (is_materialized<Node>) {  // a reduction that keeps its dimensions (row_blockable)
    for (int i = 0; i < Node::reduced_count; ++i) merges = merges && node.reduced_axes()[i] == K + i;
    for (int d = 0; d < K; ++d) merges = merges && node.shape()[d] == shape[d];
    auto arg = merged_rows_tree<K>(node.arg(), node.arg().shape(), merges);
    return reduction<typename Node::op_type, decltype(arg), 1, true>(node.op(), std::move(arg), {1}, true);
  } else if constexpr (requires { node.args(); }) {
    return apply_pack([&](auto const&... a) {
      return map<typename Node::op_type, decltype(merged_rows_tree<K>(a, shape, merges))...>{
          node.op(), merged_rows_tree<K>(a, shape, merges)...};
    }, node.args());
  } else {
    return node;
  }
}

// run_fused_rows over the merged rows of a destination of rank R > 2, or false, having run
// nothing, where the dimensions do not merge.
template <class T, int R, class Root>
bool run_fused_merged_rows(tensor_view<T, R> const& dst, Root const& root) {
  constexpr int k = R - common_reduced<Root>;  // the first reduced dimension
  bool merges = true;
  using Merged = decltype(merged_rows_tree<k>(root, dst.shape(), merges));
  if constexpr (k == R || !rows_fuse<T, Merged>) {
    return false;
  } else {
    auto const rows = merged_dims<0, k>(dst, dst.shape()), cols = merged_dims<k, R>(dst, dst.shape());
    if (!rows || !cols) return false;
    Merged const tree = merged_rows_tree<k>(root, dst.shape(), merges);
    if (!merges) return false;
    tensor_view<T, 2> const flat(dst.data(), extents<2>{(*rows)[0], (*cols)[0]}, extents<2>{(*rows)[1], (*cols)[1]});
    return run_fused_rows(flat, tree);
  }
}

// Runs `dst = root` a block of rows at a time and returns true, or returns false having run
// nothing where the blocks do not apply: a boundary that reduces dimension 0, is broadcast along
// it, or whose result over a row passes its buffer; an outer leaf that needs a temporary; a
// leaf read by a boundary that overlaps dst without being dst itself (the blocks write dst's
// rows before later blocks' reductions read theirs).
template <class Policy, class T, int R, class Root>
bool run_row_blocks(Policy const& policy, tensor_view<T, R> const& dst, Root const& root, destination kind) {
  index_t const rows = dst.extent(0), row_size = dst.size() / rows;
  index_t block = std::max<index_t>(1, index_t(row_block_bytes / sizeof(T)) / std::max<index_t>(1, row_size));
  byte_span dst_bytes;
  bool have_dst_bytes = false, unsafe = false, fits = true;
  unsafe_reads<T, R> const outer_check{dst, kind, dst_bytes, have_dst_bytes, unsafe};
  auto const is_dst = [&](auto const& leaf_node) {
    auto const& v = leaf_node.view();
    if constexpr (std::remove_cvref_t<decltype(v)>::rank != R) {
      return false;
    } else {
      return static_cast<void const*>(v.data()) == static_cast<void const*>(dst.data()) && v.shape() == dst.shape() &&
             v.strides() == dst.strides() &&
             std::is_same_v<typename std::remove_cvref_t<decltype(leaf_node)>::value_type, std::remove_const_t<T>>;
    }
  };
  for_each_part(root, outer_check, [&](auto const& boundary) {
    using V = typename std::remove_cvref_t<decltype(boundary)>::value_type;
    index_t per_row = 1;  // the boundary's elements per row
    for (int d = 1; d < R; ++d) per_row *= boundary.shape()[d];
    fits = fits && boundary.reduced_axes()[0] != 0 && boundary.shape()[0] == rows &&
           per_row <= index_t(row_block_buffer_bytes / sizeof(V));
    if (fits) block = std::min<index_t>(block, index_t(row_block_buffer_bytes / sizeof(V)) / std::max<index_t>(1, per_row));
    // (Two whole tensors are different ones, disjoint, or the same one, the destination itself.)
    for_each_leaf_node(boundary.arg(), [&](auto const& leaf_node) {
      unsafe = unsafe || !(whole_tensors(kind, leaf_node) || disjoint(dst, leaf_node.view()) || is_dst(leaf_node));
    });
  });
  if (unsafe) return false;
  if constexpr (std::is_same_v<Policy, simd_policy>) {
    if constexpr (R == 2) {
      if (fits && run_fused_rows(dst, root)) return true;
    } else if (run_fused_merged_rows(dst, root)) {
      return true;
    }
  }
  if (!fits) return false;
  alignas(storage_alignment) std::byte buffers[boundary_count<Root>][row_block_buffer_bytes];
  for (index_t start = 0; start < rows; start += block) {
    index_t const count = std::min(block, rows - start);
    std::size_t k = 0;
    auto const tree = block_tree<R>(policy, root, rows, start, count, buffers, k);
    extents<R> shape = dst.shape();
    shape[0] = count;
    run(policy, tensor_view<T, R>(dst.data() + start * dst.strides()[0], shape, dst.strides()), tree);
  }
  return true;
}

}  // namespace kiln::detail

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
#include <cstddef>
#include <type_traits>

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
  if (unsafe || !fits) return false;
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

// kiln/eval/aliasing.hpp: whether an assignment can write its destination while it reads its
// operands, or needs a temporary.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/tensor_view.hpp>
#include <kiln/eval/evaluator.hpp>
#include <kiln/eval/reduce.hpp>

#include <algorithm>
#include <cstdint>

namespace kiln::detail {

// The bytes [lo, hi) a view touches; lo == hi for an empty view. (Per dimension without
// branches: this runs for every leaf of every assignment.)
struct byte_span {
  std::uintptr_t lo = 0, hi = 0;
};
template <class T, int R>
KILN_ALWAYS_INLINE byte_span byte_range(tensor_view<T, R> const& v) noexcept {
  index_t lo = 0, hi = 1;
  bool empty = false;
  for (int d = 0; d < R; ++d) {
    index_t const span = (v.extent(d) - 1) * v.strides()[d];
    empty = empty || v.extent(d) == 0;
    lo += std::min<index_t>(span, 0);
    hi += std::max<index_t>(span, 0);
  }
  if (empty) return {};
  auto const base = reinterpret_cast<std::uintptr_t>(v.data());
  return {base + static_cast<std::uintptr_t>(lo) * sizeof(T), base + static_cast<std::uintptr_t>(hi) * sizeof(T)};
}
KILN_ALWAYS_INLINE bool overlap(byte_span a, byte_span b) noexcept {
  return a.lo != a.hi && b.lo != b.hi && b.lo < a.hi && a.lo < b.hi;
}

// Whether an operand `v` can be read while `dst` (which touches `dst_bytes`) is written, element
// by element: it shares no memory with dst, or it reads dst's own elements at the same index
// (same address, same type, same broadcast strides).
template <class T, int R, class V, int LR>
KILN_ALWAYS_INLINE bool reads_in_place(tensor_view<T, R> const& dst, byte_span dst_bytes, tensor_view<V, LR> const& v) {
  if (!overlap(dst_bytes, byte_range(v))) return true;
  bool same = std::is_same_v<std::remove_const_t<V>, std::remove_const_t<T>> &&
              static_cast<void const*>(v.data()) == static_cast<void const*>(dst.data());
  if (same) {
    extents<R> const s = broadcast_strides<R, LR>(v.shape(), v.strides(), dst.shape());
    for (int d = 0; same && d < R; ++d) same = dst.extent(d) == 1 || s[d] == dst.strides()[d];
  }
  return same;
}
template <class T, int R, class V, int LR>
bool reads_in_place(tensor_view<T, R> const& dst, tensor_view<V, LR> const& v) {
  return reads_in_place(dst, byte_range(dst), v);
}

// Whether two views share no memory.
template <class T, int R, class V, int LR>
bool disjoint(tensor_view<T, R> const& a, tensor_view<V, LR> const& b) {
  return !overlap(byte_range(a), byte_range(b));
}

// Whether a leaf and a destination are known apart or the same elements without comparing
// address ranges: both all of one tensor (each tensor owns its allocation alone).
template <class Leaf>
KILN_ALWAYS_INLINE bool whole_tensors(destination kind, Leaf const& leaf_node) noexcept {
  return kind == destination::whole_tensor && leaf_node.whole();
}

// Whether evaluating `root` straight into `dst` could read an element after it was overwritten.
// Two whole tensors are safe: different ones are disjoint, the same one is read element for element.
// (A named, always inlined visitor: every assignment runs this check, and a lambda's call operator
// is left out of line once a translation unit has used up GCC's inlining budget.)
template <class T, int R>
struct unsafe_reads {
  tensor_view<T, R> const& dst;
  destination kind;
  byte_span& dst_bytes;  // computed for the first leaf that needs it
  bool& have_dst_bytes;
  bool& unsafe;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf const& leaf_node) const {
    if (unsafe || whole_tensors(kind, leaf_node)) return;
    if (!have_dst_bytes) dst_bytes = byte_range(dst), have_dst_bytes = true;
    unsafe = !reads_in_place(dst, dst_bytes, leaf_node.view());
  }
};
// A visitor whose call on each leaf is a call, not inlined: one function per leaf type, however
// many leaves of that type the tree has.
template <class F>
struct called_per_leaf {
  F const& f;
  template <class Leaf>
  [[gnu::noinline]] void operator()(Leaf const& leaf_node) const { f(leaf_node); }
};
// A large tree's leaves are checked by such calls: inlined, the 32 checks of the 64-node chain
// (bench/compile) made its assignment a function GCC's early passes took 1.5x as long to compile,
// for a check that runs once per assignment, not per element.
template <class T, int R, class Root>
KILN_ALWAYS_INLINE bool needs_temporary(tensor_view<T, R> const& dst, Root const& root, destination kind) {
  byte_span dst_bytes;
  bool have_dst_bytes = false, unsafe = false;
  unsafe_reads<T, R> const check{dst, kind, dst_bytes, have_dst_bytes, unsafe};
  if constexpr (large_tree<evaluator<Root, R>>)
    for_each_leaf_node(root, called_per_leaf<unsafe_reads<T, R>>{check});
  else
    for_each_leaf_node(root, check);
  return unsafe;
}

}  // namespace kiln::detail

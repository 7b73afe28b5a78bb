// kiln/eval/kernels.hpp: the loops. One overload per policy; the policy tags' inheritance gives
// the fallback (simd -> seq) for trees the vector kernel cannot take.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/policy.hpp>
#include <kiln/eval/plan.hpp>

namespace kiln::detail {

// The reference loop: scalar, any strides, any element types.
template <int R, class T, class Ev>
void run_rows(seq_policy const&, loop_plan<R> const& plan, T* out, Ev& ev) {
  index_t const n = plan.shape[plan.dims - 1];
  index_t const step = plan.out_strides[plan.dims - 1];
  for_each_row(plan, out, ev, [&](T* row) {
    for (index_t i = 0; i < n; ++i) row[i * step] = static_cast<T>(ev.scalar(i));
  });
}

// Whether the vector kernel can run this tree into a destination of type T: the tree has one lane
// type with vector registers, and T is that type, or bool for a predicate.
template <class Node, class T>
inline constexpr bool vectorizable = [] {
  using L = lane_t<Node>;
  if constexpr (std::is_void_v<L> || std::is_same_v<L, mixed_lanes>) {
    return false;
  } else {
    using V = typename Node::value_type;
    return simd_detail::has_batch<L> && std::is_same_v<V, T> && (std::is_same_v<V, L> || std::is_same_v<V, bool>);
  }
}();

template <class Lane, inner_mode Mode, class T, class Ev>
KILN_ALWAYS_INLINE void simd_row(T* row, index_t n, Ev const& ev) {
  constexpr index_t W = simd_detail::batch<Lane>::size;
  index_t i = 0;
  for (; i + W <= n; i += W) ev.template packet<Lane, Mode, false>(i, W).store_unaligned(row + i);
  if (i < n) {  // the tail runs through the same vector code on a zero-padded batch
    alignas(storage_alignment) T buffer[W];
    ev.template packet<Lane, Mode, true>(i, n - i).store_unaligned(buffer);
    std::copy_n(buffer, n - i, row + i);
  }
}

template <int R, class T, class Ev>
void run_rows(simd_policy const& policy, loop_plan<R> const& plan, T* out, Ev& ev) {
  using Node = typename Ev::node_type;
  if constexpr (!vectorizable<Node, T>) {
    run_rows(static_cast<seq_policy const&>(policy), plan, out, ev);
  } else {
    using Lane = lane_t<Node>;
    int const inner = plan.dims - 1;
    bool contiguous = plan.out_strides[inner] == 1, splat_or_contiguous = contiguous;
    for_each_leaf(ev, [&](auto const& leaf) {
      contiguous = contiguous && leaf.strides[inner] == 1;
      splat_or_contiguous = splat_or_contiguous && (leaf.strides[inner] == 1 || leaf.strides[inner] == 0);
    });
    index_t const n = plan.shape[inner];
    if (contiguous)
      for_each_row(plan, out, ev, [&](T* row) { simd_row<Lane, inner_mode::contiguous>(row, n, ev); });
    else if (splat_or_contiguous)
      for_each_row(plan, out, ev, [&](T* row) { simd_row<Lane, inner_mode::mixed>(row, n, ev); });
    else  // strided reads: gathers gain nothing over scalar loads here
      run_rows(static_cast<seq_policy const&>(policy), plan, out, ev);
  }
}

}  // namespace kiln::detail

// kiln/eval/kernels.hpp: the loops. One overload per policy; the policy tags' inheritance gives
// the fallback (simd -> seq) for trees the vector kernel cannot take.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/policy.hpp>
#include <kiln/eval/parallel.hpp>

namespace kiln::detail {

// The reference loop: scalar, any strides, any element types.
template <int R, class T, class Ev>
void run_rows(seq_policy const&, loop_plan<R> const& plan, T* out, Ev& ev) {
  index_t const n = plan.shape[plan.dims - 1];
  index_t const step = plan.out_strides[plan.dims - 1];
  for_each_row(plan, ev, [&](index_t offset, auto const&) {
    T* const row = out + offset;
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

// How the leaves are read along the inner dimension of a plan: all contiguous, each contiguous or
// broadcast (stride 0), or some other stride (gathers gain nothing over scalar loads here).
enum class inner_reads { contiguous, mixed, strided };
struct classify_inner_reads {
  int inner;
  bool& contiguous;
  bool& splat_or_contiguous;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf const& leaf) const noexcept {
    contiguous = contiguous && leaf.strides[inner] == 1;
    splat_or_contiguous = splat_or_contiguous && (leaf.strides[inner] == 1 || leaf.strides[inner] == 0);
  }
};
template <int R, class Ev>
KILN_ALWAYS_INLINE inner_reads leaf_reads(loop_plan<R> const& plan, Ev& ev) {
  bool contiguous = true, splat_or_contiguous = true;
  visit_leaves(ev, classify_inner_reads{plan.dims - 1, contiguous, splat_or_contiguous});
  return contiguous ? inner_reads::contiguous : splat_or_contiguous ? inner_reads::mixed : inner_reads::strided;
}

// One row through the vector code.
template <class Lane, inner_mode Mode, class T, class Ev>
KILN_ALWAYS_INLINE void simd_row(T* row, index_t n, Ev const& shared) {
  // A const local copy: the compiler keeps its pointers in registers instead of reloading them
  // after every store, which it must do for an object it cannot prove the stores miss, and can
  // take the mixed mode's per-leaf stride tests out of the loop. When `shared` is itself a local
  // that never escapes (run_rows below), the copy costs nothing: it becomes the few fields the
  // row reads.
  Ev const ev = shared;
  constexpr index_t W = simd_detail::batch<Lane>::size;
  index_t i = 0;
  for (; i + W <= n; i += W) ev.template packet<Lane, Mode, false>(i, W).store_unaligned(row + i);
  if (i < n) {  // the tail runs through the same vector code on a zero-padded batch
    alignas(storage_alignment) T buffer[W];
    ev.template packet<Lane, Mode, true>(i, n - i).store_unaligned(buffer);
    std::copy_n(buffer, n - i, row + i);
  }
}

// The pointer, with what the compiler knows of the object behind it forgotten. When a small array
// of known size is assigned, GCC would otherwise propagate its size into the vector loop and warn
// (-Warray-bounds) about the batch stores of a loop that never runs for it.
template <class T>
KILN_ALWAYS_INLINE T* opaque(T* p) noexcept {
#if defined(__GNUC__)
  __asm__("" : "+r"(p));
#endif
  return p;
}

// The vector kernel. Inline, as are make_plan, for_each_row and the leaf visits, and the planners
// see copies of the strides: the evaluator of assign.hpp's run stays a local of run whose address
// never leaves it, so the compiler knows the stores to the destination miss it. The evaluator is
// then never copied whole, neither per assignment nor per row: for_each_row steps its leaves'
// pointers in place and simd_row reads the few fields a row needs.
template <int R, class T, class Ev>
KILN_ALWAYS_INLINE void run_rows(simd_policy const& policy, loop_plan<R> const& plan, T* out, Ev& ev) {
  using Node = typename Ev::node_type;
  out = opaque(out);
  if constexpr (!vectorizable<Node, T>) {
    run_rows(static_cast<seq_policy const&>(policy), plan, out, ev);
  } else {
    using Lane = lane_t<Node>;
    index_t const n = plan.shape[plan.dims - 1];
    inner_reads const reads = plan.out_strides[plan.dims - 1] == 1 ? leaf_reads(plan, ev) : inner_reads::strided;
    if (reads == inner_reads::contiguous) {
      for_each_row(plan, ev, [&](index_t offset, auto const&) { simd_row<Lane, inner_mode::contiguous>(out + offset, n, ev); });
    } else if (reads == inner_reads::mixed) {
      for_each_row(plan, ev, [&](index_t offset, auto const&) { simd_row<Lane, inner_mode::mixed>(out + offset, n, ev); });
    } else {
      Ev copy = ev;  // the scalar loop is a call: only the copy's address leaves this function
      run_rows(static_cast<seq_policy const&>(policy), plan, out, copy);
    }
  }
}

// All cores: each thread runs its part of the plan through the single-threaded vector kernel, on
// its own copy of the evaluator. Elementwise results are the same, bit for bit, as kiln::simd's.
template <int R, class T, class Ev>
void run_rows(par_policy const& policy, loop_plan<R> const& plan, T* out, Ev& ev) {
  simd_policy const& single = policy;
  int const threads = par_threads(plan_rows(plan) * plan.shape[plan.dims - 1]);
  if (threads == 1) return inline_tree<Ev>([&]() KILN_INLINE_LAMBDA { run_rows(single, plan, out, ev); });
  par_run(threads, [&](int part, int parts) {
    plan_part const mine = split_plan(plan, part, parts, sizeof(T));
    if (mine.count == 0) return;
    loop_plan<R> narrowed = plan;
    Ev local = ev;
    T* local_out = out;
    narrow_to(mine, narrowed, local, local_out);
    inline_tree<Ev>([&]() KILN_INLINE_LAMBDA { run_rows(single, narrowed, local_out, local); });
  });
}

}  // namespace kiln::detail

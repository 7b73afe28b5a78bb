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
    for (index_t i = 0; i < n; ++i) row[i * step] = convert<T>(ev.scalar(i));
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

// Makes each leaf's inner stride a value defined just before the row's loop, for the `mixed`
// loop's per-batch tests of it. GCC splits a loop on a test of a loop-invariant value (one loop
// per combination of contiguous and broadcast leaves; its own size limits keep large trees to one
// loop) only if it can prove the value defined whenever the loop runs: a test in the loop's first
// block always passes, a later one only if the value traces back to definitions that dominate the
// loop. The strides come through the row stepping and the planners as merges of loads on several
// paths, so GCC split W4's row loop on the first of its three leaves only and kept two tests and
// branches per batch (on an Intel Xeon, 1.5x the hand loop's time per row). An empty asm hands the
// loop fresh values and GCC splits it on every leaf.
struct fresh_inner_stride {
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf& leaf) const noexcept {
#if defined(__GNUC__)
    __asm__("" : "+r"(leaf.inner));
#endif
  }
};

// Whether simd_row unrolls its loop (four batches per step): for trees of a few nodes, whose
// batches cost a few instructions each, so that the loop's own compare and branch are a large part
// of them (W4's relu(A + b) * c, W1). A larger tree's body is long enough without, and unrolled it
// would cost compile time and code for no gain. The compiler unrolls (KILN_UNROLL), after it has
// split the mixed loop on the leaves' strides: four batches written out per step made the body too
// large for that split, left a stride test and branch per leaf per batch, and took W4 at 1K from
// 34 to 43 ns.
inline constexpr std::size_t unrolled_nodes = 8;
template <class Ev>
inline constexpr bool unrolled_rows = false;
template <class Node, int R>
inline constexpr bool unrolled_rows<evaluator<Node, R>> = subtree_nodes<evaluator<Node, R>> <= unrolled_nodes;

// One row through the vector code.
template <class Lane, inner_mode Mode, class T, class Ev>
KILN_ALWAYS_INLINE void simd_row(T* row, index_t n, Ev const& shared) {
  // A local copy: the compiler keeps its pointers in registers instead of reloading them after
  // every store, which it must do for an object it cannot prove the stores miss, and can take the
  // mixed mode's per-leaf stride tests out of the loop. When `shared` is itself a local that never
  // escapes (run_rows below), the copy costs nothing: it becomes the few fields the row reads.
  Ev ev = shared;
  if constexpr (Mode == inner_mode::mixed && requires { Ev::is_leaf; })  // (softmax_plan_rows takes it for its steps)
    visit_leaves(ev, fresh_inner_stride{});
  constexpr index_t W = simd_detail::batch<Lane>::size;
  index_t i = 0;
  if constexpr (large_tree<Ev>) {
    // One copy of the tree's code for the whole row, its tail included, rather than one for the
    // whole batches and one for the tail: the 64-node chain's object shrank by a fifth and its
    // compile by as much (Zen 4), at the cost of a predicted length test per leaf per step.
    for (; i < n; i += W) {
      index_t const left = n - i;
      auto const p = ev.template packet<Lane, Mode, batch_cover::whole_or_tail>(i, left < W ? left : W);
      // The store tests left >= W, not the leaves' n == W: given one test throughout, GCC threads
      // it through every load and compiles the tree twice again (the 64-node chain's code 107 ->
      // 127 KB with a store_covered beside load_covered).
      if (left >= W) p.store_unaligned(row + i);
      else simd_detail::store_partial(row + i, p, std::size_t(left));
    }
  } else {
    if constexpr (unrolled_rows<Ev>) {
      KILN_UNROLL(4)
      for (; i + W <= n; i += W) ev.template packet<Lane, Mode, batch_cover::whole>(i, W).store_unaligned(row + i);
    } else {
      for (; i + W <= n; i += W) ev.template packet<Lane, Mode, batch_cover::whole>(i, W).store_unaligned(row + i);
    }
    if (i < n)  // the tail runs through the same vector code on a zero-padded batch
      simd_detail::store_partial(row + i, ev.template packet<Lane, Mode, batch_cover::tail>(i, n - i), std::size_t(n - i));
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

// Rank 2 under kiln::simd: everything the `mixed` row loop reads, without a plan. That is rows that
// do not merge, the destination and each leaf contiguous or broadcast along them (the common
// broadcasting case, W4's `relu(A + b) * c` with b [C] and c [R, 1]; a single row counts, a
// [1, C] destination with some leaf broadcast along it: one row of the same loop, without the flat
// plan's stride gathering and rewriting, took W4's expression over one row of 256 from 22 to 16
// ns), and one flat row (make_flat_plan's case: the destination and every leaf contiguous over
// the whole shape or broadcasting a single element, `x - y`, `A * s` with s a rank-0 tensor; through
// the general path, with its second evaluator and plan, `x - 1.5f` over [1, 16] took 23 ns against
// 8 at rank 1, and over [4, 256] 44 against 33).
// The same loop as run_rows over make_plan's plan, with the rows read straight from the
// destination and each leaf stepping by its row stride. `ev` is a local of the caller that
// nothing indexes by a run-time dimension, so the compiler keeps it in registers: the planner and
// for_each_row index the general path's evaluator by run-time dimensions, which keeps that one in
// memory, and at W4's 1K elements its stores were a sixth of the call. Returns false, having run
// nothing, otherwise: what remains reads with strides or is a single element, and the general
// path runs it in the scalar loop, so a rank-2 expression compiles one vector loop.
struct leaf_rows_readable {
  index_t n;
  bool& readable;
  bool& mergeable;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf const& leaf) const noexcept {
    readable = readable && (leaf.strides[1] == 1 || leaf.strides[1] == 0);
    mergeable = mergeable && leaf.strides[0] == leaf.strides[1] * n;
  }
};
// A flat row's leaf strides (make_flat_plan's, in dimension 0) as a rank-2 row's: rows = 1.
template <std::size_t N>
struct flat_row_strides {
  leaf_strides<2, N> const& from;
  std::size_t& k;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf& leaf) const noexcept { leaf.strides = {0, from[k++][0]}; }
};
// The rows loop of run_two_dimensional and run_planned_rows: `rows` rows of n elements, row r at
// out + r * step, through the `mixed` loop, each leaf stepping by its strides[0] to the next row.
template <class Lane, class T, class Ev>
KILN_ALWAYS_INLINE void simd_rows(T* out, index_t step, index_t rows, index_t n, Ev& ev) {
  for (index_t r = 0;;) {
    simd_row<Lane, inner_mode::mixed>(out + r * step, n, ev);
    if (++r == rows) return;
    visit_leaves(ev, next_leaf_rows{0});
  }
}
template <class T, class Ev>
KILN_ALWAYS_INLINE bool run_two_dimensional(tensor_view<T, 2> const& dst, Ev& ev) {
  using Node = typename Ev::node_type;
  if constexpr (!vectorizable<Node, T>) {
    return false;
  } else {
    index_t rows = dst.extent(0), n = dst.extent(1), step = dst.strides()[0];
    bool readable = dst.strides()[1] == 1 && n > 1, mergeable = step == n;
    visit_leaves(ev, leaf_rows_readable{n, readable, mergeable});
    if (readable && mergeable) {
      // Rows that continue one another in the destination and every leaf (tensors of one shape,
      // or a leaf broadcasting one element) are one row, each leaf read at its inner stride.
      n *= rows, rows = 1;
    } else if (!readable) {  // one flat row, if the general flat plan finds one
      constexpr std::size_t N = Ev::leaf_count;
      leaf_strides<2, N> strides;
      std::size_t k = 0;
      visit_leaves(ev, gather_strides<2, N>{strides, k});
      loop_plan<2> flat;
      // (A single element plans with stride 0, which the general path's kernels read as strided:
      // it runs there, in the scalar loop, as under kiln::par.)
      if (!make_flat_plan<2>(dst.shape(), dst.strides(), strides, flat) || flat.out_strides[0] == 0) return false;
      k = 0;
      visit_leaves(ev, flat_row_strides<N>{strides, k});
      rows = 1, n = flat.shape[0];
    }
    visit_leaves(ev, start_leaf_rows<2>{plan_strides<2>{}, 1});
    simd_rows<lane_t<Node>>(opaque(dst.data()), step, rows, n, ev);
    return true;
  }
}

// Rank 3 and more under kiln::simd: every plan the `mixed` row loop reads (the destination
// contiguous along its rows, each leaf contiguous or broadcast along them), run as
// run_two_dimensional runs rank 2, on an evaluator of its own that stays in registers: each leaf
// keeps just the two strides the rows read, the step from row to row (slot 0) and along a row
// (slot 1), at positions fixed at compile time. The plan, the general planner's over an array of
// the leaves' strides, can have more dimensions than rows and columns (`A + b * c` with b
// [1, R, 1] and c [B, 1, C] merges nothing); those outer dimensions go by an odometer over that
// array, which points each leaf at the start of every run of rows. Through the general path, whose
// evaluator the planner and for_each_row index by run-time dimensions and so keep in memory, W4's
// expression over [2, 2, 256] took 67 ns against 32 at rank 2. It takes contiguous plans too (one
// flat row runs the `mixed` loop's version without a broadcast leaf, as fast as the `contiguous`
// loop), so above rank 2 the general path keeps only its scalar loop, for strided reads and single
// elements, for which this returns false, having run nothing.
template <int R, std::size_t N>
struct rows_of_plan {
  leaf_strides<R, N> const& from;
  std::size_t& k;
  int last, inner;  // the plan's innermost outer dimension (-1 for a single row) and its inner one
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf& leaf) const noexcept {
    auto const& s = from[k++];
    leaf.strides[0] = last >= 0 ? s[last] : 0;
    leaf.strides[1] = s[inner];
  }
};
template <int R, std::size_t N>
struct start_planned_rows {
  leaf_strides<R, N> const& strides;
  plan_strides<R> const& index;
  int outer;  // the plan's dimensions outside the rows
  std::size_t& k;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf& leaf) const noexcept {
    auto const& s = strides[k++];
    index_t offset = 0;
    for (int d = 0; d < outer; ++d) offset += index[d] * s[d];
    leaf.start_rows_at(offset);
  }
};
template <class T, int R, class Ev>
KILN_ALWAYS_INLINE bool run_planned_rows(tensor_view<T, R> const& dst, Ev& ev) {
  using Node = typename Ev::node_type;
  if constexpr (R < 3 || !vectorizable<Node, T>) {
    return false;
  } else {
    constexpr std::size_t N = Ev::leaf_count;
    leaf_strides<R, N> strides;
    std::size_t k = 0;
    visit_leaves(ev, gather_strides<R, N>{strides, k});
    loop_plan<R> plan;
    // (What make_flat_plan takes, plan_merged_outer takes too, but rows of a single element.)
    if (!plan_merged_outer<R>(dst.shape(), dst.strides(), strides, plan))
      merge_plan<R>(dst.shape(), dst.strides(), strides, plan);
    int const inner = plan.dims - 1, last = inner - 1;
    index_t const n = plan.shape[inner];
    // (A single element plans with stride 0: the general path's scalar loop, as at rank 2.)
    if (plan.out_strides[inner] != 1 || n <= 1) return false;
    bool readable = true;
    for (auto const& s : strides) readable = readable && (s[inner] == 0 || s[inner] == 1);
    if (!readable) return false;
    k = 0;
    visit_leaves(ev, rows_of_plan<R, N>{strides, k, last, inner});
    index_t const rows = last >= 0 ? plan.shape[last] : 1, step = last >= 0 ? plan.out_strides[last] : 0;
    index_t runs = 1;
    for (int d = 0; d < last; ++d) runs *= plan.shape[d];
    using Lane = lane_t<Node>;
    T* const out = opaque(dst.data());
    plan_strides<R> index{};
    for (index_t run = 0; run < runs; ++run) {
      index_t offset = 0;
      for (int d = 0; d < last; ++d) offset += index[d] * plan.out_strides[d];
      k = 0;
      visit_leaves(ev, start_planned_rows<R, N>{strides, index, last, k});
      simd_rows<Lane>(out + offset, step, rows, n, ev);
      for (int d = last - 1; d >= 0 && ++index[d] == plan.shape[d]; --d) index[d] = 0;
    }
    return true;
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

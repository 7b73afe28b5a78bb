// kiln/eval/plan.hpp: the loop planner, as ATen's TensorIterator: gather every operand's strides
// broadcast to the output shape, drop extent-1 dimensions, merge dimensions that are contiguous
// for every operand, and leave the innermost dimension for the kernel's inner loop.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/eval/evaluator.hpp>

#include <array>
#include <tuple>
#include <utility>

namespace kiln::detail {

template <int R>
struct loop_plan {
  int dims = 1;                      // planned dimensions, >= 1; the last is the inner loop
  plan_strides<R> shape{};           // planned extents
  plan_strides<R> out_strides{};     // the destination's strides, planned
  // The rows for_each_row runs, in row-major order over the outer dimensions: all of them, or
  // (kiln::par's part of a plan) row_count >= 0 rows from first_row on.
  index_t first_row = 0;
  index_t row_count = -1;
};

// The leaves' strides, gathered into an array for planning and written back afterwards. The
// planners work on the array, never on pointers into the evaluator: its address must not leave
// the function that runs the loop (see run_rows in kernels.hpp), and they depend only on R and
// the number of leaves, not on the tree, so one instance serves every expression of that rank and
// leaf count.
template <int R, std::size_t N>
using leaf_strides = std::array<plan_strides<R>, N>;

// The common case, without the general merging below: the destination and every leaf contiguous
// over the whole shape (extent-1 dimensions aside), each leaf reading the destination's elements
// in order or broadcasting a single element. Plans the one flat row that the merging would find
// (a single element plans with stride 0, as there) and returns true; otherwise returns false and
// changes nothing.
template <int R, std::size_t N>
KILN_ALWAYS_INLINE bool make_flat_plan(extents<R> const& shape, extents<R> const& out_strides,
                                       leaf_strides<R, N>& leaves, loop_plan<R>& plan) {
  index_t size = 1;
  int innermost = 0;  // the innermost dimension of extent > 1, if any
  bool flat = true;
  for (int d = R - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (size == 1) innermost = d;
    flat = flat && out_strides[d] == size;
    size *= shape[d];
  }
  for (auto const& s : leaves) {
    bool same = true, splat = true;
    for (int d = 0; d < R; ++d) {
      same = same && (shape[d] == 1 || s[d] == out_strides[d]);
      splat = splat && (shape[d] == 1 || s[d] == 0);
    }
    flat = flat && (same || splat);
  }
  if (!flat) return false;
  index_t const unit = size > 1 ? 1 : 0;
  plan.dims = 1;
  plan.shape[0] = size;
  plan.out_strides[0] = unit;
  for (auto& s : leaves) s[0] = s[innermost] != 0 ? unit : 0;
  return true;
}

// The general planner: drops extent-1 dimensions, merges adjacent dimensions that are contiguous
// for the destination and every leaf, and moves the planned dimensions to the front of every
// stride array.
template <int R, std::size_t N>
void merge_plan(extents<R> const& shape, extents<R> const& out_strides, leaf_strides<R, N>& leaves,
                loop_plan<R>& plan) {
  plan_strides<R> dst{};
  for (int d = 0; d < R; ++d) dst[d] = out_strides[d];
  int kept = 0;  // dimensions written so far, innermost first into slot `plan_dims<R> - 1 - kept`
  auto slot = [&](int k) { return plan_dims<R> - 1 - k; };
  for (int d = R - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (kept > 0) {
      int const inner = slot(kept - 1);
      index_t const step = plan.shape[inner];
      bool mergeable = dst[d] == plan.out_strides[inner] * step;
      for (auto const& s : leaves) mergeable = mergeable && s[d] == s[inner] * step;
      if (mergeable) {
        plan.shape[inner] *= shape[d];
        continue;
      }
    }
    int const k = slot(kept++);
    plan.shape[k] = shape[d];
    plan.out_strides[k] = dst[d];
    for (auto& s : leaves) s[k] = s[d];
  }
  if (kept == 0) {  // a single element
    kept = 1;
    plan.shape[slot(0)] = 1;
    plan.out_strides[slot(0)] = 0;
    for (auto& s : leaves) s[slot(0)] = 0;
  }
  // Shift the planned dimensions to the front.
  int const first = plan_dims<R> - kept;
  for (int k = 0; k < kept; ++k) {
    plan.shape[k] = plan.shape[first + k];
    plan.out_strides[k] = plan.out_strides[first + k];
    for (auto& s : leaves) s[k] = s[first + k];
  }
  plan.dims = kept;
}

// The next most common case, rank 2 that neither the flat plan nor a merge simplifies (a leaf
// broadcast along the rows or the columns, W4's `relu(A + b) * c`): the planned dimensions are the
// destination's own and the leaves' strides need no rewriting. Inline, without merge_plan's call
// and the copies back into the leaves. Returns false, and changes nothing, otherwise.
template <int R, std::size_t N>
KILN_ALWAYS_INLINE bool plan_two_dimensions(extents<R> const& shape, extents<R> const& out_strides,
                                            leaf_strides<R, N> const& leaves, loop_plan<R>& plan) {
  if constexpr (R != 2) {
    return false;
  } else {
    if (shape[0] == 1 || shape[1] == 1) return false;
    bool mergeable = out_strides[0] == out_strides[1] * shape[1];
    for (auto const& s : leaves) mergeable = mergeable && s[0] == s[1] * shape[1];
    if (mergeable) return false;
    plan.dims = 2;
    plan.shape = shape;
    plan.out_strides = out_strides;
    return true;
  }
}

// Rank 3 and more whose outer dimensions (all but the last) merge into one for the destination and
// every leaf: batched tensors, [B, T, C] with leaves of [B, T, C], [C] or [B, T, 1]. Plans what
// merge_plan would, one flat row or rows of the last dimension, inline: without its call, its
// passes over the stride arrays and the shift to their front (W4's expression over [2, 2, 256] on
// a Zen 3 host: 107 -> 95 ns, against 71 at rank 2). Returns false, changing nothing, when an
// outer dimension does not merge or the last has a single element (merge_plan then drops it).
template <int R, std::size_t N>
KILN_ALWAYS_INLINE bool plan_merged_outer(extents<R> const& shape, extents<R> const& out_strides,
                                          leaf_strides<R, N>& leaves, loop_plan<R>& plan) {
  static_assert(R >= 3);
  index_t const n = shape[R - 1];
  if (n <= 1) return false;
  index_t rows = 1, step = 0;
  std::array<index_t, N> between{};  // each leaf's stride from row to row
  for (int d = R - 2; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (rows == 1) {
      step = out_strides[d];
      for (std::size_t k = 0; k < N; ++k) between[k] = leaves[k][d];
    } else {
      bool merges = out_strides[d] == step * rows;
      for (std::size_t k = 0; k < N; ++k) merges = merges && leaves[k][d] == between[k] * rows;
      if (!merges) return false;
    }
    rows *= shape[d];
  }
  // Rows that continue one another for every operand are one row.
  bool flat = step == out_strides[R - 1] * n;
  for (std::size_t k = 0; k < N; ++k) flat = flat && between[k] == leaves[k][R - 1] * n;
  flat = flat || rows == 1;
  if (flat) {
    plan.dims = 1;
    plan.shape[0] = rows * n;
    plan.out_strides[0] = out_strides[R - 1];
    for (auto& s : leaves) s[0] = s[R - 1];
  } else {
    plan.dims = 2;
    plan.shape[0] = rows;
    plan.shape[1] = n;
    plan.out_strides[0] = step;
    plan.out_strides[1] = out_strides[R - 1];
    for (std::size_t k = 0; k < N; ++k) leaves[k][1] = leaves[k][R - 1], leaves[k][0] = between[k];
  }
  return true;
}

// for_each_leaf, always inlined (so that the evaluator can stay a local of the function that runs
// the loop, see run_rows in kernels.hpp), and used with named function objects rather than
// lambdas: those are instantiated once per tree, not once per calling function.
template <class Ev, class F>
KILN_ALWAYS_INLINE void visit_leaves(Ev& ev, F const& f);
template <class Ev, class F, std::size_t... I>
KILN_ALWAYS_INLINE void visit_leaf_children(Ev& ev, F const& f, std::index_sequence<I...>) {
  (visit_leaves(slot<I>(ev.args), f), ...);
}
template <class Ev, class F>
KILN_ALWAYS_INLINE void visit_leaves(Ev& ev, F const& f) {
  if constexpr (Ev::is_leaf)
    f(ev);
  else if constexpr (requires { ev.args; })
    visit_leaf_children(ev, f, std::make_index_sequence<pack_size_v<decltype(ev.args)>>{});
}

template <int R, std::size_t N>
struct gather_strides {
  leaf_strides<R, N>& to;
  std::size_t& k;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf const& leaf) const noexcept { to[k++] = leaf.strides; }
};
template <int R, std::size_t N>
struct scatter_strides {
  leaf_strides<R, N> const& from;
  std::size_t& k;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf& leaf) const noexcept { leaf.strides = from[k++]; }
};

// Gathers the strides of the leaves under `ev` into an array, lets plan(strides) rewrite them,
// and writes them back when it returns true (false: the leaves stay as they were).
template <int R, class Ev, class Plan>
KILN_ALWAYS_INLINE bool replan_leaf_strides(Ev& ev, Plan const& plan) {
  constexpr std::size_t N = Ev::leaf_count;
  leaf_strides<R, N> strides;
  std::size_t k = 0;
  visit_leaves(ev, gather_strides<R, N>{strides, k});
  if (!plan(strides)) return false;
  k = 0;
  visit_leaves(ev, scatter_strides<R, N>{strides, k});
  return true;
}

// Plans the loop for a destination of `shape`/`out_strides` and the leaves under `ev`, and
// rewrites every leaf's strides into the planned dimensions. Inline: the common flat case costs a
// few compares at the call; only the general merging is a call.
template <int R, class Ev>
KILN_ALWAYS_INLINE loop_plan<R> make_plan(extents<R> const& shape, extents<R> const& out_strides, Ev& ev) {
  loop_plan<R> plan;
  replan_leaf_strides<R>(ev, [&](auto& strides) {
    if (make_flat_plan<R>(shape, out_strides, strides, plan)) return true;
    if (plan_two_dimensions<R>(shape, out_strides, strides, plan)) return false;  // the leaves stay as they are
    merge_plan<R>(shape, out_strides, strides, plan);
    return true;
  });
  return plan;
}

// What for_each_row does to every leaf: point it at the row `index` (the first row, and after a
// carry into a further outer dimension), or move it one row along the innermost outer dimension
// `dim`.
template <int R>
struct start_leaf_rows {
  plan_strides<R> const& index;
  int outer_dims;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf& leaf) const noexcept { leaf.start_row(index, outer_dims); }
};
struct next_leaf_rows {
  int dim;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf& leaf) const noexcept { leaf.next_row(dim); }
};

// Runs body(offset, index) for every row of the plan (or of its part), in row-major order:
// `index` holds the outer dimensions' indices and `offset` the destination's element offset of the
// row, after pointing every leaf at it. Along the innermost outer dimension (every row but the
// first, in 2-D) the offset and the leaves' row pointers only step by that dimension's strides;
// the first row and each carry into a further dimension compute them from the indices. A plan of
// empty rows runs nothing (the leaves read each row's first element, evaluator.hpp).
template <int R, class Ev, class Body>
KILN_ALWAYS_INLINE void for_each_row(loop_plan<R> const& plan, Ev& ev, Body&& body) {
  if (plan.shape[plan.dims - 1] == 0) return;  // empty rows: nothing to run, no first element to read
  int const outer = plan.dims - 1;
  int const last = outer - 1;  // the innermost outer dimension; -1 when the plan is one row
  index_t const rows = outer > 0 ? plan.shape[last] : 1;
  index_t const step = outer > 0 ? plan.out_strides[last] : 0;
  plan_strides<R> index{};
  index_t left = plan.row_count;
  if (left < 0) {
    left = 1;
    for (int d = 0; d < outer; ++d) left *= plan.shape[d];
  }
  if (plan.first_row != 0) {  // kiln::par's parts; every other plan starts at index 0, without a division
    for (index_t r = plan.first_row, d = last; d >= 0; --d) {
      index[d] = r % plan.shape[d];
      r /= plan.shape[d];
    }
  }
  while (left > 0) {
    index_t offset = 0;
    for (int d = 0; d < outer; ++d) offset += index[d] * plan.out_strides[d];
    visit_leaves(ev, start_leaf_rows<R>{index, outer});
    for (index_t r = outer > 0 ? index[last] : 0;;) {
      body(offset, std::as_const(index));
      if (--left == 0 || ++r == rows) break;
      index[last] = r;
      offset += step;
      visit_leaves(ev, next_leaf_rows{last});
    }
    if (left == 0) return;
    index[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      if (++index[d] < plan.shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace kiln::detail

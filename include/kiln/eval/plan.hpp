// kiln/eval/plan.hpp: the loop planner, as ATen's TensorIterator: gather every operand's strides
// broadcast to the output shape, drop extent-1 dimensions, merge dimensions that are contiguous
// for every operand, and leave the innermost dimension for the kernel's inner loop.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/eval/evaluator.hpp>

#include <array>
#include <utility>

namespace kiln::detail {

template <int R>
struct loop_plan {
  int dims = 1;                      // planned dimensions, >= 1; the last is the inner loop
  plan_strides<R> shape{};           // planned extents
  plan_strides<R> out_strides{};     // the destination's strides, planned
};

// Plans the loop for a destination of `shape`/`out_strides` and the leaves under `ev`, and
// rewrites every leaf's strides into the planned dimensions.
template <int R, class Ev>
loop_plan<R> make_plan(extents<R> const& shape, extents<R> const& out_strides, Ev& ev) {
  // Operand 0 is the destination, then the leaves in visiting order.
  std::array<plan_strides<R>*, Ev::leaf_count> leaves{};
  std::size_t n = 0;
  for_each_leaf(ev, [&](auto& leaf) { leaves[n++] = &leaf.strides; });
  plan_strides<R> dst{};
  std::copy(out_strides.begin(), out_strides.end(), dst.begin());

  loop_plan<R> plan;
  int kept = 0;  // dimensions written so far, innermost first into slot `plan_dims<R> - 1 - kept`
  auto slot = [&](int k) { return plan_dims<R> - 1 - k; };
  for (int d = R - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (kept > 0) {
      int const inner = slot(kept - 1);
      index_t const step = plan.shape[inner];
      bool mergeable = dst[d] == plan.out_strides[inner] * step;
      for (auto* s : leaves) mergeable = mergeable && (*s)[d] == (*s)[inner] * step;
      if (mergeable) {
        plan.shape[inner] *= shape[d];
        continue;
      }
    }
    int const k = slot(kept++);
    plan.shape[k] = shape[d];
    plan.out_strides[k] = dst[d];
    for (auto* s : leaves) (*s)[k] = (*s)[d];
  }
  if (kept == 0) {  // a single element
    kept = 1;
    plan.shape[slot(0)] = 1;
    plan.out_strides[slot(0)] = 0;
    for (auto* s : leaves) (*s)[slot(0)] = 0;
  }
  // Shift the planned dimensions to the front.
  int const first = plan_dims<R> - kept;
  for (int k = 0; k < kept; ++k) {
    plan.shape[k] = plan.shape[first + k];
    plan.out_strides[k] = plan.out_strides[first + k];
    for (auto* s : leaves) (*s)[k] = (*s)[first + k];
  }
  plan.dims = kept;
  return plan;
}

// Runs body(offset, index) for every row of the plan: `index` holds the outer dimensions' indices
// and `offset` the destination's element offset of the row, after pointing every leaf at it.
template <int R, class Ev, class Body>
void for_each_row(loop_plan<R> const& plan, Ev& ev, Body&& body) {
  int const outer = plan.dims - 1;
  plan_strides<R> index{};
  for (;;) {
    index_t offset = 0;
    for (int d = 0; d < outer; ++d) offset += index[d] * plan.out_strides[d];
    for_each_leaf(ev, [&](auto& leaf) { leaf.start_row(index, outer); });
    body(offset, std::as_const(index));
    int d = outer - 1;
    for (; d >= 0; --d) {
      if (++index[d] < plan.shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace kiln::detail

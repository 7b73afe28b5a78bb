// kiln/eval/parallel.hpp: what kiln::par needs to split a planned loop across threads: how many
// threads a loop is worth, the OpenMP region, and the part of a plan each thread runs.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/eval/plan.hpp>

#include <algorithm>
#include <utility>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace kiln::detail {

// The fewest elements worth a thread: below 2 * par_grain a loop runs on the calling thread,
// where waking a second one (about a microsecond) would cost more than it saves.
inline constexpr index_t par_grain = index_t(1) << 15;

// How many threads kiln::par gives a loop of `work` elements: one per par_grain elements, at most
// OpenMP's thread count, and one inside an enclosing parallel region (no nested teams). Without
// OpenMP, always one.
inline int par_threads([[maybe_unused]] index_t work) noexcept {
#if defined(_OPENMP)
  if (omp_in_parallel()) return 1;
  return static_cast<int>(std::clamp<index_t>(work / par_grain, 1, omp_get_max_threads()));
#else
  return 1;
#endif
}

// Runs body(part, parts) on `threads` threads, part = 0 .. parts - 1; parts can come out lower
// than asked for when OpenMP gives a smaller team. body must not throw.
template <class Body>
void par_run(int threads, Body const& body) {
#if defined(_OPENMP)
  if (threads > 1) {
    _Pragma("omp parallel num_threads(threads)") body(omp_get_thread_num(), omp_get_num_threads());
    return;
  }
#endif
  (void)threads;
  body(0, 1);
}

// Part `part` of `parts` near-equal contiguous pieces of [0, size), its ends on multiples of
// `align` (except the last end): the pieces of a row then meet on cache-line boundaries, so two
// threads never write the same line of the destination.
inline std::pair<index_t, index_t> piece(index_t size, int part, int parts, index_t align = 1) noexcept {
  auto const end = [&](int k) {
    if (k == parts) return size;
    index_t const e = size / parts * k + std::min<index_t>(k, size % parts);
    return std::min(size, (e + align - 1) / align * align);
  };
  return {end(part), end(part + 1)};
}

// Elements of `element_size` bytes in a cache line (64 bytes), the unit column parts are cut in.
inline constexpr index_t line_elements(index_t element_size) noexcept {
  return std::max<index_t>(1, 64 / element_size);
}

// The number of rows of a plan: the product of its outer extents.
template <int R>
index_t plan_rows(loop_plan<R> const& plan) noexcept {
  index_t rows = 1;
  for (int d = 0; d < plan.dims - 1; ++d) rows *= plan.shape[d];
  return rows;
}

// What a thread runs of a plan: rows [first_row, first_row + row_count), or columns
// [first_column, first_column + column_count) of every row.
struct plan_part {
  bool by_rows;
  index_t first, count;
};

// Splits a plan for `parts` threads: by rows when there are enough of them to balance, otherwise
// by columns, in pieces of whole cache lines of the destination.
template <int R>
plan_part split_plan(loop_plan<R> const& plan, int part, int parts, index_t element_size) noexcept {
  index_t const rows = plan_rows(plan);
  bool const by_rows = rows >= 4 * index_t(parts);
  auto const [b, e] = by_rows ? piece(rows, part, parts)
                               : piece(plan.shape[plan.dims - 1], part, parts, line_elements(element_size));
  return {by_rows, b, e - b};
}

// Moves every leaf `count` columns along the plan's inner dimension `inner`.
struct skip_leaf_columns {
  int inner;
  index_t count;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf& leaf) const noexcept { leaf.skip_columns(inner, count); }
};

// Narrows `plan`, the leaves under `ev` and `out` (the destination, when there is one) to a part.
template <int R, class Ev, class T>
void narrow_to(plan_part const& part, loop_plan<R>& plan, Ev& ev, T*& out) noexcept {
  if (part.by_rows) {
    plan.first_row = part.first;
    plan.row_count = part.count;
  } else {
    int const inner = plan.dims - 1;
    visit_leaves(ev, skip_leaf_columns{inner, part.first});
    if (out) out += part.first * plan.out_strides[inner];
    plan.shape[inner] = part.count;
  }
}

}  // namespace kiln::detail

// kiln/core/extents.hpp: extents (shapes), strides and PyTorch/NumPy broadcasting.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/config.hpp>
#include <kiln/core/error.hpp>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>

namespace kiln {

// The extents of a rank-R tensor, outermost dimension first. The rank is a compile-time constant;
// the extents are run-time values.
//
// The functions below take std::array<index_t, N> with N a std::size_t, not extents<R>: an int R
// cannot be deduced from std::array's size_t parameter, and `kiln::element_count(t.shape())`
// should work without spelling the rank.
template <int R>
using extents = std::array<index_t, R>;

// "[3, 4]"; "[]" for rank 0.
inline std::string shape_string(std::span<const index_t> shape) {
  std::string s = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d != 0) s += ", ";
    s += std::to_string(shape[d]);
  }
  return s + "]";
}

// Throws shape_error("cannot broadcast [3, 4] with [5]"). Out of line and cold: callers keep
// only a call on their error path (and GCC's inliner no longer trips -Wrestrict inside
// std::string there).
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_broadcast_error(std::initializer_list<std::span<const index_t>> shapes) {
  std::string message = "cannot broadcast";
  bool first = true;
  for (auto const& shape : shapes) message += (std::exchange(first, false) ? " " : " with ") + shape_string(shape);
  throw shape_error(message);
}

template <std::size_t R>
constexpr index_t element_count(std::array<index_t, R> const& shape) noexcept {
  index_t n = 1;
  for (index_t e : shape) n *= e;
  return n;
}

namespace detail {
// The element count of a shape that is about to be used (a new tensor, an expanded view,
// broadcast_extents, a reduction's argument): throws shape_error for a negative extent or when
// the product of the non-zero extents overflows index_t, as PyTorch refuses [0, 2^62, 2^62] too.
// element_count above takes shapes that passed it, or that a destination which passed it bounds
// (an elementwise node's shape is not counted: see docs/architecture.md, Errors).
template <std::size_t R>
index_t checked_count(std::array<index_t, R> const& shape) {
  index_t n = 1;
  bool empty = false;
  for (index_t e : shape) {
    if (e < 0) throw shape_error("negative extent in shape " + shape_string(shape));
    if (e == 0) empty = true;
    else if (__builtin_mul_overflow(n, e, &n))
      throw shape_error("shape " + shape_string(shape) + " has more elements than index_t can count");
  }
  return empty ? 0 : n;
}
}  // namespace detail

// a == b, element by element. (std::array's operator== is a memcmp, which GCC 12 leaves as a
// library call: several on every assignment.)
template <std::size_t R>
KILN_ALWAYS_INLINE constexpr bool same_extents(std::array<index_t, R> const& a, std::array<index_t, R> const& b) noexcept {
  bool same = true;
  for (int d = 0; d < int(R); ++d) same = same && a[d] == b[d];  // (int: R may be 0)
  return same;
}

// Row-major (C order) strides in elements.
template <std::size_t R>
constexpr std::array<index_t, R> contiguous_strides(std::array<index_t, R> const& shape) noexcept {
  std::array<index_t, R> strides{};
  index_t step = 1;
  for (int d = int(R) - 1; d >= 0; --d) {
    strides[d] = step;
    step *= shape[d];
  }
  return strides;
}

// Broadcasting as in PyTorch and NumPy: shapes are right-aligned, an extent of 1 stretches to the
// other, and the result has the larger rank. Throws shape_error naming both shapes, or one that
// says the result has more elements than index_t counts.
template <std::size_t A, std::size_t B>
extents<int(std::max(A, B))> broadcast_extents(std::array<index_t, A> const& a, std::array<index_t, B> const& b) {
  constexpr int R = int(std::max(A, B));
  extents<R> out{};
  for (int d = 0; d < R; ++d) {
    int const da = d - (R - int(A)), db = d - (R - int(B));
    index_t const ea = da >= 0 ? a[da] : 1, eb = db >= 0 ? b[db] : 1;
    if (ea != eb && ea != 1 && eb != 1)
      throw_broadcast_error({a, b});
    out[d] = ea == 1 ? eb : ea;
  }
  detail::checked_count(out);  // [2^32, 1] with [1, 2^32]
  return out;
}

// Strides that read a tensor of `shape`/`strides` as if it had the larger `target` shape: new
// leading dimensions and stretched extent-1 dimensions get stride 0. `shape` must broadcast to
// `target` (checked when the expression was built).
template <int R, int Leaf>
constexpr extents<R> broadcast_strides(extents<Leaf> const& shape, extents<Leaf> const& strides,
                                       extents<R> const& target) noexcept {
  static_assert(Leaf <= R);
  extents<R> out{};
  for (int d = 0; d < Leaf; ++d) {
    int const t = d + (R - Leaf);
    out[t] = (shape[d] == 1 && target[t] != 1) ? 0 : strides[d];
  }
  return out;
}

}  // namespace kiln

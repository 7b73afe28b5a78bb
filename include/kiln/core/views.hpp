// kiln/core/views.hpp: views without copies: of user memory (pointers, spans, vectors) and of
// tensors (slice, select, transpose, permute, reshape, unsqueeze, squeeze, expand). A view refers
// to the elements it was made from; they must outlive it.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/tensor.hpp>

#include <numeric>
#include <span>
#include <vector>

namespace kiln {

// --- views of user memory -------------------------------------------------------------------

template <class T, std::size_t R>
  requires element<std::remove_const_t<T>>
tensor_view<T, int(R)> view(T* data, std::array<index_t, R> const& shape) noexcept {
  return {data, shape};
}
template <class T, std::size_t R>
  requires element<std::remove_const_t<T>>
tensor_view<T, int(R)> view(T* data, index_t const (&shape)[R]) noexcept {
  extents<int(R)> s;
  std::copy_n(shape, R, s.begin());
  return {data, s};
}
template <class T, std::size_t R>
  requires element<std::remove_const_t<T>>
tensor_view<T, int(R)> view(T* data, std::array<index_t, R> const& shape, std::array<index_t, R> const& strides) noexcept {
  return {data, shape, strides};
}
template <class T, std::size_t E>
  requires element<std::remove_const_t<T>>
tensor_view<T, 1> view(std::span<T, E> s) noexcept {
  return {s.data(), extents<1>{static_cast<index_t>(s.size())}};
}
template <element T, class A>
tensor_view<T, 1> view(std::vector<T, A>& v) noexcept {
  return {v.data(), extents<1>{static_cast<index_t>(v.size())}};
}
template <element T, class A>
tensor_view<T const, 1> view(std::vector<T, A> const& v) noexcept {
  return {v.data(), extents<1>{static_cast<index_t>(v.size())}};
}
// A temporary vector dies at the end of the full expression, and its view with it.
template <element T, class A>
void view(std::vector<T, A>&& v) = delete;

// --- views of tensors -----------------------------------------------------------------------

namespace detail {
template <class X>
inline constexpr bool is_tensor = false;
template <class T, int R>
inline constexpr bool is_tensor<tensor<T, R>> = true;
template <class X>
inline constexpr bool is_view = false;
template <class T, int R>
inline constexpr bool is_view<tensor_view<T, R>> = true;
}  // namespace detail

// A tensor or a view: what the functions below take.
template <class X>
concept viewable = detail::is_tensor<std::remove_cvref_t<X>> || detail::is_view<std::remove_cvref_t<X>>;

// The view of a tensor (mutable or read-only as the tensor is) or the view itself.
template <viewable X>
auto as_view(X&& x) noexcept {
  static_assert(!(detail::is_tensor<std::remove_cvref_t<X>> && std::is_rvalue_reference_v<X&&>),
                "kiln: a view of a temporary tensor would dangle; store the tensor in a variable first");
  if constexpr (detail::is_tensor<std::remove_cvref_t<X>>)
    return x.view();
  else
    return std::remove_cvref_t<X>(x);
}

namespace detail {
// `dim` as a position in [0, positions), counting from the end when negative. `positions` is the
// rank, or the rank + 1 for unsqueeze, so the message states the range that was allowed.
inline int check_dim(int dim, int positions, char const* what) {
  int const d = dim < 0 ? dim + positions : dim;
  if (positions == 0) throw shape_error(std::string(what) + ": a rank-0 tensor has no dimensions");
  if (d < 0 || d >= positions)
    throw shape_error(std::string(what) + ": dimension " + std::to_string(dim) + " is out of range [" +
                      std::to_string(-positions) + ", " + std::to_string(positions - 1) + "]");
  return d;
}

// p + n. An empty tensor owns no storage, so its views hold a null pointer, and moving null by any
// non-zero amount is undefined behaviour even though no element is ever read through it.
template <class T>
T* advance(T* p, index_t n) noexcept {
  return p == nullptr ? p : p + n;
}
}  // namespace detail

// Elements start, start + step, ... before stop along `dim`, with Python's rules: negative
// positions count from the end, out-of-range positions clamp. step must be positive.
template <viewable X>
auto slice(X&& x, int dim, index_t start, index_t stop, index_t step = 1) {
  auto v = as_view(std::forward<X>(x));
  constexpr int R = decltype(v)::rank;
  int const d = detail::check_dim(dim, R, "slice");
  if (step <= 0) throw shape_error("slice: step must be positive, not " + std::to_string(step));
  index_t const n = v.extent(d);
  auto clamp_pos = [n](index_t p) { return std::clamp<index_t>(p < 0 ? p + n : p, 0, n); };
  start = clamp_pos(start);
  stop = std::max(clamp_pos(stop), start);
  auto shape = v.shape();
  auto strides = v.strides();
  // Rounds up without forming stop - start + step, which overflows for a huge step.
  shape[d] = stop == start ? 0 : (stop - start - 1) / step + 1;
  strides[d] *= step;
  return decltype(v)(detail::advance(v.data(), start * v.strides()[d]), shape, strides);
}

// The sub-tensor at `index` along `dim`, one rank lower (negative index counts from the end).
template <viewable X>
auto select(X&& x, int dim, index_t index) {
  auto v = as_view(std::forward<X>(x));
  using V = decltype(v);
  constexpr int R = V::rank;
  static_assert(R >= 1, "kiln::select needs a tensor of rank 1 or more");
  int const d = detail::check_dim(dim, R, "select");
  index_t const n = v.extent(d);
  index_t const i = index < 0 ? index + n : index;
  if (i < 0 || i >= n)
    throw shape_error("select: index " + std::to_string(index) + " is out of range for dimension " +
                      std::to_string(dim) + " of shape " + shape_string(v.shape()));
  extents<R - 1> shape{}, strides{};
  for (int k = 0, o = 0; k < R; ++k)
    if (k != d) shape[o] = v.extent(k), strides[o++] = v.strides()[k];
  return tensor_view<typename V::element_type, R - 1>(detail::advance(v.data(), i * v.strides()[d]), shape, strides);
}

namespace detail {
template <std::size_t R>
shape_error bad_permutation(int const (&perm)[R], std::string const& why) {
  std::string list = "[";
  for (std::size_t k = 0; k < R; ++k) list += (k == 0 ? "" : ", ") + std::to_string(perm[k]);
  return shape_error("permute: " + list + "] is not a permutation of the dimensions: " + why);
}
}  // namespace detail

// Reorders dimensions: result dimension k is input dimension perm[k] (negative counts from the end).
template <viewable X, std::size_t R>
auto permute(X&& x, int const (&perm)[R]) {
  auto v = as_view(std::forward<X>(x));
  using V = decltype(v);
  static_assert(int(R) == V::rank, "kiln::permute needs one entry per dimension");
  extents<V::rank> shape{}, strides{};
  std::array<bool, R> used{};
  for (std::size_t k = 0; k < R; ++k) {
    int const d = perm[k] < 0 ? perm[k] + V::rank : perm[k];
    if (d < 0 || d >= V::rank)
      throw detail::bad_permutation(perm, "dimension " + std::to_string(perm[k]) + " is out of range");
    if (used[d]) throw detail::bad_permutation(perm, "dimension " + std::to_string(d) + " appears twice");
    used[d] = true;
    shape[k] = v.extent(d);
    strides[k] = v.strides()[d];
  }
  return V(v.data(), shape, strides);
}

// Swaps two dimensions; without arguments, the two dimensions of a matrix.
template <viewable X>
auto transpose(X&& x, int dim0, int dim1) {
  auto v = as_view(std::forward<X>(x));
  using V = decltype(v);
  int const a = detail::check_dim(dim0, V::rank, "transpose"), b = detail::check_dim(dim1, V::rank, "transpose");
  auto shape = v.shape();
  auto strides = v.strides();
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  return V(v.data(), shape, strides);
}
template <viewable X>
auto transpose(X&& x) {
  static_assert(std::remove_cvref_t<X>::rank == 2,
                "kiln::transpose(x) swaps the two dimensions of a matrix; use transpose(x, dim0, dim1) or permute");
  return transpose(std::forward<X>(x), 0, 1);
}

namespace detail {
// Writes to `out` strides that read the elements of a view of `shape` and `strides`, in
// row-major order, under `target` (of the same size); false where no strides can: PyTorch's
// computeStride. The view's dimensions fall into chunks that are contiguous among themselves
// (each dimension's stride its inner neighbour's stride times extent; extents of 1 join any
// chunk); `target`'s dimensions must split the chunks without straddling two.
template <int R, int NR>
bool strides_for_shape(extents<R> const& shape, extents<R> const& strides, extents<NR> const& target,
                       extents<NR>& out) {
  out = contiguous_strides<NR>(target);  // for no element or one (rank 0): any strides read it
  if constexpr (R == 0) {
    return true;
  } else {
    if (element_count<R>(shape) == 0) return true;
    int t = NR - 1;
    index_t chunk_stride = strides[R - 1], chunk_size = 1, covered = 1;
    for (int d = R - 1; d >= 0; --d) {
      chunk_size *= shape[d];
      if (d > 0 && (shape[d - 1] == 1 || strides[d - 1] == chunk_size * chunk_stride)) continue;
      while (t >= 0 && (covered < chunk_size || target[t] == 1)) {
        out[t] = covered * chunk_stride;
        covered *= target[t--];
      }
      if (covered != chunk_size) return false;
      if (d > 0) chunk_stride = strides[d - 1], chunk_size = 1, covered = 1;
    }
    return t == -1;
  }
}
}  // namespace detail

// The same elements under a new shape of the same size; one extent may be -1 (inferred). A view,
// never a copy, as PyTorch's `view`: of any view whose strides can express the new shape (every
// contiguous one, and a non-contiguous one whose new dimensions split or merge only dimensions
// that lie contiguously together); otherwise shape_error (make a tensor from the view first).
template <viewable X, std::size_t N>
auto reshape(X&& x, std::array<index_t, N> shape) {
  constexpr int NR = int(N);
  auto v = as_view(std::forward<X>(x));
  using V = decltype(v);
  auto fail = [&](std::string const& why) {
    return shape_error("cannot reshape " + shape_string(v.shape()) + " to " + shape_string(shape) + ": " + why);
  };
  int inferred = -1;
  index_t known = 1;  // the product of the known non-zero extents
  bool zero = false;
  for (int d = 0; d < NR; ++d) {
    if (shape[d] == -1) {
      if (inferred >= 0) throw fail("more than one extent is -1");
      inferred = d;
    } else if (shape[d] < 0) {
      throw fail("negative extent");
    } else if (shape[d] == 0) {
      zero = true;
    } else if (__builtin_mul_overflow(known, shape[d], &known)) {
      throw fail("more elements than index_t can count");
    }
  }
  if (inferred >= 0) {
    if (zero) throw fail("the extent -1 could be anything next to an extent of 0");
    if (v.size() % known != 0) throw fail("the sizes do not divide");
    shape[inferred] = v.size() / known;
  } else if (zero) {
    known = 0;
  }
  if (inferred < 0 && known != v.size()) throw fail("the sizes differ");
  if (v.is_contiguous()) return tensor_view<typename V::element_type, NR>(v.data(), shape);
  extents<NR> strides;
  if (!detail::strides_for_shape<V::rank, NR>(v.shape(), v.strides(), shape, strides))
    throw fail("the view's strides cannot express that shape (copy it into a tensor first)");
  return tensor_view<typename V::element_type, NR>(v.data(), shape, strides);
}
template <viewable X, std::size_t NR>
auto reshape(X&& x, index_t const (&shape)[NR]) {
  extents<int(NR)> s;
  std::copy_n(shape, NR, s.begin());
  return reshape(std::forward<X>(x), s);
}

// Inserts a dimension of extent 1 at `dim` (0..rank; negative counts from the end as in PyTorch).
template <viewable X>
auto unsqueeze(X&& x, int dim) {
  auto v = as_view(std::forward<X>(x));
  using V = decltype(v);
  constexpr int R = V::rank;
  int const d = detail::check_dim(dim, R + 1, "unsqueeze");
  extents<R + 1> shape{}, strides{};
  for (int k = 0, i = 0; k <= R; ++k) {
    if (k == d) {
      shape[k] = 1;
      strides[k] = k < R ? v.strides()[i] * v.extent(i) : 1;
    } else {
      shape[k] = v.extent(i);
      strides[k] = v.strides()[i++];
    }
  }
  return tensor_view<typename V::element_type, R + 1>(v.data(), shape, strides);
}

// Removes dimension `dim`, which must have extent 1 (negative counts from the end). PyTorch's
// squeeze(dim) leaves another extent in place; here the rank is part of the type, so that is a
// shape_error.
template <viewable X>
auto squeeze(X&& x, int dim) {
  auto v = as_view(std::forward<X>(x));
  constexpr int R = decltype(v)::rank;
  static_assert(R >= 1, "kiln::squeeze needs a tensor of rank 1 or more");
  int const d = detail::check_dim(dim, R, "squeeze");
  if (v.extent(d) != 1)
    throw shape_error("squeeze: dimension " + std::to_string(dim) + " of shape " + shape_string(v.shape()) +
                      " has extent " + std::to_string(v.extent(d)) + ", not 1");
  return select(v, d, 0);  // the one element along d
}

// Broadcasts to a larger shape without copying (stride 0 along stretched dimensions). Read-only:
// writing through a view whose elements repeat would be ambiguous.
template <viewable X, std::size_t N>
auto expand(X&& x, std::array<index_t, N> const& shape) {
  constexpr int NR = int(N);
  auto v = as_view(std::forward<X>(x));
  using V = decltype(v);
  static_assert(NR >= V::rank, "kiln::expand cannot lower the rank");
  // Right-aligned as in broadcasting, but only the view's extents of 1 may stretch; -1 keeps an
  // extent the view has (as in PyTorch; not for a new leading dimension).
  extents<NR> to = shape;
  for (int d = 0; d < NR; ++d) {
    int const s = d - (NR - V::rank);
    index_t const from = s >= 0 ? v.extent(s) : 1;
    if (to[d] == -1 && s >= 0) to[d] = from;
    if (to[d] < 0 || (from != to[d] && from != 1))
      throw shape_error("cannot expand " + shape_string(v.shape()) + " to " + shape_string(shape));
  }
  detail::checked_count(to);
  return tensor_view<typename V::value_type const, NR>(v.data(), to,
                                                        broadcast_strides<NR, V::rank>(v.shape(), v.strides(), to));
}
template <viewable X, std::size_t NR>
auto expand(X&& x, index_t const (&shape)[NR]) {
  extents<int(NR)> s;
  std::copy_n(shape, NR, s.begin());
  return expand(std::forward<X>(x), s);
}

}  // namespace kiln

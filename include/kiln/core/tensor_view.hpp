// kiln/core/tensor_view.hpp: a non-owning, strided window onto elements kiln does not own.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/dtype.hpp>
#include <kiln/core/extents.hpp>
#include <kiln/core/fwd.hpp>
#include <kiln/core/policy.hpp>

#include <concepts>
#include <stdexcept>
#include <string>

namespace kiln {

namespace detail {
// Whether assignment writes through a tensor_view<T, R>: false for views of `T const`.
template <class T>
inline constexpr bool view_elements_are_writable = !std::is_const_v<T>;
}  // namespace detail

// A view is a pointer, extents and strides (in elements; 0 repeats an element, negative walks
// backwards). Copying a view copies the handle. Assigning to a view writes through it, as with
// Eigen::Map or `t[...] = x` in PyTorch. A view of `T const` is read-only.
template <class T, int R>
class tensor_view {
  static_assert(R >= 0, "kiln: a tensor's rank cannot be negative");
  static_assert(element<std::remove_const_t<T>>, "kiln: tensors hold arithmetic element types");

 public:
  using value_type = std::remove_const_t<T>;
  using element_type = T;
  static constexpr int rank = R;
  static constexpr bool is_kiln_expression = true;

  tensor_view() = default;
  tensor_view(T* data, extents<R> const& shape, extents<R> const& strides) noexcept
      : shape_(shape), strides_(strides), data_(data) {}
  // A contiguous row-major view.
  tensor_view(T* data, extents<R> const& shape) noexcept
      : tensor_view(data, shape, contiguous_strides<R>(shape)) {}
  tensor_view(tensor_view const&) = default;
  // A read-only view from a mutable one. (A constructor of the read-only view rather than a
  // conversion operator of every view: on a view that is already read-only such an operator would
  // convert to its own type, which nvcc warns about.)
  template <class U>
    requires(std::is_same_v<U const, T> && !std::is_const_v<U>)
  tensor_view(tensor_view<U, R> const& other) noexcept : tensor_view(other.data(), other.shape(), other.strides()) {}

  T* data() const noexcept { return data_; }
  extents<R> const& shape() const noexcept { return shape_; }
  extents<R> const& strides() const noexcept { return strides_; }
  index_t extent(int d) const noexcept { return shape_[d]; }
  index_t size() const noexcept { return element_count<R>(shape_); }
  bool empty() const noexcept { return size() == 0; }
  // Row-major without gaps. Strides of extent-1 dimensions do not matter, and an empty view is
  // contiguous whatever its strides, as in PyTorch: reshaping it touches no element.
  bool is_contiguous() const noexcept {
    if (empty()) return true;
    index_t step = 1;
    for (int d = R - 1; d >= 0; --d) {
      if (shape_[d] != 1 && strides_[d] != step) return false;
      step *= shape_[d];
    }
    return true;
  }

  template <std::integral... I>
    requires(sizeof...(I) == R)
  T& operator()(I... i) const noexcept {
    return data_[offset(extents<R>{static_cast<index_t>(i)...})];
  }
  // Bounds-checked access; throws std::out_of_range.
  template <std::integral... I>
    requires(sizeof...(I) == R)
  T& at(I... i) const {
    extents<R> const idx{static_cast<index_t>(i)...};
    for (int d = 0; d < R; ++d)
      if (idx[d] < 0 || idx[d] >= shape_[d])
        throw std::out_of_range("kiln: index " + std::to_string(idx[d]) + " out of range for dimension " +
                                std::to_string(d) + " of shape " + shape_string(shape_));
    return data_[offset(idx)];
  }
  // The single element of a size-1 view.
  value_type item() const {
    if (size() != 1) throw shape_error("item() needs exactly one element, not shape " + shape_string(shape_));
    return *data_;
  }

  // Writes through the view. The source broadcasts to this view's shape. A view of `T const` has
  // no assignment at all (so std::is_assignable says false); the constraint's name is what the
  // compiler shows when someone tries.
  tensor_view const& operator=(tensor_view const& other) const
    requires detail::view_elements_are_writable<T>
  {
    detail::assign(default_policy{}, *this, other);
    return *this;
  }
  template <expression E>
  tensor_view const& operator=(E const& e) const
    requires detail::view_elements_are_writable<T>
  {
    detail::assign(default_policy{}, *this, e);
    return *this;
  }
  tensor_view const& operator=(value_type value) const
    requires detail::view_elements_are_writable<T>;  // defined with the expression leaves

 private:
  index_t offset(extents<R> const& idx) const noexcept {
    index_t o = 0;
    for (int d = 0; d < R; ++d) o += idx[d] * strides_[d];
    return o;
  }

  // Extents first: copies of a view (as in every expression leaf) then load the two arrays whole,
  // as tensor::view() stored them (see tensor's strides_).
  extents<R> shape_{};
  extents<R> strides_{};
  T* data_ = nullptr;
};

}  // namespace kiln

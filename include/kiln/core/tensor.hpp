// kiln/core/tensor.hpp: the owning tensor.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/storage.hpp>
#include <kiln/core/tensor_view.hpp>

#include <initializer_list>
#include <limits>
#include <utility>

namespace kiln {

namespace detail {
// nested_list<T, 2> is std::initializer_list<std::initializer_list<T>>, and so on.
template <class T, int R>
struct nested_list {
  using type = std::initializer_list<typename nested_list<T, R - 1>::type>;
};
template <class T>
struct nested_list<T, 0> {
  using type = T;
};

}  // namespace detail

// Marker for constructors that leave elements uninitialised (kiln::empty).
struct uninitialized_t {
  explicit uninitialized_t() = default;
};
inline constexpr uninitialized_t uninitialized{};

// An owning, row-major, 64-byte-aligned tensor with value semantics like Eigen's Matrix: copying
// copies the elements, moving is cheap, views are explicit (`view()`, kiln::transpose, ...).
// Extents are run-time values; the rank R is part of the type, so loops unroll over dimensions.
//
// Braces hold data, not extents (as torch.tensor): `tensor<float, 2> t = {{1, 2}, {3, 4}};`.
// Make a shaped tensor with kiln::zeros / ones / empty, or from an extents object.
template <class T, int R>
class tensor {
  static_assert(R >= 0, "kiln: a tensor's rank cannot be negative");
  static_assert(element<T>, "kiln: tensors hold arithmetic element types (float, double, int32, int64, bool...)");

 public:
  using value_type = T;
  using element_type = T;
  static constexpr int rank = R;
  static constexpr bool is_kiln_expression = true;

  // Extents all zero (one element for rank 0, which is a scalar).
  tensor() : tensor(extents<R>{}) {}
  // Zero-filled.
  explicit tensor(extents<R> const& shape)
      : storage_(detail::checked_count<R>(shape), true), shape_(shape), strides_(contiguous_strides<R>(shape)) {}
  tensor(extents<R> const& shape, uninitialized_t)
      : storage_(detail::checked_count<R>(shape), false), shape_(shape), strides_(contiguous_strides<R>(shape)) {}
  // From nested braces; ragged lists throw shape_error.
  tensor(typename detail::nested_list<T, R>::type const& values)
    requires(R >= 1)
      : tensor(list_shape(values), uninitialized) {
    T* out = data();
    fill_from_list<R>(values, out);
  }
  // One value: `tensor<float, 0> s = 2.5f;` (the rank-0 form of braces holding data).
  tensor(T value)
    requires(R == 0)
      : tensor(extents<R>{}, uninitialized) {
    *data() = value;
  }
  // Evaluates an expression (or copies a view) into new storage of the expression's shape.
  template <expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, tensor>)
  tensor(E const& e) : tensor(expression_shape(e), uninitialized) {
    if constexpr (E::rank == R)  // otherwise expression_shape's static_assert is the one error
      detail::assign(default_policy{}, view(), e, detail::destination::whole_tensor);
  }

  tensor(tensor const&) = default;
  // Moving steals the storage and leaves `other` valid: an empty tensor of extents all zero. A
  // rank-0 tensor always holds its one element, so moving one copies it (and may allocate).
  tensor(tensor&& other) noexcept(R > 0)
      : storage_(take_storage(other)), shape_(other.shape_), strides_(other.strides_) {
    if constexpr (R > 0) other.shape_ = extents<R>{}, other.strides_ = empty_strides;
  }
  // Copy and move assignment replace the contents and shape, as for any value type.
  tensor& operator=(tensor const&) = default;
  tensor& operator=(tensor&& other) noexcept {
    if constexpr (R == 0) {
      *data() = *other.data();
    } else if (this != &other) {
      storage_ = std::move(other.storage_);
      shape_ = std::exchange(other.shape_, extents<R>{});
      strides_ = std::exchange(other.strides_, empty_strides);
    }
    return *this;
  }
  // Assigning an expression evaluates it into the existing storage: the expression must broadcast
  // to this tensor's shape (shape_error otherwise), and may read this tensor (`x = x * 2 + y`).
  template <expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, tensor>)
  tensor& operator=(E const& e) {
    detail::assign(default_policy{}, view(), e, detail::destination::whole_tensor);
    return *this;
  }
  // Fills every element.
  tensor& operator=(T value) {
    view() = value;
    return *this;
  }

  T* data() noexcept { return storage_.data(); }
  T const* data() const noexcept { return storage_.data(); }
  extents<R> const& shape() const noexcept { return shape_; }
  extents<R> const& strides() const noexcept { return strides_; }
  index_t extent(int d) const noexcept { return shape_[d]; }
  index_t size() const noexcept { return element_count<R>(shape_); }
  bool empty() const noexcept { return size() == 0; }
  static constexpr bool is_contiguous() noexcept { return true; }

  tensor_view<T, R> view() noexcept { return {data(), shape_, strides_}; }
  tensor_view<T const, R> view() const noexcept { return {data(), shape_, strides_}; }
  operator tensor_view<T, R>() noexcept { return view(); }
  operator tensor_view<T const, R>() const noexcept { return view(); }

  template <std::integral... I>
    requires(sizeof...(I) == R)
  T& operator()(I... i) noexcept {
    return view()(i...);
  }
  template <std::integral... I>
    requires(sizeof...(I) == R)
  T const& operator()(I... i) const noexcept {
    return view()(i...);
  }
  template <std::integral... I>
    requires(sizeof...(I) == R)
  T& at(I... i) {
    return view().at(i...);
  }
  template <std::integral... I>
    requires(sizeof...(I) == R)
  T const& at(I... i) const {
    return view().at(i...);
  }
  T item() const { return view().item(); }

 private:
  // The shape a new tensor takes from an expression; a rank mismatch stops here, before anything
  // else in the constructor can report a less readable error.
  template <class E>
  static extents<R> expression_shape(E const& e) {
    static_assert(E::rank == R,
                  "kiln: the expression's rank differs from the tensor's rank (use kiln::eval(e) or "
                  "a tensor of the expression's rank)");
    if constexpr (E::rank == R)
      return e.shape();
    else
      return extents<R>{};
  }
  static detail::aligned_buffer<T> take_storage(tensor& other) {
    if constexpr (R == 0)
      return other.storage_;
    else
      return std::move(other.storage_);
  }

  template <int D>
  static void list_extents(typename detail::nested_list<T, D>::type const& values, extents<R>& shape,
                           bool& seen) {
    constexpr int d = R - D;
    auto const n = static_cast<index_t>(values.size());
    if (!seen) {
      shape[d] = n;
    } else if (shape[d] != n) {
      throw shape_error("ragged initializer list: dimension " + std::to_string(d) + " has " +
                        std::to_string(n) + " entries where " + std::to_string(shape[d]) + " were expected");
    }
    if constexpr (D > 1) {
      bool inner_seen = seen;
      for (auto const& v : values) {
        list_extents<D - 1>(v, shape, inner_seen);
        inner_seen = true;
      }
      if (values.size() == 0 && !seen)
        for (int k = d + 1; k < R; ++k) shape[k] = 0;
    }
  }
  static extents<R> list_shape(typename detail::nested_list<T, R>::type const& values) {
    extents<R> shape{};
    bool seen = false;
    list_extents<R>(values, shape, seen);
    return shape;
  }
  template <int D>
  static void fill_from_list(typename detail::nested_list<T, D>::type const& values, T*& out) {
    if constexpr (D == 1) {
      for (T v : values) *out++ = v;
    } else {
      for (auto const& v : values) fill_from_list<D - 1>(v, out);
    }
  }

  static constexpr extents<R> empty_strides = contiguous_strides<R>(extents<R>{});

  detail::aligned_buffer<T> storage_;
  extents<R> shape_{};
  // Stored rather than computed from shape_: a view of the tensor (and so each leaf of an
  // expression over it) is then a plain copy of memory written long before, and the copies
  // that building an expression makes load whole what was stored whole. Computed strides, stored
  // one element at a time just before those wider loads, stall them (store-to-load forwarding
  // fails): about 5 ns per expression, which showed at 1K elements.
  extents<R> strides_ = empty_strides;
};

}  // namespace kiln

// kiln/expr/leaf.hpp: the leaves of an expression tree: tensor data and broadcast constants.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/tensor.hpp>

#include <memory>

namespace kiln {

// A leaf reading tensor data through a read-only view of the caller's elements: built from an
// lvalue tensor or any view. `whole` says the view is all of one kiln::tensor, which owns its
// allocation alone: such a leaf and a whole-tensor destination overlap only when they are the
// same tensor, so the aliasing check of an assignment needs no address arithmetic for it.
//
// A view and a flag, and nothing to release: each level of a tree copies its children, and that
// copy is most of what building `relu(A + b) * c` costs (owned_leaf below keeps the owning case
// out of it). Copied member by member on purpose: copied as a whole, GCC moves it with vector
// loads that read back the narrower stores which built it a moment before, a stalled
// store-to-load forward at every level of the tree (W4 at 1K elements +20%).
template <class T, int R>
class leaf {
 public:
  using value_type = T;
  static constexpr int rank = R;
  static constexpr bool is_kiln_expression = true;

  explicit leaf(tensor_view<T const, R> v, bool whole = false) noexcept : view_(v), whole_(whole) {}
  leaf(leaf const& other) noexcept : view_(other.view_), whole_(other.whole_) {}
  leaf& operator=(leaf const& other) noexcept {
    view_ = other.view_;
    whole_ = other.whole_;
    return *this;
  }

  tensor_view<T const, R> const& view() const noexcept { return view_; }
  extents<R> const& shape() const noexcept { return view_.shape(); }
  bool whole() const noexcept { return whole_; }

  // Rows [start, start + count) of dimension 0 only (row-blocked evaluation, eval/row_blocks.hpp).
  void keep_rows(index_t start, index_t count) noexcept {
    extents<R> shape = view_.shape();
    shape[0] = count;
    extents<R> const strides = view_.strides();
    // (Constructed in place: assigning a view assigns its elements. The new view's arguments are
    // copies: the old view's storage is dead once the new one's lifetime begins.)
    std::construct_at(&view_, view_.data() + start * strides[0], shape, strides);
    whole_ = false;
  }

 private:
  tensor_view<T const, R> view_;
  bool whole_;
};

// A leaf that keeps the tensor it reads alive: built from an rvalue tensor it takes the tensor
// over (shared, so copying the expression stays cheap), and
// `auto e = kiln::exp(kiln::zeros<float>({n}));` never dangles. A var's leaf and a fusion
// boundary's evaluated result are owned leaves too.
template <class T, int R>
class owned_leaf : public leaf<T, R> {
 public:
  explicit owned_leaf(tensor<T, R>&& t) : owned_leaf(std::make_shared<tensor<T, R> const>(std::move(t))) {}
  // Over memory the caller keeps alive for the leaf's whole use: a block of a boundary's result
  // (eval/row_blocks.hpp), of the type its evaluation into a tensor gives.
  static owned_leaf borrowing(tensor_view<T const, R> v) noexcept { return owned_leaf(v, nullptr, false); }

 protected:
  // A leaf over a whole tensor that `owner` keeps alive (a var's node keeps its value).
  owned_leaf(tensor_view<T const, R> v, std::shared_ptr<void const> owner, bool whole = true) noexcept
      : leaf<T, R>(v, whole), owner_(std::move(owner)) {}

 private:
  explicit owned_leaf(std::shared_ptr<tensor<T, R> const> owned)
      : leaf<T, R>(owned->view(), true), owner_(std::move(owned)) {}

  std::shared_ptr<void const> owner_;
};

// A C++ scalar in an expression: rank 0, broadcast everywhere, of the type promotion chose.
template <class T>
class constant {
 public:
  using value_type = T;
  static constexpr int rank = 0;
  static constexpr bool is_kiln_expression = true;

  explicit constexpr constant(T v) noexcept : value_(v) {}
  constexpr T value() const noexcept { return value_; }
  extents<0> const& shape() const noexcept { return shape_; }

 private:
  T value_;
  static constexpr extents<0> shape_{};
};

// Fills a view with one value: `slice(x, 0, 0, 2) = 0.f`.
template <class T, int R>
tensor_view<T, R> const& tensor_view<T, R>::operator=(value_type value) const
  requires detail::view_elements_are_writable<T>
{
  detail::assign(default_policy{}, *this, constant<value_type>(value));
  return *this;
}

}  // namespace kiln

// kiln/expr/leaf.hpp: the leaves of an expression tree: tensor data and broadcast constants.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/tensor.hpp>

#include <memory>

namespace kiln {

// A leaf reading tensor data through a read-only view. Built from an lvalue tensor or any view it
// refers to the caller's elements; built from an rvalue tensor it takes the tensor over (shared,
// so copying the expression stays cheap), and `auto e = kiln::exp(kiln::zeros<float>({n}));`
// never dangles. `whole` says the view is all of one kiln::tensor, which owns its allocation
// alone: such a leaf and a whole-tensor destination overlap only when they are the same tensor,
// so the aliasing check of an assignment needs no address arithmetic for it.
template <class T, int R>
class leaf {
 public:
  using value_type = T;
  static constexpr int rank = R;
  static constexpr bool is_kiln_expression = true;

  explicit leaf(tensor_view<T const, R> v, bool whole = false) noexcept : view_(v), whole_(whole) {}
  explicit leaf(tensor<T, R>&& t) : leaf(std::make_shared<tensor<T, R> const>(std::move(t))) {}

  tensor_view<T const, R> const& view() const noexcept { return view_; }
  extents<R> const& shape() const noexcept { return view_.shape(); }
  bool whole() const noexcept { return whole_; }

 protected:
  // A leaf over a whole tensor that `owner` keeps alive (a var's node keeps its value).
  leaf(tensor_view<T const, R> v, std::shared_ptr<void const> owner) noexcept
      : owner_(std::move(owner)), view_(v), whole_(true) {}

 private:
  explicit leaf(std::shared_ptr<tensor<T, R> const> owned)
      : owner_(std::move(owned)), view_(static_cast<tensor<T, R> const*>(owner_.get())->view()), whole_(true) {}

  std::shared_ptr<void const> owner_;  // empty for a leaf over the caller's memory
  tensor_view<T const, R> view_;
  bool whole_;
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

// kiln/autodiff/var.hpp: kiln::var, the dual type: a value, an adjoint allocated on first use,
// and the tape that recorded it. A var is a handle, like torch::Tensor: copying one aliases it.
// In an expression it is a leaf (var_leaf) that also knows where its adjoint lives.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/autodiff/tape.hpp>
#include <kiln/core/error.hpp>
#include <kiln/expr/leaf.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace kiln {
namespace detail {

// What a var holds. The value is owned, or borrowed from the caller's contiguous memory for the
// duration of a kiln::value_and_grad call.
template <class T, int R>
struct var_node {
  using value_type = T;
  static constexpr int rank = R;

  tensor<T, R> storage;
  tensor_view<T, R> value;
  tensor<T, R> adjoint;
  bool has_adjoint = false;
  bool adjoint_lent = false;  // a caller's buffer (kiln::into), contents not written yet
  bool requires_grad = true;
  std::uint64_t tape_id = 0;  // the tape and contents that recorded it; 0 for a leaf

  explicit var_node(tensor<T, R> v) : storage(std::move(v)), value(storage.view()) {}
  explicit var_node(tensor_view<T, R> borrowed) : storage(extents<R>{}, uninitialized), value(borrowed) {}

  // The adjoint, zero-filled when first touched.
  tensor<T, R>& grad() {
    if (!has_adjoint) {
      adjoint = tensor<T, R>(value.shape());
      has_adjoint = true;
    } else if (adjoint_lent) {
      adjoint = T(0);
      adjoint_lent = false;
    }
    return adjoint;
  }
  // The adjoint for a backward loop that writes every element before reading any: left
  // uninitialised when it does not exist yet. Returns whether the loop may overwrite it.
  bool prepare_overwrite() {
    if (has_adjoint && !adjoint_lent) return false;
    if (!has_adjoint) adjoint = tensor<T, R>(value.shape(), uninitialized);
    has_adjoint = true;
    adjoint_lent = false;
    return true;
  }
  // Gives the adjoint up (moved out) and forgets it: the next backward starts from zero.
  tensor<T, R> release_adjoint() {
    has_adjoint = false;
    adjoint_lent = false;
    return std::move(adjoint);
  }
  // Takes a buffer to hold the adjoint (reshaped if its shape differs); its contents are ignored.
  void lend_adjoint(tensor<T, R>&& buffer) {
    if (buffer.shape() != value.shape()) buffer = tensor<T, R>(value.shape(), uninitialized);
    adjoint = std::move(buffer);
    has_adjoint = true;
    adjoint_lent = true;
  }
  bool is_leaf() const noexcept { return tape_id == 0; }
};

}  // namespace detail

// A var in an expression: reads the value like any leaf, and the backward loop accumulates into
// the var's adjoint through node(). The leaf's owner is the node, which keeps the var alive on
// the tape (one shared pointer per leaf, copied with the tree).
template <class T, int R>
class var_leaf : public owned_leaf<T, R> {
 public:
  explicit var_leaf(std::shared_ptr<detail::var_node<T, R>> const& node)
      : owned_leaf<T, R>(tensor_view<T const, R>(node->value), node), node_(node.get()) {}

  detail::var_node<T, R>& node() const noexcept { return *node_; }

 private:
  detail::var_node<T, R>* node_;
};

template <class T, int R>
class var;

namespace detail {
template <class T, int R, class E>
void record_into(var<T, R>& out, E const& e);
template <class T, int R>
void backward_from(var<T, R> const& out, tensor_view<T const, R> cotangent);
}  // namespace detail

// kiln::var<T, R>: a tensor that takes part in reverse-mode differentiation.
//   kiln::var<float, 2> w = kiln::randn<float>({4, 3}, 1);  // a leaf: requires gradients
//   kiln::var<float, 2> h = kiln::tanh(x * w + b);          // one tape entry, one fused loop
//   kiln::var<float, 0> loss = kiln::mean(kiln::square(h - t));
//   loss.backward();  w.grad();  w.zero_grad();
// A var built from data (a tensor, or an expression without vars) is a leaf that requires
// gradients; one built from vars requires them when any of its inputs does, and is recorded on
// the thread's tape.
template <class T, int R>
class var {
  static_assert(std::is_floating_point_v<T>,
                "kiln::var holds float or double values: gradients are defined for floating-point tensors");

 public:
  using value_type = T;
  static constexpr int rank = R;
  static constexpr bool is_kiln_expression = true;
  static constexpr bool is_kiln_var = true;

  var(tensor<T, R> value) : node_(std::make_shared<detail::var_node<T, R>>(std::move(value))) {}
  var(T value)
    requires(R == 0)
      : var(tensor<T, R>(value)) {}
  template <expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, var> && !std::is_same_v<std::remove_cvref_t<E>, tensor<T, R>>)
  var(E const& e) {
    static_assert(std::remove_cvref_t<E>::rank == R, "kiln: the expression's rank differs from the var's rank");
    detail::record_into(*this, e);
  }
  // Rebinds this handle to a new value (the old one stays alive while the tape needs it).
  template <expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, var>)
  var& operator=(E const& e) {
    return *this = var(e);
  }
  var(var const&) = default;
  var(var&&) noexcept = default;
  var& operator=(var const&) = default;
  var& operator=(var&&) noexcept = default;

  // The value. Writing through it (an optimiser step) is for vars whose tape has been consumed.
  tensor_view<T, R> value() const noexcept { return node_->value; }
  extents<R> const& shape() const noexcept { return node_->value.shape(); }
  index_t size() const noexcept { return node_->value.size(); }
  T item() const { return node_->value.item(); }
  template <std::integral... I>
    requires(sizeof...(I) == R)
  T operator()(I... i) const noexcept {
    return node_->value(i...);
  }

  // The accumulated gradient: zeros until a backward pass reaches this var.
  tensor<T, R> const& grad() const { return node_->grad(); }
  void zero_grad() const { node_->release_adjoint(); }
  bool requires_grad() const noexcept { return node_->requires_grad; }
  // Only leaves can change their mind: a computed var's dependence on its inputs is a fact.
  var& requires_grad(bool on) {
    if (!node_->is_leaf() && !on)
      throw gradient_error("requires_grad(false) on a var computed from other vars; use kiln::detach");
    node_->requires_grad = on;
    return *this;
  }
  // Whether this var is a leaf (built from data) rather than recorded from other vars.
  bool is_leaf() const noexcept { return node_->is_leaf(); }

  // Back-propagates from this var, seeded with 1 (a rank-0 var, the usual loss) or with the
  // given cotangent, into the adjoints of every var it depends on; then the tape is consumed.
  void backward() const {
    static_assert(R == 0,
                  "kiln: backward() without a cotangent needs a rank-0 var (a loss); for other ranks pass one: "
                  "y.backward(cotangent)");
    T const one = 1;
    detail::backward_from(*this, tensor_view<T const, 0>(&one, extents<0>{}));
  }
  template <viewable C>
  void backward(C const& cotangent) const {
    auto const v = as_view(cotangent);
    static_assert(std::is_same_v<typename decltype(v)::value_type, T> && decltype(v)::rank == R,
                  "kiln: backward's cotangent must have the var's element type and rank");
    if (v.shape() != shape())
      throw shape_error("backward: cotangent of shape " + shape_string(v.shape()) + " for a var of shape " +
                        shape_string(shape()));
    detail::backward_from(*this, tensor_view<T const, R>(v));
  }

  var_leaf<T, R> as_leaf() const { return var_leaf<T, R>(node_); }
  std::shared_ptr<detail::var_node<T, R>> const& node() const noexcept { return node_; }

  // For the functional API: a var over a node that outlives every use of the var (f's inputs,
  // on value_and_grad's stack). No control block: copying it costs no atomic operation.
  static var over(detail::var_node<T, R>& node) {
    var v;
    v.node_ = std::shared_ptr<detail::var_node<T, R>>(std::shared_ptr<void>(), &node);
    return v;
  }

 private:
  var() = default;
  template <class U, int Q, class E>
  friend void detail::record_into(var<U, Q>& out, E const& e);

  std::shared_ptr<detail::var_node<T, R>> node_;
};

template <class T, int R>
var(tensor<T, R>) -> var<T, R>;

// The value of a var as a new tensor, cut from the tape (torch's detach().clone()).
template <class T, int R>
tensor<T, R> detach(var<T, R> const& v) {
  return tensor<T, R>(std::as_const(v).value());
}

}  // namespace kiln

// kiln/cuda/evaluator.hpp: the device-side mirror of an expression tree, as eval/evaluator.hpp is
// the host's. Built on the host from the user's nodes, copied to the kernel as its parameter, and
// read one element at a time: the same op structs (their KILN_HD call operators) compute it.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/indexed_pack.hpp>
#include <kiln/cuda/tensor.hpp>
#include <kiln/eval/evaluator.hpp>

#include <tuple>
#include <utility>

namespace kiln::detail {

// How a kernel reads an operand: element i of a loop in which every operand is either
// contiguous in the output's order or one element broadcast everywhere (`flat`), or the element
// at the output coordinates c (any strides, broadcasting included).
struct flat_read {
  index_t i;
};
struct strided_read {
  index_t const* c;
};

template <class Node, int R>
struct device_evaluator {
  static_assert(always_false<Node>,
                "kiln: kiln::cuda{} reads device memory only: every tensor in the expression must be a "
                "kiln::cuda_tensor (kiln::var is host-only)");
};

template <class T, int LR, int R>
struct device_evaluator<leaf<T, LR>, R> {
  static_assert(always_false<T>,
                "kiln: kiln::cuda{} cannot read a host tensor: copy it to the device with kiln::to_device first");
  using value_type = T;
  device_evaluator(leaf<T, LR> const&, extents<R> const&) {}
  bool is_flat() const noexcept { return true; }
  template <class Read>
  KILN_HD T read(Read) const noexcept {
    return T{};
  }
};

// The other way round: a host loop (a CPU policy, or a host tensor's assignment) over device memory.
template <class T, int LR, int R>
struct evaluator<cuda_tensor<T, LR>, R> {
  static_assert(always_false<T>, "kiln: a CPU policy cannot read device memory (a kiln::cuda_tensor): use "
                                 "kiln::cuda{}, or copy the tensor with kiln::to_host");
  using node_type = cuda_tensor<T, LR>;
  using value_type = T;
  static constexpr bool is_leaf = true;
  static constexpr std::size_t leaf_count = 1;
  evaluator(cuda_tensor<T, LR> const&, extents<R> const&) {}
};

// A tensor in device memory, its strides broadcast to the output's shape.
template <class T, int LR, int R>
struct device_evaluator<cuda_tensor<T, LR>, R> {
  using node_type = cuda_tensor<T, LR>;
  using value_type = T;

  device_evaluator(cuda_tensor<T, LR> const& t, extents<R> const& out_shape) : data(t.data()) {
    extents<R> const s = broadcast_strides<R, LR>(t.shape(), t.strides(), out_shape);
    extents<R> const dense = contiguous_strides<R>(out_shape);
    bool in_order = true, everywhere = true;
    for (int d = 0; d < R; ++d) {
      strides[d] = s[d];
      if (out_shape[d] == 1) continue;
      in_order = in_order && s[d] == dense[d];
      everywhere = everywhere && s[d] == 0;
    }
    flat = in_order || everywhere;
    step = in_order ? 1 : 0;
  }

  bool is_flat() const noexcept { return flat; }
  KILN_HD T read(flat_read r) const noexcept { return data[r.i * step]; }
  KILN_HD T read(strided_read r) const noexcept {
    index_t offset = 0;
    for (int d = 0; d < R; ++d) offset += r.c[d] * strides[d];
    return data[offset];
  }

  T const* data;
  index_t step = 0;
  index_t strides[R > 0 ? R : 1] = {};
  bool flat = true;
};

template <class T, int R>
struct device_evaluator<constant<T>, R> {
  using node_type = constant<T>;
  using value_type = T;

  device_evaluator(constant<T> const& node, extents<R> const&) : value(node.value()) {}

  bool is_flat() const noexcept { return true; }
  template <class Read>
  KILN_HD T read(Read) const noexcept {
    return value;
  }

  T value;
};

// A child's value as argument I of Op reads it: a truth value for mask arguments, the op's
// compute type otherwise (as eval/evaluator.hpp's as_argument does for scalars).
template <class Op, std::size_t I, class Compute, class V>
KILN_HD auto device_argument(V const& v) noexcept {
  if constexpr (!reads_as_mask<Op>(I))
    return static_cast<Compute>(v);
  else if constexpr (std::is_same_v<V, bool>)
    return v;
  else
    return v != V(0);
}

template <class Op, class... Args, int R>
struct device_evaluator<map<Op, Args...>, R> {
  using node_type = map<Op, Args...>;
  using value_type = typename node_type::value_type;
  using compute_type = typename node_type::compute_type;
  using children = indexed_pack<std::index_sequence_for<Args...>, device_evaluator<Args, R>...>;
  static constexpr std::size_t arity = sizeof...(Args);

  device_evaluator(node_type const& node, extents<R> const& out_shape)
      : op(node.op()), args(apply_pack([&](Args const&... a) { return children{{device_evaluator<Args, R>(a, out_shape)}...}; },
                                       node.args())) {}

  bool is_flat() const noexcept { return flat(std::index_sequence_for<Args...>{}); }
  template <class Read>
  KILN_HD value_type read(Read r) const noexcept {
    return read_impl(r, std::index_sequence_for<Args...>{});
  }
  // Op applied to its children's values, each converted as the op reads it; in the compute type.
  template <class... V>
  KILN_HD auto apply(V const&... v) const noexcept {
    return apply_impl(std::index_sequence_for<Args...>{}, v...);
  }

  Op op;
  children args;

 private:
  template <std::size_t... I>
  bool flat(std::index_sequence<I...>) const noexcept {
    return (slot<I>(args).is_flat() && ...);
  }
  template <class Read, std::size_t... I>
  KILN_HD value_type read_impl(Read r, std::index_sequence<I...>) const noexcept {
    return static_cast<value_type>(apply(slot<I>(args).read(r)...));
  }
  template <std::size_t... I, class... V>
  KILN_HD auto apply_impl(std::index_sequence<I...>, V const&... v) const noexcept {
    return op(device_argument<Op, I, compute_type>(v)...);
  }
};

}  // namespace kiln::detail

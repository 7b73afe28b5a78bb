// kiln/cuda/assign.hpp: kiln::eval(kiln::cuda{}, ...), the one place the CUDA backend computes
// (as eval/assign.hpp is on the host: shape check, boundaries, aliasing, the kernel), and the
// operations built on it: kiln::to_host, kiln::clone and views of device tensors.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/cuda/reduce.hpp>
#include <kiln/eval/assign.hpp>

namespace kiln {
namespace detail {

// Calls f on every device tensor of a tree, through boundaries too.
template <class Node, class F>
void for_each_device_leaf(Node const& node, F&& f) {
  if constexpr (requires { node.storage(); }) f(node);
  else if constexpr (requires { node.args(); }) apply_pack([&](auto const&... a) { (for_each_device_leaf(a, f), ...); }, node.args());
  else if constexpr (requires { node.arg(); }) for_each_device_leaf(node.arg(), f);
}

// The device tensor's layout as a host view: addresses and strides only, never dereferenced.
template <class T, int R>
tensor_view<T const, R> layout_of(cuda_tensor<T, R> const& t) noexcept {
  return {t.data(), t.shape(), t.strides()};
}

// As needs_temporary in eval/assign.hpp: whether some operand overlaps dst without reading it
// element for element at the same index.
template <class T, int R, class Root>
bool device_needs_temporary(cuda_tensor<T, R> const& dst, Root const& root) {
  bool unsafe = false;
  for_each_device_leaf(root, [&](auto const& t) { unsafe = unsafe || !reads_in_place(layout_of(dst), layout_of(t)); });
  return unsafe;
}

template <class T, int R, class E>
void device_assign(cuda_tensor<T, R> const& dst, E const& e) {
  using X = std::remove_cvref_t<E>;
  check_assignable_types<X, T, R>();
  check_assignable(e.shape(), dst.shape());
  if (dst.size() == 0) return;
  if constexpr (is_materialized<X>) {
    if constexpr (std::is_same_v<typename X::value_type, T> && X::rank == R) {
      bool direct = dst.shape() == e.shape() && dst.is_contiguous();
      for_each_device_leaf(e, [&](auto const& t) { direct = direct && disjoint(layout_of(dst), layout_of(t)); });
      if (direct) return device_materialize(dst, e);
    }
    run_elementwise(dst, device_evaluate_boundary(e));
  } else if constexpr (contains_materialized<X>::value) {
    device_assign(dst, device_lower(e));
  } else if (device_needs_temporary(dst, e)) {
    cuda_tensor<T, R> const temporary(dst.shape(), uninitialized);
    run_elementwise(temporary, e);
    run_elementwise(dst, temporary);
  } else {
    run_elementwise(dst, e);
  }
}

// A tensor's view as another device tensor over the same storage: f computes the view's layout
// (kiln::transpose, kiln::slice...) on a host view of the addresses, which it never reads.
template <class T, int R, class F>
auto device_view(cuda_tensor<T, R> const& t, F const& f) {
  auto const v = f(tensor_view<T, R>(t.data(), t.shape(), t.strides()));
  return cuda_tensor<T, decltype(v)::rank>(t, v.data(), v.shape(), v.strides());
}

}  // namespace detail

// Evaluates `e` into the device tensor `dst` with CUDA kernels: one fused kernel for an
// elementwise expression, broadcasting as on the host. dst is a handle, so views work too:
// kiln::eval(kiln::cuda{}, kiln::transpose(out), x).
template <class T, int R, expression E>
void eval(cuda, cuda_tensor<T, R> const& dst, E const& e) {
  detail::device_assign(dst, e);
}

// Evaluates `e` into a new device tensor of its shape and type: kiln::eval(kiln::cuda{}, kiln::sum(x)).item()
// for a full reduction's value.
template <expression E>
  requires detail::device_memory<E>
auto eval(cuda, E const& e) {
  using X = std::remove_cvref_t<E>;
  cuda_tensor<typename X::value_type, X::rank> out(e.shape(), uninitialized);
  detail::device_assign(out, e);
  return out;
}

// A contiguous device copy (copying a cuda_tensor aliases it).
template <class T, int R>
cuda_tensor<T, R> clone(cuda_tensor<T, R> const& t) {
  return eval(cuda{}, t);
}

// A host copy of a device tensor; waits for the kernels that write it.
template <class T, int R>
tensor<T, R> to_host(cuda_tensor<T, R> const& t) {
  if (!t.is_contiguous()) return to_host(clone(t));
  tensor<T, R> out(t.shape(), uninitialized);
  if (!out.empty())
    detail::check(cudaMemcpyAsync(out.data(), t.data(), static_cast<std::size_t>(out.size()) * sizeof(T),
                                  cudaMemcpyDeviceToHost, detail::stream()),
                  "cudaMemcpyAsync");
  detail::synchronize();
  return out;
}

// Views of device tensors, sharing their storage, as the host functions of the same names.
template <class T, int R>
auto transpose(cuda_tensor<T, R> const& t) {
  return detail::device_view(t, [](auto v) { return transpose(v); });
}
template <class T, int R>
auto transpose(cuda_tensor<T, R> const& t, int dim0, int dim1) {
  return detail::device_view(t, [&](auto v) { return transpose(v, dim0, dim1); });
}
template <class T, int R, std::size_t P>
auto permute(cuda_tensor<T, R> const& t, int const (&perm)[P]) {
  return detail::device_view(t, [&](auto v) { return permute(v, perm); });
}
template <class T, int R>
auto slice(cuda_tensor<T, R> const& t, int dim, index_t start, index_t stop, index_t step = 1) {
  return detail::device_view(t, [&](auto v) { return slice(v, dim, start, stop, step); });
}
template <class T, int R>
auto select(cuda_tensor<T, R> const& t, int dim, index_t index) {
  return detail::device_view(t, [&](auto v) { return select(v, dim, index); });
}
template <class T, int R, std::size_t N>
auto reshape(cuda_tensor<T, R> const& t, index_t const (&shape)[N]) {
  return detail::device_view(t, [&](auto v) { return reshape(v, shape); });
}
template <class T, int R>
auto unsqueeze(cuda_tensor<T, R> const& t, int dim) {
  return detail::device_view(t, [&](auto v) { return unsqueeze(v, dim); });
}
template <class T, int R>
auto squeeze(cuda_tensor<T, R> const& t, int dim) {
  return detail::device_view(t, [&](auto v) { return squeeze(v, dim); });
}

}  // namespace kiln

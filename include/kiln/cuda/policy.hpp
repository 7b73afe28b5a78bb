// kiln/cuda/policy.hpp: the kiln::cuda policy tag, and the plain compile errors for mixing it up
// with host memory. Visible to every compiler, so that host code misusing the tag gets the same
// one-line message as device code; the CUDA backend itself (cuda/backend.hpp) compiles only
// under nvcc.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/policy.hpp>
#include <kiln/core/views.hpp>
#include <kiln/expr/reduce.hpp>

#include <type_traits>

namespace kiln {

namespace detail {

template <class...>
inline constexpr bool always_false = false;

// Whether a tensor or an expression lives in device memory: specialised for kiln::cuda_tensor
// and f's inputs in kiln::value_and_grad(kiln::cuda{}, ...) by the backend; nodes are on the
// device when any operand is.
template <class X>
inline constexpr bool on_device = false;
template <class Op, class... Args>
inline constexpr bool on_device<map<Op, Args...>> = (on_device<Args> || ...);
template <class Op, class Arg, int N, bool Keep>
inline constexpr bool on_device<reduction<Op, Arg, N, Keep>> = on_device<Arg>;
template <class Arg, bool Log>
inline constexpr bool on_device<softmax_node<Arg, Log>> = on_device<Arg>;

template <class X>
concept device_memory = on_device<std::remove_cvref_t<X>>;

}  // namespace detail

// kiln::cuda{} into host memory.
template <class Dst, expression E>
  requires(!detail::device_memory<Dst>)
void eval(cuda, Dst&&, E const&) {
  static_assert(detail::always_false<Dst>,
                "kiln: kiln::cuda{} writes device memory, and this destination is host memory (evaluate into a "
                "kiln::cuda_tensor in code compiled by nvcc, or use a CPU policy such as kiln::simd)");
}

// kiln::cuda{} on an expression of host tensors.
template <expression E>
  requires(!detail::device_memory<E>)
void eval(cuda, E const&) {
  static_assert(detail::always_false<E>,
                "kiln: kiln::cuda{} reads device memory, and this expression reads host tensors (copy them with "
                "kiln::to_device, in code compiled by nvcc)");
}

// A CPU policy on device memory: an expression reading it, or a device destination.
template <policy P, viewable Dst, expression E>
  requires detail::device_memory<E>
void eval(P const&, Dst&&, E const&) {
  static_assert(detail::always_false<P>, "kiln: a CPU policy cannot read device memory (a kiln::cuda_tensor): use "
                                         "kiln::cuda{}, or copy the tensor with kiln::to_host");
}
template <policy P, class Dst, expression E>
  requires detail::device_memory<Dst>
void eval(P const&, Dst&&, E const&) {
  static_assert(detail::always_false<P>, "kiln: a CPU policy cannot write device memory (a kiln::cuda_tensor): use "
                                         "kiln::cuda{}");
}

}  // namespace kiln

// kiln/core/fwd.hpp: declarations shared across layers: the expression concept and the one
// function through which every assignment runs (defined in eval/assign.hpp).
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/config.hpp>

#include <type_traits>

namespace kiln {

// Every node of an expression tree, and every tensor or view, says so with a member constant.
// Anything else (a std::vector, a pointer, an Eigen matrix) is not an expression and cannot be
// used in one without kiln::view.
template <class E>
concept expression = requires { requires std::remove_cvref_t<E>::is_kiln_expression; };

template <class T, int R>
class tensor_view;
template <class T, int R>
class tensor;

namespace detail {
// What an assignment's destination view is: any view, or all of one kiln::tensor (whose
// allocation no other tensor shares, which makes most of the aliasing check unnecessary).
enum class destination { view, whole_tensor };

// Evaluates `e` into `dst` under `policy`: checks shapes, handles aliasing, plans and runs the
// fused loop. The only place where kiln computes anything.
template <class Policy, class T, int R, class E>
void assign(Policy const& policy, tensor_view<T, R> const& dst, E const& e, destination kind = destination::view);
}  // namespace detail

}  // namespace kiln

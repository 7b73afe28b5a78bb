// kiln/core/function_objects.hpp: + - * as function objects, for math::wrapping and the folds.
// kiln's own rather than std::plus<> and friends: <functional> added about 7% to the compile
// time of <kiln/kiln.hpp>. KILN_HD: the ops call them in CUDA device code.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/config.hpp>

namespace kiln::math {

struct plus {
  template <class A, class B>
  KILN_HD constexpr auto operator()(A const& a, B const& b) const -> decltype(a + b) { return a + b; }
};
struct minus {
  template <class A, class B>
  KILN_HD constexpr auto operator()(A const& a, B const& b) const -> decltype(a - b) { return a - b; }
};
struct multiplies {
  template <class A, class B>
  KILN_HD constexpr auto operator()(A const& a, B const& b) const -> decltype(a * b) { return a * b; }
};

}  // namespace kiln::math

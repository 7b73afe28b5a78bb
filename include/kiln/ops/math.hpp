// kiln/ops/math.hpp: the few helpers op bodies need to read the same on scalars and on xsimd
// batches (select, NaN tests, truth values, wrapping integer arithmetic).
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/config.hpp>
#include <kiln/core/simd.hpp>
#include <kiln/ops/op.hpp>

#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace kiln::math {

template <class T>
struct element_of {
  using type = T;
};
template <class T, class A>
struct element_of<xsimd::batch<T, A>> {
  using type = T;
};
// The element type of a scalar or of a batch.
template <class T>
using element_t = typename element_of<T>::type;

template <class T>
inline constexpr bool is_integer = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// A constant of x's type (a splat for batches).
template <class T>
KILN_ALWAYS_INLINE T lit(double v) {
  return T(static_cast<element_t<T>>(v));
}

// m ? a : b, lane by lane for batches.
template <class M, class T>
KILN_ALWAYS_INLINE T select(M const& m, T const& a, T const& b) {
  if constexpr (simd_detail::is_batch<T>)
    return xsimd::select(m, a, b);
  else
    return m ? a : b;
}

template <class T>
KILN_ALWAYS_INLINE auto is_nan(T const& x) {
  if constexpr (simd_detail::is_batch<T>)
    return xsimd::isnan(x);
  else if constexpr (std::is_floating_point_v<T>)
    return std::isnan(x);
  else
    return false;
}

// Logical and/or/not of truth values (bool or batch_bool).
template <class M>
KILN_ALWAYS_INLINE M both(M const& a, M const& b) {
  if constexpr (std::is_same_v<M, bool>)
    return a && b;
  else
    return a & b;
}
template <class M>
KILN_ALWAYS_INLINE M either(M const& a, M const& b) {
  if constexpr (std::is_same_v<M, bool>)
    return a || b;
  else
    return a | b;
}
template <class M>
KILN_ALWAYS_INLINE M negate(M const& a) {
  if constexpr (std::is_same_v<M, bool>)
    return !a;
  else
    return ~a;
}

// Integer arithmetic wraps (two's complement) as in PyTorch instead of overflowing into UB:
// computed in uint64 and narrowed, which C++20 defines as modular.
template <class T, class F>
KILN_ALWAYS_INLINE T wrapping(T a, T b, F f) {
  if constexpr (is_integer<T>)
    return static_cast<T>(f(static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(b)));
  else
    return static_cast<T>(f(a, b));
}

// Base for op structs: arity and kind.
template <int Arity, op_kind Kind>
struct op_base {
  static constexpr int arity = Arity;
  static constexpr op_kind kind = Kind;
};

}  // namespace kiln::math

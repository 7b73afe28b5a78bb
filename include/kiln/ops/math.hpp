// kiln/ops/math.hpp: the few helpers op bodies need to read the same on scalars and on xsimd
// batches (select, NaN tests, truth values, wrapping integer arithmetic), and the math functions
// whose xsimd 8 versions need a fix at the edges or a more exact path.
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
KILN_ALWAYS_INLINE KILN_HD T lit(double v) {
  return T(static_cast<element_t<T>>(v));
}

// m ? a : b, lane by lane for batches.
template <class M, class T>
KILN_ALWAYS_INLINE KILN_HD T select(M const& m, T const& a, T const& b) {
  if constexpr (simd_detail::is_batch<T>)
    return xsimd::select(m, a, b);
  else
    return m ? a : b;
}

template <class T>
KILN_ALWAYS_INLINE KILN_HD auto is_nan(T const& x) {
  if constexpr (simd_detail::is_batch<T>)
    return xsimd::isnan(x);
  else if constexpr (std::is_floating_point_v<T>)
    return std::isnan(x);
  else
    return false;
}

// Logical and/or/not of truth values (bool or batch_bool).
template <class M>
KILN_ALWAYS_INLINE KILN_HD M both(M const& a, M const& b) {
  if constexpr (std::is_same_v<M, bool>)
    return a && b;
  else
    return a & b;
}
template <class M>
KILN_ALWAYS_INLINE KILN_HD M either(M const& a, M const& b) {
  if constexpr (std::is_same_v<M, bool>)
    return a || b;
  else
    return a | b;
}
template <class M>
KILN_ALWAYS_INLINE KILN_HD M negate(M const& a) {
  if constexpr (std::is_same_v<M, bool>)
    return !a;
  else
    return ~a;
}

// Integer arithmetic wraps (two's complement) as in PyTorch instead of overflowing into UB:
// computed in uint64 and narrowed, which C++20 defines as modular.
template <class T, class F>
KILN_ALWAYS_INLINE KILN_HD T wrapping(T a, T b, F f) {
  if constexpr (is_integer<T>)
    return static_cast<T>(f(static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(b)));
  else
    return static_cast<T>(f(a, b));
}

// --- Functions whose xsimd version needs help --------------------------------------------------
// The ops call these instead of xsimd directly. Scalars go to <cmath> unchanged; batches get
// xsimd's vectorised function plus a fix where xsimd 8 is wrong at an edge, or a slower exact
// path where it is too inexact (each says which and why). tests/ops.cpp checks them all.

// f applied to each lane of x through its scalar form, one call per element: for functions whose
// xsimd version is too inexact to repair cheaply.
template <class T, class F>
KILN_ALWAYS_INLINE KILN_HD T per_lane(T const& x, F const& f) {
  if constexpr (simd_detail::is_batch<T>) {
    using E = element_t<T>;
    alignas(storage_alignment) E lanes[T::size];
    x.store_aligned(lanes);
    for (E& v : lanes) v = f(v);
    return T::load_aligned(lanes);
  } else {
    return f(x);
  }
}

// f evaluated in double for float inputs, a float batch as several double batches: for float
// functions where xsimd's float version is inexact but its double version, rounded to float, is
// not. Double inputs go to f as they are.
template <class T, class F>
KILN_ALWAYS_INLINE KILN_HD T in_double(T const& x, F const& f) {
  if constexpr (!std::is_same_v<element_t<T>, float>) {
    return f(x);
  } else if constexpr (simd_detail::is_batch<T>) {
    using D = xsimd::batch<double, typename T::arch_type>;
    alignas(storage_alignment) float narrow[T::size];
    alignas(storage_alignment) double wide[T::size];
    x.store_aligned(narrow);
    for (std::size_t k = 0; k < T::size; ++k) wide[k] = narrow[k];
    for (std::size_t k = 0; k < T::size; k += D::size)
      f(D::load_aligned(wide + k)).store_aligned(wide + k);
    for (std::size_t k = 0; k < T::size; ++k) narrow[k] = static_cast<float>(wide[k]);
    return T::load_aligned(narrow);
  } else {
    return static_cast<float>(f(static_cast<double>(x)));
  }
}

// e^x and 2^x with gradual underflow. xsimd's exp and exp2 return 0 wherever the result is
// subnormal (x < ln FLT_MIN = -87.3 in float, -708.4 in double; x < -126 and -1022 for exp2)
// instead of the subnormal value. There e^x = (e^(x/2))^2: x/2 is exact, e^(x/2) is normal and
// the square rounds once. Batches with no such lane (nearly all) pay one compare and one branch.
// f(x) for f = e^x or 2^x, with results below the smallest normal (x < min_normal_x) computed as
// f(x/2)^2.
template <class T, class F>
KILN_ALWAYS_INLINE KILN_HD T with_gradual_underflow(T const& x, double min_normal_x, F const& f) {
  if constexpr (simd_detail::is_batch<T>) {
    auto const subnormal = x < lit<T>(min_normal_x);
    if (xsimd::none(subnormal)) return f(x);
    T const y = f(select(subnormal, x * lit<T>(0.5), x));
    return select(subnormal, y * y, y);
  } else {
    return f(x);
  }
}
template <class T>
KILN_ALWAYS_INLINE KILN_HD T exp(T const& x) {
  constexpr bool single = std::is_same_v<element_t<T>, float>;
  return with_gradual_underflow(x, single ? -87.33654475 : -708.39641853226408,  // ln(FLT_MIN), ln(DBL_MIN)
                                [](auto const& v) { using std::exp; return exp(v); });
}
template <class T>
KILN_ALWAYS_INLINE KILN_HD T exp2(T const& x) {
  constexpr bool single = std::is_same_v<element_t<T>, float>;
  return with_gradual_underflow(x, single ? -126.0 : -1022.0,  // log2(FLT_MIN), log2(DBL_MIN)
                                [](auto const& v) { using std::exp2; return exp2(v); });
}

// e^x - 1 and ln(1 + x), keeping the sign of a zero (xsimd's give +0 for -0).
template <class T>
KILN_ALWAYS_INLINE KILN_HD T expm1(T const& x) {
  using std::expm1;
  if constexpr (simd_detail::is_batch<T>) return select(x == T(0), x, expm1(x));
  else return expm1(x);
}
template <class T>
KILN_ALWAYS_INLINE KILN_HD T log1p(T const& x) {
  using std::log1p;
  if constexpr (simd_detail::is_batch<T>) return select(x == T(0), x, log1p(x));
  else return log1p(x);
}

// Logarithms of subnormal doubles: xsimd's double log, log2 and log10 read the exponent field
// without normalising first (log(4.9e-324) came out as -746.5, not -744.4). Scaling such inputs by
// 2^54 makes them normal; the scale comes off as 54 log(2). (xsimd's float versions are right.)
template <class T, class Log>
KILN_ALWAYS_INLINE KILN_HD T log_of_subnormal_too(T const& x, Log const& log, double log_of_2) {
  if constexpr (simd_detail::is_batch<T> && std::is_same_v<element_t<T>, double>) {
    auto const subnormal = x < lit<T>(2.2250738585072014e-308);  // DBL_MIN; <= 0 is unaffected
    if (xsimd::none(subnormal)) return log(x);
    T const y = log(select(subnormal, x * lit<T>(0x1p54), x));
    return select(subnormal, y - lit<T>(54 * log_of_2), y);
  } else {
    return log(x);
  }
}
template <class T>
KILN_ALWAYS_INLINE KILN_HD T log(T const& x) {
  auto const f = [](auto const& v) { using std::log; return log(v); };
  return log_of_subnormal_too(x, f, 0.69314718055994530942);
}
template <class T>
KILN_ALWAYS_INLINE KILN_HD T log2(T const& x) {
  auto const f = [](auto const& v) { using std::log2; return log2(v); };
  return log_of_subnormal_too(x, f, 1.0);
}
template <class T>
KILN_ALWAYS_INLINE KILN_HD T log10(T const& x) {
  auto const f = [](auto const& v) { using std::log10; return log10(v); };
  return log_of_subnormal_too(x, f, 0.30102999566398119521);
}

// A rounded value has its input's sign (floor(-0.5) = -1, ceil(-0.5) = -0, trunc(-0) = -0). Without
// SSE4.1's roundps (an SSE2-only build) xsimd rounds through integer conversion and returns +0 for
// -0 and for -1 < x < 0; the sign is copied back. NaN and inf pass unchanged.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T signed_round(T const& rounded, T const& x) {
  if constexpr (simd_detail::is_batch<T>) return xsimd::copysign(rounded, x);
  else return rounded;
}

// erf: xsimd's float erf is within 2 ulp; its double erf is off by up to ~70 ulp (near 2.2) and
// gives NaN for |x| = DBL_MAX, so doubles go lane by lane through std::erf.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T erf(T const& x) {
  using std::erf;
  if constexpr (simd_detail::is_batch<T> && std::is_same_v<element_t<T>, double>)
    return per_lane(x, [](double v) { return std::erf(v); });
  else
    return erf(x);
}
// erfc to far below a float ulp, vectorised: xsimd's double erfc (error ~1e-11 at worst) with its
// argument clamped to [-27, 27], outside which it returns NaN while erfc is 2, or 0 in double.
// Scalars go to std::erfc.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T erfc_to_float_accuracy(T const& x) {
  using std::erfc;
  if constexpr (simd_detail::is_batch<T>)
    return erfc(select(x > T(27), T(27), select(x < T(-27), T(-27), x)));  // NaN stays NaN
  else
    return erfc(x);
}
// erfc: xsimd's is inexact in both precisions (float: 6 ulp below 0.67, up to 70 ulp near 9, and
// 0 where the result is subnormal; double: ~30 ulp, far worse above 6, NaN for huge |x|). Floats
// are computed in double (erfc_to_float_accuracy); doubles go lane by lane through std::erfc.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T erfc(T const& x) {
  using std::erfc;
  if constexpr (!simd_detail::is_batch<T>)
    return erfc(x);
  else if constexpr (std::is_same_v<element_t<T>, double>)
    return per_lane(x, [](double v) { return std::erfc(v); });
  else
    return in_double(x, [](auto const& v) { return erfc_to_float_accuracy(v); });
}

// Base for op structs: arity and kind.
template <int Arity, op_kind Kind>
struct op_base {
  static constexpr int arity = Arity;
  static constexpr op_kind kind = Kind;
};

}  // namespace kiln::math

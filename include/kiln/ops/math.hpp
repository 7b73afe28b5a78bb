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

// -x for a float or a batch of them, by flipping the sign bit: xsimd 8 negates AVX-512 batches as
// 0 - x, which gives +0 for 0 where IEEE and PyTorch give -0. (Gradients negate through this.)
template <class T>
KILN_ALWAYS_INLINE KILN_HD T negative(T x) {
  if constexpr (simd_detail::is_batch<T>)
    return simd_detail::negative(x);
  else
    return -x;
}

// x - m with x rounded to its type first. Where x is a product fused into the loop (the variance
// of x * y), the compiler may contract the two into one fused multiply-add, which subtracts m
// from the exact product; a variance's deviations must be exactly 0 where x is its own mean (a
// single element: var with correction 1 is then NaN, not inf), as PyTorch, which evaluates the
// argument before it reduces, gives them. (__fsub_rn and __dsub_rn are never contracted.)
template <class T>
KILN_ALWAYS_INLINE KILN_HD T sub_rounded(T x, T m) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return __fsub_rn(x, m);
  else return __dsub_rn(x, m);
#else
  return simd_detail::rounded(x) - m;
#endif
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

// PyTorch's maximum (Max) and minimum, as the amax and amin folds combine: NaN where either is
// NaN, otherwise b where it is strictly greater (smaller), else a (a tie, +0 against -0 too, gives
// a). On batches one max or min and one blend: max_else_second(b, a) gives a where either is NaN,
// and the blend passes b's NaN. The general form, three compares and two blends on the fold's
// dependency chain, made amax 7x slower than a hand loop with AVX-512.
//
// extremum_ignoring_nan is the first of those two steps alone, on batches: b where it is strictly
// greater (smaller), else a, and a wherever either is NaN. The amax and amin folds step with it
// where a probe beside them shows no NaN (fold_block_probed in eval/reduce.hpp).
template <bool Max, class B>
KILN_ALWAYS_INLINE B extremum_ignoring_nan(B const& a, B const& b) {
  return Max ? simd_detail::max_else_second(b, a) : simd_detail::min_else_second(b, a);
}
template <bool Max, class T>
KILN_ALWAYS_INLINE KILN_HD T nan_propagating_extremum(T a, T b) {
  constexpr bool floating = std::is_floating_point_v<element_t<T>>;
  if constexpr (floating && simd_detail::is_batch<T>) {
    return xsimd::select(xsimd::isnan(b), b, extremum_ignoring_nan<Max>(a, b));
  } else {
    T const chosen = select(Max ? a < b : b < a, b, a);
    if constexpr (floating)
      return select(either(is_nan(a), is_nan(b)), a + b, chosen);
    else
      return chosen;
  }
}
template <class T>
KILN_ALWAYS_INLINE KILN_HD T maximum(T a, T b) {
  return nan_propagating_extremum<true>(a, b);
}
template <class T>
KILN_ALWAYS_INLINE KILN_HD T minimum(T a, T b) {
  return nan_propagating_extremum<false>(a, b);
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

// e^x and 2^x over their whole range. xsimd's exp and exp2 return 0 wherever the result is
// subnormal (x < ln FLT_MIN = -87.3 in float, -708.4 in double; x < -126 and -1022 for exp2)
// instead of the subnormal value, and inf a little before the result passes the largest finite
// value (double exp from x = 709.44, where e^x is finite up to 709.78; exp2 from x = 127 in float
// and 1023 in double, finite up to 128 and 1024): they scale by 2^k built from its exponent field,
// which has no 2^128 or 2^1024. Outside [min_direct_x, max_direct_x] f(x) = f(x/2)^2: x/2 is
// exact, f(x/2) is normal and finite, and the square rounds once (measured within 1.6 ulp for
// double exp on [709.4, 709.78]). exp2 scales exactly instead (exp2 below). Batches with no such
// lane (nearly all) pay two compares and one branch.
template <class T, class F>
KILN_ALWAYS_INLINE KILN_HD T with_full_range(T const& x, double min_direct_x, double max_direct_x, F const& f) {
  if constexpr (simd_detail::is_batch<T>) {
    auto const outside = either(x < lit<T>(min_direct_x), x > lit<T>(max_direct_x));
    if (xsimd::none(outside)) return f(x);
    T const y = f(select(outside, x * lit<T>(0.5), x));
    return select(outside, y * y, y);
  } else {
    return f(x);
  }
}

// e^r for |r| <= ln(2)/2 + a little (the range-reduced argument of exp_float_batch below): r is
// x - k ln 2 in two steps (Cody-Waite, ln 2 = 0.693359375 - 2.12194440e-4, the first part 9 bits
// long so k times it is exact), and e^r = 1 + r + r^2 P(r), P of degree 4: the minimax
// coefficients of Cephes' expf as xsimd 8 carries them (0x3f000000 ... 0x3ab778cf), error far
// below an ulp on that interval. P is evaluated in Estrin's scheme, as (p0 + p1 r) +
// ((p2 + p3 r) + p4 r^2) r^2: three dependent steps instead of Horner's four, for the same number of
// operations. Loops of exps (W2, sigmoid) are bound on Zen 5 by how long each batch's chain of
// dependent operations holds scheduler entries more than by the FMA units: this form took
// `sigmoid` over 64K floats from 8.2 to 7.9 µs there, W2 from 23.9 to 23.2 (commit 8429080).
template <class T>
KILN_ALWAYS_INLINE KILN_HD T exp_float_reduced(T const& x, T const& k) {
  T r = simd_detail::fma(k, T(-0.693359375f), x);  // x - k ln 2, each step rounded once
  r = simd_detail::fma(k, T(2.12194440e-4f), r);
  T const r2 = r * r;
  T const lo = simd_detail::fma(T(1.6666277e-01f), r, T(0.5f));
  T const hi = simd_detail::fma(T(8.3955629e-03f), r, T(4.1665401e-02f));
  T const y = simd_detail::fma(simd_detail::fma(T(1.3997796e-03f), r2, hi), r2, lo);
  return simd_detail::fma(y, r2, r) + T(1.0f);
}
// M + round(x * scale), M = 1.5 * 2^23 + 127: the sum rounds x * scale to an integer k and leaves
// k + 127 in its low mantissa bits (exp_float_batch_wide below).
inline constexpr float exp_magic = 12583039.0f;  // M
template <class T>
KILN_ALWAYS_INLINE KILN_HD T magic_plus_round(T const& x, float scale) {
  return simd_detail::fma(x, T(scale), T(exp_magic));
}
// 2^k from M + k: the sum's low bits, k + 127, shifted into the exponent field.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T two_to_the(T const& km) {
  return simd_detail::bits_as<float>(simd_detail::bits_as<std::int32_t>(km) << 23);
}
// R + round(x / ln 2), R = 1.5 * 2^23: the sum rounds x / ln 2 to an integer k and leaves k in its
// low mantissa bits. Both exp paths round k through it, so that they agree bit for bit.
inline constexpr float round_magic = 12582912.0f;  // R
template <class T>
KILN_ALWAYS_INLINE KILN_HD T rounded_exponent(T const& x) {
  return simd_detail::fma(x, T(1.44269504088896341f), T(round_magic));
}
// y 2^k for a float batch y in [0.70, 1.42] and k in [-125, 127] given as `rounded` = R + k
// (rounded_exponent): k added to y's exponent field. The result is a normal float, so this is
// exactly y * 2^k, as an integer add instead of a multiply (fused exp loops are bound by the
// multiply/FMA units).
template <class T>
KILN_ALWAYS_INLINE KILN_HD T scale_normal(T const& y, T const& rounded) {
  using simd_detail::bits_as;
  return bits_as<float>(bits_as<std::int32_t>(y) + (bits_as<std::int32_t>(rounded) << 23));
}
// exp_float_batch for any x: clamped to [-104, 88.8] first (e^-104 rounds to 0 and e^88.8
// overflows, as do all values beyond), with the bound first in max_else_second/min_else_second
// so that a NaN x comes through (they return their second operand if either is NaN). k is
// split into k1 = round(x / (2 ln 2)) and k2 = k - k1, whose factors 2^k1
// and 2^k2 are normal floats for every clamped x: e^r 2^k1 is exact and the second product
// rounds once, also where the result is subnormal or overflows to inf.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T exp_float_batch_wide(T const& x) {
  T const xc = simd_detail::min_else_second(T(88.8f), simd_detail::max_else_second(T(-104.0f), x));
  T const k = rounded_exponent(xc) - T(round_magic);
  T const k1m = magic_plus_round(xc, 0.72134752044448170f);  // M + k1
  T const k2m = (k + T(exp_magic)) - (k1m - T(exp_magic));   // M + k - k1
  return exp_float_reduced(xc, k) * two_to_the(k1m) * two_to_the(k2m);
}
// e^x for float batches, kiln's own: subnormal results included, within 2 ulp of the correctly
// rounded value over all 2^32 floats (55 inputs at 2 ulp; 99.0% of the inputs with a finite
// non-zero result correctly rounded; measured exhaustively against double exp).
//   k = round(x / ln 2), from rounded_exponent.
//   e^x = e^r 2^k. Where every lane has |x| <= 86.5 (k in [-125, 125]: nearly every batch),
//     e^r 2^k is a normal float and scale_normal makes it exactly. Other batches (some result
//     subnormal or inf, or close to that, and NaN) take exp_float_batch_wide; both paths give the
//     same bits for every float.
// The test reads x, not k, so that it does not wait on the FMA and the subtraction that make k:
// on Zen 5 that took `sigmoid` over 64K floats from 8.8 to 8.2 µs, W2 from 25.0 to 23.9.
// Speed: 9 multiplies and FMAs per batch, one fewer than xsimd's exp, which returns 0 for
// subnormal results and inf from x = 88.3763 on (e^x is finite up to 88.7228).
template <class T>
KILN_ALWAYS_INLINE KILN_HD T exp_float_batch(T const& x) {
  T const rounded = rounded_exponent(x);  // R + k
  T const k = rounded - T(round_magic);
  if (!xsimd::all(xsimd::abs(x) <= T(86.5f))) [[unlikely]]  // some |x| > 86.5, or NaN
    return exp_float_batch_wide(x);
  return scale_normal(exp_float_reduced(x, k), rounded);
}

// e^x: float batches through exp_float_batch (above); double batches through xsimd's exp over
// its whole range (with_full_range); scalars through <cmath>.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T exp(T const& x) {
  constexpr bool single = std::is_same_v<element_t<T>, float>;
  if constexpr (simd_detail::is_batch<T> && single)
    return exp_float_batch(x);
  else
    return with_full_range(x, -708.39641853226408, 709.4,  // ln(DBL_MIN); below 1023.5 ln 2
                           [](auto const& v) { using std::exp; return exp(v); });
}
// -|x|: on batches one OR of the sign bit (abs then negate is two operations). NaN stays NaN.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T minus_abs(T const& x) {
  if constexpr (simd_detail::is_batch<T>) {
    return x | T(element_t<T>(-0.0));
  } else {
    using std::abs;
    return -abs(x);
  }
}
// 2^x: past the same ends as exp's (with_full_range) 2^x = 2^(x - 1) * 2 at the top and
// 2^(x + 64) * 2^-64 at the bottom, both exact shifts of x there and exact scalings, so only the
// subnormal result rounds again: within 1.5 ulp at both ends in float and double (xsimd's own
// exp2 there), where f(x/2)^2 reached 3 and 4 ulp at the top.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T exp2(T const& x) {
  using std::exp2;
  if constexpr (simd_detail::is_batch<T>) {
    constexpr bool single = std::is_same_v<element_t<T>, float>;
    auto const below = x < lit<T>(single ? -126.0 : -1022.0), above = x > lit<T>(single ? 126.9 : 1022.9);
    if (xsimd::none(either(below, above))) return exp2(x);
    T const y = exp2(x + select(below, lit<T>(64.0), select(above, lit<T>(-1.0), lit<T>(0.0))));
    return y * select(below, lit<T>(0x1p-64), select(above, lit<T>(2.0), lit<T>(1.0)));
  } else {
    return exp2(x);
  }
}

// e^x - 1 and ln(1 + x), keeping the sign of a zero (xsimd's give +0 for -0). xsimd's expm1
// overflows where its exp does (float from x = 88.38, where e^x - 1 is finite up to 88.72; double
// from 709.44): there the 1 is far below an ulp of e^x, and kiln's exp covers the whole range.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T expm1(T const& x) {
  using std::expm1;
  if constexpr (simd_detail::is_batch<T>) {
    T const y = select(x == T(0), x, expm1(x));
    auto const large = x > lit<T>(std::is_same_v<element_t<T>, float> ? 88.0 : 709.0);
    if (xsimd::none(large)) return y;
    return select(large, math::exp(x), y);
  } else {
    return expm1(x);
  }
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

// tanh. Float batches: an odd rational approximation, x P(x^2) / Q(x^2) with P of degree 6 and Q
// of degree 3 (the form of Eigen's and XLA's fast float tanh, one division, no exp and no branch),
// with kiln's own coefficients: a minimax fit of the relative error on [0, 9.02] (Loeb's iterated
// linear programs in double, numpy/scipy), error 6.8e-9 before rounding to float. Rounding in
// the float evaluation dominates: at most 5 ulp from the correctly rounded tanh over all 2^32
// floats (measured exhaustively against double tanh: 88 inputs at 5 ulp, 13066 at 4, 99.66% within
// 1 ulp, 99.99% within 2), against 1-2 ulp for xsimd's tanh at three times the cost. Eigen 3.4's
// fast tanh (same form, FMA build) also reaches 5 ulp, with 25x as many inputs at 4 ulp and 98.6%
// within 1, and needs a select for |x| < 4e-4, where its unnormalised numerator underflows;
// P(0) = Q(0) = 1 here, so tiny and subnormal x come out exactly. Beyond |x| = 9 (from
// 9.00000095, the first float from which the rational evaluates to exactly 1 with FMA; tanh(x)
// rounds to 1 from 9.0109 on) the result is ±1, and from |x| = 3 on it is clamped to [-1, 1]:
// without FMA (a build for plain SSE2 or AVX2) the rational rounds to 1.00000012 near 9. Below 3
// neither applies (the rational stays under 1 whatever the rounding), so a batch without such a
// lane skips them for one compare and a branch: W2 at 1K elements 7% faster. The results are
// those of clamping |x| to 9.00000095 and the result to [-1, 1] everywhere, bit for bit. So
// tanh(±inf) = ±1, and it is odd, so tanh(±0) = ±0. The bounds go first in
// max_else_second/min_else_second so that NaN passes (see exp_float_batch). Double batches keep
// xsimd's tanh (1-2 ulp), scalars <cmath>.
template <class T>
KILN_ALWAYS_INLINE KILN_HD T tanh(T const& x) {
  if constexpr (simd_detail::is_batch<T> && std::is_same_v<element_t<T>, float>) {
    T const s = x * x;
    T p = simd_detail::fma(s, T(-8.43607207e-14f), T(5.25778796e-11f));
    p = simd_detail::fma(p, s, T(-2.01839825e-08f));
    p = simd_detail::fma(p, s, T(1.11442587e-05f));
    p = simd_detail::fma(p, s, T(0.00310300151f));
    p = simd_detail::fma(p, s, T(0.130831569f));
    p = simd_detail::fma(p, s, T(1.0f));
    T q = simd_detail::fma(s, T(0.000254475162f), T(0.0244913809f));
    q = simd_detail::fma(q, s, T(0.464164853f));
    q = simd_detail::fma(q, s, T(1.0f));
    T const rational = (x * p) / q;
    if (!xsimd::any(s >= T(9.0f))) return rational;  // every lane below 3 (NaN among them)
    T const one(1.0f);
    T const bounded = simd_detail::min_else_second(one, simd_detail::max_else_second(-one, rational));
    return xsimd::select(s > T(81.0f), xsimd::copysign(one, x), bounded);
  } else {
    using std::tanh;
    return tanh(x);
  }
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

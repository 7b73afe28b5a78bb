// kiln/core/simd.hpp: the xsimd seam. Every xsimd name kiln uses outside plain batch arithmetic
// goes through here, so a renamed call in a newer xsimd is fixed in one place.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/config.hpp>

// GCC before 13 warns that its own AVX-512 intrinsics read an uninitialised variable (the
// `__m512 __Y = __Y;` of _mm512_undefined_ps, GCC bug 105593) wherever xsimd's AVX-512 kernels
// are inlined. The pragma covers the intrinsic headers when this include is the first to reach
// them.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13 && (defined(__x86_64__) || defined(__i386__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
#include <xsimd/xsimd.hpp>

#include <type_traits>

namespace kiln::simd_detail {

// The widest instruction set this translation unit is compiled for (-march decides), except
// AVX-512 in an unoptimised GCC build: there GCC's AVX-512 intrinsics are macros whose casts do
// not accept xsimd's batches, and xsimd 8's AVX-512BW kernels fail to compile. Such builds
// (Debug, the sanitizer tests) use AVX2, with FMA where the target has it.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__) && XSIMD_WITH_AVX512F
#if XSIMD_WITH_FMA3_AVX2
using arch = xsimd::fma3<xsimd::avx2>;
#else
using arch = xsimd::avx2;
#endif
#else
using arch = xsimd::default_arch;
#endif

template <class T>
using batch = xsimd::batch<T, arch>;
template <class T>
using batch_bool = xsimd::batch_bool<T, arch>;

// Whether this build has vector registers for T at all (xsimd reports "unavailable" otherwise).
// nvcc's device pass parses the host loops too, and device code cannot hold host vector
// registers: there the host loops take their scalar paths (the host pass, which generates the
// host code, keeps its vector loops).
template <class T>
inline constexpr bool has_batch =
#if defined(__CUDA_ARCH__)
    false;
#else
    (std::is_same_v<T, float> || std::is_same_v<T, double>) && arch::available();
#endif

template <class T>
inline constexpr bool is_batch = false;
template <class T, class A>
inline constexpr bool is_batch<xsimd::batch<T, A>> = true;
template <class T>
inline constexpr bool is_batch_bool = false;
template <class T, class A>
inline constexpr bool is_batch_bool<xsimd::batch_bool<T, A>> = true;

// Sum of a batch's lanes: xsimd::hadd up to version 10, xsimd::reduce_add from 11 on.
template <class B>
auto reduce_add(B const& b) {
#if XSIMD_VERSION_MAJOR >= 11
  return xsimd::reduce_add(b);
#else
  return xsimd::hadd(b);
#endif
}

// -b. xsimd 8's AVX-512 negation computes 0 - b, which is +0 for +0; flipping the sign bit gives
// -0, as scalar negation and xsimd's other instruction sets do.
template <class T, class A>
KILN_ALWAYS_INLINE xsimd::batch<T, A> negative(xsimd::batch<T, A> const& b) {
  if constexpr (std::is_floating_point_v<T>) return b ^ xsimd::batch<T, A>(T(-0.0));
  else return -b;
}

// The lanes' bits read as element type U: xsimd::bitwise_cast<batch<U, A>> up to xsimd 10,
// bitwise_cast<U> from 11 on (xsimd PR 903).
template <class U, class T, class A>
KILN_ALWAYS_INLINE xsimd::batch<U, A> bits_as(xsimd::batch<T, A> const& x) {
#if XSIMD_VERSION_MAJOR >= 11
  return xsimd::bitwise_cast<U>(x);
#else
  return xsimd::bitwise_cast<xsimd::batch<U, A>>(x);
#endif
}

}  // namespace kiln::simd_detail

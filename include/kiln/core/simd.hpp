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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

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

// x, a float, a double or a batch of them, held in a register as its type rounds it: the compiler
// must assume an empty asm reads and rewrites it, so it cannot contract the operation that made x
// with the one that uses it into a fused multiply-add. (Elsewhere than on x86-64 and AArch64 x
// is returned as it is: GCC contracts across statements only where it has FMA, and Clang and
// MSVC do not by default.)
template <class T>
KILN_ALWAYS_INLINE T rounded(T x) noexcept {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
#if defined(__x86_64__)
#define KILN_VECTOR_REGISTER "+v"
#else
#define KILN_VECTOR_REGISTER "+w"
#endif
  if constexpr (is_batch<T>) {
    typename T::register_type r = x;
    __asm__("" : KILN_VECTOR_REGISTER(r));
    return T(r);
  } else {
    __asm__("" : KILN_VECTOR_REGISTER(x));
    return x;
  }
#undef KILN_VECTOR_REGISTER
#else
  return x;
#endif
}

// Sum of a batch's lanes. AVX-512 float and double batches add their halves down to one lane
// (the intrinsic): xsimd 8 sums them through two AVX2 horizontal adds, a longer chain at the end
// of every row of a row reduction (W6 and W7 at 1K elements were 2-4% slower). Elsewhere
// xsimd::hadd up to version 10, xsimd::reduce_add from 11 on.
template <class B>
auto reduce_add(B const& b) {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_base_of_v<xsimd::avx512f, typename B::arch_type> && std::is_same_v<typename B::value_type, float>)
    return _mm512_reduce_add_ps(b);
  else if constexpr (std::is_base_of_v<xsimd::avx512f, typename B::arch_type> && std::is_same_v<typename B::value_type, double>)
    return _mm512_reduce_add_pd(b);
  else
#endif
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

// a > b ? a : b and a < b ? a : b: the second operand where either is NaN (and on a tie), as
// x86's max and min instructions compute them. relu, the clamps inside exp and tanh, and the
// NaN-propagating maximum and minimum rely on it to pass NaN through. xsimd up to 13 maps max and
// min to those instructions on x86; from 14 on they behave as std::max and std::min
// (a < b ? b : a), which is the same with the operands swapped.
template <class T, class A>
KILN_ALWAYS_INLINE xsimd::batch<T, A> max_else_second(xsimd::batch<T, A> const& a, xsimd::batch<T, A> const& b) {
#if XSIMD_VERSION_MAJOR >= 14
  return xsimd::max(b, a);
#else
  return xsimd::max(a, b);
#endif
}
template <class T, class A>
KILN_ALWAYS_INLINE xsimd::batch<T, A> min_else_second(xsimd::batch<T, A> const& a, xsimd::batch<T, A> const& b) {
#if XSIMD_VERSION_MAJOR >= 14
  return xsimd::min(b, a);
#else
  return xsimd::min(a, b);
#endif
}

// a * b + c, rounded once (c - a * b is fma(a, -b, c), as exact). xsimd 8 has no AVX-512 kernel
// for it: its generic one is a * b + c, which GCC fuses only where it contracts the expression
// (not where the product has another use), so results would depend on the code around them.
// AVX-512 float and double batches call the instruction; the others keep xsimd's.
template <class T, class A>
KILN_ALWAYS_INLINE xsimd::batch<T, A> fma(xsimd::batch<T, A> const& a, xsimd::batch<T, A> const& b,
                                          xsimd::batch<T, A> const& c) {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_base_of_v<xsimd::avx512f, A> && std::is_same_v<T, float>)
    return _mm512_fmadd_ps(a, b, c);
  else if constexpr (std::is_base_of_v<xsimd::avx512f, A> && std::is_same_v<T, double>)
    return _mm512_fmadd_pd(a, b, c);
  else
#endif
    return xsimd::fma(a, b, c);
}
// Whether fma above is one fused instruction for batches of this build's architecture: FMA3 and
// AVX-512 on x86, and 64-bit Arm. Elsewhere (x86 without FMA3) it is a * b + c, rounded twice.
inline constexpr bool fused_fma =
    std::is_base_of_v<xsimd::fma3<xsimd::sse4_2>, arch> || std::is_base_of_v<xsimd::fma3<xsimd::avx>, arch> ||
    std::is_base_of_v<xsimd::fma3<xsimd::avx2>, arch> ||
#if XSIMD_WITH_AVX512F
    std::is_base_of_v<xsimd::avx512f, arch> ||
#endif
    std::is_base_of_v<xsimd::neon64, arch>;

// The batch with its lanes rotated by Shift (lane k holds lane (k + Shift) mod size), one permute:
// folds combine lanes in registers with it. batch_constant is batch_constant<batch<U, A>, V...> up
// to xsimd 12 and batch_constant<U, A, V...> from 13 on.
template <std::size_t Shift, class T, class A>
KILN_ALWAYS_INLINE xsimd::batch<T, A> rotate_lanes(xsimd::batch<T, A> const& b) {
  using U = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  constexpr std::size_t W = xsimd::batch<T, A>::size;
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
#if XSIMD_VERSION_MAJOR >= 13
    return xsimd::swizzle(b, xsimd::batch_constant<U, A, U((K + Shift) % W)...>{});
#else
    return xsimd::swizzle(b, xsimd::batch_constant<xsimd::batch<U, A>, U((K + Shift) % W)...>{});
#endif
  }(std::make_index_sequence<W>{});
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

// The n elements at p (0 < n < B::size, a row's tail) as a batch, the other lanes 0, reading
// nothing past p + n; and the first n lanes of b stored to p, writing nothing past p + n. With
// masked loads and stores where the instruction set has them (AVX-512 and AVX2, float and
// double: masked-off lanes never fault), with one or two narrower loads and stores on SSE2;
// through a zero-padded buffer elsewhere and for truth values. The buffer costs a variable-length
// copy each way and, on its way back, a load that cannot be forwarded from the copy's narrower
// stores: a row of 250 floats took 3x as long as one of 256.
enum class partial_access { buffer, sse2_pieces, avx2_mask, avx512_mask };
template <class B>
inline constexpr partial_access partial_access_of = partial_access::buffer;
template <class T, class A>
  requires(std::is_same_v<T, float> || std::is_same_v<T, double>)
inline constexpr partial_access partial_access_of<xsimd::batch<T, A>> =
#if XSIMD_WITH_AVX512F
    std::is_base_of_v<xsimd::avx512f, A> ? partial_access::avx512_mask :
#endif
#if XSIMD_WITH_AVX2
    std::is_base_of_v<xsimd::avx2, A> ? partial_access::avx2_mask :
#endif
#if XSIMD_WITH_SSE2
    xsimd::batch<T, A>::size * sizeof(T) == 16 && std::is_base_of_v<xsimd::sse2, A> ? partial_access::sse2_pieces :
#endif
    partial_access::buffer;

#if XSIMD_WITH_AVX2
// The AVX2 lane mask of the first n lanes: all ones in lanes below n.
template <class T>
KILN_ALWAYS_INLINE __m256i first_lanes_mask256(std::size_t n) noexcept {
  if constexpr (sizeof(T) == 4)
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  else
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(std::int64_t(n)), _mm256_setr_epi64x(0, 1, 2, 3));
}
#endif

template <class B, class T>
KILN_ALWAYS_INLINE B load_partial(T const* p, std::size_t n) noexcept {
  constexpr partial_access how = partial_access_of<B>;
#if XSIMD_WITH_AVX512F
  if constexpr (how == partial_access::avx512_mask) {
    if constexpr (sizeof(T) == 4) return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p);
    else return _mm512_maskz_loadu_pd(__mmask8((1u << n) - 1), p);
  } else
#endif
#if XSIMD_WITH_AVX2
  if constexpr (how == partial_access::avx2_mask) {
    if constexpr (sizeof(T) == 4) return _mm256_maskload_ps(p, first_lanes_mask256<T>(n));
    else return _mm256_maskload_pd(p, first_lanes_mask256<T>(n));
  } else
#endif
#if XSIMD_WITH_SSE2
  if constexpr (how == partial_access::sse2_pieces) {
    if constexpr (sizeof(T) == 8) {
      return _mm_load_sd(p);  // n == 1
    } else {
      if (n == 1) return _mm_load_ss(p);
      __m128 const low = _mm_loadl_pi(_mm_setzero_ps(), reinterpret_cast<__m64 const*>(p));
      return n == 2 ? low : _mm_movelh_ps(low, _mm_load_ss(p + 2));
    }
  } else
#endif
  {
    alignas(storage_alignment) T buffer[B::size] = {};
    std::copy_n(p, n, buffer);
    return B::load_unaligned(buffer);
  }
}

// How much of a batch a vector read covers: all W lanes; a row's tail, the first 0 < n < W; or
// either, 0 < n <= W, for a loop that runs every step, its last partial one included, through
// one copy of a large tree's code. Its whole steps still load plainly: masked loads on every step
// cost a 64-node tree 4-5% on Zen 4.
enum class batch_cover : unsigned char { whole, tail, whole_or_tail };

template <class B, batch_cover Cover, class T>
KILN_ALWAYS_INLINE B load_covered(T const* p, [[maybe_unused]] std::size_t n) noexcept {
  if constexpr (Cover == batch_cover::whole) {
    return B::load_unaligned(p);
  } else {
    if (Cover == batch_cover::whole_or_tail && n == B::size) return B::load_unaligned(p);
    return load_partial<B>(p, n);
  }
}

template <class B, class T>
KILN_ALWAYS_INLINE void store_partial(T* p, B const& b, std::size_t n) noexcept {
  constexpr partial_access how = partial_access_of<B>;
#if XSIMD_WITH_AVX512F
  if constexpr (how == partial_access::avx512_mask) {
    if constexpr (sizeof(T) == 4) _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), b);
    else _mm512_mask_storeu_pd(p, __mmask8((1u << n) - 1), b);
  } else
#endif
#if XSIMD_WITH_AVX2
  if constexpr (how == partial_access::avx2_mask) {
    if constexpr (sizeof(T) == 4) _mm256_maskstore_ps(p, first_lanes_mask256<T>(n), b);
    else _mm256_maskstore_pd(p, first_lanes_mask256<T>(n), b);
  } else
#endif
#if XSIMD_WITH_SSE2
  if constexpr (how == partial_access::sse2_pieces) {
    if constexpr (sizeof(T) == 8) {
      _mm_store_sd(p, b);  // n == 1
    } else if (n == 1) {
      _mm_store_ss(p, b);
    } else {
      _mm_storel_pi(reinterpret_cast<__m64*>(p), b);
      if (n == 3) _mm_store_ss(p + 2, _mm_movehl_ps(b, b));
    }
  } else
#endif
  {
    alignas(storage_alignment) T buffer[B::size];
    b.store_unaligned(buffer);
    std::copy_n(buffer, n, p);
  }
}

}  // namespace kiln::simd_detail

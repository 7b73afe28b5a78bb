// kiln/core/config.hpp: configuration macros and the index type used everywhere.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <cstddef>

#if defined(__CUDACC__)
#define KILN_HD __host__ __device__
#else
#define KILN_HD
#endif

#if defined(__GNUC__) || defined(__clang__)
#define KILN_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define KILN_ALWAYS_INLINE inline
#endif

// Everything called below, recursively, inlined into the function: how a large tree's evaluator is
// inlined into its loop (eval/evaluator.hpp, `flattened`). nvcc inlines device code by itself.
// KILN_INLINE_LAMBDA: a lambda's call operator, always inlined.
#if defined(__GNUC__) && !defined(__CUDACC__)
#define KILN_FLATTEN __attribute__((flatten))
#define KILN_INLINE_LAMBDA __attribute__((always_inline))
#else
#define KILN_FLATTEN
#define KILN_INLINE_LAMBDA
#endif

// KILN_UNROLL(n) before a host loop: unroll it n times (a literal n), where the compiler takes the
// hint. Nothing under nvcc: its front end rejects GCC's spelling and the host compiler nvcc hands
// the code to rejects the other (warnings, errors under -Werror).
#define KILN_PRAGMA(text) _Pragma(#text)
#if defined(__CUDACC__)
#define KILN_UNROLL(n)
#elif defined(__clang__)
#define KILN_UNROLL(n) KILN_PRAGMA(unroll n)
#elif defined(__GNUC__)
#define KILN_UNROLL(n) KILN_PRAGMA(GCC unroll n)
#else
#define KILN_UNROLL(n)
#endif

// KILN_HD, always inlined: the call operators of the non-arithmetic ops and the members of the
// reductions, which a fused loop calls once per batch. Left to its heuristics, GCC keeps them out
// of line once the function or the translation unit has spent its inlining budget: at -O2, or at
// -O3 in a file with a few dozen kiln expressions, W2 ran 30% slower for a call per op per batch.
// (The arithmetic ops stay ordinary inline functions: forced in early, they kept GCC from
// splitting the mixed-read loop of W4 on its leaves' strides, 30% slower.)
#if defined(__CUDACC__)
#define KILN_OP __host__ __device__ __forceinline__
#elif defined(__GNUC__) || defined(__clang__)
#define KILN_OP __attribute__((always_inline))
#else
#define KILN_OP
#endif

namespace kiln {

// Indices, extents and strides are signed and pointer-sized: tensors over 2^31 elements work and
// negative strides (reversed views) need no special case.
using index_t = std::ptrdiff_t;

// Storage is aligned for the widest vector registers (AVX-512) and for cache lines.
inline constexpr std::size_t storage_alignment = 64;

}  // namespace kiln

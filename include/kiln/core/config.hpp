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

namespace kiln {

// Indices, extents and strides are signed and pointer-sized: tensors over 2^31 elements work and
// negative strides (reversed views) need no special case.
using index_t = std::ptrdiff_t;

// Storage is aligned for the widest vector registers (AVX-512) and for cache lines.
inline constexpr std::size_t storage_alignment = 64;

}  // namespace kiln

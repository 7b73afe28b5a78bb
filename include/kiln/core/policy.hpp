// kiln/core/policy.hpp: execution policies, the tags that choose how an assignment's loop runs.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <type_traits>

namespace kiln {

// Host policies form a fallback chain by inheritance: a backend overloads on the most specific
// policy it implements, and overload resolution falls back to the base for everything else.
struct seq_policy {};                  // one thread, scalar code: the reference semantics
struct simd_policy : seq_policy {};    // one thread, xsimd batches (the default on the host)
struct par_policy : simd_policy {};    // all cores (OpenMP), xsimd batches in each

inline constexpr seq_policy seq{};
inline constexpr simd_policy simd{};
inline constexpr par_policy par{};

using default_policy = simd_policy;

// A policy that runs on the host's memory.
template <class P>
concept policy = std::is_base_of_v<seq_policy, P>;

// Runs an assignment, a reduction or a gradient as CUDA kernels on device memory
// (kiln::cuda_tensor): kiln::eval(kiln::cuda{}, out, expr). Not a host policy: nothing falls
// back from it to the CPU, and the CPU policies cannot read device memory (see cuda/policy.hpp).
struct cuda {};

// Any policy: the host ones, or kiln::cuda.
template <class P>
concept execution_policy = policy<P> || std::is_same_v<P, cuda>;

}  // namespace kiln

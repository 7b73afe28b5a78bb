// kiln/core/policy.hpp: execution policies, the tags that choose how an assignment's loop runs.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <type_traits>

namespace kiln {

// Policies form a fallback chain by inheritance: a backend overloads on the most specific policy
// it implements, and overload resolution falls back to the base for everything else.
struct seq_policy {};                  // one thread, scalar code: the reference semantics
struct simd_policy : seq_policy {};    // one thread, xsimd batches (the default on the host)

inline constexpr seq_policy seq{};
inline constexpr simd_policy simd{};

using default_policy = simd_policy;

template <class P>
concept policy = std::is_base_of_v<seq_policy, P>;

}  // namespace kiln

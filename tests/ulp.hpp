// Shared by the test translation units: distances between floating-point values in units in the
// last place.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace kiln_test {

// Distance in units in the last place, through the sign-magnitude encoding mapped onto a line
// (±0 are 0 apart).
template <class T>
std::uint64_t ulp_distance(T a, T b) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  auto key = [](T x) {
    U const bits = std::bit_cast<U>(x);
    U const sign = U(1) << (sizeof(U) * 8 - 1);
    auto const magnitude = static_cast<std::int64_t>(bits & ~sign);
    return (bits & sign) ? -magnitude : magnitude;
  };
  std::int64_t const ka = key(a), kb = key(b);
  return ka >= kb ? std::uint64_t(ka) - std::uint64_t(kb) : std::uint64_t(kb) - std::uint64_t(ka);
}

}  // namespace kiln_test

// kiln/core/random.hpp: the random stream behind kiln::rand and kiln::randn.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <type_traits>

namespace kiln::detail {

// SplitMix64 (Steele, Lea and Flood, 2014; the generator of java.util.SplittableRandom and the
// seeder of the xoshiro family): a Weyl sequence through a 64-bit mixer, output n being
// mix(seed + (n + 1) * gamma) exactly as in Vigna's splitmix64.c. Not <random>: its header costs
// about 5% of the compile time of <kiln/kiln.hpp>, and its distributions are not specified bit
// for bit. Every step from seed to value is defined here, so the same seed gives the same rand
// values on every platform, and randn values up to the rounding of the math library's log, sin
// and cos.
class seeded_stream {
 public:
  explicit seeded_stream(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
  }

  // 64 random bits -> uniform in [0, 1): the top 24 bits for float, 53 for double, scaled
  // exactly by a power of two, so no rounding can reach 1 (converting a double in [0, 1) to
  // float could).
  template <class T>
  static T unit(std::uint64_t bits) {
    if constexpr (std::is_same_v<T, float>)
      return static_cast<float>(bits >> 40) * 0x1.0p-24f;
    else
      return static_cast<T>(static_cast<double>(bits >> 11) * 0x1.0p-53);
  }
  // 64 random bits -> uniform in (0, 1]: (k + 1) / 2^53, exact, for a logarithm.
  static double open_unit(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

  template <class T>
  T uniform() { return unit<T>(next()); }

  // Standard normal by Box-Muller, in double, two draws per pair of values; the radius draw is
  // in (0, 1], so log never sees 0.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double const u1 = open_unit(next());
    double const u2 = unit<double>(next());
    double const r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace kiln::detail

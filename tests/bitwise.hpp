// Shared by the test translation units: whether two tensors hold the same bits.
#pragma once

#include <kiln/kiln.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kiln_test {

// Same shape and the same bytes element for element (NaN payloads and signed zeros included).
// An empty tensor may have no storage: memcmp must not see its null pointer, even for 0 bytes.
template <class T, int R>
bool bitwise_equal(kiln::tensor<T, R> const& a, kiln::tensor<T, R> const& b) {
  return a.shape() == b.shape() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), sizeof(T) * std::size_t(a.size())) == 0);
}

// Two floats or doubles with the same bits (NaN payloads and signed zeros included).
template <class T>
  requires std::is_floating_point_v<T>
bool same_bits(T a, T b) {
  using bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  return std::bit_cast<bits>(a) == std::bit_cast<bits>(b);
}

}  // namespace kiln_test

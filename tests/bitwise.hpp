// Shared by the test translation units: whether two tensors hold the same bits.
#pragma once

#include <kiln/kiln.hpp>

#include <cstddef>
#include <cstring>

namespace kiln_test {

// Same shape and the same bytes element for element (NaN payloads and signed zeros included).
// An empty tensor may have no storage: memcmp must not see its null pointer, even for 0 bytes.
template <class T, int R>
bool bitwise_equal(kiln::tensor<T, R> const& a, kiln::tensor<T, R> const& b) {
  return a.shape() == b.shape() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), sizeof(T) * std::size_t(a.size())) == 0);
}

}  // namespace kiln_test

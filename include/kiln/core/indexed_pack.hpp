// kiln/core/indexed_pack.hpp: a tuple that is a plain aggregate. Built in place from braces, kept
// in registers (a std::tuple of xsimd batches is copied through memory), copied byte for byte to a
// CUDA kernel; the backward tapes, the device evaluator's children and the functional API's input
// nodes hold their parts in one.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/config.hpp>

#include <cstddef>
#include <utility>

namespace kiln::detail {

template <std::size_t I, class T>
struct pack_slot {
  T value;
};
template <class Indices, class... Ts>
struct indexed_pack;
template <std::size_t... I, class... Ts>
struct indexed_pack<std::index_sequence<I...>, Ts...> : pack_slot<I, Ts>... {};

// Part I of an indexed_pack (found by deduction against its base pack_slot<I, T>).
template <std::size_t I, class T>
KILN_ALWAYS_INLINE KILN_HD T const& slot(pack_slot<I, T> const& s) noexcept {
  return s.value;
}
template <std::size_t I, class T>
KILN_ALWAYS_INLINE KILN_HD T& slot(pack_slot<I, T>& s) noexcept {
  return s.value;
}

}  // namespace kiln::detail

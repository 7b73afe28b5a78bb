// kiln/core/indexed_pack.hpp: a tuple that is a plain aggregate. Built in place from braces, kept
// in registers (a std::tuple of xsimd batches is copied through memory), copied byte for byte to a
// CUDA kernel, and cheap to compile (no recursive base chain, no converting constructors); the
// children of expression nodes and evaluators, the backward tapes and the functional API's input
// nodes hold their parts in one.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/config.hpp>

#include <cstddef>
#include <type_traits>
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

template <class Pack>
struct pack_size;
template <std::size_t... I, class... Ts>
struct pack_size<indexed_pack<std::index_sequence<I...>, Ts...>> {
  static constexpr std::size_t value = sizeof...(Ts);
};
// The number of parts of an indexed_pack (of any cv/reference form).
template <class Pack>
inline constexpr std::size_t pack_size_v = pack_size<std::remove_cvref_t<Pack>>::value;

// f(part 0, part 1, ...), as std::apply (host code: f is usually a host lambda).
template <class F, std::size_t... I, class... Ts>
KILN_ALWAYS_INLINE decltype(auto) apply_pack(F&& f, indexed_pack<std::index_sequence<I...>, Ts...> const& p) {
  return static_cast<F&&>(f)(slot<I>(p)...);
}
template <class F, std::size_t... I, class... Ts>
KILN_ALWAYS_INLINE decltype(auto) apply_pack(F&& f, indexed_pack<std::index_sequence<I...>, Ts...>& p) {
  return static_cast<F&&>(f)(slot<I>(p)...);
}

}  // namespace kiln::detail

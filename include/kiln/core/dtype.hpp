// kiln/core/dtype.hpp: element types and PyTorch's type-promotion rules.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

namespace kiln {

// Element types kiln stores and computes with. float and double work everywhere; integers and
// bool where the operation makes sense (comparisons give bool, `where` takes it).
template <class T>
concept element = std::is_arithmetic_v<T> && !std::is_const_v<T> && !std::is_volatile_v<T>;

template <class T>
inline constexpr std::string_view type_name = "?";
template <> inline constexpr std::string_view type_name<bool> = "bool";
template <> inline constexpr std::string_view type_name<std::int8_t> = "int8";
template <> inline constexpr std::string_view type_name<std::uint8_t> = "uint8";
template <> inline constexpr std::string_view type_name<std::int16_t> = "int16";
template <> inline constexpr std::string_view type_name<std::int32_t> = "int32";
template <> inline constexpr std::string_view type_name<std::int64_t> = "int64";
template <> inline constexpr std::string_view type_name<float> = "float";
template <> inline constexpr std::string_view type_name<double> = "double";

namespace detail {

template <std::size_t Bytes>
using signed_of_size_t = std::conditional_t<
    Bytes == 1, std::int8_t,
    std::conditional_t<Bytes == 2, std::int16_t, std::conditional_t<Bytes == 4, std::int32_t, std::int64_t>>>;

// Two integer types: the wider one if both are signed or both unsigned, else the smallest signed
// type that holds both (uint8 op int8 -> int16; nothing holds uint64 and a signed type, and int64
// is the closest). Not std::common_type, which follows C's integral promotions (int8 op int16 ->
// int) and turns unsigned at 32 bits (int32 op uint32 -> uint32).
template <class A, class B>
struct promote_integers {
  using S = std::conditional_t<std::is_signed_v<A>, A, B>;
  using U = std::conditional_t<std::is_signed_v<A>, B, A>;
  using type = std::conditional_t<
      std::is_signed_v<A> == std::is_signed_v<B>, std::conditional_t<(sizeof(B) > sizeof(A)), B, A>,
      std::conditional_t<(sizeof(S) > sizeof(U)), S, signed_of_size_t<std::min<std::size_t>(2 * sizeof(U), 8)>>>;
};

template <class A, class B>
struct promote2 {
  // Categories rank bool < integer < floating; inside a category the wider type wins.
  static constexpr int category(auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    return std::is_same_v<T, bool> ? 0 : std::is_integral_v<T> ? 1 : 2;
  }
  static constexpr int ca = category(static_cast<A*>(nullptr));
  static constexpr int cb = category(static_cast<B*>(nullptr));
  using same_category = typename std::conditional_t<
      ca == 0, std::type_identity<bool>,
      std::conditional_t<ca == 1, promote_integers<A, B>, std::common_type<A, B>>>::type;
  using type = std::conditional_t<(ca > cb), A, std::conditional_t<(cb > ca), B, same_category>>;
};

// v as a T, as an assignment stores it: static_cast, except a floating value into an integer type,
// where C++ leaves NaN and out-of-range values undefined. There kiln gives what PyTorch gives on
// x86: truncation toward zero into int32 (for the other types of 32 bits or fewer, but uint32: what
// x86 compilers emit for static_cast) or int64 (uint8, as c10's static_cast_with_inter_type
// converts it, and the wider types), the lowest value of that type for NaN and out of range, then
// wrapped to T (3e10f -> int32 INT32_MIN, -2.9f -> uint8 254, 4294967303.0 -> uint8 7).
template <class T, class V>
constexpr T convert(V v) noexcept {
  if constexpr (std::is_floating_point_v<V> && std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    constexpr bool through_int32 =
        (sizeof(T) < 4 && !std::is_same_v<T, std::uint8_t>) || (sizeof(T) == 4 && std::is_signed_v<T>);
    using W = std::conditional_t<through_int32, std::int32_t, std::int64_t>;
    constexpr V lowest = V(std::numeric_limits<W>::min());  // -2^31 or -2^63, exact
    W const w = v >= lowest && v < -lowest ? static_cast<W>(v) : std::numeric_limits<W>::min();
    return static_cast<T>(w);
  } else {
    return static_cast<T>(v);
  }
}

// Whether PyTorch takes the scalar v as a T where it checks it (c10::overflows): an integer that T
// holds, or for an unsigned T a negative one down to -max (it wraps, as `u8 - 1` does); a floating
// value within T's range, an infinity, and NaN for a floating T.
template <class T, class V>
constexpr bool scalar_fits(V v) noexcept {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<V, bool>) {
    return true;
  } else if constexpr (std::is_integral_v<V>) {
    if constexpr (std::is_floating_point_v<T>) {
      return true;
    } else {
      // Compared as intmax_t or uintmax_t: std::cmp_less takes neither bool nor the character types.
      using Wide = std::conditional_t<std::is_signed_v<V>, std::intmax_t, std::uintmax_t>;
      Wide const w(v);
      if constexpr (std::is_unsigned_v<T>)
        if (std::cmp_less(w, 0)) return std::uintmax_t(0) - std::uintmax_t(w) <= std::numeric_limits<T>::max();
      return std::in_range<T>(w);
    }
  } else {
    if (v != v) return std::is_floating_point_v<T>;
    if (v == std::numeric_limits<V>::infinity() || v == -std::numeric_limits<V>::infinity()) return true;
    return v >= V(std::numeric_limits<T>::lowest()) && v <= V(std::numeric_limits<T>::max());
  }
}

// An integer v as the integer type T, saturated: the nearest value of T (300 -> uint8 255).
template <class T, class V>
constexpr T saturate(V v) noexcept {
  // Compared as intmax_t or uintmax_t: std::cmp_less takes neither bool nor the character types.
  using Wide = std::conditional_t<std::is_signed_v<V>, std::intmax_t, std::uintmax_t>;
  if (std::cmp_less(Wide(v), std::intmax_t(std::numeric_limits<T>::min()))) return std::numeric_limits<T>::min();
  if (std::cmp_greater(Wide(v), std::uintmax_t(std::numeric_limits<T>::max()))) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

}  // namespace detail

// Whether PyTorch writes a result of type From into a tensor of type To in place (torch.can_cast):
// within a category or up, never down (floating into an integer tensor, a number into a bool one).
template <class From, class To>
inline constexpr bool can_cast = detail::promote2<From, To>::ca <= detail::promote2<From, To>::cb;

// promote_t<Ts...>: the type PyTorch computes `a op b` in when both are tensors:
// float op double -> double, int op float -> float, int32 op int64 -> int64, bool op int -> int,
// uint8 op int8 -> int16.
template <class T, class... Ts>
struct promote {
  using type = T;
};
template <class A, class B, class... Ts>
struct promote<A, B, Ts...> : promote<typename detail::promote2<A, B>::type, Ts...> {};
template <class... Ts>
using promote_t = typename promote<Ts...>::type;

// A C++ scalar next to a tensor is a "weak" operand, as a Python number is in PyTorch: it never
// widens the tensor's type within its category (`x * 2.0` stays float for a float x), but a
// floating scalar makes an integer tensor's result float, and an integer scalar a bool one int64.
template <class Tensor, class Scalar>
using weak_promote_t = std::conditional_t<
    std::is_floating_point_v<Scalar> && !std::is_floating_point_v<Tensor>, float,
    std::conditional_t<std::is_integral_v<Scalar> && !std::is_same_v<Scalar, bool> &&
                           std::is_same_v<Tensor, bool>,
                       std::int64_t, Tensor>>;

// The type an op that only makes sense on real numbers (exp, sin, div...) computes in: integer
// and bool inputs become float, PyTorch's default floating type.
template <class T>
using floating_t = std::conditional_t<std::is_floating_point_v<T>, T, float>;

}  // namespace kiln

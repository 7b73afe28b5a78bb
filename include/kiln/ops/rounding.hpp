// kiln/ops/rounding.hpp: floor, ceil, round (half to even, as torch.round), trunc, frac.
// Integer inputs pass through floor/ceil/round/trunc unchanged, as in PyTorch. Results keep the
// input's sign on every build (math::signed_round).
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/expr/map.hpp>
#include <kiln/ops/math.hpp>

namespace kiln {
namespace ops {
using unary_same = math::op_base<1, op_kind::same>;

struct floor_op : unary_same {
  static constexpr std::string_view name = "floor";
  template <class T> T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x;
    else { using std::floor; return math::signed_round(floor(x), x); }
  }
};
struct ceil_op : unary_same {
  static constexpr std::string_view name = "ceil";
  template <class T> T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x;
    else { using std::ceil; return math::signed_round(ceil(x), x); }
  }
};
struct round_op : unary_same {
  static constexpr std::string_view name = "round";
  template <class T> T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x;
    else { using std::nearbyint; return math::signed_round(nearbyint(x), x); }
  }
};
struct trunc_op : unary_same {
  static constexpr std::string_view name = "trunc";
  template <class T> T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x;
    else { using std::trunc; return math::signed_round(trunc(x), x); }
  }
};
struct frac_op : math::op_base<1, op_kind::floating> {
  static constexpr std::string_view name = "frac";
  template <class T> T operator()(T x) const {
    using std::trunc;
    return x - math::signed_round(trunc(x), x);
  }
};

}  // namespace ops

inline constexpr elementwise_fn<ops::floor_op> floor{};
inline constexpr elementwise_fn<ops::ceil_op> ceil{};
inline constexpr elementwise_fn<ops::round_op> round{};
inline constexpr elementwise_fn<ops::trunc_op> trunc{};
inline constexpr elementwise_fn<ops::frac_op> frac{};

}  // namespace kiln

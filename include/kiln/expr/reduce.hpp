// kiln/expr/reduce.hpp: reduction nodes and softmax, and their builders. These are fusion
// boundaries: their producer (the expression they reduce) runs inside the reduction's own loop,
// but when a reduction is an operand of a larger elementwise expression it is materialised once,
// before that expression's loop.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/policy.hpp>
#include <kiln/expr/map.hpp>
#include <kiln/ops/arithmetic.hpp>
#include <kiln/ops/reduction.hpp>

#include <algorithm>
#include <array>
#include <numeric>
#include <string>

namespace kiln {

// Axes known at compile time: kiln::sum(x, kiln::axes<1>), kiln::amax(x, kiln::axes<0, 2>).
// Run-time axes are an int or a braced list: kiln::sum(x, 1), kiln::sum(x, {0, 2}). Negative axes
// count from the end.
template <int... I>
struct axes_t {};
template <int... I>
inline constexpr axes_t<I...> axes{};

// Keep reduced dimensions with extent 1: kiln::sum(x, kiln::axes<1>, kiln::keepdim) is [R, 1].
struct keepdim_t {};
inline constexpr keepdim_t keepdim{};

// The `correction` of var and std (1: Bessel's, the default; 0: population variance).
struct correction {
  double value = 1;
};

namespace detail {
// Checks and normalises reduction axes against a rank: negative axes wrap, out-of-range and
// repeated axes throw shape_error. The result is sorted.
template <std::size_t N>
std::array<int, N> normalize_axes(std::array<int, N> axes, int rank, std::string_view op) {
  for (int& a : axes) {
    int const original = a;
    if (a < 0) a += rank;
    if (a < 0 || a >= rank)
      throw shape_error(std::string(op) + ": axis " + std::to_string(original) + " is out of range for a tensor of rank " +
                        std::to_string(rank));
  }
  std::sort(axes.begin(), axes.end());
  for (std::size_t k = 1; k < N; ++k)
    if (axes[k] == axes[k - 1])
      throw shape_error(std::string(op) + ": axis " + std::to_string(axes[k]) + " is given more than once");
  return axes;
}
}  // namespace detail

// reduction<Op, Arg, N, Keep>: reduces N axes of Arg with Op. Rank Arg::rank - N, or Arg::rank
// with Keep. Its shape is checked when it is built.
template <class Op, class Arg, int N, bool Keep>
class reduction {
  static_assert(N <= Arg::rank, "kiln: more reduction axes than the tensor has dimensions");
  static_assert(!requires { Op::floating_only; } || std::is_floating_point_v<typename Arg::value_type>,
                "kiln: mean, variance and stddev are defined for floating-point tensors; convert integers first");

 public:
  using op_type = Op;
  using arg_type = Arg;
  using value_type = decltype([] {
    using V = typename Arg::value_type;
    if constexpr (ops::index_picking<Op, V>) return std::int64_t{};                      // argmax, argmin
    else if constexpr (requires { typename Op::pre; }) return floating_t<V>{};            // var, std, logsumexp
    else return typename Op::template acc<V>{};
  }());
  static constexpr int rank = Keep ? Arg::rank : Arg::rank - N;
  static constexpr int reduced_count = N;
  static constexpr bool keeps_dims = Keep;
  static constexpr bool is_kiln_expression = true;
  static constexpr bool is_materialized = true;

  // `normalized`: the axes are known to be in range, sorted and distinct (compile-time axes, which
  // static_asserts have checked), and are not checked again.
  reduction(Op op, Arg arg, std::array<int, N> const& axes, bool normalized = false)
      : reduction(op, detail::operands_t<void>{}, std::move(arg), axes, normalized) {}
  // From the user's operand (as map's): the argument is built where it is stored, not passed by
  // value and copied there, which stored W6's two leaves six times instead of four.
  template <class X>
  reduction(Op op, detail::operands_t<void>, X&& x, std::array<int, N> const& axes, bool normalized = false)
      : op_(op),
        arg_(detail::as_node<void>(std::forward<X>(x))),
        axes_(normalized ? axes : detail::normalize_axes<N>(axes, Arg::rank, Op::name)) {
    auto const& in = arg_.shape();
    index_t reduced = 1;
    // A broadcast can hold more elements than index_t counts ([2^32, 1] * [1, 2^32]). Assigned,
    // its destination bounds it; reduced, it is checked here, beside the loop that reads the
    // extents anyway (a check in every map node changed GCC's inlining of whole statements).
    index_t count = 1;
    bool overflow = false;
    for (int d = 0, o = 0, k = 0; d < Arg::rank; ++d) {
      overflow |= __builtin_mul_overflow(count, in[d] == 0 ? 1 : in[d], &count);
      bool const is_reduced = k < N && axes_[k] == d;
      if (is_reduced) {
        ++k;
        overflow |= __builtin_mul_overflow(reduced, in[d], &reduced);  // (then count overflows too)
        if constexpr (Keep) shape_[o++] = 1;
      } else {
        shape_[o++] = in[d];
      }
    }
    if (overflow) [[unlikely]] detail::checked_count(in);  // throws shape_error naming the shape
    // amax, argmax... have no identity: reducing over zero elements is an error, as in PyTorch
    // even where the result is empty too (amax over axes {0, 2} of [0, 0, 3]).
    if constexpr (requires { Op::needs_elements; })
      if (reduced == 0)
        throw shape_error(std::string(Op::name) + ": cannot reduce over zero elements (input shape " + shape_string(in) +
                          ")");
  }

  // Copied with the shape element by element: the constructor writes it that way, and a whole
  // copy made a moment later (a map taking the reduction as an operand, `x - amax(x, axes<1>,
  // keepdim)`) read those narrow stores back with one wide load, a failed store-to-load forward:
  // building that expression took 13 ns, now 4 (Intel Xeon). (The leaves copy member by member
  // for the same reason.)
  reduction(reduction const& other) : op_(other.op_), arg_(other.arg_), axes_(other.axes_) { copy_shape(other); }
  reduction(reduction&& other) noexcept(std::is_nothrow_move_constructible_v<Arg>)
      : op_(other.op_), arg_(std::move(other.arg_)), axes_(other.axes_) {
    copy_shape(other);
  }
  reduction& operator=(reduction const&) = default;
  reduction& operator=(reduction&&) = default;

  Op const& op() const noexcept { return op_; }
  Arg const& arg() const noexcept { return arg_; }
  std::array<int, N> const& reduced_axes() const noexcept { return axes_; }
  extents<rank> const& shape() const noexcept { return shape_; }
  // The number of inputs each output element reduces.
  index_t reduced_size() const noexcept {
    index_t n = 1;
    for (int a : axes_) n *= arg_.shape()[a];
    return n;
  }

  // A full reduction reads as its value: `float total = kiln::sum(x);` (evaluated here, with the
  // default policy; kiln::eval(policy, r) chooses another).
  operator value_type() const
    requires(rank == 0)
  {
    value_type v{};
    detail::assign(default_policy{}, tensor_view<value_type, 0>(&v, extents<0>{}), *this);
    return v;
  }

 private:
  void copy_shape(reduction const& other) noexcept {
    for (int d = 0; d < rank; ++d) shape_[d] = other.shape_[d];
  }

  Op op_;
  Arg arg_;
  std::array<int, N> axes_;
  extents<rank> shape_{};
};

// softmax / log_softmax along one dimension: exp(x - max) / sum(exp(x - max)), computed in
// three passes (max, sum, write), each fused with the producer x.
template <class Arg, bool Log>
class softmax_node {
 public:
  using arg_type = Arg;
  using value_type = floating_t<typename Arg::value_type>;
  static constexpr int rank = Arg::rank;
  static constexpr bool is_kiln_expression = true;
  static constexpr bool is_materialized = true;
  static constexpr std::string_view name = Log ? "log_softmax" : "softmax";

  softmax_node(Arg arg, int dim) : softmax_node(detail::operands_t<void>{}, std::move(arg), dim) {}
  // From the user's operand, built where it is stored (as reduction's).
  template <class X>
  softmax_node(detail::operands_t<void>, X&& x, int dim)
      : arg_(detail::as_node<void>(std::forward<X>(x))), dim_(detail::normalize_axes<1>({dim}, Arg::rank, name)[0]) {}

  Arg const& arg() const noexcept { return arg_; }
  int dim() const noexcept { return dim_; }
  extents<rank> const& shape() const noexcept { return arg_.shape(); }

  // Backward (PyTorch's _softmax_backward_data), with y the result and g its adjoint: softmax
  // gives y (g - s) with s = sum(g y) along dim; log_softmax gives g - exp(y) s with s = sum(g).
  struct grad_sum_input : math::op_base<3, op_kind::floating> {
    static constexpr std::string_view name = Log ? "grad" : "grad_times_result";
    template <class T> T operator()(T, T y, T g) const {
      if constexpr (Log) return g;
      else return g * y;
    }
  };
  using grad_aux = std::tuple<ops::grad_aux_t<grad_sum_input, ops::sum_red>>;
  template <class T> static T grad(T, T y, T g, T, T s) {
    if constexpr (Log) return g - math::exp(y) * s;
    else return y * (g - s);
  }

 private:
  Arg arg_;
  int dim_;
};

// The callable behind kiln::sum, kiln::amax, ...:
//   f(x)                      every axis, a rank-0 result that converts to its value
//   f(x, kiln::axes<0, 2>)    compile-time axes
//   f(x, 1) / f(x, {0, 2})    run-time axes
// each optionally followed by kiln::keepdim (and, for var and std, kiln::correction{c}), or
//   f(policy, x)              every axis, computed at once under a policy: the value
//                             (float s = kiln::sum(kiln::par, kiln::exp(x)))
template <class Op>
struct reduction_fn {
  template <execution_policy P, expression X>
  auto operator()(P const& policy, X&& x) const {
    return eval(policy, (*this)(std::forward<X>(x))).item();  // kiln::eval, found through P
  }
  template <expression X, class... Opt>
  auto operator()(X&& x, Opt... opt) const {
    constexpr int R = std::remove_cvref_t<X>::rank;
    constexpr std::array<int, R> all = [] {  // (not static: see below)
      std::array<int, R> a{};
      std::iota(a.begin(), a.end(), 0);
      return a;
    }();
    return build(std::forward<X>(x), all, opt..., normalized_axes{});  // in range, sorted, distinct
  }
  template <expression X, int... I, class... Opt>
  auto operator()(X&& x, axes_t<I...>, Opt... opt) const {
    constexpr int R = std::remove_cvref_t<X>::rank;
    static_assert(((I >= -R && I < R) && ...), "kiln: a reduction axis is out of range for the tensor's rank");
    static_assert([] {
      std::array<int, sizeof...(I)> a{((I + R) % (R > 0 ? R : 1))...};
      std::sort(a.begin(), a.end());
      return std::adjacent_find(a.begin(), a.end()) == a.end();
    }(), "kiln: a reduction axis is given more than once");
    // A local constant rather than a static one, whose loads GCC does not fold: the reduction's
    // shape is then worked out at compile time (W6 at 1K elements, with b80a037: 18.9 -> 15.6 ns).
    constexpr std::array<int, sizeof...(I)> normalized = [] {
      std::array<int, sizeof...(I)> a{((I + R) % (R > 0 ? R : 1))...};
      std::sort(a.begin(), a.end());
      return a;
    }();
    return build(std::forward<X>(x), normalized, opt..., normalized_axes{});
  }
  // (The axis's type deduced, so that `{1}` is one axis of the array form below: with a plain int
  // parameter Clang found the two equally good.)
  template <expression X, std::integral I, class... Opt>
  auto operator()(X&& x, I axis, Opt... opt) const {
    return build(std::forward<X>(x), std::array<int, 1>{static_cast<int>(axis)}, opt...);
  }
  template <expression X, std::size_t N, class... Opt>
  auto operator()(X&& x, int const (&axes)[N], Opt... opt) const {
    std::array<int, N> a;
    std::copy_n(axes, N, a.begin());
    return build(std::forward<X>(x), a, opt...);
  }

 private:
  struct normalized_axes {};  // the last option of compile-time axes
  template <class X, std::size_t N, class... Opt>
  static auto build(X&& x, std::array<int, N> const& a, Opt... opt) {
    constexpr bool keep = (std::is_same_v<Opt, keepdim_t> || ...);
    constexpr bool normalized = (std::is_same_v<Opt, normalized_axes> || ...);
    static_assert(((std::is_same_v<Opt, keepdim_t> || std::is_same_v<Opt, correction> ||
                    std::is_same_v<Opt, normalized_axes>) && ...),
                  "kiln: a reduction's options are kiln::keepdim and, for var and std, kiln::correction{c}");
    Op op{};
    if constexpr (requires { op.correction; })
      ((std::is_same_v<Opt, correction> ? void(op.correction = as_correction(opt)) : void()), ...);
    else
      static_assert(!(std::is_same_v<Opt, correction> || ...), "kiln: only var and std take a correction");
    using Arg = decltype(detail::as_node<void>(std::forward<X>(x)));
    return reduction<Op, Arg, int(N), keep>(op, detail::operands_t<void>{}, std::forward<X>(x), a, normalized);
  }
  template <class O>
  static double as_correction(O const& o) {
    if constexpr (std::is_same_v<O, correction>) return o.value;
    else return 0;
  }
};

inline constexpr reduction_fn<ops::sum_red> sum{};
inline constexpr reduction_fn<ops::mean_red> mean{};
inline constexpr reduction_fn<ops::prod_red> prod{};
inline constexpr reduction_fn<ops::amax_red> amax{};
inline constexpr reduction_fn<ops::amin_red> amin{};
inline constexpr reduction_fn<ops::argmax_red> argmax{};
inline constexpr reduction_fn<ops::argmin_red> argmin{};
inline constexpr reduction_fn<ops::all_red> all{};
inline constexpr reduction_fn<ops::any_red> any{};
inline constexpr reduction_fn<ops::count_nonzero_red> count_nonzero{};
// Variance (torch.var) and standard deviation (torch.std). Named so that kiln::var can be the
// differentiable tensor, and `std` would read as the namespace.
inline constexpr reduction_fn<ops::var_red> variance{};
inline constexpr reduction_fn<ops::std_red> stddev{};
inline constexpr reduction_fn<ops::logsumexp_red> logsumexp{};

// softmax(x, dim) and log_softmax(x, dim).
template <expression X>
auto softmax(X&& x, int dim) {
  using Arg = decltype(detail::as_node<void>(std::forward<X>(x)));
  return softmax_node<Arg, false>(detail::operands_t<void>{}, std::forward<X>(x), dim);
}
template <expression X>
auto log_softmax(X&& x, int dim) {
  using Arg = decltype(detail::as_node<void>(std::forward<X>(x)));
  return softmax_node<Arg, true>(detail::operands_t<void>{}, std::forward<X>(x), dim);
}

}  // namespace kiln

namespace kiln {

// The order of kiln::norm<kiln::infinity_norm>: the largest magnitude.
inline constexpr int infinity_norm = -1;

// The p-norm for p = 1, 2 (the default) or kiln::infinity_norm, over every axis or over the axes
// given as for kiln::sum (an int, a braced list or kiln::axes<...>, then optionally kiln::keepdim).
template <int P = 2, expression X, class... Options>
auto norm(X&& x, Options const&... options) {
  static_assert(P == 1 || P == 2 || P == infinity_norm, "kiln::norm supports p = 1, 2 and kiln::infinity_norm");
  if constexpr (P == 1) return sum(kiln::abs(std::forward<X>(x)), options...);
  else if constexpr (P == 2) return reduction_fn<ops::norm2_red>{}(std::forward<X>(x), options...);
  else return reduction_fn<ops::norm_inf_red>{}(kiln::abs(std::forward<X>(x)), options...);
}
// kiln::norm(x, {0, 2}): a braced list deduces no type through the pack above.
template <int P = 2, expression X, std::size_t N, class... Options>
auto norm(X&& x, int const (&axes)[N], Options const&... options) {
  return norm<P, X, int[N], Options...>(std::forward<X>(x), axes, options...);
}

}  // namespace kiln

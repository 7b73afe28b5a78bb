// kiln/ops/reduction.hpp: reduction ops. A fold op says how one output element accumulates its
// inputs: the accumulator type, the identity, how an input becomes a contribution (`prepare`),
// how two partial results combine (`combine`, associative, on scalars and batches) and the last
// step (`finalize`, given the number of inputs). Two-pass ops (var, std, logsumexp) are a fold
// preceded by another reduction whose result the fold's input and finalize read.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/function_objects.hpp>
#include <kiln/ops/arithmetic.hpp>
#include <kiln/ops/math.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>

namespace kiln::ops {

namespace detail {
template <class V>
using sum_acc_t = std::conditional_t<std::is_integral_v<V>, std::int64_t, V>;  // bool and int sum to int64
}  // namespace detail

template <class V>
inline constexpr bool vector_foldable = std::is_floating_point_v<V>;

// An auxiliary reduction a grad rule reads: Fold over Input(x, out, g) along the reduced axes. A
// rule with a member type `where_first_aux_is_zero` (a rule of its own, without auxiliaries) has
// its first auxiliary reduced alone first, and where that is 0 everywhere, only that rule runs.
template <class Input, class Fold>
struct grad_aux_t {
  using input = Input;
  using fold = Fold;
};

// 1 where x is one of the elements amax/amin chose (equal to the result, or both NaN).
struct ties : math::op_base<3, op_kind::floating> {
  static constexpr std::string_view name = "is_tie";
  template <class T> KILN_OP static auto is_tie(T x, T out) {
    return math::either(x == out, math::both(math::is_nan(x), math::is_nan(out)));
  }
  template <class T> KILN_OP T operator()(T x, T out, T) const { return math::select(is_tie(x, out), T(1), T(0)); }
};

// Integer sums and products wrap, as elementwise integer arithmetic does (math::wrapping).
struct sum_red {
  static constexpr std::string_view name = "sum";
  template <class V> using acc = detail::sum_acc_t<V>;
  template <class A> KILN_OP static A identity() { return A(0); }
  template <class A, class V> KILN_OP static A prepare(V v) { return static_cast<A>(v); }
  template <class A> KILN_OP static A combine(A a, A b) { return math::wrapping(a, b, math::plus{}); }
  template <class A> KILN_OP static A finalize(A a, index_t) { return a; }
  // dL/dx for an input x of an output `out` with adjoint g, n inputs per output.
  template <class T> KILN_OP static T grad(T, T, T g, T) { return g; }
};
// The mean of no elements is NaN (0 / 0), as in PyTorch.
struct mean_red : sum_red {
  static constexpr std::string_view name = "mean";
  static constexpr bool floating_only = true;
  static constexpr bool finalizes = true;
  template <class V> using acc = V;
  template <class A> KILN_OP static A finalize(A a, index_t n) { return a / static_cast<A>(n); }
  template <class T> KILN_OP static T grad(T, T, T g, T n) { return g / n; }
};
struct prod_red {
  static constexpr std::string_view name = "prod";
  template <class V> using acc = detail::sum_acc_t<V>;
  template <class A> KILN_OP static A identity() { return A(1); }
  template <class A, class V> KILN_OP static A prepare(V v) { return static_cast<A>(v); }
  template <class A> KILN_OP static A combine(A a, A b) { return math::wrapping(a, b, math::multiplies{}); }
  template <class A> KILN_OP static A finalize(A a, index_t) { return a; }
  // The gradient of x is the product of the others. With no zero that is out / x (PyTorch's
  // formula, NaN at an infinity); a zero among the others makes it 0, or NaN where an infinity or
  // a NaN is among them too (0 * inf); the one zero gets the product of the non-zeros. PyTorch
  // computes the same through exclusive cumulative products (prod_safe_zeros_backward), except
  // that a full reduction with two or more zeros gives 0 everywhere outside create_graph. The
  // counts of zeros and of non-finite elements and the product of the non-zeros are reduced first;
  // where no slice holds a zero, out / x alone (where_first_aux_is_zero), without the other two
  // reductions or the tests per element.
  struct count_zeros : math::op_base<3, op_kind::floating> {
    static constexpr std::string_view name = "is_zero";
    template <class T> KILN_OP T operator()(T x, T, T) const { return math::select(x == T(0), T(1), T(0)); }
  };
  struct count_nonfinite : math::op_base<3, op_kind::floating> {
    static constexpr std::string_view name = "is_nonfinite";
    template <class T> KILN_OP T operator()(T x, T, T) const {
      using std::isfinite;
      return math::select(isfinite(x), T(0), T(1));
    }
  };
  struct nonzero_or_one : math::op_base<3, op_kind::floating> {
    static constexpr std::string_view name = "nonzero_or_one";
    template <class T> KILN_OP T operator()(T x, T, T) const { return math::select(x == T(0), T(1), x); }
  };
  using grad_aux = std::tuple<grad_aux_t<count_zeros, sum_red>, grad_aux_t<nonzero_or_one, prod_red>,
                              grad_aux_t<count_nonfinite, sum_red>>;
  struct where_first_aux_is_zero {
    template <class T> KILN_OP static T grad(T x, T out, T g, T) { return g * (out / x); }
  };
  template <class T> KILN_OP static T grad(T x, T out, T g, T, T zeros, T nonzero_product, T nonfinite) {
    T const nonfinite_others = nonfinite - count_nonfinite{}(x, out, g);
    T const nan(std::numeric_limits<math::element_t<T>>::quiet_NaN());
    T const with_a_zero = math::select(nonfinite_others == T(0), T(0), nan);
    return g * math::select(zeros == T(0), out / x,
                            math::select(zeros == T(1) && x == T(0), nonzero_product, with_a_zero));
  }
};
// NaN-propagating maximum (Max) and minimum; an empty reduction is an error (there is no
// identity).
template <bool Max>
struct extremum_red {
  static constexpr std::string_view name = Max ? "amax" : "amin";
  static constexpr bool needs_elements = true;
  template <class V> using acc = V;
  template <class A> KILN_OP static A identity() {
    using limits = std::numeric_limits<math::element_t<A>>;
    if constexpr (limits::has_infinity) return A(Max ? -limits::infinity() : limits::infinity());
    else return A(Max ? limits::lowest() : limits::max());
  }
  template <class A, class V> KILN_OP static A prepare(V v) { return static_cast<A>(v); }
  template <class A> KILN_OP static A combine(A a, A b) {
    if constexpr (Max) return math::maximum(a, b);
    else return math::minimum(a, b);
  }
  // combine on float or double batches without its NaN test: the max or min instruction alone,
  // which keeps a where b is NaN (and on a tie, as combine does). The folds step with it and probe
  // for NaN beside it (fold_block_probed in eval/reduce.hpp).
  template <class B> KILN_ALWAYS_INLINE static B combine_ignoring_nan(B const& a, B const& b) {
    return math::extremum_ignoring_nan<Max>(a, b);
  }
  template <class A> KILN_OP static A finalize(A a, index_t) { return a; }
  // Split evenly among the inputs equal to the result, NaN matching NaN (PyTorch's
  // evenly_distribute_backward); grad_aux counts them.
  using grad_aux = std::tuple<grad_aux_t<ties, sum_red>>;
  template <class T> KILN_OP static T grad(T x, T out, T g, T, T count) {
    return math::select(ties::is_tie(x, out), g / count, T(0));
  }
};
using amax_red = extremum_red<true>;
using amin_red = extremum_red<false>;
struct all_red {
  static constexpr std::string_view name = "all";
  template <class V> using acc = bool;
  template <class A> KILN_OP static A identity() { return true; }
  template <class A, class V> KILN_OP static A prepare(V v) { return v != V(0); }
  template <class A> KILN_OP static A combine(A a, A b) { return a && b; }
  template <class A> KILN_OP static A finalize(A a, index_t) { return a; }
};
struct any_red {
  static constexpr std::string_view name = "any";
  template <class V> using acc = bool;
  template <class A> KILN_OP static A identity() { return false; }
  template <class A, class V> KILN_OP static A prepare(V v) { return v != V(0); }
  template <class A> KILN_OP static A combine(A a, A b) { return a || b; }
  template <class A> KILN_OP static A finalize(A a, index_t) { return a; }
};
struct count_nonzero_red {
  static constexpr std::string_view name = "count_nonzero";
  template <class V> using acc = std::int64_t;
  template <class A> KILN_OP static A identity() { return 0; }
  template <class A, class V> KILN_OP static A prepare(V v) { return v != V(0) ? 1 : 0; }
  template <class A> KILN_OP static A combine(A a, A b) { return a + b; }
  template <class A> KILN_OP static A finalize(A a, index_t) { return a; }
};
// The 2-norm: sqrt of the sum of squares.
struct norm2_red : sum_red {
  static constexpr std::string_view name = "norm";
  static constexpr bool finalizes = true;
  template <class V> using acc = floating_t<V>;
  template <class A, class V> KILN_OP static A prepare(V v) { A const x = static_cast<A>(v); return x * x; }
  template <class A> KILN_OP static A finalize(A a, index_t) { using std::sqrt; return sqrt(a); }
  // Over a single element the norm is |x| (PyTorch's result too), where sqrt(x * x) would give 0
  // or inf once the square under- or overflows: the backends then fold amax of this op's result.
  using single_element = abs_op;
  // x g / out, and 0 where the norm is 0 (PyTorch's norm_backward). g / out first, as PyTorch: an
  // infinite norm then gives 0 where g x would overflow to inf / inf.
  template <class T> KILN_OP static T grad(T x, T out, T g, T) { return math::select(out == T(0), T(0), x * (g / out)); }
};

// The infinity norm: amax of |x| (kiln::norm<kiln::infinity_norm> reduces abs(x) with it), under
// the name the user wrote, so that its errors and listings say which call they come from.
struct norm_inf_red : amax_red {
  static constexpr std::string_view name = "norm<infinity_norm>";
};

// Index of the first maximum (minimum) over the reduced elements, counted in row-major order over
// the reduced dimensions. A NaN counts as the maximum (and the minimum), as in PyTorch. These pick
// an element (`better`) rather than combine values: `index_picking` below.
template <bool Max>
struct index_of_extremum_red {
  static constexpr std::string_view name = Max ? "argmax" : "argmin";
  static constexpr bool needs_elements = true;
  template <class V> KILN_OP static bool better(V candidate, V best) {
    if (math::is_nan(candidate)) return !math::is_nan(best);
    if constexpr (Max) return candidate > best;
    else return candidate < best;
  }
};
using argmax_red = index_of_extremum_red<true>;
using argmin_red = index_of_extremum_red<false>;

// Whether Op picks the index of the best of elements of V (argmax, argmin). Tested by a call, not
// by taking `&Op::template better<V>`, which nvcc's front end does not accept in a requirement.
template <class Op, class V>
concept index_picking = requires(V v) { Op::better(v, v); };

// Two-pass reductions. `pre` is reduced first (keeping dimensions) into m; then `fold` reduces
// input(x, m) elementwise, and `output(s, m, n)` finishes. The elementwise steps are op structs so
// that they vectorise like any other.
struct var_red {
  static constexpr std::string_view name = "var";
  static constexpr bool floating_only = true;
  double correction = 1;
  using pre = mean_red;
  using fold = sum_red;
  struct input : math::op_base<2, op_kind::floating> {  // (x - m)^2
    static constexpr std::string_view name = "sqdev";
    template <class T> KILN_OP T operator()(T x, T m) const { T const d = math::sub_rounded(x, m); return d * d; }
  };
  struct output : math::op_base<2, op_kind::floating> {  // s / max(0, n - correction)
    static constexpr std::string_view name = "var_out";
    double divisor = 1;
    template <class T> KILN_OP T operator()(T s, T) const { return s / math::lit<T>(divisor); }
  };
  output make_output(index_t n) const { return {{}, std::max(0.0, static_cast<double>(n) - correction)}; }
  // 2 / (n - correction) g (x - mean), in PyTorch's order (var_backward), which keeps a large
  // deviation from overflowing before the division; the mean is reduced first.
  struct input_value : math::op_base<3, op_kind::floating> {
    static constexpr std::string_view name = "input";
    template <class T> KILN_OP T operator()(T x, T, T) const { return x; }
  };
  using grad_aux = std::tuple<grad_aux_t<input_value, mean_red>>;
  template <class T> KILN_HD T grad(T x, T, T g, T n, T mean) const {
    T const divisor = n - math::lit<T>(correction);  // clamped at 0 as in the forward
    return math::lit<T>(2) / math::select(divisor > T(0), divisor, T(0)) * g * math::sub_rounded(x, mean);
  }
};
struct std_red : var_red {
  static constexpr std::string_view name = "std";
  struct output : var_red::output {
    template <class T> KILN_OP T operator()(T s, T m) const { using std::sqrt; return sqrt(var_red::output::operator()(s, m)); }
  };
  output make_output(index_t n) const { return {var_red::make_output(n)}; }
  // var's gradient for the adjoint g / (2 out), 0 where out is 0 (PyTorch's std_backward): an
  // infinite std gives 0 where the deviation is finite.
  template <class T> KILN_HD T grad(T x, T out, T g, T n, T mean) const {
    return var_red::grad(x, out, math::select(out == T(0), T(0), g / (math::lit<T>(2) * out)), n, mean);
  }
};
// log(sum(exp(x - m))) + m with m the maximum, masked to 0 where it is infinite (PyTorch's
// formulation): stable for large inputs, exact for rows of ±inf.
struct logsumexp_red {
  static constexpr std::string_view name = "logsumexp";
  using pre = amax_red;
  using fold = sum_red;
  template <class T> KILN_OP static T shift(T m) {
    using std::isinf;
    return math::select(isinf(m), T(0), m);
  }
  struct input : math::op_base<2, op_kind::floating> {
    static constexpr std::string_view name = "exp_shifted";
    template <class T> KILN_OP T operator()(T x, T m) const { return math::exp(x - shift(m)); }
  };
  struct output : math::op_base<2, op_kind::floating> {
    static constexpr std::string_view name = "log_shifted";
    template <class T> KILN_OP T operator()(T s, T m) const { using std::log; return log(s) + shift(m); }
  };
  output make_output(index_t) const { return {}; }
  // (kiln's exp, as everywhere: xsimd's flushes subnormal results to 0.)
  template <class T> KILN_OP static T grad(T x, T out, T g, T) { return g * math::exp(x - out); }
};

}  // namespace kiln::ops

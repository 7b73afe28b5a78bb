// tests/grad_rules.cpp: the derivative rules of the elementwise ops (Op::grad), checked on their own,
// without an autodiff engine:
//   1. against central differences of the op's forward, in double, at points inside each domain and
//      away from kinks (one table of ops and points, `rules()`);
//   2. at the points where PyTorch picks a value (kinks, ties, clamp and hardtanh bounds, pow at 0,
//      where with inf or NaN around), one by one with exact expected values;
//   3. the batch form against the scalar form, lane by lane, for float and double, for every
//      vectorized op in the table, over every tuple of a pool of values that includes those points,
//      ±0, ±inf and NaN.
#include "ulp.hpp"

#include <doctest/doctest.h>
// The op headers alone (not kiln.hpp): the rules need neither the evaluator nor autodiff.
#include <kiln/ops/activation.hpp>
#include <kiln/ops/arithmetic.hpp>
#include <kiln/ops/compare.hpp>
#include <kiln/ops/rounding.hpp>
#include <kiln/ops/transcendental.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

namespace ops = kiln::ops;
using kiln::op_kind;

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();

// ---- calling a rule -----------------------------------------------------------------------------

// op(x...) and op.grad(g, out, x...), with argument 0 of a select op (where) passed as a truth value
// (bool, or batch_bool for batches; NaN counts as true), as the evaluator passes it.
template <class Op, class T, std::size_t N>
T forward(Op const& op, std::array<T, N> const& x) {
  return std::apply(
      [&](T const& first, auto const&... rest) -> T {
        if constexpr (Op::kind == op_kind::select) return op(kiln::math::negate(first == T(0)), rest...);
        else return op(first, rest...);
      },
      x);
}
template <class Op, class T, std::size_t N>
std::array<T, N> backward(Op const& op, T g, T out, std::array<T, N> const& x) {
  return std::apply(
      [&](T const& first, auto const&... rest) -> std::array<T, N> {
        if constexpr (Op::kind == op_kind::select)
          return op.grad(g, out, kiln::math::negate(first == T(0)), rest...);
        else
          return op.grad(g, out, first, rest...);
      },
      x);
}
// The gradient of op at x for upstream gradient g, in double.
template <class Op, class... X>
std::array<double, sizeof...(X)> grads(Op const& op, double g, X... x) {
  std::array<double, sizeof...(X)> const args{static_cast<double>(x)...};
  return backward(op, g, forward(op, args), args);
}

template <class T>
std::string show(T v) {
  std::ostringstream s;
  s << std::setprecision(std::numeric_limits<T>::max_digits10) << v;
  return s.str();
}
template <class T, std::size_t N>
std::string show(std::array<T, N> const& x) {
  std::string s = "(";
  for (std::size_t k = 0; k < N; ++k) s += (k ? ", " : "") + show(x[k]);
  return s + ")";
}
template <class T, std::size_t N>
std::string x_and_k(std::array<T, N> const& x, std::size_t k) {
  return show(x) + ", argument " + std::to_string(k);
}

// ---- the table ----------------------------------------------------------------------------------

// An op and points inside its domain, away from kinks and jumps, where central differences apply.
template <class Op, std::size_t N>
struct rule {
  Op op;
  std::vector<std::array<double, N>> points;
};
// (Spelled out for Clang before 17, which deduces no aggregate's template arguments.)
template <class Op, std::size_t N>
rule(Op, std::vector<std::array<double, N>>) -> rule<Op, N>;

using points1 = std::vector<std::array<double, 1>>;
using points2 = std::vector<std::array<double, 2>>;
using points3 = std::vector<std::array<double, 3>>;

// Every op with a derivative rule, with non-default parameters where it has any.
auto rules() {
  points1 const reals{{-2.3}, {-0.7}, {0.3}, {1.1}, {2.9}};
  points1 const positive{{0.2}, {0.9}, {3.7}, {25}};
  points1 const open_unit{{-0.8}, {-0.3}, {0.4}, {0.9}};   // (-1, 1)
  points1 const probabilities{{0.1}, {0.3}, {0.6}, {0.95}};  // (0, 1)
  points1 const off_integers{{-2.3}, {-0.7}, {0.3}, {1.6}, {2.9}};
  points2 const pairs{{1.5, -2.0}, {-0.7, 0.4}, {2.2, 3.1}, {-1.3, -0.6}, {5.3, 2.1}, {-5.3, 2.1}, {5.3, -2.1}};
  points3 const triples{{1.5, -2.0, 0.3}, {-0.7, 0.4, 2.2}, {3.1, -1.3, -0.6}, {0.25, 1.75, -2.5}};
  return std::tuple{
      // arithmetic.hpp
      rule{ops::add_op{}, pairs},
      rule{ops::sub_op{}, pairs},
      rule{ops::mul_op{}, pairs},
      rule{ops::div_op{}, pairs},
      rule{ops::neg_op{}, reals},
      rule{ops::abs_op{}, reals},
      rule{ops::sign_op{}, reals},
      rule{ops::reciprocal_op{}, reals},
      rule{ops::square_op{}, reals},
      rule{ops::pow_op{}, points2{{1.7, 2.3}, {0.4, -1.5}, {3.0, 0.5}, {2.0, 3.0}, {0.5, 0.0}}},
      rule{ops::fmod_op{}, pairs},
      rule{ops::remainder_op{}, pairs},
      rule{ops::minimum_op{}, pairs},
      rule{ops::maximum_op{}, pairs},
      rule{ops::fmin_op{}, pairs},
      rule{ops::fmax_op{}, pairs},
      rule{ops::hypot_op{}, pairs},
      rule{ops::copysign_op{}, pairs},
      rule{ops::atan2_op{}, pairs},
      rule{ops::fma_op{}, triples},
      rule{ops::lerp_op{}, points3{{1.0, 3.0, 0.3}, {-2.0, 5.0, 0.8}, {0.5, -1.5, 1.7}, {0.5, -1.5, -0.4}}},
      // inside, below, above, and lo > hi (the result is hi)
      rule{ops::clamp_op{}, points3{{0.5, -1.0, 2.0}, {-3.0, -1.0, 2.0}, {4.0, -1.0, 2.0}, {1.0, 2.0, -1.0}}},
      rule{ops::addcmul_op{{}, 0.75}, triples},
      // transcendental.hpp
      rule{ops::sqrt_op{}, positive},
      rule{ops::rsqrt_op{}, positive},
      rule{ops::exp_op{}, reals},
      rule{ops::exp2_op{}, reals},
      rule{ops::expm1_op{}, reals},
      rule{ops::log_op{}, positive},
      rule{ops::log2_op{}, positive},
      rule{ops::log10_op{}, positive},
      rule{ops::log1p_op{}, points1{{-0.5}, {0.3}, {4.0}}},
      rule{ops::sin_op{}, reals},
      rule{ops::cos_op{}, reals},
      rule{ops::tan_op{}, reals},
      rule{ops::asin_op{}, open_unit},
      rule{ops::acos_op{}, open_unit},
      rule{ops::atan_op{}, reals},
      rule{ops::sinh_op{}, reals},
      rule{ops::cosh_op{}, reals},
      rule{ops::tanh_op{}, reals},
      rule{ops::asinh_op{}, reals},
      rule{ops::acosh_op{}, points1{{1.2}, {2.5}, {30}}},
      rule{ops::atanh_op{}, open_unit},
      rule{ops::erf_op{}, reals},
      rule{ops::erfc_op{}, reals},
      // activation.hpp
      rule{ops::sigmoid_op{}, reals},
      rule{ops::logit_op{}, probabilities},
      rule{ops::relu_op{}, reals},
      rule{ops::gelu_op{}, points1{{-5.0}, {-2.3}, {-0.7}, {0.3}, {1.1}, {2.9}}},
      rule{ops::silu_op{}, reals},
      rule{ops::softplus_op{}, points1{{-2.3}, {0.3}, {2.9}, {25}}},
      rule{ops::softplus_op{{}, 2.0, 5.0}, points1{{-1.0}, {0.3}, {1.9}, {3.0}}},  // 3.0: above threshold
      rule{ops::elu_op{{}, 1.5}, reals},
      rule{ops::leaky_relu_op{{}, 0.2}, reals},
      rule{ops::hardtanh_op{}, reals},
      rule{ops::hardtanh_op{{}, -2.0, 0.5}, points1{{-3.0}, {-1.0}, {0.2}, {0.9}}},
      // rounding.hpp
      rule{ops::floor_op{}, off_integers},
      rule{ops::ceil_op{}, off_integers},
      rule{ops::round_op{}, off_integers},
      rule{ops::trunc_op{}, off_integers},
      rule{ops::frac_op{}, off_integers},
      // compare.hpp: the condition (argument 0) is not differentiated
      rule{ops::where_op{}, points3{{1.0, 2.5, -3.5}, {0.0, 2.5, -3.5}}},
  };
}

// Predicates and logical ops have no rule.
template <class Op>
concept has_binary_rule = requires(Op op, double v) { op.grad(v, v, v, v); };
template <class Op>
concept has_unary_rule = requires(Op op, double v) { op.grad(v, v, v); };
static_assert(has_binary_rule<ops::add_op> && has_unary_rule<ops::exp_op> && has_unary_rule<ops::floor_op>);
static_assert(!has_binary_rule<ops::eq_op> && !has_binary_rule<ops::lt_op> && !has_unary_rule<ops::isnan_op>);
static_assert(!has_binary_rule<ops::logical_and_op> && !has_unary_rule<ops::logical_not_op>);

// ---- 1. central differences ---------------------------------------------------------------------

template <class Op, std::size_t N>
void check_differences(rule<Op, N> const& r) {
  for (auto const& x : r.points) {
    auto const got = backward(r.op, 1.0, forward(r.op, x), x);
    if constexpr (Op::kind == op_kind::select) CHECK(got[0] == 0);
    for (std::size_t k = Op::kind == op_kind::select ? 1 : 0; k < N; ++k) {
      auto up = x, down = x;
      double const h = 1e-6 * std::max(1.0, std::fabs(x[k]));
      up[k] += h;
      down[k] -= h;
      double const want = (forward(r.op, up) - forward(r.op, down)) / (up[k] - down[k]);
      double const error = std::fabs(got[k] - want);
      CHECK_MESSAGE(error <= 1e-6 * std::max(std::fabs(want), std::fabs(got[k])) + 1e-12,
                    Op::name << " at " << x_and_k(x, k) << ": rule " << show(got[k]) << ", differences " << show(want));
    }
  }
}

// ---- 3. batches against scalars ------------------------------------------------------------------

// Values every argument of every op takes in the batch check: the awkward points of section 2 (±0,
// ties, ±1 as hardtanh's bounds, 0.5, the ends of logit's domain), ordinary values and non-finite ones.
constexpr std::array<double, 14> pool{0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.5, 3.0, 0.1, 0.9, qnan, inf, -inf};

using kiln_test::ulp_distance;
template <class T>
bool same_within_2_ulp(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  if (a == 0 && b == 0) return std::signbit(a) == std::signbit(b);  // -g with g = 0 is -0, as in PyTorch
  return ulp_distance(a, b) <= 2;
}

// Every N-tuple of pool values, W at a time, through the batch rule and lane by lane through the
// scalar rule. Both get the same out (the scalar forward's), so that only the rules are compared.
template <class T, class Op, std::size_t N>
void check_batches(rule<Op, N> const& r) {
  if constexpr (kiln::op_vectorized<Op> && kiln::simd_detail::has_batch<T>) {
    using B = kiln::simd_detail::batch<T>;
    constexpr std::size_t W = B::size;
    std::vector<std::array<T, N>> tuples;
    std::array<std::size_t, N> index{};
    for (bool more = true; more;) {
      std::array<T, N> x;
      for (std::size_t k = 0; k < N; ++k) x[k] = static_cast<T>(pool[index[k]]);
      tuples.push_back(x);
      more = false;
      for (std::size_t k = 0; k < N && !more; ++k) {  // the next index, as an odometer
        more = ++index[k] < pool.size();
        if (!more) index[k] = 0;
      }
    }
    while (tuples.size() % W != 0) tuples.push_back(tuples.front());
    // The upstream gradient of tuple j: it differs across lanes, and is 0 or inf in some.
    auto const upstream = [](std::size_t j) { return static_cast<T>(std::array{0.75, -2.0, inf, 0.0}[j % 4]); };

    int failures = 0;
    std::string first_failure;
    for (std::size_t start = 0; start < tuples.size(); start += W) {
      std::array<std::array<T, W>, N> lanes;
      std::array<T, W> out, g;
      for (std::size_t i = 0; i < W; ++i) {
        for (std::size_t k = 0; k < N; ++k) lanes[k][i] = tuples[start + i][k];
        out[i] = forward(r.op, tuples[start + i]);
        g[i] = upstream(start + i);
      }
      std::array<B, N> xb;
      for (std::size_t k = 0; k < N; ++k) xb[k] = B::load_unaligned(lanes[k].data());
      auto const gb = backward(r.op, B::load_unaligned(g.data()), B::load_unaligned(out.data()), xb);
      for (std::size_t k = 0; k < N; ++k) {
        std::array<T, W> got;
        gb[k].store_unaligned(got.data());
        for (std::size_t i = 0; i < W; ++i) {
          T const want = backward(r.op, g[i], out[i], tuples[start + i])[k];
          if (!same_within_2_ulp(got[i], want) && failures++ == 0)
            first_failure = x_and_k(tuples[start + i], k) + ", g = " + show(g[i]) + ": batch " + show(got[i]) +
                            ", scalar " + show(want);
        }
      }
    }
    std::string const what = std::string(Op::name) + (sizeof(T) == 4 ? " (float)" : " (double)");
    CHECK_MESSAGE(failures == 0, what << ": " << failures << " lanes differ, first at " << first_failure);
  }
}

}  // namespace

TEST_CASE("grad rules match central differences") {
  std::apply([](auto const&... r) { (check_differences(r), ...); }, rules());
}

TEST_CASE_TEMPLATE("grad rules: batches agree with scalars lane by lane", T, float, double) {
  std::apply([](auto const&... r) { (check_batches<T>(r), ...); }, rules());
}

TEST_CASE("grad rules at PyTorch's awkward points") {
  using A1 = std::array<double, 1>;
  using A2 = std::array<double, 2>;
  using A3 = std::array<double, 3>;
  double const g = 3;

  SUBCASE("kinks: relu, abs, leaky_relu, elu at 0") {
    CHECK(grads(ops::relu_op{}, g, 0.0) == A1{0});
    CHECK(grads(ops::relu_op{}, g, -0.0) == A1{0});
    CHECK(grads(ops::relu_op{}, g, 1e-300) == A1{g});
    CHECK(grads(ops::relu_op{}, g, qnan) == A1{g});  // threshold_backward: only out <= 0 stops g
    CHECK(grads(ops::abs_op{}, g, 0.0) == A1{0});
    CHECK(grads(ops::abs_op{}, g, -0.0) == A1{0});
    CHECK(grads(ops::abs_op{}, g, -2.0) == A1{-g});
    CHECK(grads(ops::leaky_relu_op{}, g, 0.0) == A1{g * 0.01});
    CHECK(grads(ops::leaky_relu_op{{}, 0.2}, g, 0.0) == A1{g * 0.2});
    CHECK(grads(ops::leaky_relu_op{{}, 0.2}, g, -0.0) == A1{g * 0.2});
    CHECK(grads(ops::elu_op{{}, 1.5}, g, 0.0) == A1{g * 1.5});  // the x <= 0 side
    CHECK(grads(ops::gelu_op{}, g, 0.0) == A1{g * 0.5});
    CHECK(grads(ops::sigmoid_op{}, g, 0.0) == A1{g * 0.25});
  }

  SUBCASE("piecewise constant: sign, floor, ceil, round, trunc are 0 (at the jumps too); frac is g") {
    for (double x : {-2.0, -0.5, 0.0, 0.5, 2.5, 3.0}) {
      CAPTURE(x);
      CHECK(grads(ops::sign_op{}, g, x) == A1{0});
      CHECK(grads(ops::floor_op{}, g, x) == A1{0});
      CHECK(grads(ops::ceil_op{}, g, x) == A1{0});
      CHECK(grads(ops::round_op{}, g, x) == A1{0});
      CHECK(grads(ops::trunc_op{}, g, x) == A1{0});
      CHECK(grads(ops::frac_op{}, g, x) == A1{g});
    }
  }

  SUBCASE("minimum and maximum: a tie splits g, a NaN gives g to both") {
    CHECK(grads(ops::maximum_op{}, g, 1.0, 1.0) == A2{g / 2, g / 2});
    CHECK(grads(ops::minimum_op{}, g, 1.0, 1.0) == A2{g / 2, g / 2});
    CHECK(grads(ops::maximum_op{}, g, -0.0, 0.0) == A2{g / 2, g / 2});
    CHECK(grads(ops::maximum_op{}, g, 2.0, 1.0) == A2{g, 0});
    CHECK(grads(ops::maximum_op{}, g, 1.0, 2.0) == A2{0, g});
    CHECK(grads(ops::minimum_op{}, g, 2.0, 1.0) == A2{0, g});
    CHECK(grads(ops::minimum_op{}, g, 1.0, 2.0) == A2{g, 0});
    CHECK(grads(ops::maximum_op{}, g, qnan, 1.0) == A2{g, g});
    CHECK(grads(ops::minimum_op{}, g, 1.0, qnan) == A2{g, g});
  }

  SUBCASE("fmin and fmax: a tie splits g, a NaN loses") {
    CHECK(grads(ops::fmax_op{}, g, 1.0, 1.0) == A2{g / 2, g / 2});
    CHECK(grads(ops::fmin_op{}, g, 1.0, 1.0) == A2{g / 2, g / 2});
    CHECK(grads(ops::fmax_op{}, g, -0.0, 0.0) == A2{g / 2, g / 2});
    CHECK(grads(ops::fmax_op{}, g, 2.0, 1.0) == A2{g, 0});
    CHECK(grads(ops::fmax_op{}, g, 1.0, 2.0) == A2{0, g});
    CHECK(grads(ops::fmin_op{}, g, 2.0, 1.0) == A2{0, g});
    CHECK(grads(ops::fmin_op{}, g, 1.0, 2.0) == A2{g, 0});
    CHECK(grads(ops::fmax_op{}, g, qnan, 1.0) == A2{0, g});
    CHECK(grads(ops::fmax_op{}, g, 1.0, qnan) == A2{g, 0});
    CHECK(grads(ops::fmin_op{}, g, qnan, 1.0) == A2{0, g});
    CHECK(grads(ops::fmin_op{}, g, 1.0, qnan) == A2{g, 0});
    CHECK(grads(ops::fmax_op{}, g, qnan, qnan) == A2{g, 0});
  }

  SUBCASE("clamp passes g to x at its bounds; lo > hi gives everything to hi") {
    CHECK(grads(ops::clamp_op{}, g, -1.0, -1.0, 2.0) == A3{g, 0, 0});  // at lo
    CHECK(grads(ops::clamp_op{}, g, 2.0, -1.0, 2.0) == A3{g, 0, 0});   // at hi
    CHECK(grads(ops::clamp_op{}, g, -3.0, -1.0, 2.0) == A3{0, g, 0});
    CHECK(grads(ops::clamp_op{}, g, 5.0, -1.0, 2.0) == A3{0, 0, g});
    CHECK(grads(ops::clamp_op{}, g, 0.0, 2.0, -1.0) == A3{0, 0, g});   // lo > hi: out = hi
    CHECK(grads(ops::clamp_op{}, g, 5.0, 2.0, -1.0) == A3{0, 0, g});
    CHECK(grads(ops::clamp_op{}, g, 1.0, 1.0, 1.0) == A3{g, 0, 0});
    CHECK(grads(ops::clamp_op{}, g, -5.0, 1.0, 1.0) == A3{0, 0, 0});   // torch: lo == hi, x below
    CHECK(grads(ops::clamp_op{}, g, qnan, -1.0, 2.0) == A3{0, 0, 0});
  }

  SUBCASE("hardtanh is 0 at its bounds") {
    CHECK(grads(ops::hardtanh_op{}, g, -1.0) == A1{0});
    CHECK(grads(ops::hardtanh_op{}, g, 1.0) == A1{0});
    CHECK(grads(ops::hardtanh_op{}, g, 0.999) == A1{g});
    CHECK(grads(ops::hardtanh_op{{}, -2.0, 0.5}, g, -2.0) == A1{0});
    CHECK(grads(ops::hardtanh_op{{}, -2.0, 0.5}, g, 0.5) == A1{0});
    CHECK(grads(ops::hardtanh_op{{}, -2.0, 0.5}, g, 0.0) == A1{g});
    CHECK(grads(ops::hardtanh_op{{}, 1.0, -1.0}, g, 0.0) == A1{0});  // min > max: constant
  }

  SUBCASE("where: g to the chosen side, exactly 0 to the other, whatever is around") {
    CHECK(grads(ops::where_op{}, g, 1.0, 2.0, qnan) == A3{0, g, 0});
    CHECK(grads(ops::where_op{}, g, 1.0, 2.0, -inf) == A3{0, g, 0});
    CHECK(grads(ops::where_op{}, g, 0.0, qnan, 2.0) == A3{0, 0, g});
    CHECK(grads(ops::where_op{}, g, 0.0, inf, 2.0) == A3{0, 0, g});
    CHECK(grads(ops::where_op{}, inf, 1.0, 2.0, 3.0) == A3{0, inf, 0});
    CHECK(grads(ops::where_op{}, -inf, 0.0, 2.0, 3.0) == A3{0, 0, -inf});
    auto const d = grads(ops::where_op{}, qnan, 1.0, 2.0, 3.0);
    CHECK((d[0] == 0 && std::isnan(d[1]) && d[2] == 0));
  }

  SUBCASE("pow at base 0 and exponent 0") {
    CHECK(grads(ops::pow_op{}, g, 0.0, 2.0) == A2{0, 0});
    CHECK(grads(ops::pow_op{}, g, 0.0, 0.0) == A2{0, 0});
    CHECK(grads(ops::pow_op{}, g, 0.0, 0.5) == A2{inf, 0});
    CHECK(grads(ops::pow_op{}, g, 0.0, -1.0) == A2{-inf, -inf});
    CHECK(grads(ops::pow_op{}, g, -3.0, 0.0)[0] == 0);
    CHECK(grads(ops::pow_op{}, g, qnan, 0.0)[0] == 0);
    CHECK(grads(ops::pow_op{}, g, inf, 0.0)[0] == 0);
    CHECK(grads(ops::pow_op{}, g, 2.0, 3.0) == A2{g * 12, g * 8 * std::log(2.0)});
  }

  SUBCASE("softplus above its threshold is g") {
    CHECK(grads(ops::softplus_op{}, g, 25.0) == A1{g});
    CHECK(grads(ops::softplus_op{{}, 2.0, 5.0}, g, 2.6) == A1{g});  // beta x = 5.2 > 5
    CHECK(grads(ops::softplus_op{{}, 2.0, 5.0}, g, 2.5)[0] < g);    // beta x = 5: not above
    CHECK(grads(ops::softplus_op{{}, 1.0, 1000.0}, g, 800.0) == A1{g});  // e^800 overflows: not NaN
  }

  SUBCASE("logit: NaN outside [0, 1], infinite at its ends") {
    CHECK(std::isnan(grads(ops::logit_op{}, g, -0.5)[0]));
    CHECK(std::isnan(grads(ops::logit_op{}, g, 1.5)[0]));
    CHECK(grads(ops::logit_op{}, g, 0.0) == A1{inf});
    CHECK(grads(ops::logit_op{}, g, -0.0) == A1{inf});
    CHECK(grads(ops::logit_op{}, g, 1.0) == A1{inf});
    CHECK(grads(ops::logit_op{}, g, 0.5) == A1{g * 4});
  }

  SUBCASE("atan2: 0 where a^2 + b^2 is 0, at the origin or by underflow") {
    CHECK(grads(ops::atan2_op{}, g, 0.0, 0.0) == A2{0, 0});
    CHECK(grads(ops::atan2_op{}, g, -0.0, -0.0) == A2{0, 0});
    CHECK(grads(ops::atan2_op{}, g, 1e-200, 0.0) == A2{0, 0});
    CHECK(grads(ops::atan2_op{}, g, 0.0, 1e-200) == A2{0, 0});
    CHECK(grads(ops::atan2_op{}, g, 1e-200, 1e-200) == A2{0, 0});
    CHECK(grads(ops::atan2_op{}, g, 3.0, 4.0) == A2{g * 4 / 25, -g * 3 / 25});
  }

  SUBCASE("copysign: g times the sign flip, 0 at a zero magnitude; the sign source gets 0") {
    CHECK(grads(ops::copysign_op{}, g, 2.0, -1.0) == A2{-g, 0});
    CHECK(grads(ops::copysign_op{}, g, -2.0, -1.0) == A2{g, 0});
    CHECK(grads(ops::copysign_op{}, g, 0.0, -1.0) == A2{0, 0});
  }

  SUBCASE("remainder and fmod: the divisor's gradient uses torch's floor and trunc division") {
    // 1 // 0.1 is 9 (remainder(1, 0.1) = 0.0999...), while floor(1 / 0.1) = 10; trunc(1 / 0.1) = 10.
    CHECK(grads(ops::remainder_op{}, g, 1.0, 0.1) == A2{g, -g * 9});
    CHECK(grads(ops::remainder_op{}, g, -1.0, 0.1) == A2{g, g * 10});
    CHECK(grads(ops::remainder_op{}, g, 7.0, -2.0) == A2{g, g * 4});
    CHECK(grads(ops::fmod_op{}, g, 1.0, 0.1) == A2{g, -g * 10});
    CHECK(grads(ops::fmod_op{}, g, -7.0, 2.0) == A2{g, g * 3});
  }
}

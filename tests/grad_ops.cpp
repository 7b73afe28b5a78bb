// Every differentiable op and reduction through the whole engine: kiln::gradcheck (central
// differences in double) on broadcast shapes. Compiled at -O1 (tests/CMakeLists.txt): each
// differentiated expression instantiates its own forward and backward loops.
#include <kiln/kiln.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

namespace {

using kiln::index_t;

// Uniform inputs in [lo, hi) of the given shape.
template <std::size_t R>
kiln::tensor<double, int(R)> uniform(std::array<index_t, R> const& shape, double lo, double hi, std::uint64_t seed) {
  return kiln::tensor<double, int(R)>(kiln::rand<double>(shape, seed) * (hi - lo) + lo);
}

struct domain {
  double lo = -2, hi = 2;
};

// Checks fn (applied to vars), with the inputs broadcast against each other in three layouts:
// [3, 5] [1, 5] [3, 1]; [2, 1] [1, 6] [2, 6]; [1, 1] [4, 3] [1, 3]. A tensor output goes through the tape's statement loop; a scalar one (a
// loss) through value_and_grad's single-pass loop.
template <class Fn, class... D>
void check_op(char const* name, Fn fn, D... domains) {
  CAPTURE(name);
  // Same ranks, so every layout runs the same instantiations.
  using shapes = std::array<std::array<index_t, 2>, 3>;
  for (shapes const& layout : {shapes{{{3, 5}, {1, 5}, {3, 1}}}, shapes{{{2, 1}, {1, 6}, {2, 6}}}, shapes{{{1, 1}, {4, 3}, {1, 3}}}}) {
    CAPTURE(layout);
    std::size_t k = 0;
    auto next = [&](domain d) {
      ++k;
      return uniform(layout[k - 1], d.lo, d.hi, k);
    };
    auto inputs = std::tuple{next(domains)...};  // braces: evaluated in order
    std::apply([&](auto const&... x) {
      auto const r = kiln::gradcheck(fn, x...);
      CHECK_MESSAGE(r.ok, r.message);
    }, inputs);
  }
}

}  // namespace

TEST_CASE("unary ops pass gradcheck") {
  domain const any{-2, 2}, positive{0.2, 3}, unit{-0.9, 0.9}, above_one{1.2, 3}, probability{0.05, 0.95};
  check_op("neg", [](auto const& x) { return -x; }, any);
  check_op("abs", [](auto const& x) { return kiln::abs(x); }, any);
  check_op("sign", [](auto const& x) { return kiln::sign(x) * x; }, any);
  check_op("reciprocal", [](auto const& x) { return kiln::reciprocal(x); }, positive);
  check_op("square", [](auto const& x) { return kiln::square(x); }, any);
  check_op("sqrt", [](auto const& x) { return kiln::sqrt(x); }, positive);
  check_op("rsqrt", [](auto const& x) { return kiln::rsqrt(x); }, positive);
  check_op("exp", [](auto const& x) { return kiln::exp(x); }, any);
  check_op("exp2", [](auto const& x) { return kiln::exp2(x); }, any);
  check_op("expm1", [](auto const& x) { return kiln::expm1(x); }, any);
  check_op("log", [](auto const& x) { return kiln::log(x); }, positive);
  check_op("log2", [](auto const& x) { return kiln::log2(x); }, positive);
  check_op("log10", [](auto const& x) { return kiln::log10(x); }, positive);
  check_op("log1p", [](auto const& x) { return kiln::log1p(x); }, positive);
  check_op("sin", [](auto const& x) { return kiln::sin(x); }, any);
  check_op("cos", [](auto const& x) { return kiln::cos(x); }, any);
  check_op("tan", [](auto const& x) { return kiln::tan(x); }, unit);
  check_op("asin", [](auto const& x) { return kiln::asin(x); }, unit);
  check_op("acos", [](auto const& x) { return kiln::acos(x); }, unit);
  check_op("atan", [](auto const& x) { return kiln::atan(x); }, any);
  check_op("sinh", [](auto const& x) { return kiln::sinh(x); }, any);
  check_op("cosh", [](auto const& x) { return kiln::cosh(x); }, any);
  check_op("tanh", [](auto const& x) { return kiln::tanh(x); }, any);
  check_op("asinh", [](auto const& x) { return kiln::asinh(x); }, any);
  check_op("acosh", [](auto const& x) { return kiln::acosh(x); }, above_one);
  check_op("atanh", [](auto const& x) { return kiln::atanh(x); }, unit);
  check_op("erf", [](auto const& x) { return kiln::erf(x); }, any);
  check_op("erfc", [](auto const& x) { return kiln::erfc(x); }, any);
  check_op("sigmoid", [](auto const& x) { return kiln::sigmoid(x); }, any);
  check_op("logit", [](auto const& x) { return kiln::logit(x); }, probability);
  check_op("relu", [](auto const& x) { return kiln::relu(x); }, any);
  check_op("gelu", [](auto const& x) { return kiln::gelu(x); }, any);
  check_op("silu", [](auto const& x) { return kiln::silu(x); }, any);
  check_op("softplus", [](auto const& x) { return kiln::softplus(x, 2.0, 3.0); }, any);
  check_op("elu", [](auto const& x) { return kiln::elu(x, 0.7); }, any);
  check_op("leaky_relu", [](auto const& x) { return kiln::leaky_relu(x, 0.1); }, any);
  check_op("hardtanh", [](auto const& x) { return kiln::hardtanh(x, -0.5, 0.7); }, any);
  check_op("floor", [](auto const& x) { return kiln::floor(x) + x; }, any);
  check_op("ceil", [](auto const& x) { return kiln::ceil(x) * x; }, any);
  check_op("round", [](auto const& x) { return kiln::round(x) + x; }, any);
  check_op("trunc", [](auto const& x) { return kiln::trunc(x) * x; }, any);
  check_op("frac", [](auto const& x) { return kiln::frac(x); }, any);
}

TEST_CASE("binary and ternary ops pass gradcheck, broadcasting") {
  domain const any{-2, 2}, positive{0.5, 2}, away{1, 2};
  check_op("add", [](auto const& a, auto const& b) { return a + b; }, any, any);
  check_op("sub", [](auto const& a, auto const& b) { return a - b; }, any, any);
  check_op("mul", [](auto const& a, auto const& b) { return a * b; }, any, any);
  check_op("div", [](auto const& a, auto const& b) { return a / b; }, any, away);
  check_op("pow", [](auto const& a, auto const& b) { return kiln::pow(a, b); }, positive, any);
  check_op("fmod", [](auto const& a, auto const& b) { return kiln::fmod(a, b); }, any, away);
  check_op("remainder", [](auto const& a, auto const& b) { return kiln::remainder(a, b); }, any, away);
  check_op("minimum", [](auto const& a, auto const& b) { return kiln::minimum(a, b); }, any, any);
  check_op("maximum", [](auto const& a, auto const& b) { return kiln::maximum(a, b); }, any, any);
  check_op("fmin", [](auto const& a, auto const& b) { return kiln::fmin(a, b); }, any, any);
  check_op("fmax", [](auto const& a, auto const& b) { return kiln::fmax(a, b); }, any, any);
  check_op("hypot", [](auto const& a, auto const& b) { return kiln::hypot(a, b); }, any, any);
  check_op("copysign", [](auto const& a, auto const& b) { return kiln::copysign(a, b); }, any, any);
  check_op("atan2", [](auto const& a, auto const& b) { return kiln::atan2(a, b); }, any, away);
  check_op("fma", [](auto const& a, auto const& b, auto const& c) { return kiln::fma(a, b, c); }, any, any, any);
  check_op("lerp", [](auto const& a, auto const& b, auto const& w) { return kiln::lerp(a, b, w); }, any, any, any);
  check_op("clamp", [](auto const& x, auto const& lo, auto const& hi) { return kiln::clamp(x, lo, hi); },
           domain{-3, 3}, domain{-2, -0.5}, domain{0.5, 2});
  check_op("addcmul", [](auto const& a, auto const& b, auto const& c) { return kiln::addcmul(a, b, c, 0.5); }, any, any,
           any);
  check_op("where", [](auto const& a, auto const& b) { return kiln::where(a > b, a * b, a - b); }, any, any);
  check_op("scalars", [](auto const& a) { return 2.0 / (1.0 + a * a) - 3.0; }, any);
}

TEST_CASE("losses run forward and backward in one loop and pass gradcheck") {
  domain const any{-2, 2}, positive{0.5, 2};
  check_op("sum of x sigmoid(x) y", [](auto const& x, auto const& y) { return kiln::sum(x * kiln::sigmoid(x) * y); },
           any, any);
  check_op("mean of a broadcast product", [](auto const& a, auto const& b) { return kiln::mean(a * b - a); }, any, any);
  check_op("sum of where", [](auto const& a, auto const& b) { return kiln::sum(kiln::where(a < b, kiln::exp(a), b * b)); },
           any, any);
  check_op("sum of pow, lane by lane", [](auto const& a, auto const& b) { return kiln::sum(kiln::pow(a, b)); }, positive,
           any);
  check_op("sum of a ternary", [](auto const& a, auto const& b, auto const& c) { return kiln::sum(kiln::lerp(a, b, c)); },
           any, any, any);
}

namespace {

// Reductions of a rank-3 input over all axes, one axis, two axes, and with keepdim; softmax and
// log_softmax along every dimension.
template <class Reduce>
void check_reduction(char const* name, Reduce reduce, domain d = {}) {
  CAPTURE(name);
  auto const x = uniform<3>({2, 3, 4}, d.lo, d.hi, 7);
  auto check = [&](auto f) {
    auto const r = kiln::gradcheck(f, x);
    CHECK_MESSAGE(r.ok, r.message);
  };
  check([&](auto const& v) { return reduce(v * 1.5); });
  check([&](auto const& v) { return reduce(kiln::exp(v), 1) * 1.0; });
  check([&](auto const& v) { return reduce(v, kiln::axes<0, 2>) * 1.0; });
  check([&](auto const& v) { return reduce(v + 1.0, -1, kiln::keepdim) * v; });
}

}  // namespace

TEST_CASE("reductions pass gradcheck over any axes") {
  check_reduction("sum", kiln::sum);
  check_reduction("mean", kiln::mean);
  check_reduction("prod", kiln::prod, {0.5, 1.5});
  check_reduction("amax", kiln::amax);
  check_reduction("amin", kiln::amin);
  check_reduction("variance", kiln::variance);
  check_reduction("stddev", kiln::stddev);
  check_reduction("logsumexp", kiln::logsumexp);
  check_reduction("norm1", [](auto const& x, auto const&... o) { return kiln::norm<1>(x, o...); });
  check_reduction("norm2", [](auto const& x, auto const&... o) { return kiln::norm<2>(x, o...); });
  check_reduction("norm_inf", [](auto const& x, auto const&... o) { return kiln::norm<kiln::infinity_norm>(x, o...); });
  check_reduction("variance, correction 0",
                  [](auto const& x, auto const&... o) { return kiln::variance(x, o..., kiln::correction{0}); });
}

TEST_CASE("softmax and log_softmax pass gradcheck along every dimension") {
  auto const x = uniform<3>({2, 3, 4}, -2, 2, 9);
  for (int dim = 0; dim < 3; ++dim) {
    CAPTURE(dim);
    auto const s = kiln::gradcheck([dim](auto const& v) { return kiln::softmax(v * 2.0, dim); }, x);
    CHECK_MESSAGE(s.ok, s.message);
    auto const l = kiln::gradcheck([dim](auto const& v) { return kiln::log_softmax(v, dim) * 1.0; }, x);
    CHECK_MESSAGE(l.ok, l.message);
  }
  // A boundary in the middle of a statement splits it: the mean is its own tape entry.
  auto const centred = kiln::gradcheck([](auto const& v) { return kiln::sum(kiln::square(v - kiln::mean(v, 1, kiln::keepdim))); }, x);
  CHECK_MESSAGE(centred.ok, centred.message);
  auto const nested = kiln::gradcheck(
      [](auto const& v) { return kiln::logsumexp(kiln::softmax(v, 2) * kiln::amax(v, {0, 1}, kiln::keepdim), 1); }, x);
  CHECK_MESSAGE(nested.ok, nested.message);
}

// --- linear_recurrence: y[0] = b[0], y[t] = a y[t-1] + b[t] along dim ------------------------

namespace {

// The recurrence by definition, over a contiguous tensor: element i's predecessor along dim is i -
// stride, which comes earlier in row-major order.
template <class T, int R>
kiln::tensor<T, R> recurrence_reference(kiln::tensor<T, R> const& b, T a, int dim) {
  kiln::tensor<T, R> y = b;
  index_t const stride = y.view().strides()[dim], n = y.shape()[dim];
  for (index_t i = 0; i < y.size(); ++i)
    if ((i / stride) % n != 0) y.data()[i] = a * y.data()[i - stride] + b.data()[i];
  return y;
}

template <class T, int R>
void check_close(kiln::tensor<T, R> const& got, kiln::tensor<T, R> const& want) {
  REQUIRE(got.shape() == want.shape());
  double const tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  for (index_t i = 0; i < got.size(); ++i) {
    T const g = got.data()[i], w = want.data()[i];
    if (std::isnan(w)) CHECK(std::isnan(g));
    else if (std::isinf(w)) CHECK(g == w);
    else CHECK(std::abs(double(g) - double(w)) <= tol * (1 + std::abs(double(w))));
  }
}

template <int R>
void check_recurrence_values(std::array<index_t, R> const& shape) {
  CAPTURE(shape);
  auto const x = uniform<R>(shape, -1, 1, 21);
  kiln::tensor<double, 0> a(kiln::extents<0>{});
  a.data()[0] = -0.8;
  for (int dim = -R; dim < R; ++dim) {
    CAPTURE(dim);
    int const d = dim < 0 ? dim + R : dim;
    auto const want = recurrence_reference(kiln::tensor<double, R>(kiln::exp(x)), -0.8, d);
    check_close(kiln::tensor<double, R>(kiln::linear_recurrence(kiln::exp(x), -0.8, dim)), want);  // a number
    check_close(kiln::eval(kiln::seq, kiln::linear_recurrence(kiln::exp(x), a, dim)), want);       // a rank-0 tensor
    check_close(kiln::eval(kiln::par, kiln::linear_recurrence(kiln::exp(x), a * 1.0, dim)), want); // an expression
    // Inside a larger expression: materialised once, then read as a leaf.
    check_close(kiln::tensor<double, R>(2.0 * kiln::linear_recurrence(kiln::exp(x), a, dim) + x),
                kiln::tensor<double, R>(2.0 * want + x));
    // float: b's type, with a double number taking it (weak), a double tensor widening it.
    kiln::tensor<float, R> const xf(x);
    auto const want_f = recurrence_reference(xf, -0.8f, d);
    check_close(kiln::tensor<float, R>(kiln::linear_recurrence(xf, -0.8, dim)), want_f);
    static_assert(std::is_same_v<typename decltype(kiln::linear_recurrence(xf, a, dim))::value_type, double>);
  }
}

}  // namespace

TEST_CASE("linear_recurrence matches the scalar loop along every dimension of ranks 1 to 3") {
  check_recurrence_values<1>({9});
  check_recurrence_values<2>({4, 7});
  check_recurrence_values<3>({3, 5, 18});
  check_recurrence_values<3>({2, 1, 3});  // a size-1 dimension: y = b along it
}

TEST_CASE("linear_recurrence: empty and size-1 dimensions, NaN and inf, in-place, errors") {
  kiln::tensor<double, 2> const empty = kiln::zeros<double>({0, 3}), across = kiln::zeros<double>({3, 0});
  for (int dim : {0, 1}) {
    CHECK(kiln::eval(kiln::linear_recurrence(empty, 0.5, dim)).shape() == empty.shape());
    CHECK(kiln::eval(kiln::linear_recurrence(across, 0.5, dim)).shape() == across.shape());
  }
  kiln::tensor<double, 2> const row = {{1, 2, 3}};
  check_close(kiln::eval(kiln::linear_recurrence(row, 0.5, 0)), row);
  // The listing shows both inputs and the boundary.
  kiln::tensor<double, 0> coefficient(kiln::extents<0>{});
  std::string const listing = kiln::to_string(kiln::linear_recurrence(row, coefficient, 1) * 2.0);
  CAPTURE(listing);
  CHECK(listing.find("linear_recurrence[dim=1](%0, %1) : double[1, 3]  // materialized: fusion boundary") !=
        std::string::npos);

  double const nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  kiln::tensor<double, 1> const b = {1, nan, 2, 3};
  check_close(kiln::eval(kiln::linear_recurrence(b, 0.5, 0)), kiln::tensor<double, 1>{1, nan, nan, nan});
  kiln::tensor<double, 1> const c = {0, 1, 2};
  check_close(kiln::eval(kiln::linear_recurrence(c, nan, 0)), kiln::tensor<double, 1>{0, nan, nan});
  check_close(kiln::eval(kiln::linear_recurrence(c, inf, 0)), kiln::tensor<double, 1>{0, nan, nan});  // inf * 0
  check_close(kiln::eval(kiln::linear_recurrence(c + 1.0, inf, 0)), kiln::tensor<double, 1>{1, inf, inf});

  // The destination is an operand: evaluated in place (b is read elementwise before the scan).
  kiln::tensor<double, 1> y = {1, 2, 3};
  y = kiln::linear_recurrence(y * 2.0, 0.5, 0);
  check_close(y, kiln::tensor<double, 1>{2, 5, 8.5});

  kiln::tensor<double, 2> const m = kiln::zeros<double>({2, 3});
  CHECK_THROWS_WITH_AS(kiln::linear_recurrence(m, 0.5, 2), "linear_recurrence: axis 2 is out of range for a tensor of rank 2",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::linear_recurrence(m, 0.5, -3),
                       "linear_recurrence: axis -3 is out of range for a tensor of rank 2", kiln::shape_error);
}

TEST_CASE("linear_recurrence passes gradcheck in b and a, along every dimension") {
  auto const a = uniform<0>({}, -0.9, 0.9, 31);
  auto check = [](auto const& r) { CHECK_MESSAGE(r.ok, r.message); };
  auto const v = uniform<1>({7}, -1, 1, 32);
  check(kiln::gradcheck([](auto const& b, auto const& c) { return kiln::linear_recurrence(b, c, 0); }, v, a));
  check(kiln::gradcheck([](auto const& b) { return kiln::linear_recurrence(b * b, 0.7, 0); }, v));  // a constant
  check(kiln::gradcheck([&v](auto const& c) { return kiln::linear_recurrence(v, kiln::tanh(c), 0); }, a));  // b constant
  auto const x = uniform<3>({2, 3, 4}, -1, 1, 33);
  for (int dim = 0; dim < 3; ++dim) {
    CAPTURE(dim);
    // A tensor output (the tape's statement loop) and a loss around it (value_and_grad).
    check(kiln::gradcheck([dim](auto const& b, auto const& c) { return kiln::linear_recurrence(kiln::sin(b), c, dim); }, x, a));
    check(kiln::gradcheck(
        [dim](auto const& b, auto const& c) {
          return kiln::sum(kiln::square(kiln::linear_recurrence(b * c, c * c, dim) - b));
        },
        x, a));
  }
  // b broadcast inside its own tree; size-1 and empty dimensions.
  auto const col = uniform<2>({4, 1}, -1, 1, 34);
  check(kiln::gradcheck([](auto const& b, auto const& c) { return kiln::linear_recurrence(b + kiln::zeros<double>({4, 3}), c, 0); },
                        col, a));
  auto const flat = uniform<2>({1, 5}, -1, 1, 35);
  check(kiln::gradcheck([](auto const& b, auto const& c) { return kiln::linear_recurrence(b, c, 0) * c; }, flat, a));
  auto const [value, grads] = kiln::value_and_grad(
      [](auto const& b, auto const& c) { return kiln::sum(kiln::linear_recurrence(b, c, 1)); },
      kiln::zeros<double>({3, 0}), a);
  CHECK(value == 0);
  CHECK(std::get<0>(grads).shape() == kiln::extents<2>{3, 0});
  CHECK(std::get<1>(grads).item() == 0);
}

TEST_CASE("linear_recurrence in the imperative style: statements of vars, backward()") {
  kiln::var<float, 2> b = kiln::tensor<float, 2>{{1, 2, 3}, {4, 5, 6}};
  kiln::var<float, 0> a = kiln::full<float>(kiln::extents<0>{}, 0.3f);
  kiln::var<float, 2> h = kiln::linear_recurrence(b, a, 0);
  kiln::var<float, 0> loss = kiln::sum(h * h);
  loss.backward();
  // h = [[1, 2, 3], [4.3, 5.6, 6.9]]; dL/dh = 2h; dL/db[1] = 2 h[1], dL/db[0] = 2 h[0] + a dL/db[1].
  CHECK(a.grad().item() == doctest::Approx(8.6 * 1 + 11.2 * 2 + 13.8 * 3).epsilon(1e-6));
  CHECK(b.grad()(0, 0) == doctest::Approx(2 + 0.3 * 8.6).epsilon(1e-6));
  CHECK(b.grad()(1, 2) == doctest::Approx(13.8).epsilon(1e-6));
  // Only a requires gradients: the statement is still recorded.
  kiln::var<double, 0> c = kiln::full<double>(kiln::extents<0>{}, 0.5);
  kiln::var<double, 1> y = kiln::linear_recurrence(kiln::tensor<double, 1>{1, 1, 1}, c, 0);
  kiln::var<double, 0> total = kiln::sum(y);
  total.backward();
  CHECK(c.grad().item() == doctest::Approx(1.5 * 1 + 1 * 1.5));  // gb = [1.75, 1.5, 1], y = [1, 1.5, 1.75]
}

// Reverse mode: kiln::var, the statement tape, the fused backward loops and the functional API.
// Every op's rule is checked in grad_rules.cpp and through the engine in grad_ops.cpp; this file
// checks the machinery: single-pass losses, broadcasting, the awkward points, the imperative API,
// errors, threads, and a small network that only learns with correct gradients.
#include <kiln/kiln.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace {

using kiln::index_t;

template <class T, int R>
std::vector<double> values(kiln::tensor<T, R> const& t) {
  return std::vector<double>(t.data(), t.data() + t.size());
}

template <class T, int R>
void check_close(kiln::tensor<T, R> const& got, std::vector<double> const& want, double tol) {
  REQUIRE(got.size() == index_t(want.size()));
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(double(got.data()[i]) == doctest::Approx(want[i]).epsilon(tol).scale(1));
  }
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace

TEST_CASE("value_and_grad of the single-pass loss, every tail length, both policies, unaligned data") {
  auto f = [](auto const& x, auto const& y) { return kiln::sum(x * kiln::sigmoid(x) * y); };
  for (index_t n : {0, 1, 3, 7, 8, 9, 15, 16, 17, 33, 1000, 5000}) {
    CAPTURE(n);
    std::vector<float> memory(std::size_t(2 * n + 1));
    kiln::tensor<float, 1> const x0 = kiln::randn<float>({n}, 1), y = kiln::randn<float>({n}, 2);
    std::copy_n(x0.data(), n, memory.data() + 1);  // x is a view one float past alignment
    auto const x = kiln::view(memory.data() + 1, {n});
    double loss = 0;
    std::vector<double> dx, dy;
    for (index_t i = 0; i < n; ++i) {
      double const xi = x0(i), yi = y(i), s = sigmoid(xi);
      loss += xi * s * yi;
      dx.push_back(yi * s * (1 + xi * (1 - s)));
      dy.push_back(xi * s);
    }
    auto const [L, g] = kiln::value_and_grad(f, x, y);
    CHECK(L == doctest::Approx(loss).epsilon(1e-5).scale(1));
    check_close(std::get<0>(g), dx, 1e-5);
    check_close(std::get<1>(g), dy, 1e-5);
    auto const [L_seq, g_seq] = kiln::value_and_grad(kiln::seq, f, x, y);
    CHECK(L_seq == doctest::Approx(loss).epsilon(1e-5).scale(1));
    check_close(std::get<0>(g_seq), dx, 1e-5);
    // The same gradients through the tape (a recorded sum and its backward loop).
    auto const [value, g_tape] = kiln::vjp(f, kiln::tensor<float, 0>(1.f), x, y);
    CHECK(value.item() == doctest::Approx(loss).epsilon(1e-5).scale(1));
    check_close(std::get<0>(g_tape), dx, 1e-5);
    check_close(std::get<1>(g_tape), dy, 1e-5);
  }
}

TEST_CASE("grad(f) gives the gradients; one input gives a tensor, not a tuple") {
  auto f = [](auto const& x) { return kiln::mean(kiln::square(x)); };
  kiln::tensor<double, 1> const x = {1, 2, 3, 4};
  auto const g = kiln::grad(f)(x);
  static_assert(std::is_same_v<decltype(g), kiln::tensor<double, 1> const>);
  check_close(g, {0.5, 1, 1.5, 2}, 1e-15);
  auto const [L, g2] = kiln::value_and_grad(f, x);
  CHECK(L == 7.5);
  check_close(g2, {0.5, 1, 1.5, 2}, 1e-15);
}

TEST_CASE("kiln::into writes the gradients into the caller's tensors, in place when the shapes match") {
  kiln::tensor<float, 1> const x = {1, 2, 3}, y = {4, 5, 6};
  kiln::tensor<float, 1> gx = kiln::full<float>({3}, 7.f), gy;  // gx: garbage of the right shape; gy: empty
  float const* const gx_memory = gx.data();
  auto f = [](auto const& x, auto const& y) { return kiln::sum(x * y); };
  for (int repeat = 0; repeat < 2; ++repeat) {  // the second call finds both buffers in shape
    float const L = kiln::value_and_grad(f, kiln::into(gx, gy), x, y);
    CHECK(L == 32);
    CHECK(values(gx) == std::vector<double>{4, 5, 6});
    CHECK(values(gy) == std::vector<double>{1, 2, 3});
    CHECK(gx.data() == gx_memory);
  }
  // An input f does not use gets zeros, whatever its buffer held; a broadcast one, whose
  // gradient is added up, starts from zero too.
  kiln::tensor<double, 1> unused = kiln::full<double>({2}, 9.0), ga = kiln::full<double>({2}, 9.0),
                          gb = kiln::full<double>({1}, 9.0);
  kiln::tensor<double, 1> const a = {1, 2}, b = {5};
  double const M = kiln::value_and_grad([](auto const&, auto const& a, auto const& b) { return kiln::sum(a * b); },
                                        kiln::into(unused, ga, gb), a, a, b);
  CHECK(M == 15);
  CHECK(values(unused) == std::vector<double>{0, 0});
  CHECK(values(ga) == std::vector<double>{5, 5});
  CHECK(values(gb) == std::vector<double>{3});
}

TEST_CASE("a broadcast leaf gets its adjoint summed back to its own shape") {
  kiln::tensor<float, 2> const a = {{1}, {2}, {3}};        // [3, 1]
  kiln::tensor<float, 1> const b = {10, 20, 30, 40};       // [4]
  kiln::tensor<float, 0> const c = 0.5f;                   // scalar
  auto f = [](auto const& a, auto const& b, auto const& c) { return kiln::sum(a * b + c * a); };
  auto const [L, g] = kiln::value_and_grad(f, a, b, c);
  CHECK(L == doctest::Approx(6 * 100 + 0.5 * 6 * 4));
  auto const& [da, db, dc] = g;
  CHECK(da.shape() == kiln::extents<2>{3, 1});
  check_close(da, {100 + 2, 100 + 2, 100 + 2}, 1e-6);
  check_close(db, {6, 6, 6, 6}, 1e-6);
  check_close(dc, {24}, 1e-6);
  // A scalar broadcast over millions of elements: its gradient is summed without float drift.
  index_t const n = 3'000'001;
  kiln::tensor<float, 1> const x = kiln::rand<float>({n}, 3);
  double expected = 0;
  for (index_t i = 0; i < n; ++i) expected += x(i);
  auto const dscale = kiln::grad([](auto const& s, auto const& x) { return kiln::sum(s * x); })(c, x);
  CHECK(double(std::get<0>(dscale).item()) == doctest::Approx(expected).epsilon(1e-6));
  // ... and through a statement on the tape, with a stride-0 inner dimension and a tail.
  kiln::tensor<float, 2> const rows = kiln::rand<float>({5, 37}, 4);
  kiln::tensor<float, 2> const column = kiln::rand<float>({5, 1}, 5);
  auto const dcolumn = std::get<0>(kiln::vjp([](auto const& c, auto const& r) { return c * r; },
                                             kiln::ones<float>({5, 37}), column, rows).second);
  for (index_t i = 0; i < 5; ++i) {
    double row_sum = 0;
    for (index_t j = 0; j < 37; ++j) row_sum += rows(i, j);
    CHECK(dcolumn(i, 0) == doctest::Approx(row_sum).epsilon(1e-6));
  }
}

TEST_CASE("PyTorch's conventions at the awkward points") {
  auto grad_at = [](auto f, std::initializer_list<double> x) { return values(kiln::grad(f)(kiln::tensor<double, 1>(x))); };
  double const nan = std::numeric_limits<double>::quiet_NaN();
  double const inf = std::numeric_limits<double>::infinity();
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::relu(x)); }, {-1, 0, 2}) == std::vector<double>{0, 0, 1});
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::abs(x)); }, {-1, 0, 2}) == std::vector<double>{-1, 0, 1});
  // amax/amin: ties share the gradient evenly; a NaN result goes to the NaN.
  CHECK(grad_at([](auto const& x) { return kiln::amax(x); }, {1, 3, 3, 2}) == std::vector<double>{0, 0.5, 0.5, 0});
  // (The larger element first: GCC 12.2 with AVX-512 compiles the constant {a, a, a, 0} as four
  // a's, docs/architecture.md "Tests".)
  CHECK(grad_at([](auto const& x) { return kiln::amin(x); }, {2, 1, 1, 1}) ==
        std::vector<double>{0, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  CHECK(grad_at([](auto const& x) { return kiln::amax(x); }, {1, nan, 3}) == std::vector<double>{0, 1, 0});
  // clamp passes the gradient at its bounds; hardtanh does not.
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::clamp(x, -1.0, 1.0)); }, {-2, -1, 0, 1, 2}) ==
        std::vector<double>{0, 1, 1, 1, 0});
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::hardtanh(x)); }, {-2, -1, 0, 1, 2}) ==
        std::vector<double>{0, 0, 1, 0, 0});
  // where routes the gradient to the chosen branch only: the NaN of sqrt(-1)'s derivative and the
  // inf of log(0)'s do not leak.
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::where(x > 0, kiln::sqrt(x), x * 0 + 1)); }, {-1, 4}) ==
        std::vector<double>{0, 0.25});
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::where(x > 0, kiln::log(x), x)); }, {0, 1}) ==
        std::vector<double>{1, 1});
  // pow at base 0: d/dx x^2 = 0, d/dx x^0 = 0, and d/dy 0^y = 0 for y >= 0.
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::pow(x, 2.0)); }, {0, 3}) == std::vector<double>{0, 6});
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::pow(x, 0.0)); }, {0, 3}) == std::vector<double>{0, 0});
  kiln::tensor<double, 1> const zero = {0, 0};
  CHECK(grad_at([&](auto const& y) { return kiln::sum(kiln::pow(zero, y)); }, {0, 2}) == std::vector<double>{0, 0});
  // maximum splits a tie; prod of a vector with one zero gives the zero the others' product.
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::maximum(x, 1.0)); }, {1, 2}) == std::vector<double>{0.5, 1});
  CHECK(grad_at([](auto const& x) { return kiln::prod(x); }, {2, 0, 3}) == std::vector<double>{0, 6, 0});
  CHECK(grad_at([](auto const& x) { return kiln::prod(x); }, {2, 0, 0}) == std::vector<double>{0, 0, 0});
  CHECK(grad_at([](auto const& x) { return kiln::prod(x); }, {2, 4, 3}) == std::vector<double>{12, 6, 8});
  // prod's gradient is the product of the others, NaN where that is 0 * inf (PyTorch's
  // exclusive-cumprod rule) and out / x with no zero.
  auto const same = [](std::vector<double> const& got, std::vector<double> const& want) {
    return got.size() == want.size() && std::equal(got.begin(), got.end(), want.begin(), [](double a, double b) {
             return a == b || (std::isnan(a) && std::isnan(b));
           });
  };
  auto const prod_grad = [&](std::initializer_list<double> x) { return grad_at([](auto const& v) { return kiln::prod(v); }, x); };
  CHECK(same(prod_grad({inf, 0, 3}), {0, inf, nan}));
  CHECK(same(prod_grad({nan, 0, 3}), {0, nan, nan}));
  CHECK(same(prod_grad({inf, 0, 0}), {0, nan, nan}));
  CHECK(same(prod_grad({-inf, 0, 0, 2}), {0, nan, nan, nan}));
  CHECK(same(prod_grad({inf, 2}), {nan, inf}));
  {  // along an axis, each row by its own counts; rows long enough for whole SIMD batches
    kiln::tensor<float, 2> x = kiln::ones<float>({4, 37});
    x(0, 5) = 0;    // one zero and one infinity: the zero gets inf, the infinity 0, the rest NaN
    x(0, 20) = std::numeric_limits<float>::infinity();
    x(1, 3) = 0;    // two zeros: all 0
    x(1, 36) = 0;
    x(2, 30) = 0;   // one zero: it gets the product of the others (2), the rest 0
    x(2, 31) = 2;
    x(3, 7) = 2;    // no zero (the other rows' zeros keep the rule for zeros running): out / x
    auto const g = kiln::grad([](auto const& v) { return kiln::sum(kiln::prod(v, 1)); })(x);
    for (index_t j = 0; j < 37; ++j) {
      CAPTURE(j);
      CHECK(same({g(0, j)}, {j == 5 ? inf : j == 20 ? 0 : nan}));
      CHECK(g(1, j) == 0);
      CHECK(g(2, j) == (j == 30 ? 2 : 0));
      CHECK(g(3, j) == (j == 7 ? 1 : 2));
    }
  }
  // norm at 0 has gradient 0, not NaN.
  CHECK(grad_at([](auto const& x) { return kiln::norm(x); }, {0, 0}) == std::vector<double>{0, 0});
  // A single element's norm is |x| even where x^2 under- or overflows, its gradient x / |x|
  // (PyTorch's).
  CHECK(grad_at([](auto const& x) { return kiln::norm(x); }, {1e-200}) == std::vector<double>{1});
  CHECK(grad_at([](auto const& x) { return kiln::norm(x); }, {-1e200}) == std::vector<double>{-1});
  // norm, var and std divide before a large deviation or adjoint can overflow (PyTorch's order):
  // an infinite norm or std gives 0, a variance past DBL_MAX the finite deviations.
  CHECK(grad_at([](auto const& x) { return kiln::norm(x) * 4.0; }, {1e308, 1e308, 1}) == std::vector<double>{0, 0, 0});
  CHECK(grad_at([](auto const& x) { return kiln::variance(x, kiln::correction{0}); }, {-1e308, 1e308}) ==
        std::vector<double>{-1e308, 1e308});
  CHECK(grad_at([](auto const& x) { return kiln::stddev(x, kiln::correction{0}); }, {-1e308, 1e308}) ==
        std::vector<double>{0, 0});
  // fmax and fmin split a tie as maximum and minimum do; a NaN loses.
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::fmax(x, 1.0)); }, {1, 2, nan}) ==
        std::vector<double>{0.5, 1, 0});
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::fmin(x, 1.0)); }, {1, 0, 2}) ==
        std::vector<double>{0.5, 1, 0});
  // atan2 at the origin, and where a^2 + b^2 underflows, has gradient 0 in both arguments, not NaN.
  CHECK(grad_at([&](auto const& a) { return kiln::sum(kiln::atan2(a, zero)); }, {0, 1e-200}) ==
        std::vector<double>{0, 0});
  CHECK(grad_at([&](auto const& b) { return kiln::sum(kiln::atan2(zero, b)); }, {0, -1e-200}) ==
        std::vector<double>{0, 0});
  CHECK(grad_at([](auto const& a) { return kiln::sum(kiln::atan2(a, 4.0)); }, {3}) == std::vector<double>{4.0 / 25});
  // logit's derivative is +inf at both zeros.
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::logit(x)); }, {-0.0, 0.0, 0.5}) ==
        std::vector<double>{inf, inf, 4});
  // acosh's derivative is +inf at both ends of x^2 = 1 (the forward is NaN at -1, outside its domain).
  CHECK(grad_at([](auto const& x) { return kiln::sum(kiln::acosh(x)); }, {-1, 1}) == std::vector<double>{inf, inf});
  // logsumexp's gradient keeps subnormal values (e^-720 is 1.9e-313), as its forward and exp do.
  std::vector<double> const lse = grad_at([](auto const& x) { return kiln::logsumexp(x); }, {0, -720, -744});
  CHECK(lse[0] == 1);
  CHECK(lse[1] == doctest::Approx(std::exp(-720.0)).epsilon(1e-6));
  CHECK(lse[2] > 0);  // 1e-323, two of the smallest subnormal
  // A float std whose squared deviations overflow float is computed again in double
  // (tests/reduce.cpp), so its gradient (x - mean) / ((n - 1) std) is finite: ±0.1054 at ±1e19
  // over ten elements, as PyTorch gives it (0 with the overflowed std).
  kiln::tensor<float, 1> spread(kiln::extents<1>{10}, kiln::uninitialized);
  for (kiln::index_t i = 0; i < 10; ++i) spread(i) = i % 2 ? -1e19f : 1e19f;
  auto const [sd, sd_grad] = kiln::value_and_grad([](auto const& v) { return kiln::stddev(v); }, spread);
  CHECK(float(sd) == doctest::Approx(1.0540925e19).epsilon(1e-6));
  CHECK(sd_grad(0) == doctest::Approx(0.10540926).epsilon(1e-6));
  CHECK(sd_grad(1) == doctest::Approx(-0.10540926).epsilon(1e-6));
}

TEST_CASE("imperative statements: backward(), grad(), zero_grad(), accumulation, control flow") {
  kiln::tensor<float, 2> const a = kiln::randn<float>({8, 3}, 1), t = kiln::randn<float>({8, 3}, 2);
  kiln::var<float, 2> w = kiln::randn<float>({8, 3}, 3);
  kiln::var<float, 1> b = kiln::zeros<float>({3});
  auto forward = [&](auto const& w, auto const& b) {
    kiln::var<float, 2> h = kiln::tanh(a * w + b);  // one tape entry
    return kiln::var<float, 0>(kiln::mean(kiln::square(h - t)));
  };
  CHECK(kiln::to_string(w * 2.f).rfind("%0 = var : float[8, 3]", 0) == 0);
  kiln::detail::tape::active().clear();
  kiln::var<float, 0> loss = forward(w, b);
  CHECK(kiln::detail::tape::active().size() == 2);
  loss.backward();
  CHECK(kiln::detail::tape::active().size() == 0);
  auto const [L, g] = kiln::value_and_grad(forward, w, b);
  CHECK(loss.item() == doctest::Approx(L));
  check_close(w.grad(), values(std::get<0>(g)), 1e-5);
  check_close(b.grad(), values(std::get<1>(g)), 1e-5);
  // Gradients accumulate over backward() calls until zero_grad(), as in PyTorch.
  forward(w, b).backward();
  check_close(b.grad(), values(kiln::tensor<float, 1>(std::get<1>(g) * 2.f)), 1e-5);
  b.zero_grad();
  CHECK(values(b.grad()) == std::vector<double>{0, 0, 0});
  // Control flow between statements: s = x^5 built in a loop.
  kiln::var<double, 1> x = kiln::tensor<double, 1>{0.5, -1, 2};
  kiln::var<double, 1> s = x;
  for (int k = 0; k < 4; ++k) s = s * x;
  kiln::var<double, 0> total = kiln::sum(s);
  total.backward();
  check_close(x.grad(), {5 * std::pow(0.5, 4), 5.0, 5 * 16.0}, 1e-14);
  // A leaf that does not require gradients gets none; a result of such leaves requires none.
  kiln::var<double, 1> fixed = kiln::tensor<double, 1>{1, 2, 3};
  fixed.requires_grad(false);
  kiln::var<double, 1> y = kiln::tensor<double, 1>{1, 1, 1};
  kiln::var<double, 0> mixed = kiln::sum(fixed * y);
  mixed.backward();
  CHECK(values(fixed.grad()) == std::vector<double>{0, 0, 0});
  CHECK(values(y.grad()) == std::vector<double>{1, 2, 3});
  kiln::var<double, 0> constant = kiln::sum(fixed * 2.0);
  CHECK_FALSE(constant.requires_grad());
}

TEST_CASE("clear errors for gradients that have no answer") {
  kiln::var<double, 1> x = kiln::tensor<double, 1>{1, 2};
  kiln::var<double, 0> loss = kiln::sum(x * x);
  loss.backward();
  CHECK_THROWS_WITH_AS(loss.backward(), doctest::Contains("this var's tape is gone"), kiln::gradient_error);
  kiln::var<double, 1> fixed = kiln::tensor<double, 1>{1, 2};
  fixed.requires_grad(false);
  kiln::var<double, 0> constant = kiln::sum(fixed);
  CHECK_THROWS_WITH_AS(constant.backward(), doctest::Contains("does not require gradients"), kiln::gradient_error);
  kiln::var<double, 1> y = x * 2.0;
  CHECK_THROWS_WITH_AS(y.backward(kiln::tensor<double, 1>{1, 2, 3}), "backward: cotangent of shape [3] for a var of shape [2]",
                       kiln::shape_error);
  CHECK_THROWS_AS(y.requires_grad(false), kiln::gradient_error);
  kiln::var<double, 0> elsewhere = 0.0;
  std::thread([&] { elsewhere = kiln::sum(x * 3.0); }).join();
  CHECK_THROWS_WITH_AS(elsewhere.backward(), doctest::Contains("another thread"), kiln::gradient_error);
  CHECK_THROWS_AS(kiln::vjp([](auto const& v) { return v * 2.0; }, kiln::tensor<double, 1>{1}, x), kiln::shape_error);
}

TEST_CASE("no_grad_guard records nothing; forward passes never differentiated do not grow the tape") {
  auto& tape = kiln::detail::tape::active();
  tape.clear();
  kiln::var<float, 1> x = kiln::ones<float>({4});
  {
    kiln::no_grad_guard no_grad;
    kiln::var<float, 1> y = x * 2.f;
    CHECK_FALSE(y.requires_grad());
    CHECK(tape.size() == 0);
  }
  for (int i = 0; i < 1000; ++i) {
    kiln::var<float, 1> y = x * float(i);
    CHECK(y.requires_grad());
  }
  CHECK(tape.size() < 200);
  tape.clear();
}

TEST_CASE("empty and single-element inputs, and the scalar path for mixed element types") {
  kiln::tensor<float, 1> const empty = kiln::zeros<float>({0});
  auto const [L, g] = kiln::value_and_grad([](auto const& x) { return kiln::sum(x * x); }, empty);
  CHECK(L == 0);
  CHECK(g.size() == 0);
  auto const [M, gm] = kiln::value_and_grad([](auto const& x) { return kiln::mean(x); }, empty);
  CHECK(std::isnan(M));
  kiln::tensor<float, 1> const one = {3};
  CHECK(values(kiln::grad([](auto const& x) { return kiln::sum(x * x); })(one)) == std::vector<double>{6});
  // float var, double tensor: the tree computes in double on the scalar path; the gradient is float.
  kiln::tensor<double, 1> const weights = {0.5, 0.25, 2};
  auto const gx = kiln::grad([&](auto const& x) { return kiln::sum(x * weights); })(kiln::tensor<float, 1>{1, 2, 3});
  static_assert(std::is_same_v<decltype(gx), kiln::tensor<float, 1> const>);
  CHECK(values(gx) == std::vector<double>{0.5, 0.25, 2});
}

TEST_CASE("the gradient of var over a single element of a product: 0 with correction 0, NaN with correction 1") {
  // 2 / (n - correction) g (x - mean), as PyTorch's var_backward: x - mean is exactly 0 (the
  // product is rounded before the subtraction, not contracted with it into one FMA).
  kiln::tensor<double, 2> const x = kiln::randn<double>({11, 1}, 23), y = kiln::randn<double>({11, 1}, 24);
  for (double c : {0.0, 1.0}) {
    CAPTURE(c);
    auto const [gx, gy] = kiln::grad([c](auto const& a, auto const& b) {
      return kiln::sum(kiln::variance(a * b, kiln::axes<1>, kiln::correction{c}));
    })(x, y);
    for (index_t i = 0; i < x.size(); ++i) {
      CAPTURE(i);
      CHECK((c == 0 ? gx.data()[i] == 0 && gy.data()[i] == 0 : std::isnan(gx.data()[i]) && std::isnan(gy.data()[i])));
    }
  }
}

namespace {

// A user's op, written like kiln's: forward and derivative in one struct. `wrong` breaks the rule.
struct cube_op : kiln::math::op_base<1, kiln::op_kind::floating> {
  static constexpr std::string_view name = "cube";
  bool wrong = false;
  template <class T> T operator()(T x) const { return x * x * x; }
  template <class T> std::array<T, 1> grad(T g, T, T x) const { return {g * T(wrong ? 2 : 3) * x * x}; }
};
template <class X>
auto cube(X const& x, bool wrong = false) {
  return kiln::make_map(cube_op{{}, wrong}, x);
}

}  // namespace

TEST_CASE("a user's op gets gradients; gradcheck names the input and element that fail") {
  kiln::tensor<double, 1> const x = {1, 2, 3};
  kiln::tensor<double, 2> const y = {{1, 2, 3}, {4, 5, 6}};
  CHECK(kiln::gradcheck([](auto const& x, auto const& y) { return cube(x) * y; }, x, y));
  auto const bad = kiln::gradcheck([](auto const& x, auto const& y) { return kiln::sum(y * cube(x, true)); }, x, y,
                                   kiln::gradcheck_options{1e-6, 1e-5, 1e-3});
  CHECK_FALSE(bad);
  CAPTURE(bad.message);
  CHECK(bad.message.find("input 0, element [0]: analytical 10 vs numerical 14.99999") != std::string::npos);
  // and the listing names it as kiln's own ops are named
  CHECK(kiln::to_string(cube(x)).find("cube") != std::string::npos);
}

TEST_CASE("two threads differentiate at once on tapes of their own") {
  auto train = [](float target, float* result) {
    kiln::var<float, 1> w = kiln::zeros<float>({16});
    for (int step = 0; step < 200; ++step) {
      kiln::var<float, 0> loss = kiln::mean(kiln::square(w - target));
      loss.backward();
      w.value() -= 0.5f * w.grad();
      w.zero_grad();
    }
    *result = w(3);
  };
  float a = 0, b = 0;
  std::thread ta(train, 2.f, &a), tb(train, -5.f, &b);
  ta.join();
  tb.join();
  CHECK(a == doctest::Approx(2.f));
  CHECK(b == doctest::Approx(-5.f));
}

TEST_CASE("a two-layer network learns sin(3x) only with correct gradients") {
  // y = sum_h w2[h] tanh(x w1[h] + b1[h]) + b2 on 128 points; plain gradient descent with momentum.
  constexpr index_t n = 128, hidden = 16;
  kiln::tensor<float, 1> const points = kiln::linspace<float>(-1, 1, n);
  kiln::tensor<float, 2> const x = kiln::reshape(points, {n, 1});
  kiln::tensor<float, 1> const target = kiln::sin(points * 3.f);
  kiln::var<float, 2> w1 = kiln::randn<float>({1, hidden}, 11) * 2.f;
  kiln::var<float, 1> b1 = kiln::randn<float>({hidden}, 12);
  kiln::var<float, 1> w2 = kiln::randn<float>({hidden}, 13) * 0.3f;
  kiln::var<float, 0> b2 = 0.f;
  auto loss_of = [&] {
    kiln::var<float, 2> h = kiln::tanh(x * w1 + b1);
    kiln::var<float, 1> y = kiln::sum(h * w2, kiln::axes<1>) + b2;
    return kiln::var<float, 0>(kiln::mean(kiln::square(y - target)));
  };
  float const initial = loss_of().item();
  kiln::detail::tape::active().clear();
  kiln::tensor<float, 2> v_w1 = kiln::zeros<float>({1, hidden});
  kiln::tensor<float, 1> v_b1 = kiln::zeros<float>({hidden}), v_w2 = kiln::zeros<float>({hidden});
  kiln::tensor<float, 0> v_b2 = 0.f;
  float last = initial;
  for (int step = 0; step < 600; ++step) {
    kiln::var<float, 0> loss = loss_of();
    last = loss.item();
    loss.backward();
    auto update = [](auto& param, auto& velocity) {
      velocity = velocity * 0.9f + param.grad();
      param.value() -= 0.05f * velocity;
      param.zero_grad();
    };
    update(w1, v_w1);
    update(b1, v_b1);
    update(w2, v_w2);
    update(b2, v_b2);
  }
  CAPTURE(initial);
  CHECK(last < 0.01f * initial);
  CHECK(last < 2e-3f);
}

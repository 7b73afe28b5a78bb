// tests/cuda_reduce.cu: device reductions and gradients against the host (part of kiln_test_cuda,
// whose main() in tests/cuda.cu skips everything without a device).
// - Reductions: every one, over every element (CUB) and over axes, evaluated both ways; argmax and
//   argmin also at ties, NaN and infinities.
// - kiln::value_and_grad(kiln::cuda{}, ...): for every differentiable op against the op's own grad
//   rule applied on the host element by element, so what is tested is the device's backward
//   machinery (the forward recomputed per element, the chain rule through the tree, `where`
//   masking, broadcast inputs reduced back to their shape, the loss's block reduction); and
//   composite losses against hand-derived gradients evaluated by the host library, and one against
//   the host's own value_and_grad.
#include "cuda_check.cuh"

using namespace kiln_cuda_test;

namespace {

// reduce(x, axes...) on the device against the host, over several sets of x's three axes: one,
// two, keepdim, a negative axis.
template <class Reduce>
void same_as_host_over_axes(kiln::tensor<float, 3> const& x, Reduce const& reduce) {
  same_as_host("axis 0", [&](auto const& a) { return reduce(a, 0); }, x);
  same_as_host("axis 1", [&](auto const& a) { return reduce(a, 1); }, x);
  same_as_host("axis 2", [&](auto const& a) { return reduce(a, 2); }, x);
  same_as_host("axes 0, 2", [&](auto const& a) { return reduce(a, kiln::axes<0, 2>); }, x);
  same_as_host("axes 0, 1 keepdim", [&](auto const& a) { return reduce(a, kiln::axes<0, 1>, kiln::keepdim); }, x);
  same_as_host("axis -1 keepdim", [&](auto const& a) { return reduce(a, -1, kiln::keepdim); }, x);
}

}  // namespace

TEST_CASE("full reductions through CUB, the producer fused") {
  for (index_t n : {index_t(1), index_t(1000), index_t(1) << 20}) {
    CAPTURE(n);
    auto const x = kiln::eval(kiln::rand<float>({n}, 5) + 0.5f);
    auto const dx = kiln::to_device(x);
    auto value = [](auto const& e) { return kiln::eval(kiln::cuda{}, e).item(); };
    // NaN where the host has NaN (variance and std of one element), else within eps.
    auto near = [](float got, float want, double eps) {
      return std::isnan(want) ? std::isnan(got) : got == doctest::Approx(want).epsilon(eps);
    };
    CHECK(value(kiln::sum(kiln::exp(dx))) == doctest::Approx(float(kiln::sum(kiln::exp(x)))).epsilon(1e-5));
    CHECK(kiln::sum(kiln::cuda{}, kiln::exp(dx)) == value(kiln::sum(kiln::exp(dx))));  // the policy-first spelling
    CHECK(value(kiln::mean(dx * 2.f)) == doctest::Approx(float(kiln::mean(x * 2.f))).epsilon(1e-5));
    CHECK(value(kiln::amax(dx - 1.f)) == float(kiln::amax(x - 1.f)));
    CHECK(value(kiln::amin(dx)) == float(kiln::amin(x)));
    CHECK(value(kiln::norm(dx)) == doctest::Approx(float(kiln::norm(x))).epsilon(1e-5));
    CHECK(near(value(kiln::variance(dx)), float(kiln::variance(x)), 1e-4));
    CHECK(near(value(kiln::stddev(dx)), float(kiln::stddev(x)), 1e-4));
    CHECK(value(kiln::logsumexp(dx)) == doctest::Approx(float(kiln::logsumexp(x))).epsilon(1e-5));
    CHECK(value(kiln::count_nonzero(dx > 1.f)) == std::int64_t(kiln::count_nonzero(x > 1.f)));
    CHECK(value(kiln::any(dx > 1.4f)) == bool(kiln::any(x > 1.4f)));
    CHECK(value(kiln::all(dx > 0.4f)) == bool(kiln::all(x > 0.4f)));
    CHECK(value(kiln::argmax(dx * -1.f)) == std::int64_t(kiln::argmax(x * -1.f)));
    CHECK(value(kiln::argmin(kiln::exp(dx))) == std::int64_t(kiln::argmin(kiln::exp(x))));
  }
  auto const small = kiln::eval(kiln::rand<double>({40}, 6) * 0.2 + 0.9);
  CHECK(kiln::eval(kiln::cuda{}, kiln::prod(kiln::to_device(small))).item() ==
        doctest::Approx(double(kiln::prod(small))).epsilon(1e-12));
  auto const nan = kiln::tensor<float, 1>{1, std::numeric_limits<float>::quiet_NaN(), 3};
  CHECK(std::isnan(kiln::eval(kiln::cuda{}, kiln::amax(kiln::to_device(nan))).item()));
  CHECK(kiln::eval(kiln::cuda{}, kiln::sum(kiln::cuda_tensor<float, 1>(kiln::extents<1>{0}))).item() == 0.f);
  // The 2-norm of a single element is |x| where its square under- or overflows, as on the host.
  CHECK(kiln::eval(kiln::cuda{}, kiln::norm(kiln::to_device(kiln::tensor<float, 1>{-1e-30f}))).item() == 1e-30f);
  auto const column = kiln::tensor<float, 2>{{1e-30f}, {-3e30f}, {2.f}};
  auto const along = kiln::to_host(kiln::eval(kiln::cuda{}, kiln::norm(kiln::to_device(column), 1)));
  CHECK(along(0) == 1e-30f);
  CHECK(along(1) == 3e30f);
  CHECK(along(2) == 2.f);
}

TEST_CASE("argmax and argmin: the first best element, NaN first, over all elements and over axes") {
  float const inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto index = [](auto const& e) { return kiln::eval(kiln::cuda{}, e).item(); };
  auto on_device = [](kiln::tensor<float, 1> const& t) { return kiln::to_device(t); };
  // Ties go to the first; a NaN is both the maximum and the minimum, the first NaN wins; infinities
  // are values like any other; -0 and +0 tie.
  kiln::tensor<float, 1> const ties = {1, 3, -2, 3, -2, 3};
  CHECK(index(kiln::argmax(on_device(ties))) == 1);
  CHECK(index(kiln::argmin(on_device(ties))) == 2);
  kiln::tensor<float, 1> const nans = {1, inf, nan, -inf, nan};
  CHECK(index(kiln::argmax(on_device(nans))) == 2);
  CHECK(index(kiln::argmin(on_device(nans))) == 2);
  kiln::tensor<float, 1> const infinities = {1, -inf, inf, inf, -inf};
  CHECK(index(kiln::argmax(on_device(infinities))) == 2);
  CHECK(index(kiln::argmin(on_device(infinities))) == 1);
  kiln::tensor<float, 1> const zeros = {-0.f, 0.f, -0.f};
  CHECK(index(kiln::argmax(on_device(zeros))) == 0);
  CHECK(index(kiln::argmin(on_device(zeros))) == 0);
  // Across CUB's tiles and blocks: one value everywhere (the first element wins), then a NaN and a
  // best value placed late, each only once.
  index_t const n = index_t(1) << 22;
  auto flat = kiln::full<float>({n}, 2.f);
  CHECK(index(kiln::argmax(on_device(flat))) == 0);
  CHECK(index(kiln::argmin(kiln::to_device(flat) * -1.f)) == 0);
  flat.data()[n - 7] = 5.f;
  flat.data()[3 * n / 4] = -5.f;
  CHECK(index(kiln::argmax(on_device(flat))) == n - 7);
  CHECK(index(kiln::argmin(on_device(flat))) == 3 * n / 4);
  flat.data()[n - 2] = nan;
  CHECK(index(kiln::argmax(on_device(flat))) == n - 2);
  CHECK(index(kiln::argmin(on_device(flat))) == n - 2);
  // Over axes, on values with many ties (floor(4x): four values), every kernel shape (a block, a
  // warp or a thread per output), against the host.
  for (kiln::extents<3> shape : {kiln::extents<3>{6, 7, 33}, kiln::extents<3>{64, 300, 5}, kiln::extents<3>{50, 60, 70}}) {
    auto const x = kiln::eval(kiln::floor(kiln::rand<float>(shape, 8) * 4.f));
    same_as_host_over_axes(x, [](auto const& a, auto... o) { return kiln::argmax(a, o...); });
    same_as_host_over_axes(x, [](auto const& a, auto... o) { return kiln::argmin(a - 1.f, o...); });
    same_as_host("all axes", [](auto const& a) { return kiln::argmax(a, kiln::axes<0, 1, 2>, kiln::keepdim); }, x);
    same_as_host("transposed", [](auto const& a) { return kiln::argmax(kiln::transpose(a, 0, 2), 1); }, x);
  }
  // Inside an expression: a fusion boundary, as on the host.
  auto const x = kiln::rand<float>({5, 40}, 9);
  same_as_host("argmax in an expression", [](auto const& a) { return kiln::argmax(a, 1) * std::int64_t{2}; }, x);
}

TEST_CASE("axis reductions, keepdim, and reductions inside expressions") {
  // (Each output folded by a block: [6, 7, 33] along its last axis; by a warp: [50, 60, 70] along
  // it, 3000 rows of 70; by a thread: along the first axes.)
  for (kiln::extents<3> shape : {kiln::extents<3>{6, 7, 33}, kiln::extents<3>{64, 300, 5}, kiln::extents<3>{50, 60, 70}}) {
    auto const x = kiln::rand<float>(shape, 7);
    auto const dx = kiln::to_device(x);
    auto each_axis_set = [&](auto const& reduce) { same_as_host_over_axes(x, reduce); };
    each_axis_set([](auto const& a, auto... o) { return kiln::sum(kiln::exp(a) - 1.f, o...); });
    each_axis_set([](auto const& a, auto... o) { return kiln::mean(a, o...); });
    each_axis_set([](auto const& a, auto... o) { return kiln::amax(a * -1.f, o...); });
    each_axis_set([](auto const& a, auto... o) { return kiln::amin(a, o...); });
    each_axis_set([](auto const& a, auto... o) { return kiln::variance(a, o...); });
    each_axis_set([](auto const& a, auto... o) { return kiln::logsumexp(a, o...); });
    same_as_host("prod axis 1", [](auto const& a) { return kiln::prod(a * 0.1f + 0.95f, 1); }, x);
    same_as_host("centred", [](auto const& a) { return a - kiln::mean(a, 2, kiln::keepdim); }, x);
    same_as_host("softmax", [](auto const& a) { return kiln::softmax(a, 2); }, x);
    same_as_host("softmax dim 0", [](auto const& a) { return kiln::softmax(a, 0); }, x);
    same_as_host("log_softmax", [](auto const& a) { return kiln::log_softmax(a, 1); }, x);
    check_same(kiln::to_host(kiln::eval(kiln::cuda{}, kiln::sum(kiln::transpose(dx, 0, 2), 1))),
               kiln::eval(kiln::sum(kiln::transpose(x, 0, 2), 1)), "transposed input");
  }
}

namespace {

constexpr double grad_rtol = 1e-4, grad_atol = 1e-5;

template <class G, int R>
void check_grad(G const& device_grad, kiln::tensor<float, R> const& want, std::string const& what) {
  check_same(kiln::to_host(device_grad), want, what, grad_rtol, grad_atol);
}

// L = sum(op(x)): dL/dx_i = op.grad(1, op(x_i), x_i).
template <class Op>
void unary_case(std::string const& what, Op op, kiln::tensor<float, 1> const& x) {
  kiln::tensor<float, 1> want(x.shape());
  double value = 0;
  for (index_t i = 0; i < x.size(); ++i) {
    float const xi = x.data()[i], out = op(xi);
    value += out;
    want.data()[i] = op.grad(1.f, out, xi)[0];
  }
  auto const [L, g] = kiln::value_and_grad(
      kiln::cuda{}, [op](auto const& a) { return kiln::sum(kiln::make_map(op, a)); }, kiln::to_device(x));
  CHECK_MESSAGE(L == doctest::Approx(value).epsilon(1e-4), what);
  check_grad(g, want, what);
}

// L = sum(op(a, b)).
template <class Op>
void binary_case(std::string const& what, Op op, kiln::tensor<float, 1> const& a, kiln::tensor<float, 1> const& b) {
  kiln::tensor<float, 1> want_a(a.shape()), want_b(b.shape());
  for (index_t i = 0; i < a.size(); ++i) {
    float const ai = a.data()[i], bi = b.data()[i];
    auto const d = op.grad(1.f, op(ai, bi), ai, bi);
    want_a.data()[i] = d[0];
    want_b.data()[i] = d[1];
  }
  auto const [L, g] = kiln::value_and_grad(
      kiln::cuda{}, [op](auto const& x, auto const& y) { return kiln::sum(kiln::make_map(op, x, y)); },
      kiln::to_device(a), kiln::to_device(b));
  CHECK_MESSAGE(L == doctest::Approx(float(kiln::sum(kiln::make_map(op, a, b)))).epsilon(1e-4), what);
  check_grad(std::get<0>(g), want_a, what + " (first input)");
  check_grad(std::get<1>(g), want_b, what + " (second input)");
}

}  // namespace

TEST_CASE("every differentiable op's gradient, through the device backward kernel") {
  namespace ops = kiln::ops;
  auto const x = kiln::eval(kiln::rand<float>({1000}, 8) * 4.f - 2.f);
  auto const pos = kiln::eval(kiln::rand<float>({257}, 13) + 0.1f);
  auto const unit = kiln::eval(kiln::rand<float>({257}, 14) * 1.8f - 0.9f);
  unary_case("neg", ops::neg_op{}, x);
  unary_case("abs", ops::abs_op{}, x);
  unary_case("square", ops::square_op{}, x);
  unary_case("reciprocal", ops::reciprocal_op{}, pos);
  unary_case("sqrt", ops::sqrt_op{}, pos);
  unary_case("rsqrt", ops::rsqrt_op{}, pos);
  unary_case("exp", ops::exp_op{}, x);
  unary_case("exp2", ops::exp2_op{}, x);
  unary_case("expm1", ops::expm1_op{}, x);
  unary_case("log", ops::log_op{}, pos);
  unary_case("log2", ops::log2_op{}, pos);
  unary_case("log10", ops::log10_op{}, pos);
  unary_case("log1p", ops::log1p_op{}, pos);
  unary_case("sin", ops::sin_op{}, x);
  unary_case("cos", ops::cos_op{}, x);
  unary_case("tan", ops::tan_op{}, unit);
  unary_case("asin", ops::asin_op{}, unit);
  unary_case("acos", ops::acos_op{}, unit);
  unary_case("atan", ops::atan_op{}, x);
  unary_case("sinh", ops::sinh_op{}, x);
  unary_case("cosh", ops::cosh_op{}, x);
  unary_case("tanh", ops::tanh_op{}, x);
  unary_case("asinh", ops::asinh_op{}, x);
  unary_case("acosh", ops::acosh_op{}, kiln::eval(pos + 1.1f));
  unary_case("atanh", ops::atanh_op{}, unit);
  unary_case("erf", ops::erf_op{}, x);
  unary_case("erfc", ops::erfc_op{}, x);
  unary_case("sigmoid", ops::sigmoid_op{}, x);
  unary_case("logit", ops::logit_op{}, kiln::eval(pos * 0.5f));
  unary_case("relu", ops::relu_op{}, x);
  unary_case("gelu", ops::gelu_op{}, x);
  unary_case("silu", ops::silu_op{}, x);
  unary_case("softplus", ops::softplus_op{{}, 2, 5}, x);
  unary_case("elu", ops::elu_op{{}, 0.5}, x);
  unary_case("leaky_relu", ops::leaky_relu_op{{}, 0.1}, x);
  unary_case("hardtanh", ops::hardtanh_op{{}, -1, 1.5}, x);
  unary_case("floor", ops::floor_op{}, x);
  unary_case("frac", ops::frac_op{}, x);

  auto const y = kiln::eval(kiln::rand<float>({1000}, 15) * 3.f + 0.5f);
  binary_case("add", ops::add_op{}, x, y);
  binary_case("sub", ops::sub_op{}, x, y);
  binary_case("mul", ops::mul_op{}, x, y);
  binary_case("div", ops::div_op{}, x, y);
  binary_case("pow", ops::pow_op{}, y, x);
  binary_case("atan2", ops::atan2_op{}, x, y);
  binary_case("hypot", ops::hypot_op{}, x, y);
  binary_case("fmod", ops::fmod_op{}, x, y);
  binary_case("remainder", ops::remainder_op{}, x, y);
  binary_case("minimum", ops::minimum_op{}, x, y);
  binary_case("maximum", ops::maximum_op{}, x, y);
  binary_case("fmin", ops::fmin_op{}, x, y);
  binary_case("fmax", ops::fmax_op{}, x, y);
  binary_case("copysign", ops::copysign_op{}, x, y);
}

TEST_CASE("composite losses: shared inputs, mean, where, broadcast inputs") {
  auto const x = kiln::eval(kiln::rand<float>({1000}, 8) * 4.f - 2.f);
  auto const y = kiln::rand<float>({1000}, 9);
  auto const dx = kiln::to_device(x);
  auto const dy = kiln::to_device(y);
  {  // x used twice
    auto const [L, g] = kiln::value_and_grad(
        kiln::cuda{}, [](auto const& a, auto const& b) { return kiln::sum(a * kiln::sigmoid(a) * b); }, dx, dy);
    auto const s = kiln::eval(kiln::sigmoid(x));
    CHECK(L == doctest::Approx(float(kiln::sum(x * s * y))).epsilon(1e-4));
    check_grad(std::get<0>(g), kiln::eval(y * (s + x * s * (1.f - s))), "x sigmoid(x) y: x");
    check_grad(std::get<1>(g), kiln::eval(x * s), "x sigmoid(x) y: y");
  }
  {  // mean: the upstream gradient is 1/n
    auto const [L, g] = kiln::value_and_grad(
        kiln::cuda{}, [](auto const& a, auto const& b) { return kiln::mean(kiln::tanh(a) * b + a * a); }, dx, dy);
    auto const t = kiln::eval(kiln::tanh(x));
    float const n = 1000;
    CHECK(L == doctest::Approx(float(kiln::mean(t * y + x * x))).epsilon(1e-4));
    check_grad(std::get<0>(g), kiln::eval((y * (1.f - t * t) + 2.f * x) / n), "mean: x");
    check_grad(std::get<1>(g), kiln::eval(t / n), "mean: y");
  }
  {  // where: the branch not taken contributes nothing, NaN derivatives included
    auto const [L, g] = kiln::value_and_grad(
        kiln::cuda{}, [](auto const& a) { return kiln::sum(kiln::where(a > 0.f, kiln::sqrt(a), a * a)); }, dx);
    CHECK(L == doctest::Approx(float(kiln::sum(kiln::where(x > 0.f, kiln::sqrt(x), x * x)))).epsilon(1e-4));
    check_grad(g, kiln::eval(kiln::where(x > 0.f, 0.5f / kiln::sqrt(x), 2.f * x)), "where");
  }
  {  // inputs broadcast in the loss get their gradients summed back to their shapes
    auto const a = kiln::rand<float>({64, 33}, 10);
    auto const b = kiln::rand<float>({33}, 11);
    auto const k = kiln::tensor<float, 1>{0.25f};
    auto const d = kiln::rand<float>({64, 1}, 12);
    auto const f = [](auto const& p, auto const& q, auto const& r, auto const& s) {
      return kiln::mean(kiln::tanh(p * q + r) * s);
    };
    auto const [L, g] =
        kiln::value_and_grad(kiln::cuda{}, f, kiln::to_device(a), kiln::to_device(b), kiln::to_device(k), kiln::to_device(d));
    auto const [host_L, host_g] = kiln::value_and_grad(f, a, b, k, d);
    CHECK(L == doctest::Approx(host_L).epsilon(1e-5));
    check_grad(std::get<1>(g), std::get<1>(host_g), "broadcast: b against the host's value_and_grad");
    auto const t = kiln::eval(kiln::tanh(a * b + k));
    float const n = 64 * 33;
    auto const du = kiln::eval(d * (1.f - t * t) / n);
    CHECK(L == doctest::Approx(float(kiln::mean(t * d))).epsilon(1e-4));
    check_grad(std::get<0>(g), kiln::eval(du * b), "broadcast: a");
    check_grad(std::get<1>(g), kiln::eval(kiln::sum(du * a, 0)), "broadcast: b (along rows)");
    check_grad(std::get<2>(g), kiln::tensor<float, 1>{float(kiln::sum(du))}, "broadcast: k (everywhere)");
    check_grad(std::get<3>(g), kiln::eval(kiln::sum(t, 1, kiln::keepdim) / n), "broadcast: d (along columns)");
  }
}

// tests/pytorch/ops.cpp: kiln's side of ops.py. Reads cases from stdin: `type(f|d) op n`, then the
// values of x, y and w (n each); prints the op's values (F) and the gradients dL/dx (X) and dL/dy (Y)
// of L = sum(op(x, y) * w).
#include <kiln/kiln.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

template <class T>
void run_case(std::string const& op, long n) {
  auto read = [&](long m) {
    kiln::tensor<T, 1> t(kiln::extents<1>{m}, kiln::uninitialized);
    for (long i = 0; i < m; ++i) { std::string s; std::cin >> s; t(i) = T(std::strtod(s.c_str(), nullptr)); }
    return t;
  };
  kiln::tensor<T, 1> x = read(n), y = read(n), w = read(n);
  std::vector<double> F, GX, GY;
  auto out = [&](auto const& t, std::vector<double>& v) { v.assign(t.data(), t.data() + t.size()); };
  auto unary = [&](auto f) {
    kiln::tensor<T, 1> r = f(x);
    out(r, F);
    out(kiln::grad([&](auto const& v) { return kiln::sum(f(v) * w); })(x), GX);
  };
  auto binary = [&](auto f) {
    kiln::tensor<T, 1> r = f(x, y);
    out(r, F);
    auto [gx, gy] = kiln::grad([&](auto const& a, auto const& b) { return kiln::sum(f(a, b) * w); })(x, y);
    out(gx, GX);
    out(gy, GY);
  };
#define U(NAME, EXPR) if (op == #NAME) unary([](auto const& v) { return EXPR; });
#define B(NAME, EXPR) if (op == #NAME) binary([](auto const& a, auto const& b) { return EXPR; });
  U(sigmoid, kiln::sigmoid(v)) U(logit, kiln::logit(v)) U(relu, kiln::relu(v)) U(gelu, kiln::gelu(v))
  U(silu, kiln::silu(v)) U(neg, -v) U(abs, kiln::abs(v)) U(sign, kiln::sign(v)) U(reciprocal, kiln::reciprocal(v))
  U(square, kiln::square(v)) U(floor, kiln::floor(v)) U(ceil, kiln::ceil(v)) U(round, kiln::round(v))
  U(trunc, kiln::trunc(v)) U(frac, kiln::frac(v)) U(sqrt, kiln::sqrt(v)) U(rsqrt, kiln::rsqrt(v)) U(exp, kiln::exp(v))
  U(exp2, kiln::exp2(v)) U(expm1, kiln::expm1(v)) U(log, kiln::log(v)) U(log2, kiln::log2(v)) U(log10, kiln::log10(v))
  U(log1p, kiln::log1p(v)) U(sin, kiln::sin(v)) U(cos, kiln::cos(v)) U(tan, kiln::tan(v)) U(asin, kiln::asin(v))
  U(acos, kiln::acos(v)) U(atan, kiln::atan(v)) U(sinh, kiln::sinh(v)) U(cosh, kiln::cosh(v)) U(tanh, kiln::tanh(v))
  U(asinh, kiln::asinh(v)) U(acosh, kiln::acosh(v)) U(atanh, kiln::atanh(v)) U(erf, kiln::erf(v)) U(erfc, kiln::erfc(v))
  U(softplus, kiln::softplus(v)) U(elu, kiln::elu(v)) U(leaky_relu, kiln::leaky_relu(v)) U(hardtanh, kiln::hardtanh(v))
  U(clamp, kiln::clamp(v, -1.5, 2.0))
  B(add, a + b) B(sub, a - b) B(mul, a * b) B(div, a / b) B(pow, kiln::pow(a, b)) B(fmod, kiln::fmod(a, b))
  B(remainder, kiln::remainder(a, b)) B(minimum, kiln::minimum(a, b)) B(maximum, kiln::maximum(a, b))
  B(fmin, kiln::fmin(a, b)) B(fmax, kiln::fmax(a, b)) B(hypot, kiln::hypot(a, b)) B(copysign, kiln::copysign(a, b))
  B(atan2, kiln::atan2(a, b)) B(lerp, kiln::lerp(a, b, 0.25)) B(where, kiln::where(a > b, a * 2.0, b))
  auto print = [](char c, std::vector<double> const& v) {
    std::printf("%c", c);
    for (double d : v) std::printf(" %.17g", d);
    std::printf("\n");
  };
  print('F', F); print('X', GX); print('Y', GY);
  std::fflush(stdout);
}

int main() {
  std::string type, op;
  long n;
  while (std::cin >> type >> op >> n) {
    if (type == "f") run_case<float>(op, n);
    else run_case<double>(op, n);
  }
}

// A stand-alone user of the installed package: an elementwise expression, a row reduction, a
// softmax and a gradient, each checked. .ci/run builds it with the default compiler and, where
// there is one, with Clang.
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstddef>
#include <cstdio>

namespace {
int failures = 0;
void expect(bool ok, char const* what) {
  if (!ok) {
    std::printf("consumer: %s is wrong\n", what);
    ++failures;
  }
}
bool near(double a, double b) { return std::fabs(a - b) <= 1e-5 * (1 + std::fabs(b)); }
}  // namespace

int main() {
  kiln::tensor<float, 1> const x = kiln::ones<float>({5});
  kiln::tensor<float, 1> const y = x * 2.0f + x;
  for (std::size_t i = 0; i < 5; ++i) expect(y(i) == 3.0f, "x * 2 + x");

  kiln::tensor<float, 2> const A = {{0.f, 1.f, 2.f}, {3.f, 4.f, 5.f}};
  kiln::tensor<float, 2> const B = kiln::relu(A - 2.f) * A + kiln::tensor<float, 1>{1.f, 2.f, 3.f};
  expect(B(0, 2) == 3.0f && B(1, 2) == 18.0f, "relu(A - 2) * A + row");

  kiln::tensor<float, 1> const rows = kiln::sum(A * A, kiln::axes<1>);
  expect(rows(0) == 5.0f && rows(1) == 50.0f, "sum(A * A, axes<1>)");

  kiln::tensor<float, 2> const p = kiln::softmax(A, 1);
  expect(near(p(0, 0) + p(0, 1) + p(0, 2), 1.0) && near(p(1, 2) / p(1, 1), std::exp(1.0)), "softmax(A, 1)");

  auto const [loss, grad] = kiln::value_and_grad([](auto const& a) { return kiln::sum(a * a); }, A);
  expect(near(loss, 55.0) && grad(1, 2) == 10.0f, "value_and_grad of sum(a * a)");

  if (failures == 0) std::puts("consumer: ok");
  return failures == 0 ? 0 : 1;
}

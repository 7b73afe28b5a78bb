// value_and_grad differentiates a scalar function; a tensor output needs kiln::vjp.
#include <kiln/kiln.hpp>

int main() {
  kiln::tensor<float, 1> x = kiln::ones<float>({3});
#ifdef KILN_SHOULD_FAIL
  auto f = [](auto const& v) { return v * 2.f; };
#else
  auto f = [](auto const& v) { return kiln::sum(v * 2.f); };
#endif
  auto result = kiln::value_and_grad(f, x);
  (void)result;
}

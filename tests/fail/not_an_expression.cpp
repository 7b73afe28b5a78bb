// A std::vector is not an expression: it takes part in one only through kiln::view.
#include <kiln/kiln.hpp>

#include <vector>

int main() {
  std::vector<float> v(4, 1.f);
#ifdef KILN_SHOULD_FAIL
  auto e = kiln::exp(v);
#else
  auto e = kiln::exp(kiln::view(v));
#endif
  kiln::tensor<float, 1> r = e;
}

// backward() seeds with 1, which only means something for a scalar: other ranks need a cotangent.
#include <kiln/kiln.hpp>

int main() {
  kiln::var<float, 1> x = kiln::ones<float>({3});
  kiln::var<float, 1> y = x * 2.f;
#ifdef KILN_SHOULD_FAIL
  y.backward();
#else
  y.backward(kiln::ones<float>({3}));
#endif
}

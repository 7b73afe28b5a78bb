// kiln::cuda{} on host memory is a compile error with a plain message, in host code too.
#include <kiln/kiln.hpp>

int main() {
  kiln::tensor<float, 1> x = {1, 2, 3};
  kiln::tensor<float, 1> y(kiln::extents<1>{3});
#ifdef KILN_SHOULD_FAIL
  kiln::eval(kiln::cuda{}, y, x + 1.f);
#else
  kiln::eval(kiln::simd, y, x + 1.f);
#endif
}

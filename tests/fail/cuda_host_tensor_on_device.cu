// kiln::cuda{} cannot read a host tensor inside a device expression.
#include <kiln/kiln.hpp>

int main() {
  kiln::cuda_tensor<float, 1> const d(kiln::extents<1>{3});
  kiln::tensor<float, 1> h = {1, 2, 3};
#ifdef KILN_SHOULD_FAIL
  kiln::eval(kiln::cuda{}, d, d + h);
#else
  kiln::eval(kiln::cuda{}, d, d + kiln::to_device(h));
#endif
}

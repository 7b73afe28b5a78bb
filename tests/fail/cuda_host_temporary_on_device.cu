// kiln::cuda{} cannot read a host tensor inside a device expression, a temporary one either (the
// expression owns it: an owned leaf).
#include <kiln/kiln.hpp>

int main() {
  kiln::cuda_tensor<float, 1> const d(kiln::extents<1>{3});
#ifdef KILN_SHOULD_FAIL
  kiln::eval(kiln::cuda{}, d, d + kiln::tensor<float, 1>{1, 2, 3});
#else
  kiln::eval(kiln::cuda{}, d, d + kiln::to_device(kiln::tensor<float, 1>{1, 2, 3}));
#endif
}

// A CPU policy cannot read device memory.
#include <kiln/kiln.hpp>

int main() {
  kiln::cuda_tensor<float, 1> const d(kiln::extents<1>{3});
  kiln::tensor<float, 1> h(kiln::extents<1>{3});
#ifdef KILN_SHOULD_FAIL
  kiln::eval(kiln::simd, h, d + 1.f);
#else
  kiln::eval(kiln::simd, h, kiln::to_host(d) + 1.f);
#endif
}

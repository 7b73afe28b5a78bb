// A cuda_tensor's elements cannot be read on the host; kiln::to_host copies them.
#include <kiln/kiln.hpp>

int main() {
  kiln::cuda_tensor<float, 1> const d(kiln::extents<1>{3});
#ifdef KILN_SHOULD_FAIL
  d(0);
#else
  kiln::to_host(d)(0);
#endif
}

// Gradients are defined for floating-point tensors only.
#include <kiln/kiln.hpp>

#include <cstdint>

int main() {
#ifdef KILN_SHOULD_FAIL
  kiln::var<std::int32_t, 1> x = kiln::tensor<std::int32_t, 1>{1, 2};
#else
  kiln::var<float, 1> x = kiln::tensor<float, 1>{1, 2};
#endif
  (void)x;
}

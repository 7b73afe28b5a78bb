// mean, variance and stddev of an integer tensor do not compile (PyTorch raises): convert first.
#include <kiln/kiln.hpp>

#include <cstdint>

int main() {
  kiln::tensor<std::int32_t, 1> x = {1, 2, 3};
#ifdef KILN_SHOULD_FAIL
  auto m = kiln::mean(x);
#else
  auto m = kiln::mean(kiln::tensor<float, 1>(x));
#endif
  float value = m;
  (void)value;
}

// `i /= 2` for an integer tensor does not compile: the quotient is float, and PyTorch's in-place
// ops refuse to write a floating result into an integer tensor. `i = i / 2` converts.
#include <kiln/kiln.hpp>

#include <cstdint>

int main() {
  kiln::tensor<std::int32_t, 1> i = {-7, 3};
#ifdef KILN_SHOULD_FAIL
  i /= 2;
#else
  i *= 2;
  i = i / 2;
#endif
}

// A tensor is constructed from an expression of its own rank; the shape cannot be guessed.
#include <kiln/kiln.hpp>

int main() {
  kiln::tensor<float, 2> m(kiln::extents<2>{2, 3});
#ifdef KILN_SHOULD_FAIL
  kiln::tensor<float, 1> t = m * 2.f;
#else
  kiln::tensor<float, 2> t = m * 2.f;
#endif
  (void)t;
}

// A rank-2 expression cannot be assigned into a rank-1 tensor: broadcasting only adds leading
// dimensions to the source, never to the destination.
#include <kiln/kiln.hpp>

int main() {
  kiln::tensor<float, 1> row(kiln::extents<1>{3});
  kiln::tensor<float, 2> m(kiln::extents<2>{2, 3});
#ifdef KILN_SHOULD_FAIL
  row = m * 2.f;
#else
  m = row * 2.f;
#endif
}

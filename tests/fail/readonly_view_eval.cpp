// kiln::eval into a read-only view (here an expanded one, whose elements repeat) is rejected too.
#include <kiln/kiln.hpp>

int main() {
  kiln::tensor<float, 1> row = {1, 2, 3};
  kiln::tensor<float, 2> m(kiln::extents<2>{2, 3});
#ifdef KILN_SHOULD_FAIL
  kiln::eval(kiln::seq, kiln::expand(row, {2, 3}), m + 1.f);
#else
  kiln::eval(kiln::seq, m, kiln::expand(row, {2, 3}) + 1.f);
#endif
}

// A view of a temporary tensor would refer to storage freed at the end of the statement.
#include <kiln/kiln.hpp>

int main() {
#ifdef KILN_SHOULD_FAIL
  auto t = kiln::transpose(kiln::zeros<float>({2, 3}));
#else
  auto z = kiln::zeros<float>({2, 3});
  auto t = kiln::transpose(z);
#endif
  (void)t;
}

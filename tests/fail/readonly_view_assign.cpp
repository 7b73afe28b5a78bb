// A view of const elements (here of a const std::vector) cannot be written through.
#include <kiln/kiln.hpp>

#include <vector>

int main() {
  std::vector<float> const frozen(3, 1.f);
  std::vector<float> scratch(3);
#ifdef KILN_SHOULD_FAIL
  kiln::view(frozen) = kiln::view(scratch) * 2.f;
#else
  kiln::view(scratch) = kiln::view(frozen) * 2.f;
#endif
}

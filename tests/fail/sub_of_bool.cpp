// Subtracting or negating bool tensors does not compile (PyTorch raises): true - true and -true
// have no arithmetic meaning in bool. ne and logical_not say what is meant.
#include <kiln/kiln.hpp>

int main() {
  kiln::tensor<bool, 1> a = {true, false}, b = {true, true};
#ifdef KILN_SHOULD_FAIL
  kiln::tensor<bool, 1> x = a - b;
#else
  kiln::tensor<bool, 1> x = kiln::ne(a, b);
#endif
  kiln::tensor<bool, 1> y = kiln::logical_not(x);
  (void)y;
}

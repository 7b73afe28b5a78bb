// kiln::linear_recurrence's coefficient is one number for the whole recurrence: a tensor of
// rank 1 or more does not compile (a number, or a rank-0 tensor, var or expression does).
#include <kiln/kiln.hpp>

int main() {
  kiln::tensor<double, 1> const b = {1, 2, 3};
#ifdef KILN_SHOULD_FAIL
  kiln::tensor<double, 1> const a = {0.5, 0.5, 0.5};
#else
  kiln::tensor<double, 0> const a(kiln::extents<0>{});
#endif
  kiln::tensor<double, 1> const y = kiln::linear_recurrence(b, a, 0);
  (void)y;
}

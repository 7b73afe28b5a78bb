#include <kiln/kiln.hpp>

#include <cstddef>
#include <cstdio>

int main() {
  kiln::tensor<float, 1> x = kiln::ones<float>({5});
  kiln::tensor<float, 1> y = x * 2.0f + x;

  for (std::size_t i = 0; i < 5; ++i) {
    if (y(i) != 3.0f) {
      std::printf("consumer: y(%zu) = %g, expected 3\n", i, static_cast<double>(y(i)));
      return 1;
    }
  }
  std::puts("consumer: ok");
  return 0;
}

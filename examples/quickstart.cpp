// The main job in a few lines: lazy expressions over tensors, broadcast like PyTorch, evaluated
// as one fused SIMD loop per assignment.
#include <kiln/kiln.hpp>

#include <chrono>
#include <iostream>

int main() {
  kiln::tensor<float, 2> A = kiln::randn<float>({1024, 256}, /*seed=*/1);
  kiln::tensor<float, 1> b = kiln::linspace<float>(-1, 1, 256);
  kiln::tensor<float, 2> c = kiln::ones<float>({1024, 1});

  // [1024, 256] + [256] broadcasts b along the rows; * [1024, 1] broadcasts c along the columns.
  kiln::tensor<float, 2> out = kiln::relu(A + b) * c;
  std::cout << "relu(A + b) * c: out(0, 0..3) = " << out(0, 0) << ' ' << out(0, 1) << ' ' << out(0, 2) << '\n';

  // A chain of eight ops is one loop over A: no temporaries, one pass, xsimd batches.
  auto const start = std::chrono::steady_clock::now();
  out = kiln::tanh(0.7f * A + 0.1f) * kiln::sigmoid(A) + kiln::exp(-A * A);
  auto const us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::cout << "tanh(0.7 A + 0.1) * sigmoid(A) + exp(-A^2) over " << A.size() << " floats: " << us << " us\n";

  // Building an expression computes nothing; to_string shows the tree it built.
  std::cout << kiln::to_string(kiln::tanh(A) * b);

  // Shapes are checked when the expression is built.
  try {
    kiln::tensor<float, 1> wrong = kiln::zeros<float>({5});
    auto bad = A + wrong;
    (void)bad;
  } catch (kiln::shape_error const& e) {
    std::cout << "shape_error: " << e.what() << '\n';
  }
}

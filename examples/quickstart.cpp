// The main job in a few lines: lazy expressions over tensors, broadcast like PyTorch, evaluated
// as one fused SIMD loop per assignment, and differentiated by a backward loop fused the same way.
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>

int main() {
  kiln::tensor<float, 2> A = kiln::randn<float>({1024, 256}, /*seed=*/1);
  kiln::tensor<float, 1> b = kiln::linspace<float>(-1, 1, 256);
  kiln::tensor<float, 2> c = kiln::ones<float>({1024, 1});

  // [1024, 256] + [256] broadcasts b along the rows; * [1024, 1] broadcasts c along the columns.
  kiln::tensor<float, 2> out = kiln::relu(A + b) * c;
  std::cout << "relu(A + b) * c: out(0, 0..3) = " << out(0, 0) << ' ' << out(0, 1) << ' ' << out(0, 2) << '\n';

  // A chain of eight ops is one loop over A: no temporaries, one pass, xsimd batches. The same
  // expression under kiln::par runs on every core (OpenMP), xsimd in each, with the same result
  // bit for bit. (Best of five calls: the first ones also start and wake OpenMP's threads.)
  auto best_of_five = [](auto&& run) {
    double best = 1e300;
    for (int i = 0; i < 5; ++i) {
      auto const start = std::chrono::steady_clock::now();
      run();
      best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    return best;
  };
  double const simd_us = best_of_five([&] { out = kiln::tanh(0.7f * A + 0.1f) * kiln::sigmoid(A) + kiln::exp(-A * A); });
  double const par_us = best_of_five(
      [&] { kiln::eval(kiln::par, out, kiln::tanh(0.7f * A + 0.1f) * kiln::sigmoid(A) + kiln::exp(-A * A)); });
  std::cout << "tanh(0.7 A + 0.1) * sigmoid(A) + exp(-A^2) over " << A.size() << " floats: " << simd_us
            << " us, under kiln::par " << par_us << " us\n";

  // Building an expression computes nothing; to_string shows the tree it built.
  std::cout << kiln::to_string(kiln::tanh(A) * b);

  // Gradients: a loss that is one sum of an elementwise expression runs forward and backward as
  // a single loop; value_and_grad returns the value and dL/dx, dL/dy.
  kiln::var<float, 1> x = kiln::randn<float>({4096}, 2), y = kiln::randn<float>({4096}, 3);
  auto f = [](auto const& x, auto const& y) { return kiln::sum(x * kiln::sigmoid(x) * y); };
  auto [L, g] = kiln::value_and_grad(f, x, y);
  std::cout << "L = " << L << ", dL/dx(0) = " << std::get<0>(g)(0) << ", dL/dy(0) = " << std::get<1>(g)(0) << '\n';

  // Imperative style: each statement over vars is one tape entry, its backward one fused loop.
  kiln::var<float, 2> w = kiln::randn<float>({1024, 256}, 4) * 0.1f;
  kiln::var<float, 1> bias = kiln::zeros<float>({256});
  kiln::var<float, 2> h = kiln::tanh(A * w + bias);
  kiln::var<float, 0> loss = kiln::mean(kiln::square(h - 0.5f));
  loss.backward();
  std::cout << "loss = " << loss.item() << ", dloss/dbias(0) = " << bias.grad()(0) << '\n';

  // Shapes are checked when the expression is built.
  try {
    kiln::tensor<float, 1> wrong = kiln::zeros<float>({5});
    auto bad = A + wrong;
    (void)bad;
  } catch (kiln::shape_error const& e) {
    std::cout << "shape_error: " << e.what() << '\n';
  }
}

// tests/pytorch/composite.cpp: gradients of composite expressions (rank-3 tensors, broadcasting,
// reductions over several axes, keepdim, reductions inside expressions) for composite.py, which
// computes the same in PyTorch. Reads cases from stdin: `case a b c yb yc za zc`, then the values
// of x [a, b, c], y [yb, yc] and z [za, 1, zc]; prints `F <loss>` and `G <dx dy dz>`.
// Run as `composite d` (double) or `composite f` (float).
#include <kiln/kiln.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

template <class T, int R>
kiln::tensor<T, R> read(kiln::extents<R> sh) {
  kiln::tensor<T, R> t(sh, kiln::uninitialized);
  for (long i = 0; i < t.size(); ++i) { std::string s; std::cin >> s; t.data()[i] = std::strtod(s.c_str(), nullptr); }
  return t;
}
template <class T, class F>
void run(F f, kiln::tensor<T, 3> const& x, kiln::tensor<T, 2> const& y, kiln::tensor<T, 3> const& z) {
  auto [L, g] = kiln::value_and_grad(f, x, y, z);
  std::printf("F %.17g\nG", double(L));
  auto put = [](auto const& t) { for (long i = 0; i < t.size(); ++i) std::printf(" %.17g", t.data()[i]); };
  put(std::get<0>(g)); put(std::get<1>(g)); put(std::get<2>(g));
  std::printf("\n");
  std::fflush(stdout);
}
template <class T>
void serve() {
  int c; long a, b, cc, yb, yc, za, zc;
  while (std::cin >> c >> a >> b >> cc >> yb >> yc >> za >> zc) {
    auto x = read<T, 3>({a, b, cc}); auto y = read<T, 2>({yb, yc}); auto z = read<T, 3>({za, 1, zc});
    try {
    switch (c) {
      case 0: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::exp(x) * y + z); }, x, y, z); break;
      case 1: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::amax(x * y, kiln::axes<2>, kiln::keepdim) - z); }, x, y, z); break;
      case 2: run<T>([](auto x, auto y, auto z) { return kiln::mean(kiln::logsumexp(x + y, 1) * kiln::sum(z, kiln::axes<1>)); }, x, y, z); break;
      case 3: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::softmax(x * z, 2) * y); }, x, y, z); break;
      case 4: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::variance(x + y, kiln::axes<0, 2>) + kiln::mean(z)); }, x, y, z); break;
      case 5: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::where(x > y, x * z, y / (T(1) + z * z))); }, x, y, z); break;
      case 6: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::norm(x - y, 1) + kiln::norm<1>(z)); }, x, y, z); break;
      case 7: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::clamp(x, T(-0.5), T(0.5)) * kiln::relu(y) + kiln::sigmoid(z)); }, x, y, z); break;
      case 8: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::pow(kiln::abs(x) + T(0.5), y) * z); }, x, y, z); break;
      case 9: run<T>([](auto x, auto y, auto z) { return kiln::sum(x * kiln::mean(x * y, kiln::axes<1>, kiln::keepdim) + z); }, x, y, z); break;
      case 10: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::prod(T(1) + T(0.1) * x, kiln::axes<0>) * y) + kiln::sum(kiln::amin(z, kiln::axes<0, 2>)); }, x, y, z); break;
      case 11: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::stddev(x * z, kiln::axes<1, 2>) + kiln::sum(y)); }, x, y, z); break;
      case 12: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::log_softmax(x + y, 1) * z); }, x, y, z); break;
      case 13: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::norm<kiln::infinity_norm>(x * y, kiln::axes<0, 1>) * kiln::tanh(kiln::sum(z, kiln::axes<0, 1>))); }, x, y, z); break;
      case 14: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::hypot(x, y) + kiln::atan2(z, x) + kiln::lerp(x, z, y)); }, x, y, z); break;
      case 15: run<T>([](auto x, auto y, auto z) { return kiln::sum(kiln::maximum(x, y) * kiln::minimum(x, z) + kiln::fmax(y, T(0.25))); }, x, y, z); break;
    }
    } catch (std::exception const& e) { std::printf("F err %s\nG\n", e.what()); std::fflush(stdout); }
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "f") serve<float>();
  else serve<double>();
}

// tests/pytorch/reductions.cpp: reductions, alone and inside elementwise expressions, over strided
// views of rank 2 to 4, for reductions.py, which computes the same in PyTorch. Reads cases from
// stdin, one a line:
//   RANK N EXPR KEEP  shape[RANK]  x_offset x_strides[RANK]  y_offset y_strides[RANK]
//   w_offset w_stride  axes[N]  destination_order[RANK] padding  COUNT values[COUNT]
// x and y are views of the values (strides of 0 repeat an element), w a vector along the last
// dimension; an expression of the input's rank is assigned into a view laid out in
// destination_order with `padding` elements after each dimension, the others evaluated. Prints
// `R` and the result's elements in row-major order, or `E` and the message of the exception.
// Run as `reductions d` (double) or `reductions f` (float). Build it as the suite's users would
// compile it (-O2 -march=native): what the compiler contracts into FMAs depends on it.
#include <kiln/kiln.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

using kiln::index_t;

template <class T>
void print(T const* data, index_t n) {
  std::printf("R");
  for (index_t i = 0; i < n; ++i) std::printf(" %.17g", double(data[i]));
  std::printf("\n");
}

template <class E>
void print_eval(E const& e) {
  auto const t = kiln::eval(e);
  print(t.data(), t.size());
}

// e assigned into a destination whose dimensions are laid out in `order`, each padded.
template <class T, int R, class E>
void print_assigned(E const& e, kiln::extents<R> const& shape, int const* order, index_t padding) {
  kiln::extents<R> strides{};
  index_t step = 1;
  for (int k = R - 1; k >= 0; --k) {
    strides[order[k]] = step;
    step *= shape[order[k]] + padding;
  }
  std::vector<T> buffer(static_cast<std::size_t>(step), T(-7));
  kiln::view(buffer.data(), shape, strides) = e;
  kiln::tensor<T, R> const t = kiln::eval(kiln::view(std::as_const(buffer).data(), shape, strides));
  print(t.data(), t.size());
}

struct case_data {
  int expr = 0;
  bool keep = false;
  index_t x_offset = 0, y_offset = 0, w_offset = 0, w_stride = 0, padding = 0;
  int order[4] = {};
};

template <class T, int R, int N>
void run(case_data const& c, std::vector<T> const& values, kiln::extents<R> const& shape,
         kiln::extents<R> const& x_strides, kiln::extents<R> const& y_strides, int const (&ax)[N]) {
  auto const x = kiln::view(values.data() + c.x_offset, shape, x_strides);
  auto const y = kiln::view(values.data() + c.y_offset, shape, y_strides);
  auto const w = kiln::view(values.data() + c.w_offset, kiln::extents<1>{shape[R - 1]}, kiln::extents<1>{c.w_stride});
  auto const K = kiln::keepdim;
  auto const assigned = [&](auto const& e) { print_assigned<T, R>(e, shape, c.order, c.padding); };
  auto const either = [&](auto const& kept, auto const& dropped) { c.keep ? print_eval(kept()) : print_eval(dropped()); };
  switch (c.expr) {
    case 0: assigned(x - kiln::amax(x, ax, K)); break;
    case 1:
      assigned((x - kiln::mean(x, ax, K)) / kiln::sqrt(kiln::variance(x, ax, K, kiln::correction{0}) + T(1e-5)) * w);
      break;
    case 2: assigned(x * kiln::sum(y, ax, K)); break;
    case 3: either([&] { return kiln::logsumexp(x, ax, K); }, [&] { return kiln::logsumexp(x, ax); }); break;
    case 4: either([&] { return kiln::sum(x * y, ax, K); }, [&] { return kiln::sum(x * y, ax); }); break;
    case 5: assigned(kiln::softmax(x, ax[0])); break;
    case 6: assigned(x / kiln::stddev(x, ax, K) + kiln::amin(y, ax, K)); break;
    case 7: either([&] { return kiln::variance(x * y, ax, K); }, [&] { return kiln::variance(x * y, ax); }); break;
    case 8: either([&] { return kiln::argmax(x, ax[0], K); }, [&] { return kiln::argmin(x, ax[0]); }); break;
    case 9:
      either([&] { return kiln::norm<1>(x, ax, K) + kiln::norm(y, ax, K); },
             [&] { return kiln::norm<kiln::infinity_norm>(x - y, ax); });
      break;
    case 10:
      either([&] { return kiln::prod(x * T(0.01) + T(1), ax, K); }, [&] { return kiln::prod(x * T(0.01) + T(1), ax); });
      break;
    case 11: assigned(kiln::where(x > y, kiln::exp(x) - y, kiln::tanh(y) * x) + w); break;
    case 12:
      either([&] { return kiln::mean(x, ax, K) * kiln::amax(y, ax, K) - kiln::sum(x * y, ax, K); },
             [&] { return kiln::mean(x, ax) + kiln::amax(y, ax); });
      break;
    case 13: either([&] { return kiln::count_nonzero(x > T(0), ax, K); }, [&] { return kiln::any(x > y, ax); }); break;
    case 14: assigned(x - kiln::logsumexp(x, ax, K)); break;
    case 15: assigned(kiln::log_softmax(x, ax[0]) * y); break;
    default: std::printf("E no expression %d\n", c.expr);
  }
}

template <class T, int R>
void read_and_run(int n, case_data c) {
  kiln::extents<R> shape, x_strides, y_strides;
  int axes[2] = {};
  index_t count = 0;
  for (auto& v : shape) std::cin >> v;
  std::cin >> c.x_offset;
  for (auto& v : x_strides) std::cin >> v;
  std::cin >> c.y_offset;
  for (auto& v : y_strides) std::cin >> v;
  std::cin >> c.w_offset >> c.w_stride;
  for (int i = 0; i < n; ++i) std::cin >> axes[i];
  for (int i = 0; i < R; ++i) std::cin >> c.order[i];
  std::cin >> c.padding >> count;
  std::vector<T> values(static_cast<std::size_t>(count));
  for (auto& v : values) {
    std::string s;
    std::cin >> s;
    v = T(std::strtod(s.c_str(), nullptr));
  }
  try {
    if (n == 1) run<T, R, 1>(c, values, shape, x_strides, y_strides, {axes[0]});
    else run<T, R, 2>(c, values, shape, x_strides, y_strides, {axes[0], axes[1]});
  } catch (std::exception const& e) {
    std::printf("E %s\n", e.what());
  }
}

template <class T>
void serve() {
  int rank, n, expr, keep;
  while (std::cin >> rank >> n >> expr >> keep) {
    case_data const c{expr, keep != 0};
    if (rank == 2) read_and_run<T, 2>(n, c);
    else if (rank == 3) read_and_run<T, 3>(n, c);
    else read_and_run<T, 4>(n, c);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] == 'f') serve<float>();
  else serve<double>();
}

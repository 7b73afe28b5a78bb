// kiln::par: every loop kind split across threads gives what one thread gives. Elementwise
// results, reductions whose outputs split between threads, and exact-shape gradients are the same
// bit for bit as kiln::simd's; reductions into a single run of outputs and broadcast gradients
// combine per-thread partials, within rounding of kiln::simd and identical from run to run at the
// same thread count. Sizes run from empty (one thread) to several par_grains (every thread).
#include "bitwise.hpp"

#include <kiln/kiln.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

using kiln::index_t;

// The thread counts to try: one, the machine's, and a few that do not divide the work evenly.
std::vector<int> thread_counts() {
#if defined(_OPENMP)
  return {1, 2, 3, 4, 7};
#else
  return {1};
#endif
}
void use_threads([[maybe_unused]] int n) {
#if defined(_OPENMP)
  omp_set_num_threads(n);
#endif
}
// Sets the thread count for the scope, and gives the machine's back afterwards.
struct thread_count_scope {
#if defined(_OPENMP)
  int saved = omp_get_max_threads();
  ~thread_count_scope() { omp_set_num_threads(saved); }
#endif
};

using kiln_test::bitwise_equal;

// Every element within `tol` (relative, or absolute below 1) of the reference; NaN where it is.
template <class T, int R>
void check_close(kiln::tensor<T, R> const& got, kiln::tensor<T, R> const& want, double tol) {
  REQUIRE(got.shape() == want.shape());
  index_t bad = -1;
  for (index_t i = 0; i < got.size() && bad < 0; ++i) {
    double const g = double(got.data()[i]), w = double(want.data()[i]);
    bool const close = std::isnan(w) ? std::isnan(g) : std::abs(g - w) <= tol * std::max(1.0, std::abs(w));
    if (!close) bad = i;
  }
  CAPTURE(bad);
  CHECK(bad < 0);
}

// Shapes from a single element to several par_grains: one row, few long rows, many short rows.
std::vector<std::array<index_t, 2>> const shapes = {{1, 1}, {1, 7}, {3, 1000}, {1, 200003}, {3, 70001},
                                                    {70001, 3}, {700, 301}};

}  // namespace

TEST_CASE("par elementwise: the same bits as simd at every thread count, contiguous, broadcast and strided") {
  [[maybe_unused]] thread_count_scope const restore;
  for (auto const& shape : shapes) {
    CAPTURE(shape[0]);
    CAPTURE(shape[1]);
    auto const a = kiln::randn<float>(shape, 1);
    auto const b = kiln::randn<float>({shape[1]}, 2);        // broadcast along rows
    auto const c = kiln::randn<float>({shape[0], 1}, 3);     // broadcast along columns
    auto const at = kiln::randn<float>({shape[1], shape[0]}, 4);
    auto const w2 = [&](auto const& x) { return kiln::tanh(0.7f * x + 0.1f) * kiln::sigmoid(b) + kiln::exp(-x * x) * c; };
    auto const single = kiln::eval(kiln::simd, w2(a));
    auto const transposed = kiln::eval(kiln::simd, w2(kiln::transpose(at, 0, 1)));
    for (int threads : thread_counts()) {
      CAPTURE(threads);
      use_threads(threads);
      CHECK(bitwise_equal(kiln::eval(kiln::par, w2(a)), single));
      CHECK(bitwise_equal(kiln::eval(kiln::par, w2(kiln::transpose(at, 0, 1))), transposed));
      // Exact arithmetic matches the scalar reference too.
      CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::relu(a - b) + c), kiln::eval(kiln::seq, kiln::relu(a - b) + c)));
    }
  }
}

TEST_CASE("par elementwise: empty tensors, aliasing and mixed types") {
  kiln::tensor<float, 2> empty(kiln::extents<2>{0, 5});
  kiln::eval(kiln::par, empty, kiln::exp(empty));
  CHECK(empty.size() == 0);

  auto x = kiln::randn<double>({300001}, 5);
  auto const before = x;
  kiln::eval(kiln::par, x, x * 2.0 + 1.0);  // in place: every thread reads only its own elements
  CHECK(bitwise_equal(x, kiln::eval(kiln::seq, before * 2.0 + 1.0)));

  kiln::tensor<int, 1> const n = kiln::arange<int>(0, 300001);
  auto const mixed = kiln::eval(kiln::par, n * 0.5f + x);  // int * float + double: the scalar path
  CHECK(bitwise_equal(mixed, kiln::eval(kiln::seq, n * 0.5f + x)));
}

TEST_CASE("par reductions: bitwise where outputs split, close and repeatable where partials combine") {
  [[maybe_unused]] thread_count_scope const restore;
  for (auto const& shape : shapes) {
    CAPTURE(shape[0]);
    CAPTURE(shape[1]);
    auto const a = kiln::randn<float>(shape, 6);
    auto const e = kiln::exp(a * 0.5f);
    for (int threads : thread_counts()) {
      CAPTURE(threads);
      use_threads(threads);
      // Runs of rows per thread, or a kept inner dimension's columns: the same bits.
      if (shape[0] > 1)  // one row is one run of outputs: partials, below
        CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::sum(e, 1)), kiln::eval(kiln::simd, kiln::sum(e, 1))));
      CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::amax(a, 1)), kiln::eval(kiln::simd, kiln::amax(a, 1))));
      CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::softmax(a, 1)), kiln::eval(kiln::simd, kiln::softmax(a, 1))));
      CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::log_softmax(a, 1)),
                          kiln::eval(kiln::simd, kiln::log_softmax(a, 1))));
      // One run of outputs: per-thread partials (the order of a max does not matter).
      auto const full = kiln::eval(kiln::par, kiln::sum(e));
      check_close(full, kiln::eval(kiln::simd, kiln::sum(e)), 1e-5);
      CHECK(bitwise_equal(full, kiln::eval(kiln::par, kiln::sum(e))));
      auto const columns = kiln::eval(kiln::par, kiln::sum(e, 0));
      check_close(columns, kiln::eval(kiln::simd, kiln::sum(e, 0)), 1e-5);
      CHECK(bitwise_equal(columns, kiln::eval(kiln::par, kiln::sum(e, 0))));
      CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::amax(a)), kiln::eval(kiln::simd, kiln::amax(a))));
      CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::amin(a, 0)), kiln::eval(kiln::simd, kiln::amin(a, 0))));
      check_close(kiln::eval(kiln::par, kiln::mean(kiln::transpose(a, 0, 1))), kiln::eval(kiln::simd, kiln::mean(a)), 1e-5);
      check_close(kiln::eval(kiln::par, kiln::variance(a, 0)), kiln::eval(kiln::simd, kiln::variance(a, 0)), 1e-4);
      check_close(kiln::eval(kiln::par, kiln::softmax(a, 0)), kiln::eval(kiln::simd, kiln::softmax(a, 0)), 1e-5);
      CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::argmax(a, 0)), kiln::eval(kiln::simd, kiln::argmax(a, 0))));
      // all and any, whose partials are bools (they did not compile under par in one run of outputs).
      CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::all(a > -2.f, 0)), kiln::eval(kiln::simd, kiln::all(a > -2.f, 0))));
      CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::any(a > 2.f, 1)), kiln::eval(kiln::simd, kiln::any(a > 2.f, 1))));
      CHECK(kiln::any(kiln::par, a > 4.f) == kiln::eval(kiln::simd, kiln::any(a > 4.f)).item());
      CHECK(kiln::all(kiln::par, a > -4.f) == kiln::eval(kiln::simd, kiln::all(a > -4.f)).item());
      CHECK(kiln::any(kiln::par, a > 100.f) == false);
      CHECK(kiln::all(kiln::par, a < 100.f) == true);
    }
  }
}

TEST_CASE("par reductions of one long row, in double: close to the exact sum") {
  [[maybe_unused]] thread_count_scope const restore;
  index_t const n = 1 << 20;
  auto const x = kiln::arange<double>(0, double(n));
  for (int threads : thread_counts()) {
    use_threads(threads);
    CHECK(kiln::eval(kiln::par, kiln::sum(x)).item() == double(n) * double(n - 1) / 2);
    CHECK(kiln::eval(kiln::par, kiln::amax(x)).item() == double(n - 1));
  }
}

TEST_CASE("par gradients: exact-shape adjoints bitwise, broadcast adjoints close, no races") {
  auto f = [](auto const& x, auto const& b, auto const& s) { return kiln::sum(kiln::tanh(x * s + b) * x); };
  for (auto const& shape : shapes) {
    CAPTURE(shape[0]);
    CAPTURE(shape[1]);
    auto const x = kiln::randn<float>(shape, 7);
    auto const b = kiln::randn<float>({shape[1]}, 8);       // summed over rows
    auto const s = kiln::full<float>({shape[0], 1}, 0.5f);  // summed along rows
    auto const [value, grads] = kiln::value_and_grad(kiln::simd, f, x, b, s);
    for (int threads : thread_counts()) {
      CAPTURE(threads);
      use_threads(threads);
      auto const [par_value, par_grads] = kiln::value_and_grad(kiln::par, f, x, b, s);
      CHECK(double(par_value) == doctest::Approx(double(value)).epsilon(1e-5));
      CHECK(bitwise_equal(std::get<0>(par_grads), std::get<0>(grads)));
      check_close(std::get<1>(par_grads), std::get<1>(grads), 1e-4);
      check_close(std::get<2>(par_grads), std::get<2>(grads), 1e-4);
      auto const [again_value, again] = kiln::value_and_grad(kiln::par, f, x, b, s);
      CHECK(again_value == par_value);
      CHECK(bitwise_equal(std::get<1>(again), std::get<1>(par_grads)));
      CHECK(bitwise_equal(std::get<2>(again), std::get<2>(par_grads)));
    }
  }
}

TEST_CASE("par gradients: a scalar broadcast over millions of elements keeps its accuracy") {
  [[maybe_unused]] thread_count_scope const restore;
  auto f = [](auto const& x, auto const& w) { return kiln::sum(x * w); };
  auto const x = kiln::full<float>({3000000}, 1e-3f);
  kiln::tensor<float, 0> const w = kiln::full<float>(kiln::extents<0>{}, 2.f);
  for (int threads : thread_counts()) {
    use_threads(threads);
    auto const [value, grads] = kiln::value_and_grad(kiln::par, f, x, w);
    CHECK(double(std::get<1>(grads).item()) == doctest::Approx(3e6 * double(1e-3f)).epsilon(1e-6));
    CHECK(double(value) == doctest::Approx(6e6 * double(1e-3f)).epsilon(1e-6));
  }
}

TEST_CASE("par linear_recurrence: independent recurrences split between threads, the same bits") {
  [[maybe_unused]] thread_count_scope const restore;
  // Along dim 1 of [64, 4096] (whole outer blocks per thread), dim 0 of [4096, 64] (columns cut on
  // cache lines), dim 1 of [8, 2048, 40] (8 outer blocks: blocks for 2 threads, columns beyond),
  // three long sequences (fewer blocks than threads, no columns to cut) and one (one thread).
  auto run = [](auto const& b, double a, int dim) {
    auto f = [dim](auto const& x, auto const& c) { return kiln::sum(kiln::linear_recurrence(x, c, dim) * x); };
    kiln::tensor<double, 0> const coefficient = kiln::full<double>(kiln::extents<0>{}, a);
    auto const y = kiln::eval(kiln::simd, kiln::linear_recurrence(b, a, dim));
    auto const [value, grads] = kiln::value_and_grad(kiln::simd, f, b, coefficient);
    for (int threads : thread_counts()) {
      CAPTURE(threads);
      use_threads(threads);
      CHECK(bitwise_equal(kiln::eval(kiln::par, kiln::linear_recurrence(b, a, dim)), y));
      auto const [par_value, par_grads] = kiln::value_and_grad(kiln::par, f, b, coefficient);
      CHECK(par_value == doctest::Approx(value).epsilon(1e-12));
      CHECK(bitwise_equal(std::get<0>(par_grads), std::get<0>(grads)));  // each element as on one thread
      CHECK(std::get<1>(par_grads).item() == doctest::Approx(std::get<1>(grads).item()).epsilon(1e-12));
      auto const [again_value, again] = kiln::value_and_grad(kiln::par, f, b, coefficient);
      CHECK(std::get<1>(again).item() == std::get<1>(par_grads).item());  // repeatable
    }
  };
  run(kiln::randn<double>({64, 4096}, 11), 0.9, 1);
  run(kiln::randn<double>({4096, 64}, 12), -0.7, 0);
  run(kiln::randn<double>({8, 2048, 40}, 13), 0.5, 1);
  run(kiln::randn<double>({3, 40000}, 15), 0.9, 1);  // three sequences: a block each, at most
  run(kiln::randn<double>({200000}, 14), 0.99, 0);
}

TEST_CASE("a full reduction under a policy gives its value") {
  auto const x = kiln::randn<float>({100000}, 9);
  float const s = kiln::sum(kiln::par, kiln::exp(x * 0.1f));
  CHECK(s == doctest::Approx(kiln::eval(kiln::simd, kiln::sum(kiln::exp(x * 0.1f))).item()).epsilon(1e-5));
  CHECK(kiln::amax(kiln::seq, x) == kiln::eval(kiln::seq, kiln::amax(x)).item());
}

// Evaluation: fusion, broadcasting, strides, aliasing, policies, the planner and introspection.
#include "bitwise.hpp"

#include <doctest/doctest.h>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#if defined(__unix__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace {

constexpr int float_lanes = int(kiln::simd_detail::batch<float>::size);

// Every element of `t` against f(index...) within a relative tolerance.
template <class T, class F>
void check_elements_1d(kiln::tensor_view<T const, 1> t, F&& f, double rtol = 1e-6) {
  for (kiln::index_t i = 0; i < t.extent(0); ++i) {
    double const want = f(i);
    CAPTURE(i);
    CHECK(double(t(i)) == doctest::Approx(want).epsilon(rtol));
  }
}

#if defined(__unix__)
// n floats that end where a page no access is allowed to begins: reading or writing one element
// past the end faults. (AddressSanitizer does not see inside the masked loads and stores of the
// vector tails; the page does.)
class guarded_floats {
 public:
  explicit guarded_floats(std::size_t n) : page_(std::size_t(sysconf(_SC_PAGESIZE))) {
    bytes_ = (n * sizeof(float) + page_ - 1) / page_ * page_ + page_;
    base_ = static_cast<char*>(mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base_ != MAP_FAILED);
    REQUIRE(mprotect(base_ + bytes_ - page_, page_, PROT_NONE) == 0);
    data_ = reinterpret_cast<float*>(base_ + bytes_ - page_) - n;
    for (std::size_t i = 0; i < n; ++i) data_[i] = 0.25f * float(i % 13) - 1.f;
  }
  guarded_floats(guarded_floats const&) = delete;
  guarded_floats& operator=(guarded_floats const&) = delete;
  ~guarded_floats() { munmap(base_, bytes_); }
  float* data() const { return data_; }

 private:
  std::size_t page_, bytes_;
  char* base_;
  float* data_;
};
#endif

double w2(double x, double y) { return std::tanh(0.7 * x + 0.1) / (1 + std::exp(-y)) + std::exp(-x * x); }

}  // namespace

TEST_CASE("a long elementwise chain evaluates as the scalar formula, for every length around the SIMD width") {
  for (int n = 0; n <= 3 * float_lanes + 1; ++n) {
    auto x = kiln::randn<float>({n}, 1), y = kiln::randn<float>({n}, 2);
    for (auto policy : {0, 1}) {
      kiln::tensor<float, 1> z = kiln::zeros<float>({n});
      auto e = kiln::tanh(0.7f * x + 0.1f) * kiln::sigmoid(y) + kiln::exp(-x * x);
      if (policy == 0) kiln::eval(kiln::seq, z, e);
      else kiln::eval(kiln::simd, z, e);
      CAPTURE(n);
      check_elements_1d<float>(z, [&](kiln::index_t i) { return w2(x(i), y(i)); }, 1e-5);
    }
  }
}

TEST_CASE("a tree too large to force inline node by node runs every loop kind as its steps one at a time") {
  // Trees over forced_inline_nodes are inlined into their loops by flattening (eval/evaluator.hpp),
  // a path of its own in every loop that reads batches; each step below is a small tree.
  auto step = [](auto const& e, auto const& b) { return kiln::tanh(e * 0.5f + b) * 0.75f - 0.25f; };
  for (kiln::index_t cols : {kiln::index_t(2 * float_lanes + 3), kiln::index_t(1 << 15)}) {
    kiln::index_t const rows = cols > 1000 ? 2 : 5;  // the wide case gives kiln::par two threads
    CAPTURE(cols);
    auto const A = kiln::randn<float>({rows, cols}, 11);
    auto const b = kiln::randn<float>({cols}, 12);
    auto const deep = step(step(step(step(A, b), b), b), b);
    static_assert(kiln::detail::large_tree<kiln::detail::evaluator<std::remove_cvref_t<decltype(deep)>, 2>>);
    kiln::tensor<float, 2> ref = A;
    for (int k = 0; k < 4; ++k) ref = step(ref, b);
    auto close = [](auto const& got, auto const& want) {
      REQUIRE(got.shape() == want.shape());
      for (kiln::index_t i = 0; i < got.size(); ++i)
        CHECK(got.data()[i] == doctest::Approx(want.data()[i]).epsilon(1e-5).scale(1));
    };
    close(kiln::eval(deep), ref);
    close(kiln::eval(kiln::seq, deep), ref);
    close(kiln::eval(kiln::par, deep), ref);
    close(kiln::eval(kiln::sum(deep, kiln::axes<1>)), kiln::eval(kiln::sum(ref, kiln::axes<1>)));
    close(kiln::eval(kiln::sum(deep, kiln::axes<0>)), kiln::eval(kiln::sum(ref, kiln::axes<0>)));
    CHECK(kiln::sum(deep) == doctest::Approx(kiln::sum(ref)).epsilon(1e-5));
    close(kiln::eval(kiln::softmax(deep, 1)), kiln::eval(kiln::softmax(ref, 1)));
    close(kiln::eval(kiln::softmax(deep, 0)), kiln::eval(kiln::softmax(ref, 0)));
    // A large subtree with no inputs to differentiate: the backward loop reads it with batches.
    auto const x = kiln::randn<float>({rows, cols}, 13);
    auto const [loss, dx] = kiln::value_and_grad([&](auto const& v) { return kiln::sum(v * deep); }, x);
    CHECK(loss == doctest::Approx(kiln::sum(x * ref)).epsilon(1e-4).scale(1));
    close(dx, ref);
  }
}

TEST_CASE("a large tree's rows give every length of tail the lanes a longer row gives, in place and broadcast too") {
  // A large tree runs each row, its tail included, through one copy of its vector code (simd_row):
  // the last step reads and writes only what is left of the row. Lanes are independent, so each
  // prefix of a row must come out bit for bit as in the longest row. (Every comparison is between
  // results of one instantiation: GCC may contract a * b + c into an FMA differently in another.)
  auto step = [](auto const& e, auto const& b) { return kiln::tanh(e * 0.5f + b) * 0.75f - 0.25f; };
  auto deep = [&](auto const& x, auto const& b, auto const& keep) {
    return kiln::where(keep, step(step(step(x, b), b), b), x * b);
  };
  kiln::index_t const longest = 3 * float_lanes + 1;
  auto const b_all = kiln::randn<float>({longest}, 22);
  kiln::tensor<bool, 1> const keep_all = kiln::randn<float>({longest}, 23) > 0.f;
  std::vector<float> x_store(std::size_t(longest) + 1);  // x from element 1: unaligned
  for (kiln::index_t i = 0; i < longest; ++i) x_store[std::size_t(i) + 1] = 0.3f * float(i % 11) - 1.5f;
  float const* const x_all = x_store.data() + 1;
  auto prefix = [](auto const& t, kiln::index_t n) { return kiln::view(t.data(), {n}); };  // read-only
  auto const b_view = kiln::view(b_all.data(), {longest});
  auto const keep_view = kiln::view(keep_all.data(), {longest});
  static_assert(kiln::detail::large_tree<kiln::detail::evaluator<
                    std::remove_cvref_t<decltype(deep(kiln::view(x_all, {longest}), b_view, keep_view))>, 1>>);
  kiln::tensor<float, 1> const want = deep(kiln::view(x_all, {longest}), b_view, keep_view);
  kiln::tensor<float, 2> const column = kiln::view(x_all, {2, 1});  // broadcast along rows: the mixed loop
  kiln::tensor<float, 2> const rows_want = deep(column, b_view, keep_view);
  for (kiln::index_t n = 0; n <= longest; ++n) {
    CAPTURE(n);
    auto const b = prefix(b_all, n);
    auto const keep = prefix(keep_all, n);
    auto same_prefix = [&](kiln::tensor_view<float const, 1> got) {
      for (kiln::index_t i = 0; i < n; ++i) {
        CAPTURE(i);
        CHECK(kiln_test::same_bits(got(i), want(i)));
      }
    };
#if defined(__unix__)
    guarded_floats edge{std::size_t(n)};  // reading past the row's end faults
    std::copy_n(x_all, n, edge.data());
    auto const x = kiln::view(static_cast<float const*>(edge.data()), {n});
    guarded_floats sink{std::size_t(n)};  // and so does writing past it
    kiln::view(sink.data(), {n}) = deep(x, b, keep);
    same_prefix(kiln::view(static_cast<float const*>(sink.data()), {n}));
#else
    auto const x = kiln::view(x_all, {n});
#endif
    kiln::tensor<float, 1> const out = deep(x, b, keep);
    same_prefix(out);
    // In place: each step reads its elements before it writes them.
    kiln::tensor<float, 1> inplace = x;
    inplace = deep(prefix(inplace, n), b, keep);
    same_prefix(inplace);
    kiln::tensor<float, 2> const rows = deep(column, b, keep);
    for (kiln::index_t r = 0; r < 2; ++r)
      for (kiln::index_t i = 0; i < n; ++i) CHECK(kiln_test::same_bits(rows(r, i), rows_want(r, i)));
  }
}

TEST_CASE("a large tree folds and differentiates every length of row as a small tree and the scalar loop do") {
  // A large tree's folds read each step through one copy of its code (fold_block_simd rotates
  // four accumulators, fold_into_row_simd reads the tail as a step); a guard page after the input
  // catches any read past its end. The tree is exact (no rounding, so no FMA contraction either)
  // and its values have full mantissas over a wide range of exponents, so a fold in another
  // order rounds differently from the small tree's fold of the same values (putting every whole
  // batch into one accumulator fails here).
  auto step = [](auto const& e, auto const& b) { return kiln::maximum(kiln::abs(e * 2.f), b) * 0.5f; };
  auto deep = [&](auto const& x, auto const& b) { return -step(step(step(step(x, b), b), b), b); };
  kiln::index_t const longest = 6 * float_lanes + 3;  // four-batch steps, single batches and a tail
  kiln::index_t const rows = 3;
  auto x_store = std::vector<float>(std::size_t(rows * longest));
  auto b_store = std::vector<float>(std::size_t(longest));
  for (std::size_t i = 0; i < x_store.size(); ++i) x_store[i] = std::ldexp(1.f + 0.37f * float(i % 29), int(i * 7 % 19));
  for (std::size_t i = 0; i < b_store.size(); ++i) b_store[i] = float(i % 4);
  for (kiln::index_t n = 0; n <= longest; ++n) {
    CAPTURE(n);
#if defined(__unix__)
    guarded_floats edge{std::size_t(rows * n)};  // reading past the last row's end faults
    std::copy_n(x_store.data(), rows * n, edge.data());
    float const* const x_data = edge.data();
#else
    float const* const x_data = x_store.data();
#endif
    auto const x = kiln::view(x_data, {rows, n});
    auto const b = kiln::view(static_cast<float const*>(b_store.data()), {n});
    auto const tree = deep(x, b);
    static_assert(kiln::detail::large_tree<kiln::detail::evaluator<std::remove_cvref_t<decltype(tree)>, 2>>);
    kiln::tensor<float, 2> const values = tree;
    auto const small = values * 1.f;  // the same values through a small tree's folds
    auto const flat = kiln::view(x_data, {rows * n});  // the whole tensor as one row
    float const total = kiln::sum(deep(flat, flat)), total_small = kiln::sum(kiln::eval(deep(flat, flat)) * 1.f);
    CHECK(kiln_test::same_bits(total, total_small));
    CHECK(kiln_test::bitwise_equal(kiln::eval(kiln::sum(tree, kiln::axes<1>)), kiln::eval(kiln::sum(small, kiln::axes<1>))));
    CHECK(kiln_test::bitwise_equal(kiln::eval(kiln::sum(tree, kiln::axes<0>)), kiln::eval(kiln::sum(small, kiln::axes<0>))));
    if (n > 0) CHECK(kiln_test::bitwise_equal(kiln::eval(kiln::amax(tree, kiln::axes<1>)), kiln::eval(kiln::amax(small, kiln::axes<1>))));
    // And its gradients, the rows' and those of a column broadcast along them (the mixed loop),
    // against the scalar loop's. Every step's derivative is 1, -1 or 0, so the column's row sums
    // are exact in any order.
    kiln::tensor<float, 2> const column = kiln::view(x_store.data(), {rows, 1});
    auto loss = [&](auto const& xv, auto const& cv) { return kiln::sum(deep(xv + cv, b)); };
    auto const [l_simd, g_simd] = kiln::value_and_grad(kiln::simd, loss, x, column);
    auto const [l_seq, g_seq] = kiln::value_and_grad(kiln::seq, loss, x, column);
    CHECK(l_simd == doctest::Approx(l_seq).epsilon(1e-6));
    CHECK(kiln_test::bitwise_equal(std::get<0>(g_simd), std::get<0>(g_seq)));
    CHECK(kiln_test::bitwise_equal(std::get<1>(g_simd), std::get<1>(g_seq)));
  }
}

TEST_CASE("the simd and seq policies agree on a tree mixing every kind of node") {
  auto x = kiln::randn<double>({257}, 3), y = kiln::rand<double>({257}, 4);
  auto e = kiln::where(x > y, kiln::exp(x) - 1.5, kiln::sqrt(y) * 2) + kiln::clamp(x, -0.5, 0.5) / (1 + y * y);
  kiln::tensor<double, 1> a = kiln::zeros<double>({257}), b = kiln::zeros<double>({257});
  kiln::eval(kiln::seq, a, e);
  kiln::eval(kiln::simd, b, e);
  for (int i = 0; i < 257; ++i) CHECK(a(i) == doctest::Approx(b(i)).epsilon(1e-14));
}

TEST_CASE("broadcasting: rows, columns, rank 0 and scalars") {
  kiln::index_t const rows = 5, cols = 2 * float_lanes + 3;
  auto A = kiln::randn<float>({rows, cols}, 1);
  auto b = kiln::randn<float>({cols}, 2);
  auto c = kiln::randn<float>({rows, 1}, 3);
  kiln::tensor<float, 0> s = kiln::full<float>(kiln::extents<0>{}, 0.25f);

  kiln::tensor<float, 2> out = kiln::relu(A + b) * c - s;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      CHECK(out(i, j) == doctest::Approx(std::max(A(i, j) + b(j), 0.f) * c(i, 0) - 0.25f));

  // A rank-1 expression broadcast into every row of a rank-2 destination.
  out = b * 2.f;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) CHECK(out(i, j) == b(j) * 2.f);

  // [rows, 1] op [1, cols]: an outer product, no operand contiguous along both dimensions.
  auto r = kiln::reshape(b, {1, cols});
  kiln::tensor<float, 2> outer = c * r;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) CHECK(outer(i, j) == c(i, 0) * b(j));

  // A rank-0 expression fills a tensor.
  out = s + 1.f;
  CHECK(out(rows - 1, cols - 1) == 1.25f);
}

TEST_CASE("empty and single-element tensors") {
  auto e = kiln::zeros<float>({0, 3});
  auto row = kiln::ones<float>({3});
  kiln::tensor<float, 2> z = e + row;
  CHECK(z.shape() == kiln::extents<2>{0, 3});
  CHECK(z.size() == 0);

  kiln::tensor<float, 1> one = {2.f};
  kiln::tensor<float, 1> r = kiln::sqrt(one) * one;
  CHECK(r(0) == doctest::Approx(std::sqrt(2.f) * 2.f));

  kiln::tensor<double, 0> scalar;
  scalar = kiln::exp(scalar + 1.0);
  CHECK(scalar() == doctest::Approx(std::exp(1.0)));

  // Rows of no elements under a non-empty outer dimension, through every loop that steps rows
  // (the leaves read each row's first element, so no loop may start an empty row).
  auto none = kiln::zeros<float>({3, 0});
  auto col = kiln::ones<float>({3, 1});
  kiln::tensor<float, 2> broadcast = kiln::relu(none + col) * col;
  CHECK(broadcast.shape() == kiln::extents<2>{3, 0});
  kiln::eval(kiln::seq, broadcast, none * col);
  kiln::eval(kiln::par, broadcast, none * col);
  CHECK(kiln::eval(kiln::sum(none * col, kiln::axes<1>)).shape() == kiln::extents<1>{3});
  CHECK(kiln::eval(kiln::sum(none * col, kiln::axes<1>))(2) == 0.f);
  CHECK(kiln::eval(kiln::softmax(none * col, 1)).shape() == kiln::extents<2>{3, 0});
  CHECK(kiln::eval(kiln::log_softmax(none + col, 1)).shape() == kiln::extents<2>{3, 0});
  auto const [loss, g] = kiln::value_and_grad([](auto const& x, auto const& c) { return kiln::sum(kiln::relu(x * c)); },
                                              none, col);
  CHECK(loss == 0.f);
  CHECK(std::get<0>(g).shape() == kiln::extents<2>{3, 0});
  CHECK(std::get<1>(g)(1, 0) == 0.f);
}

TEST_CASE("strided, transposed, reversed and expanded operands") {
  kiln::index_t const n = 3 * float_lanes + 1;
  auto M = kiln::randn<float>({n, n}, 7);
  auto Mt = kiln::transpose(M);
  kiln::tensor<float, 2> out = Mt * 2.f + M;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) CHECK(out(i, j) == M(j, i) * 2.f + M(i, j));

  // Every second column.
  auto odd = kiln::slice(M, 1, 1, n, 2);
  kiln::tensor<float, 2> o = kiln::abs(odd);
  REQUIRE(o.extent(1) == (n - 1 + 1) / 2);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < o.extent(1); ++j) CHECK(o(i, j) == std::abs(M(i, 1 + 2 * j)));

  // A negative stride walks a vector backwards.
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  auto reversed = kiln::view(v.data() + n - 1, kiln::extents<1>{n}, kiln::extents<1>{-1});
  kiln::tensor<double, 1> r = reversed + 0.5;
  for (int i = 0; i < n; ++i) CHECK(r(i) == double(n - 1 - i) + 0.5);

  // expand() gives stride 0 without copying.
  auto col = kiln::randn<float>({n, 1}, 8);
  auto wide = kiln::expand(col, {n, n});
  kiln::tensor<float, 2> w = wide - M;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) CHECK(w(i, j) == col(i, 0) - M(i, j));
}

TEST_CASE("unaligned user memory as input and output") {
  for (int offset = 0; offset < float_lanes; ++offset) {
    for (int n : {1, float_lanes - 1, float_lanes, 5 * float_lanes + 3}) {
      std::vector<float> in(n + offset), out(n + offset, -1.f);
      for (int i = 0; i < n + offset; ++i) in[i] = 0.1f * float(i) - 1.f;
      auto x = kiln::view(in.data() + offset, {n});
      auto y = kiln::view(out.data() + offset, {n});
      y = kiln::tanh(x) * 3.f + x;
      CAPTURE(offset);
      CAPTURE(n);
      for (int i = 0; i < offset; ++i) CHECK(out[i] == -1.f);  // nothing written before the view
      for (int i = 0; i < n; ++i) CHECK(out[offset + i] == doctest::Approx(std::tanh(in[offset + i]) * 3.f + in[offset + i]));
    }
  }
}

TEST_CASE("views as destinations: slices, transposed and strided") {
  auto M = kiln::zeros<float>({4, 6});
  kiln::slice(M, 0, 1, 3) = 1.f;  // rows 1 and 2
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) CHECK(M(i, j) == (i == 1 || i == 2 ? 1.f : 0.f));

  auto src = kiln::randn<float>({6, 4}, 3);
  kiln::transpose(M) = src * 2.f;  // writes M column by column
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) CHECK(M(i, j) == src(j, i) * 2.f);

  kiln::select(M, 1, 2) = kiln::arange<float>(0, 4);  // column 2
  for (int i = 0; i < 4; ++i) CHECK(M(i, 2) == float(i));
}

TEST_CASE("aliasing: in-place updates are direct, overlapping views go through a temporary") {
  SUBCASE("x = x * 2 + y reads each element before writing it") {
    auto x = kiln::arange<float>(0, 37);
    auto y = kiln::ones<float>({37});
    x = x * 2.f + y;
    for (int i = 0; i < 37; ++i) CHECK(x(i) == 2.f * float(i) + 1.f);
  }
  SUBCASE("x = transpose(x)") {
    kiln::tensor<float, 2> x = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
    x = kiln::transpose(x);
    kiln::tensor<float, 2> want = {{1, 4, 7}, {2, 5, 8}, {3, 6, 9}};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) CHECK(x(i, j) == want(i, j));
  }
  SUBCASE("a shifted window of the destination") {
    auto x = kiln::arange<double>(0, 40);
    auto head = kiln::slice(x, 0, 0, 39), tail = kiln::slice(x, 0, 1, 40);
    head = tail + head;  // x[i] = x[i + 1] + x[i], every read sees the old values
    for (int i = 0; i < 39; ++i) CHECK(x(i) == double(2 * i + 1));
    CHECK(x(39) == 39.0);
  }
  SUBCASE("a reversed view of the destination") {
    auto x = kiln::arange<float>(0, 21);
    auto rev = kiln::view(x.data() + 20, kiln::extents<1>{21}, kiln::extents<1>{-1});
    x = rev * 1.f;
    for (int i = 0; i < 21; ++i) CHECK(x(i) == float(20 - i));
  }
  SUBCASE("whole tensors skip the address check; a view of the destination among them still counts") {
    // Leaves that are all of a tensor are known apart from (or identical to) a whole-tensor
    // destination; a view of that same tensor must still send the assignment through a temporary.
    kiln::tensor<float, 2> x = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
    kiln::tensor<float, 2> const y = {{10, 20, 30}, {40, 50, 60}, {70, 80, 90}};
    kiln::tensor<float, 2> const want = {{12, 26, 40}, {46, 60, 74}, {80, 94, 108}};  // y + x + x^T
    kiln::tensor<float, 2> a = x, b = x, c = x;
    a = y + a + kiln::transpose(a);
    kiln::eval(kiln::seq, b, y + b + kiln::transpose(b));
    c += y + kiln::transpose(c);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        CHECK(a(i, j) == want(i, j));
        CHECK(b(i, j) == want(i, j));
        CHECK(c(i, j) == want(i, j));
      }
    // A view of all of x with x's own layout is read element for element: in place is right.
    x = kiln::view(x.data(), x.shape()) * 2.f + x;
    CHECK(x(2, 2) == 27.f);
  }
  SUBCASE("a large tree's leaves are checked as a small tree's") {
    // Trees over forced_inline_nodes check each leaf through a call (assign.hpp's called_per_leaf).
    auto grow = [](auto const& e) { return ((((e * 1.f + 0.f) * 1.f + 0.f) * 1.f + 0.f) * 1.f + 0.f) * 1.f + 0.f; };
    kiln::tensor<float, 2> x = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
    kiln::tensor<float, 2> const y = {{10, 20, 30}, {40, 50, 60}, {70, 80, 90}};
    kiln::tensor<float, 2> const want = {{12, 26, 40}, {46, 60, 74}, {80, 94, 108}};  // y + x + x^T
    auto const transposed = grow(y + x + kiln::transpose(x));
    static_assert(kiln::detail::large_tree<kiln::detail::evaluator<std::remove_cvref_t<decltype(transposed)>, 2>>);
    x = transposed;  // through a temporary: x^T overlaps x at other indices
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) CHECK(x(i, j) == want(i, j));
    auto z = kiln::arange<float>(0, 40);
    auto head = kiln::slice(z, 0, 0, 39), tail = kiln::slice(z, 0, 1, 40);
    head = grow(tail + head);  // the shifted window of the destination, as above
    for (int i = 0; i < 39; ++i) CHECK(z(i) == float(2 * i + 1));
    z = grow(z * 2.f + z);  // the destination itself, element for element: in place
    CHECK(z(3) == 21.f);
  }
  SUBCASE("a broadcast row of the destination") {
    kiln::tensor<float, 2> x = {{1, 2}, {3, 4}, {5, 6}};
    auto first_row = kiln::slice(x, 0, 0, 1);  // [1, 2], broadcast over the 3 rows
    x = x + first_row;
    kiln::tensor<float, 2> want = {{2, 4}, {4, 6}, {6, 8}};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) CHECK(x(i, j) == want(i, j));
  }
}

TEST_CASE("compound assignment") {
  auto x = kiln::ones<float>({2, 9});
  auto b = kiln::arange<float>(0, 9);
  x += b;
  x *= 2.f;
  x -= kiln::exp(kiln::zeros<float>({2, 9}));
  x /= 2.f;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 9; ++j) CHECK(x(i, j) == doctest::Approx(((1.f + float(j)) * 2.f - 1.f) / 2.f));
  auto v = kiln::slice(x, 1, 0, 3);
  v += 100.f;
  CHECK(x(0, 0) == doctest::Approx(100.5f));
  CHECK(x(0, 3) == doctest::Approx(3.5f));
}

TEST_CASE("bool results and where on the vector path") {
  int const n = 4 * float_lanes + 3;
  auto x = kiln::randn<float>({n}, 11), y = kiln::randn<float>({n}, 12);
  kiln::tensor<bool, 1> m = x > y;
  kiln::tensor<bool, 1> m_seq = kiln::zeros<bool>({n});
  kiln::eval(kiln::seq, m_seq, x > y);
  kiln::tensor<float, 1> w = kiln::where(m, x, y * 0.5f);
  kiln::tensor<float, 1> both = kiln::where(kiln::logical_and(x > 0.f, y > 0.f), 1.f, 0.f);
  for (int i = 0; i < n; ++i) {
    CHECK(m(i) == (x(i) > y(i)));
    CHECK(m_seq(i) == m(i));
    CHECK(w(i) == (x(i) > y(i) ? x(i) : y(i) * 0.5f));
    CHECK(both(i) == ((x(i) > 0 && y(i) > 0) ? 1.f : 0.f));
  }
}

TEST_CASE("mixed element types promote and evaluate on the scalar path") {
  auto f = kiln::linspace<float>(-2, 2, 19);
  auto d = kiln::linspace<double>(0, 1, 19);
  kiln::tensor<std::int32_t, 1> i = kiln::arange<std::int32_t>(0, 19);
  auto sum = kiln::eval(f + d + i);
  static_assert(std::is_same_v<decltype(sum)::value_type, double>);
  for (int k = 0; k < 19; ++k) CHECK(sum(k) == doctest::Approx(double(f(k)) + d(k) + k));
  // Assigning into a destination of another type converts.
  kiln::tensor<double, 1> wide = kiln::zeros<double>({19});
  wide = f * 2.f;
  CHECK(wide(18) == doctest::Approx(4.0));
}

TEST_CASE("an expression owns the temporaries it was built from") {
  auto e = kiln::exp(kiln::zeros<float>({4})) + kiln::arange<float>(0, 4);
  auto copy = e;  // copying shares the owned tensors, cheaply
  kiln::tensor<float, 1> a = e, b = copy;
  for (int i = 0; i < 4; ++i) CHECK(a(i) == 1.f + float(i));
  CHECK(b(3) == 4.f);
}

TEST_CASE("eval materialises an expression with its type and shape") {
  auto x = kiln::arange<std::int64_t>(0, 5);
  auto doubled = kiln::eval(x * 2);
  static_assert(std::is_same_v<decltype(doubled), kiln::tensor<std::int64_t, 1>>);
  CHECK(doubled(4) == 8);
  auto halves = kiln::eval(kiln::seq, x / 2);
  static_assert(std::is_same_v<decltype(halves), kiln::tensor<float, 1>>);
  CHECK(halves(3) == 1.5f);
}

TEST_CASE("shape errors name both shapes") {
  auto A = kiln::zeros<float>({3, 4});
  auto b = kiln::zeros<float>({5});
  CHECK_THROWS_WITH_AS(A + b, "cannot broadcast [3, 4] with [5]", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::where(A > 0.f, A, b), "cannot broadcast [3, 4] with [3, 4] with [5]", kiln::shape_error);
  auto c = kiln::zeros<float>({4, 4});
  CHECK_THROWS_WITH_AS(c = A * 2.f, "cannot assign an expression of shape [3, 4] to a destination of shape [4, 4]",
                       kiln::shape_error);
  kiln::tensor<float, 2> d = kiln::zeros<float>({3, 1});
  CHECK_THROWS_AS(d = A + 0.f, kiln::shape_error);  // [3, 4] does not broadcast into [3, 1]
  CHECK_THROWS_AS(kiln::eval(kiln::seq, d, A), kiln::shape_error);
  d = A;  // copy assignment of a tensor replaces it, shape included
  CHECK(d.shape() == A.shape());
}

TEST_CASE("the planner merges dimensions that are contiguous for every operand") {
  using kiln::detail::evaluator;
  using kiln::detail::make_plan;
  auto A = kiln::zeros<float>({4, 5, 6});
  auto out = kiln::zeros<float>({4, 5, 6});
  {
    auto e = A * 2.f;
    evaluator<decltype(e), 3> ev(e, out.shape());
    auto plan = make_plan<3>(out.shape(), out.strides(), ev);
    CHECK(plan.dims == 1);  // one flat loop
    CHECK(plan.shape[0] == 120);
  }
  {
    auto row = kiln::zeros<float>({6});
    auto e = A + row;  // row repeats every 6 elements: the outer two dimensions merge
    evaluator<decltype(e), 3> ev(e, out.shape());
    auto plan = make_plan<3>(out.shape(), out.strides(), ev);
    CHECK(plan.dims == 2);
    CHECK(plan.shape[0] == 20);
    CHECK(plan.shape[1] == 6);
  }
  {
    auto e = kiln::permute(A, {0, 2, 1}) * 1.f;
    auto o = kiln::zeros<float>({4, 6, 5});
    evaluator<decltype(e), 3> ev(e, o.shape());
    auto plan = make_plan<3>(o.shape(), o.strides(), ev);
    CHECK(plan.dims == 3);
  }
  {
    auto one = kiln::zeros<float>({1, 1, 1});
    auto e = one + 1.f;
    evaluator<decltype(e), 3> ev(e, one.shape());
    auto plan = make_plan<3>(one.shape(), one.strides(), ev);
    CHECK(plan.dims == 1);
    CHECK(plan.shape[0] == 1);
  }
}

TEST_CASE("the flat plan is the plan the merging finds, and declines every other layout") {
  using kiln::index_t;
  using kiln::detail::leaf_strides;
  using kiln::detail::loop_plan;
  struct layout {
    kiln::extents<3> shape, out;
    leaf_strides<3, 2> leaves;
    bool flat;
  };
  layout const layouts[] = {
      {{2, 3, 4}, {12, 4, 1}, {{{12, 4, 1}, {0, 0, 0}}}, true},         // same order, and a scalar
      {{2, 1, 4}, {4, 999, 1}, {{{4, -7, 1}, {0, 5, 0}}}, true},        // extent-1 strides are ignored
      {{1, 1, 1}, {5, 6, 7}, {{{1, 2, 3}, {0, 0, 0}}}, true},           // a single element: strides 0
      {{1, 1, 5}, {5, 5, 1}, {{{0, 0, 1}, {3, 2, 0}}}, true},           // a row, and a scalar
      {{2, 3, 4}, {12, 4, 1}, {{{12, 4, 1}, {0, 0, 1}}}, false},        // a broadcast row
      {{2, 3, 4}, {12, 4, 1}, {{{0, 4, 1}, {12, 4, 1}}}, false},        // broadcast along the first dim
      {{2, 3, 4}, {24, 8, 1}, {{{24, 8, 1}, {24, 8, 1}}}, false},       // padded rows (a slice)
      {{2, 3, 4}, {12, 4, 1}, {{{1, 2, 6}, {12, 4, 1}}}, false},        // a permuted leaf
      {{2, 3, 4}, {1, 2, 6}, {{{1, 2, 6}, {1, 2, 6}}}, false},          // column-major: merging's job
  };
  for (auto const& l : layouts) {
    CAPTURE(l.shape[0]);
    CAPTURE(l.out[0]);
    CAPTURE(l.leaves[0][0]);
    auto flat_leaves = l.leaves, merged_leaves = l.leaves;
    loop_plan<3> flat_plan, merged_plan;
    bool const flat = kiln::detail::make_flat_plan<3>(l.shape, l.out, flat_leaves, flat_plan);
    kiln::detail::merge_plan<3>(l.shape, l.out, merged_leaves, merged_plan);
    CHECK(flat == l.flat);
    if (flat) {
      REQUIRE(merged_plan.dims == 1);
      CHECK(flat_plan.dims == 1);
      CHECK(flat_plan.shape[0] == merged_plan.shape[0]);
      CHECK(flat_plan.out_strides[0] == merged_plan.out_strides[0]);
      for (int k = 0; k < 2; ++k) CHECK(flat_leaves[k][0] == merged_leaves[k][0]);
    } else {
      CHECK(flat_leaves == l.leaves);  // declined: nothing changed
    }
  }
}

TEST_CASE("the merged-outer plan is the plan the merging finds, and declines every other layout") {
  using kiln::detail::leaf_strides;
  using kiln::detail::loop_plan;
  struct layout {
    kiln::extents<3> shape, out;
    leaf_strides<3, 2> leaves;
    int dims;  // 0: declined
  };
  layout const layouts[] = {
      {{2, 3, 4}, {12, 4, 1}, {{{12, 4, 1}, {0, 0, 0}}}, 1},     // same order, and a scalar: one row
      {{2, 3, 4}, {12, 4, 1}, {{{12, 4, 1}, {0, 0, 1}}}, 2},     // a broadcast row: [6, 4]
      {{2, 3, 4}, {12, 4, 1}, {{{12, 4, 1}, {3, 1, 0}}}, 2},     // a [2, 3, 1] column
      {{2, 1, 4}, {4, 999, 1}, {{{4, -7, 1}, {1, 5, 0}}}, 2},    // extent-1 strides are ignored
      {{1, 1, 5}, {5, 5, 1}, {{{0, 0, 1}, {3, 2, 0}}}, 1},       // a single row
      {{2, 3, 4}, {24, 8, 1}, {{{24, 8, 1}, {12, 4, 1}}}, 2},    // padded rows (a slice)
      {{2, 3, 4}, {12, 4, 1}, {{{12, 4, 2}, {12, 4, 1}}}, 2},    // a leaf read with a stride
      {{2, 3, 4}, {12, 4, 1}, {{{0, 4, 1}, {12, 4, 1}}}, 0},     // broadcast along the first dim
      {{2, 3, 4}, {12, 4, 1}, {{{1, 2, 6}, {12, 4, 1}}}, 0},     // a permuted leaf
      {{2, 3, 4}, {1, 2, 6}, {{{1, 2, 6}, {1, 2, 6}}}, 0},       // column-major
      {{2, 3, 1}, {3, 1, 1}, {{{3, 1, 1}, {0, 0, 0}}}, 0},       // rows of one element: merging drops them
      {{1, 1, 1}, {5, 6, 7}, {{{1, 2, 3}, {0, 0, 0}}}, 0},       // a single element
  };
  for (auto const& l : layouts) {
    CAPTURE(l.shape[1]);
    CAPTURE(l.out[0]);
    CAPTURE(l.leaves[0][2]);
    CAPTURE(l.leaves[1][0]);
    auto fast_leaves = l.leaves, merged_leaves = l.leaves;
    loop_plan<3> fast_plan, merged_plan;
    bool const fast = kiln::detail::plan_merged_outer<3>(l.shape, l.out, fast_leaves, fast_plan);
    kiln::detail::merge_plan<3>(l.shape, l.out, merged_leaves, merged_plan);
    CHECK(fast == (l.dims > 0));
    if (fast) {
      CHECK(fast_plan.dims == l.dims);
      REQUIRE(merged_plan.dims == fast_plan.dims);
      for (int d = 0; d < fast_plan.dims; ++d) {
        CHECK(fast_plan.shape[d] == merged_plan.shape[d]);
        CHECK(fast_plan.out_strides[d] == merged_plan.out_strides[d]);
        for (int k = 0; k < 2; ++k) CHECK(fast_leaves[k][d] == merged_leaves[k][d]);
      }
    } else {
      CHECK(fast_leaves == l.leaves);  // declined: nothing changed
    }
  }
}

TEST_CASE("rank 3 and 4: broadcast rows planned, in runs of rows, at every row length, in padded rows") {
  // kiln::simd runs the plans of rank 3 and more that the mixed row loop reads on an evaluator of
  // their own (run_planned_rows in eval/kernels.hpp): plans of rows and columns, and plans with
  // further dimensions that nothing merges, run in runs of rows. kiln::seq is the reference.
  using shape3 = std::array<kiln::index_t, 3>;
  for (auto const& batches_and_rows : {std::pair{2, 3}, std::pair{3, 1}, std::pair{1, 2}}) {
    int const B = batches_and_rows.first, R = batches_and_rows.second;  // (lambdas below capture them)
    auto const c = kiln::randn<float>({B, R, 1}, 60);
    auto const p = kiln::randn<float>({1, R, 1}, 61);
    for (int n = 1; n <= 3 * float_lanes + 1; ++n) {
      auto const A = kiln::randn<float>({B, R, n}, 62);
      auto const b = kiln::randn<float>({n}, 63);
      auto const q = kiln::randn<float>({B, 1, n}, 64);
      auto const rows_and_columns = kiln::relu(A + b) * c;  // plans as [B R, n]
      auto const runs_of_rows = A + p * q;                  // nothing merges: [B, R, n]
      for (int pitch : {n, n + 3}) {  // contiguous rows, or rows further apart than their length
        int const offset = pitch == n ? 0 : 1;
        std::size_t const size = std::size_t(B * R * pitch + offset + 1);
        CAPTURE(B);
        CAPTURE(R);
        CAPTURE(n);
        CAPTURE(pitch);
        auto check = [&](auto const& e) {
          std::vector<float> out(size, -9.f);
          kiln::tensor<float, 3> ref = kiln::zeros<float>({B, R, n});
          kiln::eval(kiln::seq, ref, e);
          kiln::eval(kiln::simd, kiln::view(out.data() + offset, shape3{B, R, n}, shape3{R * pitch, pitch, 1}), e);
          for (int k = 0; k < int(size); ++k) {
            int const row = (k - offset) / pitch, j = (k - offset) % pitch;
            CAPTURE(k);
            if (k >= offset && row < B * R && j < n) CHECK(out[std::size_t(k)] == doctest::Approx(ref(row / R, row % R, j)));
            else CHECK(out[std::size_t(k)] == -9.f);  // nothing written between or around the rows
          }
        };
        check(rows_and_columns);
        check(runs_of_rows);
      }
    }
  }
  SUBCASE("rank 4, a broadcast dimension between runs") {
    for (kiln::index_t n : {kiln::index_t(1), kiln::index_t(float_lanes + 3)}) {
      auto const A = kiln::randn<float>({2, 3, 2, n}, 65);
      auto const s = kiln::randn<float>({2, 1, 2, 1}, 66);
      auto const t = kiln::randn<float>({n}, 67);
      kiln::tensor<float, 4> got = kiln::zeros<float>({2, 3, 2, n}), want = kiln::zeros<float>({2, 3, 2, n});
      kiln::eval(kiln::simd, got, A - s * t);
      kiln::eval(kiln::seq, want, A - s * t);
      CAPTURE(n);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
          for (int k = 0; k < 2; ++k)
            for (int l = 0; l < n; ++l) CHECK(got(i, j, k, l) == doctest::Approx(want(i, j, k, l)));
    }
  }
  SUBCASE("in place") {
    kiln::tensor<float, 3> X = kiln::randn<float>({2, 3, 2 * float_lanes + 1}, 68);
    kiln::tensor<float, 3> const before = X;
    auto const c = kiln::randn<float>({2, 3, 1}, 69);
    X = kiln::relu(X) * c + 1.f;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int l = 0; l < 2 * float_lanes + 1; ++l)
          CHECK(X(i, j, l) == doctest::Approx(std::max(before(i, j, l), 0.f) * c(i, j, 0) + 1.f));
  }
}

#if defined(__unix__)
TEST_CASE("vector tails read and write nothing past the last element") {
  using shape2 = std::array<kiln::index_t, 2>;
  for (kiln::index_t n = 1; n <= 3 * float_lanes + 1; ++n) {
    CAPTURE(n);
    guarded_floats const x{std::size_t(n)}, A{std::size_t(3 * n)};
    guarded_floats out{std::size_t(n)}, rows_out{std::size_t(3 * n)};
    auto const xv = kiln::view(static_cast<float const*>(x.data()), {n});
    auto const Av = kiln::view(static_cast<float const*>(A.data()), shape2{3, n});
    auto const c = kiln::randn<float>({3, 1}, 50);
    kiln::view(out.data(), {n}) = xv * 2.f + 1.f;  // a flat row
    for (kiln::index_t i = 0; i < n; ++i) CHECK(out.data()[i] == xv(i) * 2.f + 1.f);
    kiln::view(rows_out.data(), shape2{3, n}) = kiln::relu(Av + xv) * c;  // rows with broadcast leaves
    for (int i = 0; i < 3; ++i)
      for (kiln::index_t j = 0; j < n; ++j)
        CHECK(rows_out.data()[i * n + j] == std::max(Av(i, j) + xv(j), 0.f) * c(i, 0));
    kiln::view(out.data(), shape2{1, n}) = kiln::relu(xv + xv) * kiln::slice(c, 0, 2, 3);  // a single such row
    for (kiln::index_t j = 0; j < n; ++j) CHECK(out.data()[j] == std::max(xv(j) + xv(j), 0.f) * c(2, 0));
    double squares = 0;
    for (kiln::index_t i = 0; i < n; ++i) squares += double(xv(i)) * xv(i);
    CHECK(float(kiln::sum(xv * xv)) == doctest::Approx(squares));  // a fold's tail
    kiln::view(out.data(), {n}) = kiln::sum(Av, kiln::axes<0>);  // a kept inner dimension, read back and written
    for (kiln::index_t j = 0; j < n; ++j) CHECK(out.data()[j] == doctest::Approx(Av(0, j) + Av(1, j) + Av(2, j)));
  }
}
#endif

TEST_CASE("aliasing, at random: a destination overlapping its sources through other views gets the out-of-place result") {
  // One buffer holds the destination and both sources, each a view of random layout (dimensions
  // permuted, padded, reversed; the sources may repeat elements with a stride of 0) at a random
  // offset near the others. `dst = e` must write what evaluating e into a fresh tensor first (under
  // the same policy) and then copying it gives, through every route: in place, a temporary, the
  // row blocks, the rows fused (rank 2) or merged (rank 3).
  using kiln::index_t;
  std::mt19937 rng(2026);
  auto pick = [&](auto const& options) {
    return options[std::uniform_int_distribution<std::size_t>(0, options.size() - 1)(rng)];
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  constexpr index_t buffer_size = 700;
  std::vector<float> values(buffer_size);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (auto& v : values) v = normal(rng);
  // A layout of `shape`: {offset, strides} inside the buffer, `near` the given offset.
  auto layout = [&]<std::size_t R>(std::array<index_t, R> const& shape, bool may_repeat, index_t near) {
    std::array<int, R> order;
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::array<index_t, R> strides{};
    index_t step = 1;
    for (int k = int(R) - 1; k >= 0; --k) {
      strides[order[k]] = step;
      step *= shape[order[k]] + (chance(0.3) ? 1 : 0);
    }
    index_t low = 0, high = 0;  // the span of offsets the view reaches
    for (std::size_t d = 0; d < R; ++d) {
      if (may_repeat && chance(0.1)) strides[d] = 0;
      if (chance(0.2)) strides[d] = -strides[d];
      (strides[d] < 0 ? low : high) += (shape[d] - 1) * strides[d];
    }
    index_t const start =
        std::clamp<index_t>(near + std::uniform_int_distribution<index_t>(-20, 20)(rng), -low, buffer_size - 1 - high);
    return std::pair{start, strides};
  };
  int routes = 0;
  auto run = [&]<int R>(std::integral_constant<int, R>, int expr, auto const& policy) {
    std::array<index_t, R> shape;
    for (auto& e : shape) e = pick(std::array<index_t, 6>{1, 2, 3, 5, 9, 17});
    if (std::accumulate(shape.begin(), shape.end(), index_t(1), std::multiplies<>()) > 150) return;
    // (No structured bindings: Clang before 16 does not capture them.)
    auto const d_layout = layout(shape, false, buffer_size / 2 - 75);
    index_t const d_at = d_layout.first;
    auto const x_layout = layout(shape, true, d_at), y_layout = layout(shape, true, d_at);
    index_t const x_at = x_layout.first, y_at = y_layout.first;
    auto const d_strides = d_layout.second, x_strides = x_layout.second, y_strides = y_layout.second;
    auto build = [&](float* buffer) {
      auto const* b = static_cast<float const*>(buffer);
      auto const x = kiln::view(b + x_at, shape, x_strides), y = kiln::view(b + y_at, shape, y_strides);
      constexpr int last = R - 1;
      return [=](auto&& assign) {
        switch (expr) {
          case 0: return assign(x * 2.f + y);
          case 1: return assign(x - kiln::amax(y, kiln::axes<last>, kiln::keepdim));
          case 2: return assign((x - kiln::mean(x, kiln::axes<last>, kiln::keepdim)) /
                                kiln::sqrt(kiln::variance(x, kiln::axes<last>, kiln::keepdim, kiln::correction{0}) + 1e-5f));
          case 3: return assign(x * kiln::sum(y, kiln::axes<0>, kiln::keepdim));
          case 4: return assign(kiln::softmax(x, last) + y);
          default: return assign(kiln::exp(x) - kiln::logsumexp(y, kiln::axes<last>, kiln::keepdim));
        }
      };
    };
    std::vector<float> want = values, got = values;
    kiln::tensor<float, R> out_of_place;
    build(values.data())([&](auto const& e) { out_of_place = kiln::eval(policy, e); });
    kiln::view(want.data() + d_at, shape, d_strides) = out_of_place;
    build(got.data())([&](auto const& e) { kiln::eval(policy, kiln::view(got.data() + d_at, shape, d_strides), e); });
    // (Within 5e-7 of the value, or of 1 below it, about 4 ulp of a float: a route may contract an
    // FMA that another does not. An element read after it was written is off by far more.)
    index_t first_wrong = -1;
    for (index_t i = 0; i < buffer_size && first_wrong < 0; ++i) {
      float const a = got[std::size_t(i)], b = want[std::size_t(i)];
      if (!(a == b || (std::isnan(a) && std::isnan(b)) || std::abs(a - b) <= 5e-7f * std::max(1.f, std::abs(b)))) first_wrong = i;
    }
    CAPTURE(R);
    CAPTURE(expr);
    CAPTURE(d_at);
    CAPTURE(x_at);
    CAPTURE(y_at);
    CHECK(first_wrong == -1);
    ++routes;
  };
  for (int round = 0; round < 400; ++round) {
    int const expr = round % 6;
    run(std::integral_constant<int, 2>{}, expr, kiln::simd);
    run(std::integral_constant<int, 3>{}, expr, kiln::simd);
    run(std::integral_constant<int, 2>{}, expr, kiln::seq);
    run(std::integral_constant<int, 3>{}, expr, kiln::par);
  }
  CHECK(routes > 1000);
}

TEST_CASE("flat assignments: tails, single elements, broadcast scalars, unaligned and aliased memory") {
  kiln::tensor<float, 0> s0 = kiln::full<float>(kiln::extents<0>{}, 0.75f);
  kiln::tensor<float, 1> s1 = {-0.5f};
  SUBCASE("every length around the SIMD width, at every misalignment, both policies") {
    for (int offset = 0; offset < float_lanes; ++offset) {
      for (int n = 0; n <= 3 * float_lanes + 1; ++n) {
        std::vector<float> in(n + 2 * offset + 1), out(n + offset + 1, -9.f), ref(n);
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = 0.25f * float(i) - 3.f;
        auto x = kiln::view(in.data() + offset, {n});
        auto y = kiln::view(in.data() + 2 * offset + 1, {n});
        for (int policy : {0, 1}) {
          auto z = kiln::view(out.data() + offset, {n});
          auto e = x * s0 + y - s1 + 2.f;
          if (policy == 0) kiln::eval(kiln::seq, z, e);
          else kiln::eval(kiln::simd, z, e);
          CAPTURE(offset);
          CAPTURE(n);
          CAPTURE(policy);
          for (int i = 0; i < offset; ++i) CHECK(out[i] == -9.f);  // nothing written around the view
          CHECK(out[offset + n] == -9.f);
          for (int i = 0; i < n; ++i)
            CHECK(z(i) == doctest::Approx(x(i) * 0.75f + y(i) + 0.5f + 2.f).epsilon(1e-6));
        }
      }
    }
  }
  SUBCASE("single elements of rank 0, 1 and 3, and leading extent-1 dimensions") {
    kiln::tensor<float, 0> r0;
    r0 = kiln::exp(s0) * 2.f - s0;
    CHECK(r0() == doctest::Approx(std::exp(0.75f) * 2.f - 0.75f));
    kiln::tensor<float, 1> r1 = kiln::zeros<float>({1});
    r1 = s1 * 3.f + s0;
    CHECK(r1(0) == doctest::Approx(-0.75f));
    kiln::tensor<float, 3> r3 = kiln::zeros<float>({1, 1, 1});
    r3 = kiln::sqrt(s0 + 0.25f) + s1;
    CHECK(r3(0, 0, 0) == doctest::Approx(0.5f));
    auto a = kiln::randn<float>({1, 1, 2 * float_lanes + 1}, 21);
    kiln::tensor<float, 3> r = kiln::zeros<float>({1, 1, 2 * float_lanes + 1});
    r = a * s0 - kiln::full<float>(kiln::extents<2>{1, 1}, 1.f);
    for (int i = 0; i < 2 * float_lanes + 1; ++i) CHECK(r(0, 0, i) == doctest::Approx(a(0, 0, i) * 0.75f - 1.f));
  }
  SUBCASE("ranks 2 to 4 over operands of one shape: one flat row, every length, views and in place") {
    // Whole tensors and contiguous views of the destination's shape are read as one row of all the
    // elements; a transposed operand or a strided destination is not.
    auto const check = [](auto const& got, auto const& a, auto const& b, char const* what) {
      CAPTURE(what);
      for (kiln::index_t i = 0; i < got.size(); ++i) {
        float const want = std::max(a.data()[i], b.data()[i]) - 0.5f * b.data()[i];
        CHECK(got.data()[i] == doctest::Approx(want).epsilon(1e-6));
      }
    };
    for (kiln::index_t n = 1; n <= 3 * float_lanes + 1; ++n) {
      CAPTURE(n);
      auto const a2 = kiln::randn<float>({2, n}, 60 + n), b2 = kiln::randn<float>({2, n}, 61 + n);
      kiln::tensor<float, 2> z2 = kiln::zeros<float>({2, n});
      z2 = kiln::maximum(a2, b2) - 0.5f * b2;
      check(z2, a2, b2, "rank 2");
      auto const a3 = kiln::randn<float>({2, 1, n}, 62 + n), b3 = kiln::randn<float>({2, 1, n}, 63 + n);
      kiln::tensor<float, 3> z3 = kiln::zeros<float>({2, 1, n});
      z3 = kiln::maximum(a3, b3) - 0.5f * b3;
      check(z3, a3, b3, "rank 3");
      auto const a4 = kiln::randn<float>({1, 2, 1, n}, 64 + n), b4 = kiln::randn<float>({1, 2, 1, n}, 65 + n);
      kiln::tensor<float, 4> z4 = kiln::zeros<float>({1, 2, 1, n});
      z4 = kiln::maximum(a4, b4) - 0.5f * b4;
      check(z4, a4, b4, "rank 4");
      // Contiguous views (rows 1 and 2 of three) as operands and destination, nothing written around.
      auto const A = kiln::randn<float>({3, n}, 66 + n), B = kiln::randn<float>({3, n}, 67 + n);
      kiln::tensor<float, 2> Z = kiln::full<float>(kiln::extents<2>{3, n}, -9.f);
      auto const a = kiln::slice(A, 0, 1, 3), b = kiln::slice(B, 0, 1, 3);
      kiln::slice(Z, 0, 1, 3) = kiln::maximum(a, b) - 0.5f * b;
      kiln::tensor<float, 2> const got = kiln::slice(Z, 0, 1, 3), a_copy = a, b_copy = b;
      check(got, a_copy, b_copy, "views");
      for (kiln::index_t j = 0; j < n; ++j) CHECK(Z(0, j) == -9.f);
      // In place: each element read before it is written.
      kiln::tensor<float, 2> x = a2;
      x = kiln::maximum(x, b2) - 0.5f * b2;
      check(x, a2, b2, "in place");
      // Not flat: a transposed operand of the same shape, and a strided destination.
      auto const S = kiln::randn<float>({n, 2}, 68 + n);
      kiln::tensor<float, 2> const St = kiln::transpose(S);
      z2 = kiln::maximum(kiln::transpose(S), b2) - 0.5f * b2;
      check(z2, St, b2, "transposed operand");
      kiln::tensor<float, 2> wide = kiln::zeros<float>({2, 2 * n});
      auto strided = kiln::slice(wide, 1, 0, 2 * n, 2);
      strided = kiln::maximum(a2, b2) - 0.5f * b2;
      kiln::tensor<float, 2> const strided_copy = strided;
      check(strided_copy, a2, b2, "strided destination");
    }
  }
  SUBCASE("empty destinations") {
    kiln::tensor<float, 2> e = kiln::zeros<float>({3, 0});
    e = kiln::zeros<float>({3, 0}) * s0 + s1;
    CHECK(e.size() == 0);
  }
  SUBCASE("a 2-D destination with scalars of every rank") {
    auto A = kiln::randn<float>({3, 2 * float_lanes + 5}, 22);
    kiln::tensor<float, 2> out = kiln::zeros<float>({3, 2 * float_lanes + 5});
    out = A * s0 + s1 - kiln::full<float>(kiln::extents<2>{1, 1}, 2.f);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2 * float_lanes + 5; ++j) CHECK(out(i, j) == doctest::Approx(A(i, j) * 0.75f - 2.5f));
  }
  SUBCASE("in place, and with a broadcast element of the destination itself") {
    int const n = 3 * float_lanes + 2;
    auto x = kiln::arange<float>(1, float(n + 1));
    x = x * 2.f + s0;  // in place: each element read before it is written, no temporary
    for (int i = 0; i < n; ++i) CHECK(x(i) == doctest::Approx(2.f * float(i + 1) + 0.75f));
    auto y = kiln::arange<float>(1, float(n + 1));
    y = y * 2.f + kiln::slice(y, 0, 0, 1);  // y[0] broadcast: read through a temporary, all old values
    for (int i = 0; i < n; ++i) CHECK(y(i) == doctest::Approx(2.f * float(i + 1) + 1.f));
  }
}

TEST_CASE("rows: leaf pointers step along the innermost outer dimension and restart after a carry") {
  int const n = 2 * float_lanes + 3;
  auto A = kiln::randn<float>({3, 4, n}, 31);
  auto A_swapped = kiln::randn<float>({4, 3, n}, 32);
  auto At = kiln::permute(A_swapped, {1, 0, 2});  // [3, 4, n], its outer dimensions swapped
  auto b = kiln::randn<float>({4, 1}, 33);                                 // broadcast along the rows
  auto c = kiln::randn<float>({3, 1, n}, 34);                               // repeats over dimension 1
  auto expected = [&](int i, int j, int k) { return std::max(A(i, j, k) + At(i, j, k) * b(j, 0), 0.f) * c(i, 0, k); };
  auto e = kiln::relu(A + At * b) * c;
  SUBCASE("into a contiguous destination, both policies") {
    for (int policy : {0, 1}) {
      kiln::tensor<float, 3> out = kiln::zeros<float>({3, 4, n});
      if (policy == 0) kiln::eval(kiln::seq, out, e);
      else kiln::eval(kiln::simd, out, e);
      CAPTURE(policy);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j)
          for (int k = 0; k < n; ++k) CHECK(out(i, j, k) == doctest::Approx(expected(i, j, k)));
    }
  }
  SUBCASE("into a strided view with an extent-1 dimension between the outer ones") {
    auto big = kiln::full<float>({3, 1, 8, n + 5}, -7.f);
    auto dst = kiln::slice(kiln::slice(big, 2, 1, 8, 2), 3, 2, n + 2);  // [3, 1, 4, n], padded rows
    auto e4 = kiln::relu(kiln::unsqueeze(A, 1) + kiln::unsqueeze(At, 1) * b) * kiln::unsqueeze(c, 1);
    dst = e4;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 8; ++j)
        for (int k = 0; k < n + 5; ++k) {
          bool const inside = j % 2 == 1 && k >= 2 && k < n + 2;
          CAPTURE(i);
          CAPTURE(j);
          CAPTURE(k);
          if (inside) CHECK(big(i, 0, j, k) == doctest::Approx(expected(i, j / 2, k - 2)));
          else CHECK(big(i, 0, j, k) == -7.f);
        }
  }
  SUBCASE("a column broadcast over many rows, as a reduction reads it") {
    auto M = kiln::randn<float>({37, n}, 35);
    auto col = kiln::randn<float>({37, 1}, 36);
    kiln::tensor<float, 1> sums = kiln::sum(M * col, 1);
    for (int i = 0; i < 37; ++i) {
      double want = 0;
      for (int k = 0; k < n; ++k) want += double(M(i, k)) * double(col(i, 0));
      CHECK(sums(i) == doctest::Approx(want).epsilon(1e-5));
    }
  }
}

TEST_CASE("rank-2 rows with broadcast leaves, at every row length and misalignment, in padded rows") {
  // kiln::simd runs rank-2 rows that do not merge, each leaf contiguous or broadcast along them,
  // without a plan (run_two_dimensional in eval/kernels.hpp), a single such row too; kiln::seq's
  // plan is the reference.
  using shape2 = std::array<kiln::index_t, 2>;
  int const rows = 3;
  auto const c = kiln::randn<float>({rows, 1}, 42);
  for (int r : {rows, 1}) {
    auto const cr = kiln::slice(c, 0, 0, r);
    for (int offset : {0, 1}) {
      for (int n = 1; n <= 3 * float_lanes + 1; ++n) {
        for (int pitch : {n, n + 3}) {  // contiguous rows, or rows further apart than their length
          std::size_t const size = std::size_t(r * pitch + offset + 1);
          std::vector<float> in(size), out(size, -9.f);
          for (std::size_t i = 0; i < size; ++i) in[i] = 0.125f * float(i % 29) - 1.5f;
          auto const A = kiln::view(std::as_const(in).data() + offset, shape2{r, n}, shape2{pitch, 1});
          auto const b = kiln::randn<float>({n}, 41);
          auto const t = kiln::randn<float>({1, n}, 43);
          auto const e = kiln::relu(A + b) * cr - t * 0.5f;
          kiln::tensor<float, 2> ref = kiln::zeros<float>({r, n});
          kiln::eval(kiln::seq, ref, e);
          kiln::eval(kiln::simd, kiln::view(out.data() + offset, shape2{r, n}, shape2{pitch, 1}), e);
          CAPTURE(r);
          CAPTURE(offset);
          CAPTURE(n);
          CAPTURE(pitch);
          for (int k = 0; k < int(size); ++k) {
            int const i = (k - offset) / pitch, j = (k - offset) % pitch;
            CAPTURE(k);
            if (k >= offset && i < r && j < n) CHECK(out[std::size_t(k)] == doctest::Approx(ref(i, j)));
            else CHECK(out[std::size_t(k)] == -9.f);  // nothing written between or around the rows
          }
        }
      }
    }
  }
  SUBCASE("in place: the destination is also a leaf, at every tail length") {
    for (kiln::index_t n = 1; n <= 2 * float_lanes + 1; ++n) {
      auto const b = kiln::randn<float>({n}, 48);
      kiln::tensor<float, 2> X = kiln::randn<float>({rows, n}, 49);
      kiln::tensor<float, 2> const before = X;
      X = kiln::relu(X + b) * c;
      CAPTURE(n);
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < n; ++j) CHECK(X(i, j) == std::max(before(i, j) + b(j), 0.f) * c(i, 0));
    }
  }
  SUBCASE("every mix of contiguous and broadcast leaves, one to four of them, at every tail length") {
    // The mixed rows loop (simd_rows in eval/kernels.hpp) reads each leaf by its stride along the
    // rows, a load for 1 and a splat for 0, over full batches, the unrolled ones and the tail.
    // Leaf i is a column [r, 1], broadcast along the rows, where bit i of the mix is set, and
    // [r, n] otherwise.
    for (kiln::index_t r : {1, 3})
      for (kiln::index_t n = 1; n <= 2 * float_lanes + 1; ++n)
        for (unsigned mix = 0; mix < 16; ++mix) {
          std::array<kiln::tensor<float, 2>, 4> L;
          for (unsigned i = 0; i < 4; ++i) L[i] = kiln::randn<float>({r, (mix >> i) & 1u ? 1 : n}, 60 + i);
          auto const matches_seq = [&](auto const& e) {
            kiln::tensor<float, 2> got = kiln::zeros<float>({r, n}), want = kiln::zeros<float>({r, n});
            kiln::eval(kiln::simd, got, e);
            kiln::eval(kiln::seq, want, e);
            for (int i = 0; i < r; ++i)
              for (int j = 0; j < n; ++j) CHECK(got(i, j) == doctest::Approx(want(i, j)));
          };
          CAPTURE(r);
          CAPTURE(n);
          CAPTURE(mix);
          if (mix < 2) matches_seq(kiln::relu(L[0]) * 2.f);
          if (mix < 4) matches_seq(L[0] - L[1] * 0.5f);
          if (mix < 8) matches_seq(kiln::relu(L[0] + L[1]) * L[2]);
          matches_seq((L[0] - L[1]) * (L[2] + L[3]));
        }
  }
  SUBCASE("one flat row with a leaf broadcasting one element, extent-1 dimensions included") {
    kiln::tensor<float, 0> const s = kiln::full<float>(kiln::extents<0>{}, -0.75f);
    auto const one = kiln::full<float>({1, 1}, 2.f);
    for (kiln::index_t r : {1, 2, 3})
      for (kiln::index_t n = 1; n <= 2 * float_lanes + 1; ++n) {
        auto const A = kiln::randn<float>({r, n}, 47);
        auto const e = A * s + one;
        kiln::tensor<float, 2> got = kiln::zeros<float>({r, n}), want = kiln::zeros<float>({r, n});
        kiln::eval(kiln::simd, got, e);
        kiln::eval(kiln::seq, want, e);
        CAPTURE(r);
        CAPTURE(n);
        for (int i = 0; i < r; ++i)
          for (int j = 0; j < n; ++j) CHECK(got(i, j) == doctest::Approx(want(i, j)));
      }
  }
  SUBCASE("one flat row without a broadcast: same-shape leaves, in place and unaligned, every tail") {
    for (kiln::index_t r : {1, 2, 3})
      for (kiln::index_t n = 1; n <= 2 * float_lanes + 1; ++n) {
        auto const A = kiln::randn<float>({r, n}, 50);
        auto const storage = kiln::randn<float>({r * n + 1}, 51);
        auto const B = kiln::view(storage.data() + 1, shape2{r, n});  // one float past the alignment
        kiln::tensor<float, 2> X = kiln::randn<float>({r, n}, 52);
        kiln::tensor<float, 2> const before = X;
        kiln::tensor<float, 2> got = kiln::zeros<float>({r, n});
        got = A * B - A;
        X = X * X - B;  // in place: each element read before it is written
        CAPTURE(r);
        CAPTURE(n);
        for (int i = 0; i < r; ++i)
          for (int j = 0; j < n; ++j) {
            CHECK(got(i, j) == doctest::Approx(A(i, j) * B(i, j) - A(i, j)));
            CHECK(X(i, j) == doctest::Approx(before(i, j) * before(i, j) - B(i, j)));
          }
      }
  }
  SUBCASE("layouts the rows decline: a destination or a leaf strided along the rows") {
    auto const A = kiln::randn<float>({5, 2 * float_lanes + 1}, 44);
    auto const T = kiln::randn<float>({2 * float_lanes + 1, 5}, 45);
    auto const At = kiln::transpose(T);
    auto const col = kiln::randn<float>({5, 1}, 46);
    kiln::tensor<float, 2> out = kiln::zeros<float>({5, 2 * float_lanes + 1});
    out = A * col + At;
    kiln::tensor<float, 2> outT = kiln::zeros<float>({2 * float_lanes + 1, 5});
    kiln::transpose(outT) = A * col;
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 2 * float_lanes + 1; ++j) {
        CHECK(out(i, j) == doctest::Approx(A(i, j) * col(i, 0) + At(i, j)));
        CHECK(outT(j, i) == doctest::Approx(A(i, j) * col(i, 0)));
      }
  }
}

TEST_CASE("to_string lists the tree, to_dot draws it") {
  auto A = kiln::zeros<float>({2, 3});
  auto b = kiln::zeros<float>({3});
  auto e = kiln::tanh(A) * b + A;
  CHECK(kiln::to_string(e) ==
        "%0 = tensor : float[2, 3]\n"
        "%1 = tanh(%0) : float[2, 3]\n"
        "%2 = tensor : float[3]\n"
        "%3 = mul(%1, %2) : float[2, 3]\n"
        "%4 = add(%3, %0) : float[2, 3]\n");
  CHECK(kiln::to_string(kiln::transpose(A) > 0.5f) ==
        "%0 = view : float[3, 2]\n"
        "%1 = scalar 0.5 : float[]\n"
        "%2 = gt(%0, %1) : bool[3, 2]\n");
  auto dot = kiln::to_dot(e);
  CHECK(dot.find("digraph kiln {") == 0);
  CHECK(dot.find("n0 -> n1;") != std::string::npos);
  CHECK(dot.find("n0 -> n4;") != std::string::npos);
  CHECK(dot.find("label=\"%1 tanh\\nfloat[2, 3]\"") != std::string::npos);
}

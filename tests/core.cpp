// tests/core.cpp: kiln/core/: tensors, storage, factories, views, broadcasting and type promotion,
// and assignment of expressions into tensors and views. Every error path checks its whole message.
#include <kiln/kiln.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using kiln::index_t;

namespace {

// The elements of a tensor or view in row-major order, read through operator() so that views are
// checked independently of the evaluation machinery.
template <class X>
auto elements(X const& x) {
  constexpr int R = std::remove_cvref_t<X>::rank;
  using V = typename std::remove_cvref_t<X>::value_type;
  std::vector<V> out;
  if (x.size() == 0) return out;
  std::array<index_t, R> idx{};
  for (;;) {
    out.push_back(std::apply([&](auto... i) { return x(i...); }, idx));
    int d = R - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < x.extent(d)) break;
      idx[d] = 0;
    }
    if (d < 0) return out;
  }
}

template <class T>
std::vector<T> values(std::initializer_list<T> v) {
  return std::vector<T>(v);
}

template <class T>
bool aligned64(T const* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 64 == 0;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
TEST_SUITE("tensor") {

TEST_CASE("construction from nested braces") {
  kiln::tensor<float, 2> m = {{1, 2, 3}, {4, 5, 6}};
  CHECK(m.shape() == kiln::extents<2>{2, 3});
  CHECK(m.size() == 6);
  CHECK(m.strides() == kiln::extents<2>{3, 1});
  CHECK(elements(m) == values<float>({1, 2, 3, 4, 5, 6}));

  kiln::tensor<int, 3> c = {{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}, {{9, 10}, {11, 12}}};
  CHECK(c.shape() == kiln::extents<3>{3, 2, 2});
  CHECK(c(2, 1, 0) == 11);

  kiln::tensor<double, 1> v = {0.5, 1.5};
  CHECK(v.shape() == kiln::extents<1>{2});
  CHECK(elements(v) == values<double>({0.5, 1.5}));

  // Braces hold data, as in torch.tensor: a one-element list is one element, not an extent.
  kiln::tensor<float, 1> one({3});
  CHECK(one.shape() == kiln::extents<1>{1});
  CHECK(one(0) == 3.f);

  // Empty inner lists give zero extents below them.
  kiln::tensor<float, 2> rows_of_nothing = {{}, {}};
  CHECK(rows_of_nothing.shape() == kiln::extents<2>{2, 0});
  kiln::tensor<float, 2> one_empty_row{{}};
  CHECK(one_empty_row.shape() == kiln::extents<2>{1, 0});
}

TEST_CASE("ragged braces throw shape_error naming the dimension") {
  using T2 = kiln::tensor<float, 2>;
  using T3 = kiln::tensor<float, 3>;
  CHECK_THROWS_WITH_AS(T2({{1, 2}, {3}}), "ragged initializer list: dimension 1 has 1 entries where 2 were expected",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(T2({{1, 2}, {}}), "ragged initializer list: dimension 1 has 0 entries where 2 were expected",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(T2({{}, {1}}), "ragged initializer list: dimension 1 has 1 entries where 0 were expected",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(T3({{{1, 2}, {3, 4}}, {{5, 6}, {7}}}),
                       "ragged initializer list: dimension 2 has 1 entries where 2 were expected", kiln::shape_error);
  CHECK_THROWS_WITH_AS(T3({{{1}, {2}}, {{3}}}), "ragged initializer list: dimension 1 has 1 entries where 2 were expected",
                       kiln::shape_error);
}

TEST_CASE("construction from a shape") {
  kiln::tensor<float, 2> z(kiln::extents<2>{2, 3});
  CHECK(z.shape() == kiln::extents<2>{2, 3});
  CHECK(elements(z) == std::vector<float>(6, 0.f));  // zero-filled

  kiln::tensor<double, 3> d;  // default: all extents zero
  CHECK(d.shape() == kiln::extents<3>{0, 0, 0});
  CHECK(d.empty());

  CHECK_THROWS_WITH_AS((kiln::tensor<float, 2>(kiln::extents<2>{-2, 3})), "negative extent in shape [-2, 3]",
                       kiln::shape_error);
  index_t const big = index_t{1} << 40;
  CHECK_THROWS_WITH_AS((kiln::tensor<float, 2>(kiln::extents<2>{big, big})),
                       "shape [1099511627776, 1099511627776] has more elements than index_t can count",
                       kiln::shape_error);
  // Even with a zero extent that makes it empty, as PyTorch (its strides would overflow).
  CHECK_THROWS_WITH_AS((kiln::tensor<float, 3>(kiln::extents<3>{0, big, big})),
                       "shape [0, 1099511627776, 1099511627776] has more elements than index_t can count",
                       kiln::shape_error);
}

TEST_CASE("shapes whose element count overflows index_t throw wherever they arise") {
  index_t const half = index_t{1} << 32;
  kiln::tensor<float, 1> one = {1.f};
  char const* const too_many = "shape [4294967296, 4294967296] has more elements than index_t can count";
  CHECK_THROWS_WITH_AS((kiln::expand(one, {half, half})), too_many, kiln::shape_error);
  // Each operand fits; their broadcast does not. Evaluated into a tensor or reduced, it throws (an
  // existing destination is never that large: assigning to one throws the shape mismatch).
  auto const tall = kiln::expand(one, {half, 1}), wide = kiln::expand(one, {1, half});
  CHECK(tall.size() == half);
  CHECK((tall + wide).shape() == kiln::extents<2>{half, half});
  CHECK_THROWS_WITH_AS(kiln::eval(tall + wide), too_many, kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::sum(kiln::exp(tall) * wide), too_many, kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::amax(tall * wide, kiln::axes<1>), too_many, kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::broadcast_extents(kiln::extents<2>{half, 1}, kiln::extents<2>{1, half})), too_many,
                       kiln::shape_error);
  kiln::tensor<float, 1> const none(kiln::extents<1>{0});
  CHECK(float(kiln::sum(kiln::expand(none, {half, 0}) * tall)) == 0.f);  // empty: nothing to count
  CHECK_THROWS_WITH_AS((kiln::expand(none, {half, half, 0})),
                       "shape [4294967296, 4294967296, 0] has more elements than index_t can count", kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::reshape(none, {half, half, 0})),
                       "cannot reshape [0] to [4294967296, 4294967296, 0]: more elements than index_t can count",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::reshape(none, {0, -1})),
                       "cannot reshape [0] to [0, -1]: the extent -1 could be anything next to an extent of 0",
                       kiln::shape_error);
  CHECK(kiln::reshape(none, {-1, 4}).shape() == kiln::extents<2>{0, 4});
  CHECK(kiln::reshape(none, {half, 0}).shape() == kiln::extents<2>{half, 0});
}

TEST_CASE("rank 0 tensors hold one element") {
  kiln::tensor<float, 0> s;
  CHECK(s.size() == 1);
  CHECK_FALSE(s.empty());
  CHECK(s.item() == 0.f);
  CHECK(kiln::shape_string(s.shape()) == "[]");

  kiln::tensor<float, 0> v = 2.5f;
  CHECK(v() == 2.5f);
  CHECK(v.at() == 2.5f);
  CHECK(v.item() == 2.5f);
  v = 4.f;  // fills
  CHECK(v.item() == 4.f);
  v() = 5.f;
  CHECK(v.item() == 5.f);

  kiln::tensor<float, 0> copy = v;
  copy() = 1.f;
  CHECK(v.item() == 5.f);

  // Moving a rank-0 tensor copies its element: the source keeps its one element.
  kiln::tensor<float, 0> moved = std::move(v);
  CHECK(moved.item() == 5.f);
  CHECK(v.size() == 1);
  CHECK(v.data() != nullptr);
  v = std::move(moved);
  CHECK(v.item() == 5.f);

  // A rank-0 expression evaluates to a rank-0 tensor.
  kiln::tensor<double, 0> e = v * 2.0;
  CHECK(e.item() == 10.0);
}

TEST_CASE("zero-size extents") {
  kiln::tensor<float, 2> z(kiln::extents<2>{0, 3});
  CHECK(z.size() == 0);
  CHECK(z.empty());
  CHECK(z.extent(1) == 3);
  CHECK(elements(z).empty());

  kiln::tensor<float, 2> copy = z;
  CHECK(copy.shape() == kiln::extents<2>{0, 3});

  // Assigning into an empty tensor is a no-op, also with broadcasting.
  z = 7.f;
  z = kiln::tensor<float, 1>{1, 2, 3};
  CHECK(z.empty());

  CHECK_THROWS_WITH_AS(z.at(0, 0), "kiln: index 0 out of range for dimension 0 of shape [0, 3]", std::out_of_range);
  CHECK_THROWS_WITH_AS(z.item(), "item() needs exactly one element, not shape [0, 3]", kiln::shape_error);
}

TEST_CASE("copy is deep") {
  kiln::tensor<float, 2> a = {{1, 2}, {3, 4}};
  kiln::tensor<float, 2> b = a;
  CHECK(b.data() != a.data());
  b(0, 0) = 100.f;
  CHECK(a(0, 0) == 1.f);
  CHECK(elements(b) == values<float>({100, 2, 3, 4}));

  kiln::tensor<float, 2> c(kiln::extents<2>{5, 5});
  c = a;  // copy assignment replaces shape and contents
  CHECK(c.shape() == kiln::extents<2>{2, 2});
  CHECK(elements(c) == values<float>({1, 2, 3, 4}));
  c(1, 1) = -1.f;
  CHECK(a(1, 1) == 4.f);

  auto& self = c;
  c = self;  // self-assignment keeps the contents
  CHECK(elements(c) == values<float>({1, 2, 3, -1}));
}

TEST_CASE("move is cheap and leaves the source valid") {
  kiln::tensor<float, 2> a = {{1, 2, 3}, {4, 5, 6}};
  float const* storage = a.data();
  kiln::tensor<float, 2> b = std::move(a);
  CHECK(b.data() == storage);  // no copy
  CHECK(b.shape() == kiln::extents<2>{2, 3});

  // Valid but unspecified: the source's size matches what it holds, it can be assigned, queried
  // and evaluated into, and it can be given new contents.
  CHECK(a.size() == kiln::element_count(a.shape()));
  CHECK(elements(a).size() == static_cast<std::size_t>(a.size()));
  a = 1.f;
  a = kiln::tensor<float, 2>{{7, 8}};
  CHECK(elements(a) == values<float>({7, 8}));

  kiln::tensor<float, 2> c = {{9}};
  float const* b_storage = b.data();
  c = std::move(b);
  CHECK(c.data() == b_storage);  // move assignment steals too
  CHECK(b.size() == kiln::element_count(b.shape()));
  b = c;
  CHECK(elements(b) == values<float>({1, 2, 3, 4, 5, 6}));

  auto& self = c;
  c = std::move(self);  // self-move keeps a valid tensor
  CHECK(c.size() == kiln::element_count(c.shape()));
}

TEST_CASE("element access; at() throws std::out_of_range naming index, dimension and shape") {
  kiln::tensor<int, 2> m = {{1, 2, 3}, {4, 5, 6}};
  CHECK(m(1, 2) == 6);
  m(1, 2) = 60;
  CHECK(m.at(1, 2) == 60);
  m.at(0, 0) = 10;
  CHECK(m(0, 0) == 10);
  kiln::tensor<int, 2> const& cm = m;
  CHECK(cm(0, 1) == 2);
  CHECK(cm.at(0, 1) == 2);

  CHECK_THROWS_WITH_AS(m.at(1, 3), "kiln: index 3 out of range for dimension 1 of shape [2, 3]", std::out_of_range);
  CHECK_THROWS_WITH_AS(m.at(2, 0), "kiln: index 2 out of range for dimension 0 of shape [2, 3]", std::out_of_range);
  CHECK_THROWS_WITH_AS(cm.at(-1, 0), "kiln: index -1 out of range for dimension 0 of shape [2, 3]", std::out_of_range);
  CHECK_THROWS_WITH_AS(m.item(), "item() needs exactly one element, not shape [2, 3]", kiln::shape_error);

  kiln::tensor<double, 3> one = {{{42}}};
  CHECK(one.item() == 42.0);
}

TEST_CASE("data() is aligned to 64 bytes") {
  CHECK(kiln::storage_alignment == 64);
  for (index_t n : {1, 3, 7, 16, 17, 1000}) {
    CAPTURE(n);
    CHECK(aligned64(kiln::zeros<float>({n}).data()));
    CHECK(aligned64(kiln::empty<double>({n, 3}).data()));
    CHECK(aligned64(kiln::ones<std::int8_t>({n}).data()));
    CHECK(aligned64(kiln::full<bool>({2, n}, true).data()));
    CHECK(aligned64(kiln::rand<float>({n}).data()));
  }
  kiln::tensor<float, 1> a = {1, 2, 3};
  kiln::tensor<float, 1> copy = a;
  CHECK(aligned64(copy.data()));
  kiln::tensor<double, 1> evaluated = a * 2.0;
  CHECK(aligned64(evaluated.data()));
  kiln::tensor<float, 0> scalar;
  CHECK(aligned64(scalar.data()));
}

TEST_CASE("an expression built from an rvalue tensor owns it") {
  auto e = kiln::exp(kiln::zeros<float>({4}));
  auto f = kiln::tensor<float, 1>{1, 2, 3, 4} * 2.f;
  // Reuse the heap: a dangling leaf would now read these values (and ASan would report it).
  std::vector<kiln::tensor<float, 1>> scribble;
  for (int i = 0; i < 8; ++i) scribble.push_back(kiln::full<float>({4}, 123.f));
  kiln::tensor<float, 1> r = e;
  CHECK(elements(r) == values<float>({1, 1, 1, 1}));
  kiln::tensor<float, 1> g = f;
  CHECK(elements(g) == values<float>({2, 4, 6, 8}));

  auto copy = e;  // copying the expression shares the owned tensor
  kiln::tensor<float, 1> r2 = copy + 1.f;
  CHECK(elements(r2) == values<float>({2, 2, 2, 2}));
}

}  // TEST_SUITE("tensor")

// ------------------------------------------------------------------------------------------------
TEST_SUITE("factories") {

TEST_CASE("zeros ones full empty: shapes and values") {
  auto z = kiln::zeros<float>({2, 3});
  static_assert(std::is_same_v<decltype(z), kiln::tensor<float, 2>>);
  CHECK(z.shape() == kiln::extents<2>{2, 3});
  CHECK(elements(z) == std::vector<float>(6, 0.f));

  auto o = kiln::ones<int>({4});
  CHECK(elements(o) == values<int>({1, 1, 1, 1}));

  auto f = kiln::full<double>({2, 1, 2}, 2.5);
  CHECK(f.shape() == kiln::extents<3>{2, 1, 2});
  CHECK(elements(f) == std::vector<double>(4, 2.5));

  auto e = kiln::empty<float>({3, 0});
  CHECK(e.shape() == kiln::extents<2>{3, 0});
  CHECK(e.empty());

  auto from_extents = kiln::ones<float>(kiln::extents<2>{1, 2});
  CHECK(elements(from_extents) == values<float>({1, 1}));
  auto rank0 = kiln::full<float>(kiln::extents<0>{}, 3.f);
  CHECK(rank0.item() == 3.f);

  CHECK_THROWS_WITH_AS(kiln::zeros<float>({2, -1}), "negative extent in shape [2, -1]", kiln::shape_error);
}

TEST_CASE("rand: [0, 1), reproducible per seed, different across seeds") {
  auto a = kiln::rand<float>({1000}, 7);
  auto b = kiln::rand<float>({1000}, 7);
  auto c = kiln::rand<float>({1000}, 8);
  CHECK(elements(a) == elements(b));
  CHECK(elements(a) != elements(c));
  CHECK(elements(kiln::rand<float>({10})) == elements(kiln::rand<float>({10}, 0)));  // default seed 0

  auto u = kiln::rand<double>({100000}, 3);
  double sum = 0;
  double lo = 1, hi = 0;
  for (double x : elements(u)) {
    sum += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(sum / 1e5 == doctest::Approx(0.5).epsilon(0.01));
  auto const fa = elements(a);
  CHECK(*std::min_element(fa.begin(), fa.end()) >= 0.f);
  CHECK(*std::max_element(fa.begin(), fa.end()) < 1.f);

  auto shaped = kiln::rand<float>({3, 4}, 1);
  CHECK(shaped.shape() == kiln::extents<2>{3, 4});
}

TEST_CASE("rand: SplitMix64 bits, the same on every platform") {
  // The first outputs of splitmix64.c from state 0: 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4,
  // 0x06c45d188009454f; float keeps the top 24 bits, double the top 53.
  CHECK(elements(kiln::rand<float>({3}, 0)) ==
        values<float>({0xe220a8p-24f, 0x6e789ep-24f, 0x06c45dp-24f}));
  CHECK(elements(kiln::rand<double>({3}, 0)) ==
        values<double>({0x1c4415072f63b9p-53, 0xdcf13cd54372cp-53, 0xd88ba3100128p-53}));
  kiln::detail::seeded_stream s(0);
  CHECK(s.next() == 0xe220a8397b1dcdafu);
  CHECK(s.next() == 0x6e789e6aa1b965f4u);
  CHECK(s.next() == 0x06c45d188009454fu);

  // The conversions at the ends of the range: all-ones bits stay below 1 (a double in [0, 1)
  // rounded to float would give 1.0f), the radius draw of randn is never 0.
  std::uint64_t const ones = ~std::uint64_t{0};
  CHECK(kiln::detail::seeded_stream::unit<float>(ones) == 1.f - 0x1p-24f);
  CHECK(kiln::detail::seeded_stream::unit<double>(ones) == 1.0 - 0x1p-53);
  CHECK(kiln::detail::seeded_stream::unit<float>(0) == 0.f);
  CHECK(kiln::detail::seeded_stream::open_unit(0) == 0x1p-53);
  CHECK(kiln::detail::seeded_stream::open_unit(ones) == 1.0);

  // Neighbouring seeds give unrelated streams, not shifted copies of one another.
  auto const s0 = elements(kiln::rand<double>({64}, 0));
  auto const s1 = elements(kiln::rand<double>({64}, 1));
  for (double x : s0) CHECK(std::find(s1.begin(), s1.end(), x) == s1.end());
}

TEST_CASE("randn: mean 0, std 1, reproducible per seed") {
  auto a = kiln::randn<double>({100000}, 42);
  CHECK(elements(a) == elements(kiln::randn<double>({100000}, 42)));
  CHECK(elements(a) != elements(kiln::randn<double>({100000}, 43)));
  double sum = 0, sq = 0;
  for (double x : elements(a)) {
    sum += x;
    sq += x * x;
  }
  REQUIRE(std::isfinite(sq));
  double const mean = sum / 1e5;
  double const sd = std::sqrt(sq / 1e5 - mean * mean);
  CHECK(std::abs(mean) < 0.02);  // standard error 0.003
  CHECK(std::abs(sd - 1.0) < 0.02);
  // Tails: P(|x| > 3) = 0.0027, so 270 expected (standard deviation 16); nothing beyond 8.6,
  // the largest radius the 53-bit draw can give.
  int beyond3 = 0;
  double largest = 0;
  for (double x : elements(a)) {
    beyond3 += std::abs(x) > 3;
    largest = std::max(largest, std::abs(x));
  }
  CHECK(largest < 8.6);
  CHECK(beyond3 > 190);
  CHECK(beyond3 < 350);

  auto f = kiln::randn<float>({5, 7}, 1);
  CHECK(f.shape() == kiln::extents<2>{5, 7});
  auto odd = kiln::randn<float>({3}, 1);  // an odd count uses half of a Box-Muller pair
  CHECK(odd(0) == f(0, 0));
}

TEST_CASE("arange") {
  CHECK(elements(kiln::arange(5)) == values<int>({0, 1, 2, 3, 4}));
  CHECK(elements(kiln::arange(2, 5)) == values<int>({2, 3, 4}));
  CHECK(elements(kiln::arange(0, 10, 3)) == values<int>({0, 3, 6, 9}));
  CHECK(elements(kiln::arange(10, 0, -3)) == values<int>({10, 7, 4, 1}));
  CHECK(elements(kiln::arange(5.0, 0.0, -1.5)) == values<double>({5.0, 3.5, 2.0, 0.5}));
  CHECK(elements(kiln::arange(0.0, 1.0, 0.25)) == values<double>({0, 0.25, 0.5, 0.75}));
  // Float steps: the count is ceil((stop - start) / step), as in PyTorch (10 here, not 11).
  auto tenths = kiln::arange(0.f, 1.f, 0.1f);
  REQUIRE(tenths.size() == 10);
  CHECK(tenths(9) == doctest::Approx(0.9));
  CHECK(kiln::arange(-1.0, 1.0, 0.5).size() == 4);

  // Empty when start == stop; a step leading away from stop is an error, as in PyTorch.
  CHECK(kiln::arange(3.0, 3.0).size() == 0);
  CHECK(kiln::arange(0).size() == 0);
  CHECK(kiln::arange(7, 7, -2).size() == 0);
  char const* const away = "arange: the step's sign leads away from stop";
  CHECK_THROWS_WITH_AS(kiln::arange(5, 0), away, kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::arange(0, 5, -1), away, kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::arange(-1), away, kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::arange(1.0, 0.5, 0.25), away, kiln::shape_error);

  // Integers count exactly, past 2^53 and up to the ends of the type (PyTorch's values).
  std::int64_t const big = (std::int64_t{1} << 53) + 1, top = std::numeric_limits<std::int64_t>::max();
  CHECK(elements(kiln::arange<std::int64_t>(big, big + 4)) == values<std::int64_t>({big, big + 1, big + 2, big + 3}));
  CHECK(elements(kiln::arange<std::int64_t>(top - 3, top)) == values<std::int64_t>({top - 3, top - 2, top - 1}));
  std::int64_t const bottom = std::numeric_limits<std::int64_t>::min();
  CHECK(elements(kiln::arange<std::int64_t>(top, bottom, bottom)) == values<std::int64_t>({top, -1}));
  CHECK(kiln::arange<std::int64_t>(bottom, top, top).size() == 3);  // bottom, -1, top - 1
  CHECK(elements(kiln::arange<std::int8_t>(-128, 127, 100)) == values<std::int8_t>({-128, -28, 72}));
  CHECK(elements(kiln::arange<std::uint8_t>(250, 255, 2)) == values<std::uint8_t>({250, 252, 254}));
  CHECK_THROWS_WITH_AS(kiln::arange<std::uint64_t>(0, ~std::uint64_t{0}), "arange: the range is too long",
                       kiln::shape_error);

  CHECK_THROWS_WITH_AS(kiln::arange(0, 5, 0), "arange: step must not be zero", kiln::shape_error);
  double const inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS(kiln::arange(0.0, inf), "arange: the range is infinite, NaN or too long", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::arange(0.0, std::nan("")), "arange: the range is infinite, NaN or too long",
                       kiln::shape_error);
}

TEST_CASE("linspace") {
  CHECK(elements(kiln::linspace(0.0, 1.0, 5)) == values<double>({0, 0.25, 0.5, 0.75, 1}));
  CHECK(kiln::linspace(0.f, 1.f, 0).size() == 0);
  // One point is `start`, as in PyTorch and NumPy.
  CHECK(elements(kiln::linspace(2.f, 10.f, 1)) == values<float>({2.f}));
  CHECK(elements(kiln::linspace(2.f, 10.f, 2)) == values<float>({2.f, 10.f}));
  CHECK(elements(kiln::linspace(1.0, -1.0, 3)) == values<double>({1, 0, -1}));

  // Exact endpoints, even where start + (n - 1) * step would round past them.
  for (index_t n : {3, 7, 10, 11, 100, 1001}) {
    auto l = kiln::linspace(0.1f, 0.7f, n);
    CAPTURE(n);
    CHECK(l(0) == 0.1f);
    CHECK(l(n - 1) == 0.7f);
    auto const e = elements(l);
    CHECK(std::adjacent_find(e.begin(), e.end(), std::greater_equal<>{}) == e.end());  // increasing
  }
  CHECK_THROWS_WITH_AS(kiln::linspace(0.f, 1.f, -1), "linspace: steps must not be negative", kiln::shape_error);
}

}  // TEST_SUITE("factories")

// ------------------------------------------------------------------------------------------------
TEST_SUITE("views of user memory") {

TEST_CASE("pointer and shape") {
  std::vector<float> buffer = {0, 1, 2, 3, 4, 5};
  auto v = kiln::view(buffer.data(), {2, 3});
  static_assert(std::is_same_v<decltype(v), kiln::tensor_view<float, 2>>);
  CHECK(v.shape() == kiln::extents<2>{2, 3});
  CHECK(v.strides() == kiln::extents<2>{3, 1});
  CHECK(v.data() == buffer.data());
  CHECK(v(1, 0) == 3.f);
  CHECK(v.is_contiguous());

  v(1, 2) = 50.f;  // writes the user's memory
  CHECK(buffer[5] == 50.f);
  v = 9.f;
  CHECK(buffer == std::vector<float>(6, 9.f));

  // Explicit strides: a column-major reading, and a reversed one.
  std::vector<int> ints = {0, 1, 2, 3, 4, 5};
  auto col_major = kiln::view(ints.data(), kiln::extents<2>{2, 3}, kiln::extents<2>{1, 2});
  CHECK(elements(col_major) == values<int>({0, 2, 4, 1, 3, 5}));
  CHECK_FALSE(col_major.is_contiguous());
  auto reversed = kiln::view(ints.data() + 5, kiln::extents<1>{6}, kiln::extents<1>{-1});
  CHECK(elements(reversed) == values<int>({5, 4, 3, 2, 1, 0}));

  float const* cptr = buffer.data();
  auto ro = kiln::view(cptr, {6});
  static_assert(std::is_same_v<decltype(ro), kiln::tensor_view<float const, 1>>);
  CHECK(ro(5) == 9.f);
}

TEST_CASE("std::span and std::vector") {
  std::vector<double> data = {1, 2, 3, 4};
  auto from_span = kiln::view(std::span<double>(data));
  static_assert(std::is_same_v<decltype(from_span), kiln::tensor_view<double, 1>>);
  from_span(0) = 10;
  CHECK(data[0] == 10);

  // (8 elements: with 3, g++ -O2 -march=native warns -Warray-bounds in eval/kernels.hpp's vector
  // loop, which it cannot see is skipped; reported.)
  std::array<double, 8> fixed{};
  auto from_fixed = kiln::view(std::span<double, 8>(fixed));
  CHECK(from_fixed.shape() == kiln::extents<1>{8});
  from_fixed = 0.5;
  CHECK(fixed == std::array<double, 8>{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5});

  auto from_const_span = kiln::view(std::span<double const>(data));
  static_assert(std::is_same_v<decltype(from_const_span), kiln::tensor_view<double const, 1>>);

  auto from_vector = kiln::view(data);
  static_assert(std::is_same_v<decltype(from_vector), kiln::tensor_view<double, 1>>);
  CHECK(from_vector.data() == data.data());
  from_vector = kiln::tensor<double, 1>{4, 3, 2, 1};  // writing through the view writes the vector
  CHECK(data == std::vector<double>{4, 3, 2, 1});

  std::vector<double> const& cdata = data;
  auto read_only = kiln::view(cdata);
  static_assert(std::is_same_v<decltype(read_only), kiln::tensor_view<double const, 1>>);
  CHECK(elements(read_only) == data);

  // A view of user memory takes part in expressions like a tensor.
  kiln::tensor<double, 1> doubled = read_only * 2.0;
  CHECK(elements(doubled) == values<double>({8, 6, 4, 2}));
  kiln::view(data) = read_only + 1.0;  // reads and writes the same memory element for element
  CHECK(data == std::vector<double>{5, 4, 3, 2});

  std::vector<float> empty_vector;
  CHECK(kiln::view(empty_vector).empty());
}

}  // TEST_SUITE("views of user memory")

// ------------------------------------------------------------------------------------------------
TEST_SUITE("views of tensors") {

TEST_CASE("slice") {
  auto t = kiln::tensor<int, 1>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  CHECK(elements(kiln::slice(t, 0, 2, 5)) == values<int>({2, 3, 4}));
  CHECK(elements(kiln::slice(t, 0, 1, 8, 3)) == values<int>({1, 4, 7}));
  CHECK(elements(kiln::slice(t, 0, 0, 10, 4)) == values<int>({0, 4, 8}));
  // Negative positions count from the end.
  CHECK(elements(kiln::slice(t, 0, -3, 10)) == values<int>({7, 8, 9}));
  CHECK(elements(kiln::slice(t, 0, -4, -1, 2)) == values<int>({6, 8}));
  CHECK(elements(kiln::slice(t, -1, 8, 100)) == values<int>({8, 9}));  // negative dim
  // Out-of-range positions clamp.
  CHECK(elements(kiln::slice(t, 0, -100, 2)) == values<int>({0, 1}));
  CHECK(elements(kiln::slice(t, 0, 8, 100)) == values<int>({8, 9}));
  // Empty results.
  CHECK(kiln::slice(t, 0, 5, 5).size() == 0);
  CHECK(kiln::slice(t, 0, 7, 3).size() == 0);
  CHECK(kiln::slice(t, 0, 10, 12).size() == 0);
  CHECK(kiln::slice(t, 0, 100, 200).extent(0) == 0);
  CHECK(kiln::slice(t, 0, 0, 10, std::numeric_limits<index_t>::max()).extent(0) == 1);  // no overflow

  // A slice is a view: it writes the tensor.
  kiln::slice(t, 0, 0, 10, 2) = 0;
  CHECK(elements(t) == values<int>({0, 1, 0, 3, 0, 5, 0, 7, 0, 9}));

  kiln::tensor<float, 2> m = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}};
  auto cols = kiln::slice(m, 1, 1, 4, 2);
  CHECK(cols.shape() == kiln::extents<2>{3, 2});
  CHECK(elements(cols) == values<float>({1, 3, 5, 7, 9, 11}));
  CHECK(elements(kiln::slice(cols, 0, 1, 3)) == values<float>({5, 7, 9, 11}));  // slice of a slice
  kiln::tensor<float, 2> const& cm = m;
  static_assert(std::is_same_v<decltype(kiln::slice(cm, 0, 0, 1)), kiln::tensor_view<float const, 2>>);

  CHECK_THROWS_WITH_AS(kiln::slice(t, 0, 0, 5, 0), "slice: step must be positive, not 0", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::slice(t, 0, 5, 0, -1), "slice: step must be positive, not -1", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::slice(m, 2, 0, 1), "slice: dimension 2 is out of range [-2, 1]", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::slice(m, -3, 0, 1), "slice: dimension -3 is out of range [-2, 1]", kiln::shape_error);
}

TEST_CASE("select") {
  kiln::tensor<float, 3> t = {{{0, 1}, {2, 3}, {4, 5}}, {{6, 7}, {8, 9}, {10, 11}}};
  auto s0 = kiln::select(t, 0, 1);
  static_assert(std::is_same_v<decltype(s0), kiln::tensor_view<float, 2>>);
  CHECK(s0.shape() == kiln::extents<2>{3, 2});
  CHECK(elements(s0) == values<float>({6, 7, 8, 9, 10, 11}));
  CHECK(elements(kiln::select(t, 1, 2)) == values<float>({4, 5, 10, 11}));
  CHECK(elements(kiln::select(t, 2, -1)) == values<float>({1, 3, 5, 7, 9, 11}));  // negative index
  CHECK(elements(kiln::select(t, -1, 0)) == values<float>({0, 2, 4, 6, 8, 10}));  // negative dim

  auto row = kiln::select(kiln::select(t, 0, 0), 0, 2);
  CHECK(elements(row) == values<float>({4, 5}));
  auto scalar = kiln::select(row, 0, 1);
  static_assert(decltype(scalar)::rank == 0);
  CHECK(scalar.item() == 5.f);
  scalar = 50.f;
  CHECK(t(0, 2, 1) == 50.f);

  CHECK_THROWS_WITH_AS(kiln::select(t, 1, 3), "select: index 3 is out of range for dimension 1 of shape [2, 3, 2]",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::select(t, 0, -3), "select: index -3 is out of range for dimension 0 of shape [2, 3, 2]",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::select(t, 3, 0), "select: dimension 3 is out of range [-3, 2]", kiln::shape_error);
}

TEST_CASE("transpose and permute") {
  kiln::tensor<int, 2> m = {{1, 2, 3}, {4, 5, 6}};
  auto tr = kiln::transpose(m);
  CHECK(tr.shape() == kiln::extents<2>{3, 2});
  CHECK(tr.strides() == kiln::extents<2>{1, 3});
  CHECK(elements(tr) == values<int>({1, 4, 2, 5, 3, 6}));
  CHECK_FALSE(tr.is_contiguous());
  CHECK(elements(kiln::transpose(tr)) == elements(m));
  tr(2, 0) = 30;
  CHECK(m(0, 2) == 30);

  kiln::tensor<int, 3> t = {{{0, 1}, {2, 3}, {4, 5}}, {{6, 7}, {8, 9}, {10, 11}}};  // [2, 3, 2]
  auto t02 = kiln::transpose(t, 0, 2);
  CHECK(t02.shape() == kiln::extents<3>{2, 3, 2});
  CHECK(t02(1, 0, 0) == t(0, 0, 1));
  CHECK(elements(kiln::transpose(t, -1, 0)) == elements(t02));
  CHECK(elements(kiln::transpose(t, 1, 1)) == elements(t));

  auto p = kiln::permute(t, {2, 0, 1});
  CHECK(p.shape() == kiln::extents<3>{2, 2, 3});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) CHECK(p(k, i, j) == t(i, j, k));
  CHECK(elements(kiln::permute(t, {-1, 0, -2})) == elements(p));
  CHECK(elements(kiln::permute(t, {0, 1, 2})) == elements(t));

  CHECK_THROWS_WITH_AS(kiln::transpose(t, 0, 3), "transpose: dimension 3 is out of range [-3, 2]", kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::permute(t, {0, 0, 1})),
                       "permute: [0, 0, 1] is not a permutation of the dimensions: dimension 0 appears twice",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::permute(t, {0, 1, 3})),
                       "permute: [0, 1, 3] is not a permutation of the dimensions: dimension 3 is out of range",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::permute(t, {-1, 2, 0})),
                       "permute: [-1, 2, 0] is not a permutation of the dimensions: dimension 2 appears twice",
                       kiln::shape_error);
}

TEST_CASE("reshape") {
  kiln::tensor<int, 2> m = {{1, 2, 3}, {4, 5, 6}};
  auto r = kiln::reshape(m, {3, 2});
  static_assert(std::is_same_v<decltype(r), kiln::tensor_view<int, 2>>);
  CHECK(r.shape() == kiln::extents<2>{3, 2});
  CHECK(elements(r) == values<int>({1, 2, 3, 4, 5, 6}));
  CHECK(r.data() == m.data());

  auto flat = kiln::reshape(m, {-1});
  CHECK(flat.shape() == kiln::extents<1>{6});
  CHECK(kiln::reshape(m, {-1, 2}).shape() == kiln::extents<2>{3, 2});
  CHECK(kiln::reshape(m, {1, -1, 1}).shape() == kiln::extents<3>{1, 6, 1});
  CHECK(kiln::reshape(m, kiln::extents<4>{1, 2, 3, 1}).shape() == kiln::extents<4>{1, 2, 3, 1});
  flat(5) = 60;
  CHECK(m(1, 2) == 60);

  // Contiguous views reshape, and so do non-contiguous ones wherever strides can express the new
  // shape (PyTorch's view; strides as PyTorch 2.15 gives them). reshape never copies.
  CHECK(elements(kiln::reshape(kiln::slice(m, 0, 1, 2), {3})) == values<int>({4, 5, 60}));
  kiln::tensor<int, 1> a = kiln::arange<int>(32);
  auto a48 = kiln::reshape(a, {4, 8});
  auto left = kiln::slice(a48, 1, 0, 4);  // [4, 4], strides [8, 1]
  auto split_inner = kiln::reshape(left, {4, 2, 2});
  CHECK(split_inner.strides() == kiln::extents<3>{8, 2, 1});
  CHECK(split_inner(3, 1, 0) == 26);
  auto split_outer = kiln::reshape(left, {2, 2, 4});
  CHECK(split_outer.strides() == kiln::extents<3>{16, 8, 1});
  CHECK(elements(split_outer) == elements(left));
  CHECK(kiln::reshape(kiln::slice(a48, 1, 0, 1), {4}).strides() == kiln::extents<1>{8});
  CHECK(kiln::reshape(kiln::transpose(m), {3, 1, 2}).strides() == kiln::extents<3>{1, 6, 3});
  CHECK(kiln::reshape(kiln::transpose(m), {1, 3, 2}).strides() == kiln::extents<3>{3, 1, 3});
  CHECK(elements(kiln::reshape(kiln::transpose(m), {1, 3, 2})) == elements(kiln::transpose(m)));
  auto every_other = kiln::reshape(kiln::slice(a, 0, 0, 8, 2), {2, 2});
  CHECK(every_other.strides() == kiln::extents<2>{4, 2});
  CHECK(elements(every_other) == values<int>({0, 2, 4, 6}));
  split_inner(1, 1, 1) = -1;  // a view of a's memory
  CHECK(a(11) == -1);
  // Where a new dimension would straddle two of the view's that do not lie together, no strides
  // can: shape_error, as PyTorch's view raises (its reshape copies).
  CHECK_THROWS_WITH_AS(kiln::reshape(kiln::transpose(m), {6}),
                       "cannot reshape [3, 2] to [6]: the view's strides cannot express that shape (copy it into a "
                       "tensor first)",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::reshape(kiln::slice(m, 1, 0, 2), {4}),
                       "cannot reshape [2, 2] to [4]: the view's strides cannot express that shape (copy it into a "
                       "tensor first)",
                       kiln::shape_error);
  CHECK_THROWS_AS(kiln::reshape(left, {16}), kiln::shape_error);
  CHECK_THROWS_AS(kiln::reshape(left, {2, 8}), kiln::shape_error);
  CHECK_THROWS_AS(kiln::reshape(left, {8, 2}), kiln::shape_error);

  // Size mismatches name both shapes.
  CHECK_THROWS_WITH_AS(kiln::reshape(m, {5}), "cannot reshape [2, 3] to [5]: the sizes differ", kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::reshape(m, {4, 2})), "cannot reshape [2, 3] to [4, 2]: the sizes differ", kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::reshape(m, {4, -1})), "cannot reshape [2, 3] to [4, -1]: the sizes do not divide",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::reshape(m, {-1, -1})), "cannot reshape [2, 3] to [-1, -1]: more than one extent is -1",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::reshape(m, {-2, -3})), "cannot reshape [2, 3] to [-2, -3]: negative extent",
                       kiln::shape_error);

  // Empty tensors reshape freely between shapes of size 0.
  kiln::tensor<float, 2> e(kiln::extents<2>{0, 4});
  CHECK(kiln::reshape(e, {2, 0, 2}).size() == 0);
  CHECK(kiln::reshape(e, {-1, 2}).shape() == kiln::extents<2>{0, 2});
  CHECK(kiln::reshape(kiln::transpose(e), {0}).size() == 0);  // an empty view is contiguous
}

TEST_CASE("views of empty tensors") {
  kiln::tensor<float, 2> e(kiln::extents<2>{0, 4});  // owns no storage
  CHECK(kiln::slice(e, 1, 2, 4).shape() == kiln::extents<2>{0, 2});
  CHECK(kiln::select(e, 1, 3).shape() == kiln::extents<1>{0});
  CHECK(kiln::transpose(e).shape() == kiln::extents<2>{4, 0});
  CHECK(kiln::expand(kiln::unsqueeze(e, 1), {0, 3, 4}).size() == 0);
  kiln::select(e, 1, 3) = 1.f;  // writes nothing
  kiln::tensor<float, 1> from_empty = kiln::select(e, 1, 0);
  CHECK(from_empty.empty());
}

TEST_CASE("unsqueeze") {
  kiln::tensor<int, 2> m = {{1, 2, 3}, {4, 5, 6}};
  CHECK(kiln::unsqueeze(m, 0).shape() == kiln::extents<3>{1, 2, 3});
  CHECK(kiln::unsqueeze(m, 1).shape() == kiln::extents<3>{2, 1, 3});
  CHECK(kiln::unsqueeze(m, 2).shape() == kiln::extents<3>{2, 3, 1});
  CHECK(kiln::unsqueeze(m, -1).shape() == kiln::extents<3>{2, 3, 1});  // as PyTorch: -1 appends
  CHECK(kiln::unsqueeze(m, -3).shape() == kiln::extents<3>{1, 2, 3});
  auto u = kiln::unsqueeze(m, 1);
  CHECK(elements(u) == elements(m));
  CHECK(u(1, 0, 2) == 6);
  CHECK(kiln::unsqueeze(kiln::unsqueeze(m, 0), 0).shape() == kiln::extents<4>{1, 1, 2, 3});
  // An unsqueezed contiguous tensor stays contiguous (so it reshapes).
  CHECK(kiln::unsqueeze(m, 1).is_contiguous());
  CHECK(kiln::unsqueeze(m, 2).is_contiguous());

  kiln::tensor<float, 0> s = 3.f;
  auto s1 = kiln::unsqueeze(s, 0);
  CHECK(s1.shape() == kiln::extents<1>{1});
  CHECK(s1(0) == 3.f);

  CHECK_THROWS_WITH_AS(kiln::slice(s, 0, 0, 1), "slice: a rank-0 tensor has no dimensions", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::transpose(s, 0, 0), "transpose: a rank-0 tensor has no dimensions", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::unsqueeze(m, 3), "unsqueeze: dimension 3 is out of range [-3, 2]", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::unsqueeze(m, -4), "unsqueeze: dimension -4 is out of range [-3, 2]", kiln::shape_error);
}

TEST_CASE("squeeze") {
  kiln::tensor<int, 3> m = {{{1, 2, 3}}, {{4, 5, 6}}};  // [2, 1, 3]
  auto s = kiln::squeeze(m, 1);
  static_assert(std::is_same_v<decltype(s), kiln::tensor_view<int, 2>>);
  CHECK(s.shape() == kiln::extents<2>{2, 3});
  CHECK(elements(s) == elements(m));
  s(1, 2) = 60;  // a view
  CHECK(m(1, 0, 2) == 60);
  CHECK(kiln::squeeze(m, -2).shape() == kiln::extents<2>{2, 3});
  CHECK(kiln::squeeze(kiln::unsqueeze(m, 3), 3).shape() == m.shape());
  // Of a strided view: the other dimensions keep their strides.
  auto t = kiln::squeeze(kiln::transpose(m, 0, 1), 0);
  CHECK(t.shape() == kiln::extents<2>{2, 3});
  CHECK(t.strides() == kiln::extents<2>{3, 1});
  kiln::tensor<float, 1> one = {7.f};
  kiln::tensor<float, 0> scalar = kiln::squeeze(one, 0);
  CHECK(scalar.item() == 7.f);
  // The rank is in the type, so an extent other than 1 is an error (PyTorch leaves it in place).
  CHECK_THROWS_WITH_AS(kiln::squeeze(m, 0), "squeeze: dimension 0 of shape [2, 1, 3] has extent 2, not 1",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::squeeze(m, 3), "squeeze: dimension 3 is out of range [-3, 2]", kiln::shape_error);
  kiln::tensor<float, 2> empty(kiln::extents<2>{0, 1});
  CHECK(kiln::squeeze(empty, 1).shape() == kiln::extents<1>{0});
}

TEST_CASE("expand") {
  kiln::tensor<float, 1> row = {1, 2, 3};
  auto e = kiln::expand(row, {2, 3});
  static_assert(std::is_same_v<decltype(e), kiln::tensor_view<float const, 2>>);  // read-only
  CHECK(e.shape() == kiln::extents<2>{2, 3});
  CHECK(e.strides() == kiln::extents<2>{0, 1});
  CHECK(elements(e) == values<float>({1, 2, 3, 1, 2, 3}));

  kiln::tensor<float, 2> col = {{1}, {2}};
  auto c = kiln::expand(col, {3, 2, 4});
  CHECK(c.strides() == kiln::extents<3>{0, 1, 0});
  CHECK(elements(kiln::select(c, 0, 2)) == values<float>({1, 1, 1, 1, 2, 2, 2, 2}));
  CHECK(kiln::expand(col, {2, 0}).size() == 0);  // 1 stretches to 0
  CHECK(elements(kiln::expand(row, {3})) == elements(row));

  // A stride-0 view is a normal source for expressions.
  kiln::tensor<float, 2> m = kiln::expand(row, {2, 3});
  CHECK(elements(m) == values<float>({1, 2, 3, 1, 2, 3}));

  CHECK_THROWS_WITH_AS((kiln::expand(row, {2, 4})), "cannot expand [3] to [2, 4]", kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::expand(col, {3, 2})), "cannot expand [2, 1] to [3, 2]", kiln::shape_error);
  // -1 keeps the view's extent, as in PyTorch; a new leading dimension has none to keep.
  CHECK(kiln::expand(col, {2, -1}).shape() == kiln::extents<2>{2, 1});
  CHECK(kiln::expand(col, {3, -1, 4}).shape() == kiln::extents<3>{3, 2, 4});
  CHECK(elements(kiln::expand(col, {-1, 2})) == elements(kiln::expand(col, {2, 2})));
  CHECK_THROWS_WITH_AS((kiln::expand(row, {-1, 3})), "cannot expand [3] to [-1, 3]", kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::expand(row, {2, -2})), "cannot expand [3] to [2, -2]", kiln::shape_error);
}

TEST_CASE("views of views and of const tensors") {
  kiln::tensor<float, 2> m = {{0, 1, 2}, {3, 4, 5}};
  kiln::tensor<float, 2> const& cm = m;
  auto cv = kiln::transpose(cm);
  static_assert(std::is_same_v<decltype(cv), kiln::tensor_view<float const, 2>>);
  kiln::tensor_view<float const, 2> converted = m.view();  // mutable converts to read-only
  CHECK(converted.data() == m.data());
  auto chain = kiln::select(kiln::transpose(kiln::slice(m, 1, 1, 3)), 0, 1);
  CHECK(elements(chain) == values<float>({2, 5}));
}

}  // TEST_SUITE("views of tensors")

// ------------------------------------------------------------------------------------------------
TEST_SUITE("broadcasting") {

TEST_CASE("broadcast_extents") {
  CHECK(kiln::broadcast_extents(kiln::extents<2>{3, 4}, kiln::extents<1>{4}) == kiln::extents<2>{3, 4});
  CHECK(kiln::broadcast_extents(kiln::extents<2>{3, 1}, kiln::extents<2>{1, 4}) == kiln::extents<2>{3, 4});
  CHECK(kiln::broadcast_extents(kiln::extents<0>{}, kiln::extents<3>{2, 3, 4}) == kiln::extents<3>{2, 3, 4});
  CHECK(kiln::broadcast_extents(kiln::extents<3>{2, 1, 4}, kiln::extents<0>{}) == kiln::extents<3>{2, 1, 4});
  CHECK(kiln::broadcast_extents(kiln::extents<2>{0, 3}, kiln::extents<1>{3}) == kiln::extents<2>{0, 3});
  CHECK(kiln::broadcast_extents(kiln::extents<1>{0}, kiln::extents<1>{1}) == kiln::extents<1>{0});
  CHECK(kiln::broadcast_extents(kiln::extents<1>{1}, kiln::extents<2>{5, 0}) == kiln::extents<2>{5, 0});
  CHECK(kiln::broadcast_extents<2, 1>({3, 1}, {5}) == kiln::extents<2>{3, 5});

  CHECK_THROWS_WITH_AS(kiln::broadcast_extents(kiln::extents<2>{3, 4}, kiln::extents<1>{5}),
                       "cannot broadcast [3, 4] with [5]", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::broadcast_extents(kiln::extents<1>{2}, kiln::extents<1>{3}), "cannot broadcast [2] with [3]",
                       kiln::shape_error);
  // 0 is an extent like any other: it stretches only from 1.
  CHECK_THROWS_WITH_AS(kiln::broadcast_extents(kiln::extents<1>{0}, kiln::extents<1>{3}), "cannot broadcast [0] with [3]",
                       kiln::shape_error);
}

TEST_CASE("broadcasting through expressions") {
  kiln::tensor<float, 2> a = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}};  // [3, 4]
  kiln::tensor<float, 1> b = {100, 200, 300, 400};                           // [4]
  auto ab = a + b;
  CHECK(ab.shape() == kiln::extents<2>{3, 4});
  kiln::tensor<float, 2> r = ab;
  CHECK(r(2, 3) == 411.f);
  CHECK(r(0, 1) == 201.f);

  kiln::tensor<float, 2> col = {{1}, {2}, {3}};      // [3, 1]
  kiln::tensor<float, 2> row = {{10, 20, 30, 40}};  // [1, 4]
  CHECK((col + row).shape() == kiln::extents<2>{3, 4});
  kiln::tensor<float, 2> outer = col * row;
  CHECK(outer(2, 3) == 120.f);
  CHECK(outer(1, 0) == 20.f);
  kiln::tensor<double, 2> row64 = {{10, 20, 30, 40}};
  kiln::tensor<double, 2> mixed = col * row64;  // promotion and broadcasting together
  CHECK(mixed(2, 3) == 120.0);
  kiln::tensor<float, 2> self = col * col;  // one tensor read twice
  CHECK(elements(self) == values<float>({1, 4, 9}));

  // A node's shape starts from its first operand of full rank: operands after it, of lower rank
  // too, fill in its extents of 1, and the full-rank one need not come first.
  CHECK((b + a).shape() == kiln::extents<2>{3, 4});
  kiln::tensor<float, 2> ba = b + a;
  CHECK(ba(2, 3) == 411.f);
  kiln::tensor<bool, 2> every_other = {{true, false, true, false}};  // [1, 4]
  kiln::tensor<float, 1> fallback = {-1, -2, -3, -4};
  auto picked = kiln::where(every_other, col, fallback);  // [1, 4], [3, 1], [4]
  CHECK(picked.shape() == kiln::extents<2>{3, 4});
  kiln::tensor<float, 2> picked_values = picked;
  CHECK(elements(picked_values) == values<float>({1, -2, 1, -4, 2, -2, 2, -4, 3, -2, 3, -4}));
  kiln::tensor<float, 3> thin = kiln::ones<float>({2, 1, 4});
  CHECK((thin + col).shape() == kiln::extents<3>{2, 3, 4});
  CHECK((col + thin + row).shape() == kiln::extents<3>{2, 3, 4});

  kiln::tensor<float, 0> s = 0.5f;
  CHECK((s + a).shape() == kiln::extents<2>{3, 4});
  CHECK((a * s).shape() == kiln::extents<2>{3, 4});
  kiln::tensor<float, 2> scaled = a * s;
  CHECK(scaled(2, 2) == 5.f);
  kiln::tensor<float, 0> rank0 = s * 4.f;
  CHECK(rank0.item() == 2.f);

  kiln::tensor<float, 2> empty_rows(kiln::extents<2>{0, 3});
  kiln::tensor<float, 1> three = {1, 2, 3};
  CHECK((empty_rows + three).shape() == kiln::extents<2>{0, 3});
  kiln::tensor<float, 2> empty_result = empty_rows + three;
  CHECK(empty_result.shape() == kiln::extents<2>{0, 3});

  kiln::tensor<float, 1> zero(kiln::extents<1>{0});
  kiln::tensor<float, 1> one = {1};
  CHECK((zero + one).shape() == kiln::extents<1>{0});
  CHECK((one + zero).shape() == kiln::extents<1>{0});
  kiln::tensor<float, 1> still_empty = one * zero;
  CHECK(still_empty.empty());

  kiln::tensor<float, 1> two = {1, 2};
  CHECK_THROWS_WITH_AS(three + two, "cannot broadcast [3] with [2]", kiln::shape_error);
  CHECK_THROWS_WITH_AS(zero + two, "cannot broadcast [0] with [2]", kiln::shape_error);
  kiln::tensor<float, 1> five = {1, 2, 3, 4, 5};
  CHECK_THROWS_WITH_AS(a + five, "cannot broadcast [3, 4] with [5]", kiln::shape_error);
  CHECK_THROWS_WITH_AS(five + a, "cannot broadcast [5] with [3, 4]", kiln::shape_error);
  CHECK_THROWS_WITH_AS(thin + five, "cannot broadcast [2, 1, 4] with [5]", kiln::shape_error);
  // The error is thrown where the expression is built, inside a larger tree too.
  CHECK_THROWS_WITH_AS(kiln::exp(a) * 2.f + five, "cannot broadcast [3, 4] with [5]", kiln::shape_error);
  // Three operands: the message names all of them.
  kiln::tensor<bool, 1> mask = {true, false};
  CHECK_THROWS_WITH_AS(kiln::where(mask, a, b), "cannot broadcast [2] with [3, 4] with [4]", kiln::shape_error);
}

}  // TEST_SUITE("broadcasting")

// ------------------------------------------------------------------------------------------------
TEST_SUITE("assignment") {

// C++ leaves a NaN or out-of-range float converted to an integer undefined; kiln stores PyTorch's
// values on x86 (checked against PyTorch 2.15: x.to(dtype) and copy_).
TEST_CASE("floats assigned to integer tensors truncate, and NaN and out of range give PyTorch's values") {
  float const inf = std::numeric_limits<float>::infinity();
  kiln::tensor<float, 1> const x = {3e10f, std::nanf(""), -3e10f, inf, 2.9f, -2.9f, 2147483520.f};
  std::int32_t const min32 = std::numeric_limits<std::int32_t>::min();
  std::int64_t const min64 = std::numeric_limits<std::int64_t>::min();
  auto const check = [&](auto const& policy) {
    kiln::tensor<std::int32_t, 1> i32(x.shape());
    kiln::eval(policy, i32, x);
    CHECK(elements(i32) == values<std::int32_t>({min32, min32, min32, min32, 2, -2, 2147483520}));
    kiln::tensor<std::int64_t, 1> i64(x.shape());
    kiln::eval(policy, i64, x * 1.f);
    CHECK(elements(i64) == values<std::int64_t>({30000001024, min64, -30000001024, min64, 2, -2, 2147483520}));
    kiln::tensor<std::uint8_t, 1> u8(x.shape());
    kiln::eval(policy, u8, x);
    CHECK(elements(u8) == values<std::uint8_t>({0, 0, 0, 0, 2, 254, 128}));
    kiln::tensor<std::int8_t, 1> i8(x.shape());
    kiln::eval(policy, i8, x);
    CHECK(elements(i8) == values<std::int8_t>({0, 0, 0, 0, 2, -2, -128}));
  };
  check(kiln::seq);
  check(kiln::simd);
  check(kiln::par);
  kiln::tensor<double, 1> const d = {-9.3e18, 9.2e18, -0.5};
  kiln::tensor<std::int64_t, 1> from_double(d.shape());
  from_double = d;
  CHECK(elements(from_double) == values<std::int64_t>({min64, 9200000000000000000, 0}));
}

// PyTorch converts to uint8 through int64 (c10's static_cast_with_inter_type), so a double in
// [2^31, 2^63) in magnitude keeps its low byte; int8 and int16 go through int32 (out of range: 0).
// Floats that large are multiples of 256: 0 either way. 37 elements: a SIMD body and a tail.
TEST_CASE("doubles assigned to uint8 keep the low byte of their int64 value, as in PyTorch") {
  double const inf = std::numeric_limits<double>::infinity();
  std::vector<double> const edges = {2147483653.0, -2147483651.0, 4294967303.0, 3000000001.0, 0x1p52 + 1,
                                     -1099511627777.0, 1e19, std::nan(""), -1.5, 300.7, -2.9, 0x1p63, -0x1p63,
                                     inf, 0x1p31 + 259};
  std::vector<std::uint8_t> const u8_want = {5, 253, 7, 1, 1, 255, 0, 0, 255, 44, 254, 0, 0, 0, 3};
  std::vector<std::int8_t> const i8_want = {0, 0, 0, 0, 0, 0, 0, 0, -1, 44, -2, 0, 0, 0, 0};
  std::vector<std::int16_t> const i16_want = {0, 0, 0, 0, 0, 0, 0, 0, -1, 300, -2, 0, 0, 0, 0};
  std::vector<std::uint8_t> const u8_from_float_want = {0, 0, 0, 0, 0, 0, 0, 0, 255, 44, 254, 0, 0, 0, 0};
  kiln::tensor<double, 1> d(kiln::extents<1>{37});
  for (index_t i = 0; i < d.size(); ++i) d(i) = edges[std::size_t(i) % edges.size()];
  kiln::tensor<float, 1> f(d.shape());
  f = d;
  // Every element of x assigned to a T tensor under policy, against want repeated.
  auto const check = [&]<class T>(auto const& policy, auto const& x, std::vector<T> const& want) {
    kiln::tensor<T, 1> out(x.shape());
    kiln::eval(policy, out, x);
    std::vector<T> repeated;
    for (index_t i = 0; i < out.size(); ++i) repeated.push_back(want[std::size_t(i) % want.size()]);
    CHECK(elements(out) == repeated);
  };
  auto const check_all = [&](auto const& policy) {
    check(policy, d, u8_want);
    check(policy, d, i8_want);
    check(policy, d, i16_want);
    check(policy, f, u8_from_float_want);
  };
  check_all(kiln::seq);
  check_all(kiln::simd);
  check_all(kiln::par);
}

TEST_CASE("assigning to a destination of the wrong shape names both shapes") {
  kiln::tensor<float, 1> two = {1, 2};
  kiln::tensor<double, 1> three = {1, 2, 3};
  CHECK_THROWS_WITH_AS(two = three * 2.0, "cannot assign an expression of shape [3] to a destination of shape [2]",
                       kiln::shape_error);
  CHECK(elements(two) == values<float>({1, 2}));  // untouched

  kiln::tensor<float, 2> m(kiln::extents<2>{2, 3});
  kiln::tensor<float, 2> wrong(kiln::extents<2>{3, 3});
  CHECK_THROWS_WITH_AS(m = wrong + 1.f, "cannot assign an expression of shape [3, 3] to a destination of shape [2, 3]",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(m.view() = two, "cannot assign an expression of shape [2] to a destination of shape [2, 3]",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS((kiln::slice(m, 1, 0, 2) = kiln::tensor<float, 1>{1, 2, 3}),
                       "cannot assign an expression of shape [3] to a destination of shape [2, 2]", kiln::shape_error);
  // The destination does not broadcast: an extent-1 destination does not take an extent-3 source.
  kiln::tensor<float, 2> narrow(kiln::extents<2>{2, 1});
  CHECK_THROWS_WITH_AS(narrow = m + 1.f, "cannot assign an expression of shape [2, 3] to a destination of shape [2, 1]",
                       kiln::shape_error);

  // Expressions of lower rank or with extents of 1 broadcast into the destination.
  m = kiln::tensor<float, 1>{1, 2, 3};
  CHECK(elements(m) == values<float>({1, 2, 3, 1, 2, 3}));
  m = kiln::tensor<float, 2>{{10}, {20}} + 0.f;
  CHECK(elements(m) == values<float>({10, 10, 10, 20, 20, 20}));
  // Copy assignment from a tensor of the same type replaces instead of broadcasting.
  m = kiln::tensor<float, 2>{{1}};
  CHECK(m.shape() == kiln::extents<2>{1, 1});
}

TEST_CASE("evaluation into slices, selections and transposed views") {
  kiln::tensor<float, 2> m(kiln::extents<2>{3, 4});
  // Every other column, from a [3, 1] column broadcast along the slice.
  kiln::slice(m, 1, 0, 4, 2) = kiln::tensor<float, 2>{{1}, {2}, {3}} * 10.f;
  CHECK(elements(m) == values<float>({10, 0, 10, 0, 20, 0, 20, 0, 30, 0, 30, 0}));
  kiln::select(m, 0, 1) = kiln::arange(0.f, 4.f) + 0.5f;
  CHECK(elements(kiln::select(m, 0, 1)) == values<float>({0.5f, 1.5f, 2.5f, 3.5f}));
  kiln::select(m, 1, -1) = -1.f;
  CHECK(elements(kiln::select(m, 1, 3)) == values<float>({-1, -1, -1}));

  // A transposed destination: source element (i, j) lands in n(j, i).
  kiln::tensor<float, 2> n(kiln::extents<2>{2, 3});
  kiln::transpose(n) = kiln::tensor<double, 2>{{1, 2}, {3, 4}, {5, 6}} * 1.0;
  CHECK(elements(n) == values<float>({1, 3, 5, 2, 4, 6}));
  kiln::select(kiln::transpose(n), 0, 2) = 0.f;  // a column, through a view of a view
  CHECK(elements(n) == values<float>({1, 3, 0, 2, 4, 0}));

  // A reversed destination (negative stride) over user memory.
  std::vector<float> buffer(5);
  kiln::view(buffer.data() + 4, kiln::extents<1>{5}, kiln::extents<1>{-1}) = kiln::arange(0.f, 5.f) * 1.f;
  CHECK(buffer == values<float>({4, 3, 2, 1, 0}));

  // A strided destination from a strided source.
  kiln::tensor<int, 2> big(kiln::extents<2>{4, 4});
  kiln::tensor<int, 2> src = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  kiln::slice(kiln::slice(big, 0, 0, 4, 2), 1, 1, 4, 2) = kiln::slice(src, 1, 0, 4, 2) * 1;
  CHECK(elements(big) == values<int>({0, 1, 0, 3, 0, 0, 0, 0, 0, 5, 0, 7, 0, 0, 0, 0}));

  // x = x * 2 + 1 reads and writes each element at the same index.
  kiln::tensor<float, 1> x = {1, 2, 3};
  x = x * 2.f + 1.f;
  CHECK(elements(x) == values<float>({3, 5, 7}));
}

TEST_CASE("destinations that overlap their source through another view") {
  kiln::tensor<float, 2> sq = {{1, 2}, {3, 4}};
  sq = kiln::transpose(sq);
  CHECK(elements(sq) == values<float>({1, 3, 2, 4}));
  kiln::transpose(sq) = sq + 0.f;
  CHECK(elements(sq) == values<float>({1, 2, 3, 4}));

  // Shifting within one buffer: view-to-view assignment copies elements, it does not rebind.
  kiln::tensor<int, 1> v = {0, 1, 2, 3, 4};
  kiln::slice(v, 0, 1, 5) = kiln::slice(v, 0, 0, 4);
  CHECK(elements(v) == values<int>({0, 0, 1, 2, 3}));
  kiln::slice(v, 0, 0, 4) = kiln::slice(v, 0, 1, 5);
  CHECK(elements(v) == values<int>({0, 1, 2, 3, 3}));

  std::vector<int> data = {1, 2, 3};
  auto reversed = kiln::view(data.data() + 2, kiln::extents<1>{3}, kiln::extents<1>{-1});
  kiln::view(data) = reversed;
  CHECK(data == values<int>({3, 2, 1}));
}

}  // TEST_SUITE("assignment")

// ------------------------------------------------------------------------------------------------
TEST_SUITE("type promotion") {

TEST_CASE("promote_t follows PyTorch for tensor op tensor") {
  using kiln::promote_t;
  static_assert(std::is_same_v<promote_t<float, double>, double>);
  static_assert(std::is_same_v<promote_t<double, float>, double>);
  static_assert(std::is_same_v<promote_t<float, float>, float>);
  static_assert(std::is_same_v<promote_t<std::int32_t, float>, float>);
  static_assert(std::is_same_v<promote_t<std::int64_t, float>, float>);  // not double
  static_assert(std::is_same_v<promote_t<double, std::int64_t>, double>);
  static_assert(std::is_same_v<promote_t<std::int32_t, std::int64_t>, std::int64_t>);
  static_assert(std::is_same_v<promote_t<std::int8_t, std::int8_t>, std::int8_t>);
  static_assert(std::is_same_v<promote_t<std::int8_t, std::int16_t>, std::int16_t>);  // not int
  static_assert(std::is_same_v<promote_t<std::uint8_t, std::uint8_t>, std::uint8_t>);
  static_assert(std::is_same_v<promote_t<std::uint8_t, std::int8_t>, std::int16_t>);
  static_assert(std::is_same_v<promote_t<std::int8_t, std::uint8_t>, std::int16_t>);
  static_assert(std::is_same_v<promote_t<std::uint8_t, std::int16_t>, std::int16_t>);
  static_assert(std::is_same_v<promote_t<std::uint8_t, std::int32_t>, std::int32_t>);
  static_assert(std::is_same_v<promote_t<std::uint32_t, std::int32_t>, std::int64_t>);  // not uint32
  static_assert(std::is_same_v<promote_t<bool, bool>, bool>);
  static_assert(std::is_same_v<promote_t<bool, std::int32_t>, std::int32_t>);
  static_assert(std::is_same_v<promote_t<std::uint8_t, bool>, std::uint8_t>);
  static_assert(std::is_same_v<promote_t<bool, float>, float>);
  static_assert(std::is_same_v<promote_t<float>, float>);
  static_assert(std::is_same_v<promote_t<bool, std::int8_t, float, double>, double>);
  static_assert(std::is_same_v<promote_t<std::int16_t, bool, std::int32_t>, std::int32_t>);
  CHECK(kiln::type_name<kiln::promote_t<std::uint8_t, std::int8_t>> == "int16");
}

TEST_CASE("weak_promote_t: a C++ scalar does not widen a tensor") {
  using kiln::weak_promote_t;
  static_assert(std::is_same_v<weak_promote_t<float, double>, float>);
  static_assert(std::is_same_v<weak_promote_t<float, int>, float>);
  static_assert(std::is_same_v<weak_promote_t<double, float>, double>);
  static_assert(std::is_same_v<weak_promote_t<std::int32_t, double>, float>);  // int tensor * 2.5
  static_assert(std::is_same_v<weak_promote_t<std::int32_t, std::int64_t>, std::int32_t>);
  static_assert(std::is_same_v<weak_promote_t<std::int8_t, int>, std::int8_t>);
  static_assert(std::is_same_v<weak_promote_t<std::int64_t, bool>, std::int64_t>);
  static_assert(std::is_same_v<weak_promote_t<bool, int>, std::int64_t>);
  static_assert(std::is_same_v<weak_promote_t<bool, bool>, bool>);
  static_assert(std::is_same_v<weak_promote_t<bool, double>, float>);
  static_assert(std::is_same_v<kiln::floating_t<std::int32_t>, float>);
  static_assert(std::is_same_v<kiln::floating_t<double>, double>);
  static_assert(std::is_same_v<kiln::floating_t<bool>, float>);

  // ... and at run time, through expressions.
  kiln::tensor<float, 1> x = {1.5f};
  kiln::tensor<std::int32_t, 1> i = {3};
  auto xs = kiln::eval(x * 2.0);
  static_assert(std::is_same_v<decltype(xs), kiln::tensor<float, 1>>);
  CHECK(xs(0) == 3.f);
  auto is = kiln::eval(i * 2.5);
  static_assert(std::is_same_v<decltype(is), kiln::tensor<float, 1>>);
  CHECK(is(0) == 7.5f);
  auto ii = kiln::eval(i / 2);
  static_assert(std::is_same_v<decltype(ii), kiln::tensor<float, 1>>);
  CHECK(ii(0) == 1.5f);
}

}  // TEST_SUITE("type promotion")

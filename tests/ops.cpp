// tests/ops.cpp: every elementwise op against a scalar reference.
//
// The reference for each op is a lambda written in double with <cmath>, following PyTorch's
// formula and edge semantics (in long double where double itself cancels: logit, gelu; in the
// op's type where PyTorch's own rounding defines the result: fma, addcmul). One generic checker
// (check, check_against) evaluates the kiln expression under kiln::seq and kiln::simd, for float
// and double, and compares every element to the reference rounded to the result type:
//   - NaN-ness, infinities (with their sign) and zeros where the reference is zero must match
//     exactly (the zero's sign too, unless the op's tolerance says the sign is unspecified);
//   - other values within the op's tolerance in ulps (0 for correctly rounded arithmetic, 1-2
//     for transcendental functions, more where a comment says why).
// Every check also runs every length 0..2W+1 (W = xsimd::batch<float>::size, the widest batch),
// so each tail length below the SIMD width is covered, with inputs and output at offsets 0..W-1
// inside std::vectors (unaligned), and verifies that nothing outside the output view is written.
//
// Inputs are edge values (±0, ±1, ±inf, NaN, subnormals, large magnitudes, the ends of each
// domain, rounding ties) plus a grid and pseudo-random values; binary and ternary ops run on the
// cross product of edge values. KILN_TEST_SHOW_ULPS=1 prints the worst ulp error of every check.
#include "ulp.hpp"

#include <doctest/doctest.h>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iomanip>
#include <limits>
#include <memory>
#include <numbers>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

using kiln::index_t;
template <class T>
using lim = std::numeric_limits<T>;

constexpr double inf = lim<double>::infinity();
constexpr double nan = lim<double>::quiet_NaN();

// The widest batch (float lanes): lengths and offsets derived from it cover double's too.
constexpr index_t W = static_cast<index_t>(xsimd::batch<float>::size);

// ---- comparing results ------------------------------------------------------------------------

// How far a result may be from the reference rounded to its type.
struct tol {
  double f = 0;              // ulps for float results
  double d = 0;              // ulps for double results
  bool signed_zero = true;   // a zero must carry the reference's sign
  double subnormal = 0;      // ulps for subnormal (and zero) results, if more than the above
};
constexpr tol exact{};
constexpr tol ulps(double f, double d) { return {f, d, true, 0}; }
constexpr tol any_zero_sign(tol t) { return {t.f, t.d, false, t.subnormal}; }
constexpr tol subnormal_ulps(tol t, double n) { return {t.f, t.d, t.signed_zero, n}; }

using kiln_test::ulp_distance;

template <class T>
bool matches(T got, T want, tol t) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
    if (std::isinf(want) || std::isinf(got)) return got == want;
    if (want == 0 && got == 0) return !t.signed_zero || std::signbit(got) == std::signbit(want);
    double allowed = want == 0 ? 0 : std::is_same_v<T, float> ? t.f : t.d;  // a zero must be exact...
    if (std::fabs(want) < lim<T>::min()) allowed = std::max(allowed, t.subnormal);  // ...unless told otherwise
    return static_cast<double>(ulp_distance(got, want)) <= allowed;
  } else {
    return got == want;
  }
}

template <class T>
std::string show(T v) {
  std::ostringstream s;
  if constexpr (std::is_same_v<T, bool>)
    s << (v ? "true" : "false");
  else if constexpr (std::is_floating_point_v<T>)
    s << std::setprecision(lim<T>::max_digits10) << v;
  else
    s << +v;
  return s.str();
}

// ---- inputs -----------------------------------------------------------------------------------

// A fixed-size array of inputs or outputs, held in a std::vector as a user's buffer would be
// (unpadded, so AddressSanitizer sees any access past the end); bool, whose std::vector has no
// data(), in a plain heap array.
template <class T>
class column {
 public:
  using value_type = T;
  explicit column(index_t n) : size_(std::max<index_t>(n, 0)) {
    if constexpr (std::is_same_v<T, bool>) data_ = std::make_unique<bool[]>(static_cast<std::size_t>(size_));
    else data_.resize(static_cast<std::size_t>(size_));
  }
  template <class U>
  column(std::vector<U> const& v) : column(static_cast<index_t>(v.size())) {
    for (index_t i = 0; i < size_; ++i) data()[i] = static_cast<T>(v[static_cast<std::size_t>(i)]);
  }
  T* data() const noexcept {
    if constexpr (std::is_same_v<T, bool>) return data_.get();
    else return const_cast<T*>(data_.data());
  }
  index_t size() const noexcept { return size_; }
  T& operator[](index_t i) const noexcept { return data()[i]; }
  // A read-only view of [offset, offset + n), through kiln::view as a user would make it.
  kiln::tensor_view<T const, 1> cview(index_t offset, index_t n) const noexcept {
    return kiln::view(static_cast<T const*>(data()) + offset, {n});
  }

 private:
  std::conditional_t<std::is_same_v<T, bool>, std::unique_ptr<bool[]>, std::vector<T>> data_;
  index_t size_;
};

// Values every floating op sees: specials, the ends of the usual domains, rounding ties, large
// magnitudes, and a grid of ordinary values of both signs.
template <class T>
std::vector<T> unary_values() {
  T const eps = lim<T>::epsilon();
  T const pi = std::numbers::pi_v<T>;
  std::vector<T> v = {T(0), -T(0), T(1), T(-1), lim<T>::infinity(), -lim<T>::infinity(), lim<T>::quiet_NaN(),
                      lim<T>::denorm_min(), -lim<T>::denorm_min(), lim<T>::min() / 2, -lim<T>::min() / 2,
                      lim<T>::min(), -lim<T>::min(), lim<T>::max(), lim<T>::lowest(), eps, -eps,
                      1 + eps, -1 - eps, 1 - eps / 2, -1 + eps / 2,  // just outside and inside [-1, 1]
                      T(0.5), T(-0.5), T(1.5), T(-1.5), T(2.5), T(-2.5), T(3.5), T(-3.5),  // ties
                      pi, -pi, pi / 2, -pi / 2};
  for (double g : {1e-30, 1e-10, 1e-5, 1e-3, 0.1, 0.3, 0.7, 0.9, 0.999, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 19.9,
                   20.1, 30.0, 50.0, 88.0, 89.0, 100.0, 104.0, 130.0, 140.0, 700.0, 710.0, 745.0, 1000.0,
                   1030.0, 1070.0, 1e4, 1e10, 1e30}) {
    v.push_back(static_cast<T>(g));
    v.push_back(static_cast<T>(-g));
  }
  if constexpr (std::is_same_v<T, double>)
    for (double g : {1e-300, 1e300}) {
      v.push_back(g);
      v.push_back(-g);
    }
  // Pseudo-random values (a fixed LCG): log-uniform magnitudes in [1e-4, 1e4) and uniform in
  // [-1, 1), both signs, for accuracy away from the special points.
  std::uint64_t state = 0x9E3779B97F4A7C15u;
  auto uniform = [&] {
    state = state * 6364136223846793005u + 1442695040888963407u;
    return static_cast<double>(state >> 11) * 0x1.0p-53;
  };
  for (int i = 0; i < 96; ++i) {
    v.push_back(static_cast<T>((i % 2 ? -1 : 1) * std::pow(10.0, 8 * uniform() - 4)));
    v.push_back(static_cast<T>(2 * uniform() - 1));
  }
  return v;
}

// Fewer values for the cross products of binary and ternary ops.
template <class T>
std::vector<T> binary_values() {
  return {T(0), -T(0), T(1), T(-1), T(0.5), T(-0.5), T(2), T(-2), T(3), T(-3), T(2.5), T(-2.5), T(1) / T(3),
          T(10), T(-8), T(1e4), T(-1e4), T(1e30), T(-1e30), lim<T>::infinity(), -lim<T>::infinity(),
          lim<T>::quiet_NaN(), lim<T>::denorm_min(), -lim<T>::min() / 2, lim<T>::min()};
}
template <class T>
std::vector<T> small_values() {
  return {T(0), -T(0), T(1), T(-1), T(2.5), T(-3), T(1e4), T(1e30), -lim<T>::infinity(), lim<T>::infinity(),
          lim<T>::quiet_NaN(), lim<T>::denorm_min()};
}

template <class I>
std::vector<I> integer_values() {
  return {I(0), I(1), I(-1), I(2), I(-2), I(3), I(-3), I(7), I(-7), I(100), I(-100), I(46341), I(-46341),
          lim<I>::max(), lim<I>::min(), I(lim<I>::max() - 1), I(lim<I>::min() + 1)};
}

// Columns holding every combination of the given value lists (the first list varies slowest).
template <class... T>
std::tuple<column<T>...> cross(std::vector<T> const&... values) {
  index_t const n = (index_t{1} * ... * static_cast<index_t>(values.size()));
  std::tuple<column<T>...> cols{column<T>(n)...};
  for (index_t i = 0; i < n; ++i) {
    index_t rest = i;
    auto pick = [&](auto const& vals, auto& col) {  // evaluated last list first
      auto const k = static_cast<index_t>(vals.size());
      col[i] = vals[static_cast<std::size_t>(rest % k)];
      rest /= k;
    };
    std::apply([&](auto&... c) {
      auto const lists = std::tie(values...);
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        constexpr std::size_t N = sizeof...(J);
        (pick(std::get<N - 1 - J>(lists), std::get<N - 1 - J>(std::tie(c...))), ...);
      }(std::index_sequence_for<T...>{});
    }, cols);
  }
  return cols;
}

// ---- the checker ------------------------------------------------------------------------------

// Collects mismatches for one op under one policy; shows the first few.
struct report {
  int failures = 0;
  double worst = 0;  // the largest ulp distance seen between finite non-zero results
  std::string text;
  void add(std::string const& line) {
    if (failures++ < 8) text += "\n    " + line;
  }
};

template <class... In>
std::string show_inputs(index_t i, column<In> const&... in) {
  std::string s;
  ((s += (s.empty() ? "" : ", ") + show(in[i])), ...);
  return "(" + s + ")";
}

template <class T>
std::string show_mismatch(T got, T want) {
  std::string s = "got " + show(got) + ", want " + show(want);
  if constexpr (std::is_floating_point_v<T>)
    if (std::isfinite(got) && std::isfinite(want))
      s += " (" + std::to_string(ulp_distance(got, want)) + " ulp)";
  return s;
}

template <class T>
constexpr T sentinel() {
  if constexpr (std::is_same_v<T, bool>) return true;
  else return static_cast<T>(77);
}

// Evaluates build(in...) into out[0, n) under kiln::seq or kiln::simd. Out of line and keyed on
// the expression type, so each expression's loops are compiled once however many checks build it
// (compile time is dominated by kiln's loops, about 0.3 s per expression type at -O2).
template <class E, class Out>
[[gnu::noinline]] void evaluate_expr(bool simd, kiln::tensor_view<Out, 1> dst, E const& e) {
  if (simd)
    kiln::eval(kiln::simd, dst, e);
  else
    kiln::eval(kiln::seq, dst, e);
}
template <class Build, class Out, class... In>
void evaluate(void const* build, bool simd, Out* out, index_t n, In const*... in) {
  evaluate_expr(simd, kiln::view(out, {n}), (*static_cast<Build const*>(build))(kiln::view(in, {n})...));
}
template <class Out, class... In>
using evaluate_fn = void (*)(void const*, bool, Out*, index_t, In const*...);

// Runs one op under one policy and compares to `want`: the whole arrays first, then every length
// 0..2W+1 at input offsets 0..W-1 and output offsets 0..W-1, each a window of the inputs compared
// to the same window of `want`, and nothing outside the output view may change. Depends only on
// the element types, so it is compiled once per signature.
template <class Out, class... In>
[[gnu::noinline]] void run_policy(report& rep, evaluate_fn<Out, In...> eval, void const* build, bool simd,
                                  tol t, column<Out> const& want, column<In> const&... in) {
  index_t const n = want.size();
  auto compare = [&](Out got, index_t i, std::string const& where) {
    if constexpr (std::is_floating_point_v<Out>)
      if (std::isfinite(got) && std::isfinite(want[i]) && got != 0 && want[i] != 0)
        rep.worst = std::max(rep.worst, static_cast<double>(ulp_distance(got, want[i])));
    if (!matches(got, want[i], t)) rep.add(where + show_inputs(i, in...) + ": " + show_mismatch(got, want[i]));
  };
  {
    column<Out> got(n);
    eval(build, simd, got.data(), n, in.data()...);
    for (index_t i = 0; i < n; ++i) compare(got[i], i, "");
  }
  for (index_t len = 0; len <= 2 * W + 1 && len <= n; ++len) {
    for (index_t k = 0; k < W; ++k) {
      index_t const start = (k * 7 + len * 3) % (n - len + 1);
      index_t const out_offset = (k + 1 + len) % W;
      auto shift = [&](auto const& col) {
        column<typename std::remove_cvref_t<decltype(col)>::value_type> c(len + k);
        std::copy_n(col.data() + start, len, c.data() + k);
        return c;
      };
      std::tuple<column<In>...> const shifted{shift(in)...};
      column<Out> out(len + 2 * W);
      std::fill_n(out.data(), out.size(), sentinel<Out>());
      std::apply([&](auto const&... c) { eval(build, simd, out.data() + out_offset, len, (c.data() + k)...); },
                 shifted);
      auto where = [&] {
        return "length " + std::to_string(len) + ", input offset " + std::to_string(k) + ", output offset " +
               std::to_string(out_offset) + ", ";
      };
      for (index_t i = 0; i < out.size(); ++i) {
        if (i < out_offset || i >= out_offset + len) {
          if (out[i] != sentinel<Out>())
            rep.add(where() + "wrote element " + std::to_string(i) + " outside the view");
        } else if (!matches(out[i], want[start + i - out_offset], t)) {
          compare(out[i], start + i - out_offset, where());
        }
      }
    }
  }
}

template <class... In>
std::string type_list() {
  std::string s;
  ((s += (s.empty() ? "" : ", ") + std::string(kiln::type_name<In>)), ...);
  return s;
}

// Checks an op against explicit expected values under both policies. Compiled once per signature.
template <class Out, class... In>
[[gnu::noinline]] void check_with(std::string const& what, tol t, evaluate_fn<Out, In...> eval,
                                  void const* build, column<Out> const& want, column<In> const&... in) {
  REQUIRE(((in.size() == want.size()) && ...));
  for (bool simd : {false, true}) {
    report rep;
    run_policy<Out, In...>(rep, eval, build, simd, t, want, in...);
    std::string const policy = simd ? "kiln::simd" : "kiln::seq";
    CHECK_MESSAGE(rep.failures == 0, what << " (" << type_list<In...>() << ") under " << policy << ": "
                                          << rep.failures << " mismatches" << rep.text);
    if (std::getenv("KILN_TEST_SHOW_ULPS") && rep.worst > 0)
      MESSAGE(what << " (" << type_list<In...>() << ") under " << policy << ": worst " << rep.worst << " ulp");
  }
}
template <class Build, class Out, class... In>
void check_against(std::string const& what, tol t, Build const& build, column<Out> const& want,
                   column<In> const&... in) {
  check_with<Out, In...>(what, t, &evaluate<Build, Out, In...>, &build, want, in...);
}

// Checks build(inputs...) against ref(inputs...) element by element. build receives read-only
// views and returns a kiln expression; ref receives the input values (a double parameter widens
// them) and returns the exact or double-precision result, which is rounded to the result type.
template <class Build, class Ref, class... In>
void check(std::string const& what, tol t, Build const& build, Ref const& ref, column<In> const&... in) {
  using E = decltype(build(in.cview(0, 0)...));
  using Out = typename E::value_type;
  index_t const n = std::get<0>(std::tie(in...)).size();
  column<Out> want(n);
  for (index_t i = 0; i < n; ++i) want[i] = static_cast<Out>(ref(in[i]...));
  check_against(what, t, build, want, in...);
}

// Shorthands for the common shapes of check.
template <class T, class Build, class Ref>
void unary(std::string const& what, tol t, Build const& build, Ref const& ref) {
  check(what, t, build, ref, column<T>(unary_values<T>()));
}
template <class T, class Build, class Ref>
void binary(std::string const& what, tol t, Build const& build, Ref const& ref) {
  auto const [a, b] = cross(binary_values<T>(), binary_values<T>());
  check(what, t, build, ref, a, b);
}

// Explicit (inputs..., expected) rows, checked exactly (up to `t`) under both policies.
template <class T, std::size_t K, class Build>
void table(std::string const& what, tol t, Build const& build, std::vector<std::array<double, K>> const& rows) {
  auto const n = static_cast<index_t>(rows.size());
  column<T> want(n);
  std::array<std::vector<T>, K - 1> cols;
  for (auto const& r : rows) {
    for (std::size_t j = 0; j + 1 < K; ++j) cols[j].push_back(static_cast<T>(r[j]));
  }
  for (index_t i = 0; i < n; ++i) want[i] = static_cast<T>(rows[static_cast<std::size_t>(i)][K - 1]);
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    check_against(what, t, build, want, column<T>(cols[J])...);
  }(std::make_index_sequence<K - 1>{});
}

// A builder from one of kiln's callables: call(kiln::exp) is [](auto const& x) { return kiln::exp(x); }
// (the parameterised ops, being function templates, are spelled out).
constexpr auto call = [](auto f) { return [f](auto const&... x) { return f(x...); }; };

// ---- references (double, PyTorch's semantics) -------------------------------------------------

double ref_sigmoid(double x) {
  double const e = std::exp(-std::fabs(x));
  return x >= 0 ? 1 / (1 + e) : e / (1 + e);
}
// NaN-propagating torch.minimum / torch.maximum; otherwise std::min / std::max.
double ref_minimum(double a, double b) { return std::isnan(a) || std::isnan(b) ? nan : (b < a ? b : a); }
double ref_maximum(double a, double b) { return std::isnan(a) || std::isnan(b) ? nan : (a < b ? b : a); }
double ref_clamp(double x, double lo, double hi) { return ref_minimum(ref_maximum(x, lo), hi); }
// Python's modulo, as PyTorch computes it: fmod, then moved into the divisor's sign.
double ref_remainder(double a, double b) {
  double const r = std::fmod(a, b);
  return r != 0 && ((b < 0) != (r < 0)) ? r + b : r;
}

// Tolerances for the transcendental functions (xsimd's vector versions and libm's scalar ones).
constexpr tol tr = ulps(2, 2);

// ---- unary floating ops -----------------------------------------------------------------------

TEST_CASE_TEMPLATE("unary arithmetic: abs neg sign reciprocal square sqrt rsqrt", T, float, double) {
  unary<T>("abs", exact, call(kiln::abs), [](double x) { return std::fabs(x); });
  unary<T>("neg", exact, call(kiln::neg), [](double x) { return -x; });
  unary<T>("unary -", exact, [](auto const& x) { return -x; }, [](double x) { return -x; });
  // PyTorch: (0 < x) - (x < 0), so sign(±0) = +0 and sign(NaN) = 0.
  unary<T>("sign", exact, call(kiln::sign), [](double x) { return double((0 < x) - (x < 0)); });
  unary<T>("reciprocal", exact, call(kiln::reciprocal), [](double x) { return 1 / x; });
  unary<T>("square", exact, call(kiln::square), [](double x) { return x * x; });
  unary<T>("sqrt", exact, call(kiln::sqrt), [](double x) { return std::sqrt(x); });
  unary<T>("rsqrt", ulps(1, 1), call(kiln::rsqrt), [](double x) { return 1 / std::sqrt(x); });
}

TEST_CASE_TEMPLATE("exponentials and logarithms: exp exp2 expm1 log log2 log10 log1p", T, float, double) {
  unary<T>("exp", tr, call(kiln::exp), [](double x) { return std::exp(x); });
  unary<T>("exp2", tr, call(kiln::exp2), [](double x) { return std::exp2(x); });
  unary<T>("expm1", tr, call(kiln::expm1), [](double x) { return std::expm1(x); });
  unary<T>("log", tr, call(kiln::log), [](double x) { return std::log(x); });
  unary<T>("log2", tr, call(kiln::log2), [](double x) { return std::log2(x); });
  unary<T>("log10", tr, call(kiln::log10), [](double x) { return std::log10(x); });
  unary<T>("log1p", tr, call(kiln::log1p), [](double x) { return std::log1p(x); });
}

TEST_CASE_TEMPLATE("trigonometric: sin cos tan asin acos atan", T, float, double) {
  // xsimd's double argument reduction is a few bits short next to multiples of pi/2, where the
  // result is tiny or huge: 7 ulp at sin(fl(pi)) and cos(fl(pi/2)), 11 at tan(fl(pi/2)).
  constexpr tol trig = ulps(2, 16);
  unary<T>("sin", trig, call(kiln::sin), [](double x) { return std::sin(x); });
  unary<T>("cos", trig, call(kiln::cos), [](double x) { return std::cos(x); });
  unary<T>("tan", trig, call(kiln::tan), [](double x) { return std::tan(x); });
  unary<T>("asin", tr, call(kiln::asin), [](double x) { return std::asin(x); });
  unary<T>("acos", tr, call(kiln::acos), [](double x) { return std::acos(x); });
  unary<T>("atan", tr, call(kiln::atan), [](double x) { return std::atan(x); });
}

TEST_CASE_TEMPLATE("hyperbolic and error functions: sinh cosh tanh asinh acosh atanh erf erfc", T, float,
                   double) {
  unary<T>("sinh", tr, call(kiln::sinh), [](double x) { return std::sinh(x); });
  unary<T>("cosh", tr, call(kiln::cosh), [](double x) { return std::cosh(x); });
  // Float batches use a rational approximation, within 5 ulp (see math::tanh and the sweep below).
  unary<T>("tanh", ulps(5, 2), call(kiln::tanh), [](double x) { return std::tanh(x); });
  unary<T>("asinh", tr, call(kiln::asinh), [](double x) { return std::asinh(x); });
  unary<T>("acosh", tr, call(kiln::acosh), [](double x) { return std::acosh(x); });
  unary<T>("atanh", tr, call(kiln::atanh), [](double x) { return std::atanh(x); });
  unary<T>("erf", tr, call(kiln::erf), [](double x) { return std::erf(x); });
  unary<T>("erfc", tr, call(kiln::erfc), [](double x) { return std::erfc(x); });
}

TEST_CASE_TEMPLATE("activations: sigmoid logit relu gelu silu softplus elu leaky_relu hardtanh", T, float,
                   double) {
  // e / (1 + e) after kiln's float exp: within 3 ulp (see sigmoid_op and the sweep below).
  unary<T>("sigmoid", ulps(3, 2), call(kiln::sigmoid), ref_sigmoid);
  // log(x / (1 - x)) loses digits near x = 1/2 even in double; the reference works in long double,
  // through log1p((2x - 1) / (1 - x)) from x = 1/4 on (2x - 1 and 1 - x are exact there).
  unary<T>("logit", tr, call(kiln::logit), [](double x) {
    long double const v = x;
    return static_cast<double>(v < 0.25L ? std::log(v / (1 - v)) : std::log1p((2 * v - 1) / (1 - v)));
  });
  unary<T>("relu", exact, call(kiln::relu), [](double x) { return x < 0 ? 0.0 : x; });
  // The exact (erf) form, evaluated as x/2 erfc(-x/sqrt 2), which has no cancellation for x < 0,
  // in long double so that x/sqrt 2 carries no visible rounding either.
  unary<T>("gelu", tr, call(kiln::gelu), [](double x) {
    long double const v = x;
    return static_cast<double>(0.5L * v * std::erfc(-v / std::numbers::sqrt2_v<long double>));
  });
  // x sigmoid(x): where sigmoid(x) is subnormal (x < -87 in float) it carries few digits, and
  // x times it keeps the absolute error (45 subnormal steps at x = -100); PyTorch returns -0 there.
  unary<T>("silu", subnormal_ulps(tr, 64), call(kiln::silu), [](double x) { return x * ref_sigmoid(x); });
  auto softplus = [](double beta, double threshold) {
    return [=](double x) { return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta; };
  };
  unary<T>("softplus", tr, [](auto const& x) { return kiln::softplus(x); }, softplus(1, 20));
  unary<T>("softplus(beta 2, threshold 10)", tr, [](auto const& x) { return kiln::softplus(x, 2, 10); },
           softplus(2, 10));
  unary<T>("softplus(beta 0.5, threshold 5)", tr, [](auto const& x) { return kiln::softplus(x, 0.5, 5); },
           softplus(0.5, 5));
  auto elu = [](double alpha) { return [=](double x) { return x > 0 ? x : alpha * std::expm1(x); }; };
  unary<T>("elu", tr, [](auto const& x) { return kiln::elu(x); }, elu(1));
  unary<T>("elu(alpha 0.5)", tr, [](auto const& x) { return kiln::elu(x, 0.5); }, elu(0.5));
  unary<T>("elu(alpha 2)", tr, [](auto const& x) { return kiln::elu(x, 2); }, elu(2));
  auto leaky = [](double slope) { return [=](double x) { return x > 0 ? x : x * slope; }; };
  // x * slope rounds slope to T first (as PyTorch), so float results may be an ulp off x * 0.01.
  unary<T>("leaky_relu", ulps(1, 0), [](auto const& x) { return kiln::leaky_relu(x); }, leaky(0.01));
  unary<T>("leaky_relu(slope 0.2)", ulps(1, 0), [](auto const& x) { return kiln::leaky_relu(x, 0.2); },
           leaky(0.2));
  unary<T>("leaky_relu(slope -1)", exact, [](auto const& x) { return kiln::leaky_relu(x, -1); }, leaky(-1));
  auto hardtanh = [](double lo, double hi) { return [=](double x) { return ref_clamp(x, lo, hi); }; };
  unary<T>("hardtanh", exact, [](auto const& x) { return kiln::hardtanh(x); }, hardtanh(-1, 1));
  unary<T>("hardtanh(0, 6)", exact, [](auto const& x) { return kiln::hardtanh(x, 0, 6); }, hardtanh(0, 6));
  unary<T>("hardtanh(-2.5, 1e4)", exact, [](auto const& x) { return kiln::hardtanh(x, -2.5, 1e4); },
           hardtanh(-2.5, 1e4));
  // min_val > max_val gives max_val, as clamp.
  unary<T>("hardtanh(2, 1)", exact, [](auto const& x) { return kiln::hardtanh(x, 2, 1); }, hardtanh(2, 1));
}

TEST_CASE_TEMPLATE("rounding and classification: floor ceil round trunc frac isnan isinf isfinite", T, float,
                   double) {
  unary<T>("floor", exact, call(kiln::floor), [](double x) { return std::floor(x); });
  unary<T>("ceil", exact, call(kiln::ceil), [](double x) { return std::ceil(x); });
  // Half to even, as torch.round (the default rounding mode's nearbyint).
  unary<T>("round", exact, call(kiln::round), [](double x) { return std::nearbyint(x); });
  unary<T>("trunc", exact, call(kiln::trunc), [](double x) { return std::trunc(x); });
  unary<T>("frac", exact, call(kiln::frac), [](double x) { return x - std::trunc(x); });
  unary<T>("isnan", exact, call(kiln::isnan), [](double x) { return std::isnan(x); });
  unary<T>("isinf", exact, call(kiln::isinf), [](double x) { return std::isinf(x); });
  unary<T>("isfinite", exact, call(kiln::isfinite), [](double x) { return std::isfinite(x); });
}

// ---- binary floating ops ----------------------------------------------------------------------

TEST_CASE_TEMPLATE("binary arithmetic: add sub mul div and the operators", T, float, double) {
  auto const plus = [](double a, double b) { return a + b; };
  auto const minus = [](double a, double b) { return a - b; };
  auto const times = [](double a, double b) { return a * b; };
  auto const over = [](double a, double b) { return a / b; };
  binary<T>("add", exact, call(kiln::add), plus);
  binary<T>("a + b", exact, [](auto const& a, auto const& b) { return a + b; }, plus);
  binary<T>("sub", exact, call(kiln::sub), minus);
  binary<T>("a - b", exact, [](auto const& a, auto const& b) { return a - b; }, minus);
  binary<T>("mul", exact, call(kiln::mul), times);
  binary<T>("a * b", exact, [](auto const& a, auto const& b) { return a * b; }, times);
  binary<T>("div", exact, call(kiln::div), over);
  binary<T>("a / b", exact, [](auto const& a, auto const& b) { return a / b; }, over);
  // A C++ scalar takes the tensor's type and broadcasts (the kernel's splat path).
  unary<T>("x * 2.0", exact, [](auto const& x) { return x * 2.0; }, [](double x) { return x * 2; });
}

TEST_CASE_TEMPLATE("pow", T, float, double) {
  binary<T>("pow", ulps(1, 1), call(kiln::pow), [](double a, double b) { return std::pow(a, b); });
  // A scalar exponent or base, over every unary input.
  for (double e : {0.0, 2.0, 0.5, -3.0, 1.0 / 3})
    unary<T>("pow(x, " + show(e) + ")", ulps(1, 1), [e](auto const& x) { return kiln::pow(x, e); },
             [e](double x) { return std::pow(x, double(T(e))); });
  for (double base : {2.0, -1.0, 0.0})
    unary<T>("pow(" + show(base) + ", x)", ulps(1, 1), [base](auto const& x) { return kiln::pow(base, x); },
             [base](double x) { return std::pow(base, x); });
  // torch.pow follows C's pow at every edge.
  table<T, 3>("pow edges", exact, call(kiln::pow),
              {{0, 0, 1},       {-0.0, 0, 1},     {nan, 0, 1},        {inf, -0.0, 1},   {1, nan, 1},
               {1, inf, 1},     {1, -inf, 1},     {-1, inf, 1},       {-1, -inf, 1},    {0.5, inf, 0},
               {0.5, -inf, inf}, {2, inf, inf},   {2, -inf, 0},       {-0.5, inf, 0},   {-2, inf, inf},
               {-2, -inf, 0},   {inf, -1, 0},     {inf, 0.5, inf},    {-inf, 3, -inf},  {-inf, 2, inf},
               {-inf, -3, -0.0}, {-inf, -2, 0},   {-inf, 0.5, inf},   {0, -1, inf},     {-0.0, -1, -inf},
               {-0.0, -2, inf}, {0, -inf, inf},   {-0.0, 3, -0.0},    {-0.0, 2, 0},     {0, 3, 0},
               {-8, 1.0 / 3, nan}, {-2, 3, -8},   {-2, -3, -0.125},   {-2, 2, 4},       {-2, -2, 0.25},
               {-3, 3, -27},    {2, 10, 1024},    {10, 2, 100},       {nan, 1, nan},    {1, 1e4, 1},
               {-1, 3, -1},     {2, -1074, std::ldexp(1.0, -1074)}});
}

TEST_CASE_TEMPLATE("binary math: atan2 fmod remainder hypot copysign", T, float, double) {
  // std::atan2's signed-zero and infinity cases: atan2(±0, -0) = ±pi, atan2(±inf, -inf) = ±3pi/4...
  binary<T>("atan2", tr, call(kiln::atan2), [](double a, double b) { return std::atan2(a, b); });
  // fmod has the dividend's sign; remainder the divisor's (Python's %).
  binary<T>("fmod", exact, call(kiln::fmod), [](double a, double b) { return std::fmod(a, b); });
  binary<T>("remainder", exact, call(kiln::remainder), ref_remainder);
  binary<T>("hypot", ulps(1, 1), call(kiln::hypot), [](double a, double b) { return std::hypot(a, b); });
  binary<T>("copysign", exact, call(kiln::copysign), [](double a, double b) { return std::copysign(a, b); });
  double const pi = std::numbers::pi;
  table<T, 3>("atan2 edges", ulps(1, 1), call(kiln::atan2),
              {{0, 0, 0}, {-0.0, 0, -0.0}, {0, -0.0, pi}, {-0.0, -0.0, -pi}, {1, 0, pi / 2},
               {-1, -0.0, -pi / 2}, {inf, inf, pi / 4}, {inf, -inf, 3 * pi / 4}, {-inf, inf, -pi / 4},
               {-inf, -inf, -3 * pi / 4}, {1, inf, 0}, {-1, inf, -0.0}, {1, -inf, pi}, {-1, -inf, -pi},
               {inf, 1, pi / 2}, {nan, 1, nan}});
  table<T, 3>("fmod has the dividend's sign", exact, call(kiln::fmod),
              {{-1, 3, -1}, {1, -3, 1}, {5.5, -2, 1.5}, {-5.5, 2, -1.5}, {4, 2, 0}, {-4, 2, -0.0},
               {1, inf, 1}, {-1, inf, -1}, {inf, 2, nan}, {1, 0, nan}});
  table<T, 3>("remainder has the divisor's sign", exact, call(kiln::remainder),
              {{-1, 3, 2}, {1, -3, -2}, {5.5, -2, -0.5}, {-5.5, 2, 0.5}, {4, 2, 0}, {-4, 2, -0.0},
               {1, inf, 1}, {-1, inf, inf}, {1, -inf, -inf}, {inf, 2, nan}, {1, 0, nan}});
  table<T, 3>("hypot without overflow", ulps(1, 1), call(kiln::hypot),
              {{1e30, 1e30, 1e30 * std::numbers::sqrt2}, {3e-30, 4e-30, 5e-30}, {inf, nan, inf},
               {nan, -inf, inf}});
}

TEST_CASE_TEMPLATE("minimum maximum fmin fmax clamp", T, float, double) {
  // minimum/maximum propagate NaN; fmin/fmax ignore it; otherwise std::min / std::max.
  binary<T>("minimum", exact, call(kiln::minimum), ref_minimum);
  binary<T>("maximum", exact, call(kiln::maximum), ref_maximum);
  binary<T>("fmin", exact, call(kiln::fmin),
            [](double a, double b) { return std::isnan(a) ? b : std::isnan(b) ? a : (b < a ? b : a); });
  binary<T>("fmax", exact, call(kiln::fmax),
            [](double a, double b) { return std::isnan(a) ? b : std::isnan(b) ? a : (a < b ? b : a); });
  // clamp(x, lo, hi) = minimum(maximum(x, lo), hi): NaN anywhere propagates; lo > hi gives hi.
  std::vector<T> const bounds = {-lim<T>::infinity(), T(-1), -T(0),           T(0), T(0.5),
                                 T(2),                lim<T>::infinity(), lim<T>::quiet_NaN()};
  auto const [x, lo, hi] = cross(binary_values<T>(), bounds, bounds);
  check("clamp", exact, call(kiln::clamp), ref_clamp, x, lo, hi);
  unary<T>("clamp(x, -1, 2.5)", exact, [](auto const& v) { return kiln::clamp(v, -1, 2.5); },
           [](double v) { return ref_clamp(v, -1, 2.5); });
}

// ---- comparisons and logic --------------------------------------------------------------------

TEST_CASE_TEMPLATE("comparisons: eq ne lt le gt ge and the operators", T, float, double) {
  binary<T>("eq", exact, call(kiln::eq), std::equal_to<double>{});
  binary<T>("a == b", exact, [](auto const& a, auto const& b) { return a == b; }, std::equal_to<double>{});
  binary<T>("ne", exact, call(kiln::ne), std::not_equal_to<double>{});
  binary<T>("a != b", exact, [](auto const& a, auto const& b) { return a != b; }, std::not_equal_to<double>{});
  binary<T>("lt", exact, call(kiln::lt), std::less<double>{});
  binary<T>("a < b", exact, [](auto const& a, auto const& b) { return a < b; }, std::less<double>{});
  binary<T>("le", exact, call(kiln::le), std::less_equal<double>{});
  binary<T>("a <= b", exact, [](auto const& a, auto const& b) { return a <= b; }, std::less_equal<double>{});
  binary<T>("gt", exact, call(kiln::gt), std::greater<double>{});
  binary<T>("a > b", exact, [](auto const& a, auto const& b) { return a > b; }, std::greater<double>{});
  binary<T>("ge", exact, call(kiln::ge), std::greater_equal<double>{});
  binary<T>("a >= b", exact, [](auto const& a, auto const& b) { return a >= b; },
            std::greater_equal<double>{});
}

// Inputs are read as truth values: non-zero is true, -0 is false, NaN is true (as in C++ and
// PyTorch; on the SIMD path this relies on eval/evaluator.hpp's as_argument not using xsimd's `!=`,
// which is ordered on AVX, false for NaN).
TEST_CASE_TEMPLATE("logical_and logical_or logical_not", T, float, double) {
  auto const both = [](double p, double q) { return p != 0 && q != 0; };
  auto const either = [](double p, double q) { return p != 0 || q != 0; };
  binary<T>("logical_and", exact, call(kiln::logical_and), both);
  binary<T>("a && b", exact, [](auto const& p, auto const& q) { return p && q; }, both);
  binary<T>("logical_or", exact, call(kiln::logical_or), either);
  binary<T>("a || b", exact, [](auto const& p, auto const& q) { return p || q; }, either);
  unary<T>("logical_not", exact, call(kiln::logical_not), [](double p) { return p == 0; });
  unary<T>("!x", exact, [](auto const& p) { return !p; }, [](double p) { return p == 0; });
  // Comparison results (masks on the SIMD path) as operands.
  unary<T>("!(x < 1) || x > 2", exact, [](auto const& v) { return !(v < 1) || v > 2; },
           [](double v) { return !(v < 1) || v > 2; });
  // On bool tensors.
  auto const [p, q] = cross(std::vector<bool>{false, true}, std::vector<bool>{false, true});
  check("logical ops on bool", exact, [](auto const& l, auto const& r) { return (l && !r) || (!l && r); },
        [](bool l, bool r) { return l != r; }, p, q);
}

// ---- ternary ops ------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("where lerp addcmul fma", T, float, double) {
  // where never leaks a NaN (or anything else) from the branch it does not choose.
  {
    auto const [c, a, b] = cross(std::vector<bool>{false, true}, binary_values<T>(), small_values<T>());
    check("where", exact, call(kiln::where), [](bool m, double x, double y) { return m ? x : y; }, c, a, b);
  }
  unary<T>("where(x > 0, x, 0.0)", exact, [](auto const& x) { return kiln::where(x > 0, x, 0.0); },
           [](double x) { return x > 0 ? x : 0.0; });
  // lerp: PyTorch's two-sided formula, exact at w = 0 and w = 1.
  {
    std::vector<T> const w = {T(0), -T(0), T(0.25), T(0.5), T(0.75),
                              T(1), T(-0.5), T(-0.75), T(-2), T(1.5), lim<T>::infinity(), lim<T>::quiet_NaN()};
    auto const [a, b, t] = cross(small_values<T>(), small_values<T>(), w);
    // Where w (b - a) underflows, the result depends on whether the compiler fused a + w (b - a)
    // (GCC does at -O2 with FMA, not at -O0): a subnormal step either way, and the sign of a zero.
    // For w <= -0.5, b - (b - a)(1 - w) rounds twice and cancels (b - 1.5 (b - a) at w = -0.5):
    // up to 2 ulp unfused.
    check("lerp", any_zero_sign(subnormal_ulps(ulps(2, 2), 1)), call(kiln::lerp),
          [](double x, double y, double z) { return std::abs(z) < 0.5 ? x + z * (y - x) : y - (y - x) * (1 - z); }, a, b,
          t);
    // Exact at the ends for every a and b (up to the sign of a zero result, a + 0 * (b - a)).
    auto const [a0, b0, w0] = cross(unary_values<T>(), small_values<T>(), std::vector<T>{T(0)});
    check("lerp(a, b, 0) == a", any_zero_sign(exact), call(kiln::lerp),
          [](double x, double y, double) { return std::isfinite(y - x) ? x : x + 0 * (y - x); }, a0, b0, w0);
    auto const [a1, b1, w1] = cross(unary_values<T>(), small_values<T>(), std::vector<T>{T(1)});
    check("lerp(a, b, 1) == b", any_zero_sign(exact), call(kiln::lerp),
          [](double x, double y, double) { return std::isfinite(y - x) ? y : y - (y - x) * 0; }, a1, b1, w1);
  }
  {
    auto const [a, b, c] = cross(small_values<T>(), small_values<T>(), small_values<T>());
    // In T: std::fma is exact, where a double fma rounded to float would round twice.
    check("fma", exact, call(kiln::fma), [](T x, T y, T z) { return std::fma(x, y, z); }, a, b, c);
    // torch.addcmul: a + value * t1 * t2, in T as PyTorch computes it (in double, value * t1
    // would not underflow where T's does). The product is its own statement, as it is in kiln's
    // op: GCC fuses its last multiply and the add into an fma in both, Clang (which fuses only
    // within one expression) in neither.
    auto addcmul = [](double value) {
      return [=](T x, T y, T z) {
        T const product = T(value) * y * z;
        return x + product;
      };
    };
    check("addcmul", ulps(1, 1),
          [](auto const& x, auto const& y, auto const& z) { return kiln::addcmul(x, y, z); }, addcmul(1), a, b,
          c);
    check("addcmul(value 0.5)", ulps(1, 1),
          [](auto const& x, auto const& y, auto const& z) { return kiln::addcmul(x, y, z, 0.5); }, addcmul(0.5),
          a, b, c);
    check("addcmul(value -2)", ulps(1, 1),
          [](auto const& x, auto const& y, auto const& z) { return kiln::addcmul(x, y, z, -2); }, addcmul(-2),
          a, b, c);
  }
}

// ---- PyTorch's edge semantics, spelled out ----------------------------------------------------

TEST_CASE_TEMPLATE("PyTorch edge semantics", T, float, double) {
  table<T, 2>("sign(±0) = 0, sign(NaN) = 0", exact, call(kiln::sign),
              {{0, 0}, {-0.0, 0}, {nan, 0}, {-3, -1}, {inf, 1}, {-inf, -1}, {1e-30, 1}});
  table<T, 2>("relu(NaN) = NaN", exact, call(kiln::relu),
              {{nan, nan}, {-1, 0}, {2, 2}, {-inf, 0}, {inf, inf}});
  table<T, 2>("sigmoid saturates without NaN", exact, call(kiln::sigmoid),
              {{-1000, 0}, {1000, 1}, {-inf, 0}, {inf, 1}, {0, 0.5}, {nan, nan}});
  table<T, 2>("softplus returns x above the threshold", ulps(1, 1),
              [](auto const& x) { return kiln::softplus(x); },
              {{21, 21}, {1e30, 1e30}, {inf, inf}, {20, std::log1p(std::exp(20.0))}, {-1000, 0}, {-inf, 0},
               {0, std::log(2.0)}});
  table<T, 2>("round half to even", exact, call(kiln::round),
              {{0.5, 0}, {1.5, 2}, {2.5, 2}, {3.5, 4}, {-0.5, -0.0}, {-1.5, -2}, {-2.5, -2}, {0.49999997, 0},
               {1e30, 1e30}});
  // Against exact values (mpmath).
  table<T, 2>("gelu is the exact erf form", tr, call(kiln::gelu),
              {{1, 0.84134474606854294859}, {-1, -0.15865525393145705141}, {0, 0}, {3, 2.9959503059051097164},
               {-3, -0.00404969409489028358}, {-10, -7.619853024160526066e-23}, {inf, inf}, {-inf, nan}});
  table<T, 2>("logit at the ends of its domain", exact, call(kiln::logit),
              {{0, -inf}, {1, inf}, {0.5, 0}, {-1, nan}, {2, nan}});
  table<T, 2>("log at the end of its domain", exact, call(kiln::log),
              {{0, -inf}, {-0.0, -inf}, {-1, nan}, {1, 0}, {inf, inf}, {-inf, nan}});
  table<T, 2>("sqrt at the end of its domain", exact, call(kiln::sqrt),
              {{0, 0}, {-0.0, -0.0}, {-1, nan}, {1, 1}, {inf, inf}, {-inf, nan}});
  table<T, 2>("acos at the ends of its domain", ulps(1, 1), call(kiln::acos),
              {{1, 0}, {-1, std::numbers::pi}, {1.5, nan}, {-1.5, nan}});
  table<T, 2>("asin at the ends of its domain", ulps(1, 1), call(kiln::asin),
              {{1, std::numbers::pi / 2}, {-1, -std::numbers::pi / 2}, {1.5, nan}, {-0.0, -0.0}});
  table<T, 2>("acosh at the end of its domain", exact, call(kiln::acosh), {{1, 0}, {0.5, nan}, {inf, inf}});
  table<T, 2>("atanh(±1) = ±inf", exact, call(kiln::atanh),
              {{1, inf}, {-1, -inf}, {0, 0}, {-0.0, -0.0}, {2, nan}});
  table<T, 3>("minimum propagates NaN", exact, call(kiln::minimum), {{nan, 1, nan}, {1, nan, nan}, {1, 2, 1}});
  table<T, 3>("maximum propagates NaN", exact, call(kiln::maximum), {{nan, 1, nan}, {1, nan, nan}, {1, 2, 2}});
  table<T, 3>("fmin ignores NaN", exact, call(kiln::fmin),
              {{nan, 1, 1}, {1, nan, 1}, {nan, nan, nan}, {-2, 3, -2}});
  table<T, 3>("fmax ignores NaN", exact, call(kiln::fmax),
              {{nan, 1, 1}, {1, nan, 1}, {nan, nan, nan}, {-2, 3, 3}});
  table<T, 4>("clamp: NaN propagates, lo > hi gives hi", exact, call(kiln::clamp),
              {{nan, 0, 1, nan}, {5, 2, 1, 1}, {0, 2, 1, 1}, {1.5, 2, 1, 1}, {0.5, nan, 1, nan},
               {0.5, 0, nan, nan}, {-3, -1, 1, -1}, {3, -1, 1, 1}, {0.25, -1, 1, 0.25}});
  table<T, 4>("where takes nothing from the unchosen branch", exact, call(kiln::where),
              {{0, nan, 1, 1}, {1, 1, nan, 1}, {0, inf, -2, -2}, {-2, 3, nan, 3}});
  table<T, 4>("where reads a NaN condition as true, -0 as false", exact, call(kiln::where),
              {{nan, 3, 4, 3}, {0, 3, 4, 4}, {-0.0, 3, 4, 4}, {1, 3, 4, 3}});
  table<T, 4>("lerp is exact at w = 0 and w = 1", exact, call(kiln::lerp),
              {{0.1, 0.7, 0, 0.1}, {0.1, 0.7, 1, 0.7}, {-1e30, 3, 1, 3}, {3, -1e30, 0, 3}, {1, 2, 0.5, 1.5}});
  table<T, 3>("hypot(1e30, 1e30) is finite", ulps(1, 1), call(kiln::hypot),
              {{1e30, 1e30, 1e30 * std::numbers::sqrt2}});
}

// ---- float kernels: dense sweeps --------------------------------------------------------------

// The largest ulp distance between kiln's float op (evaluated under kiln::simd, so through its batch
// kernel) and the double reference rounded to float, over every 997th bit pattern of the whole
// float range (NaNs, infinities, zeros and subnormals included) and every 509th float in
// [-12, 12], where tanh and sigmoid change: 8.6 million inputs. NaN, infinities and zeros (with
// their sign) must match exactly. The bounds are the errors measured over all 2^32 floats.
template <class Build, class Ref>
void sweep(std::string const& what, std::uint64_t bound, Build const& build, Ref const& ref) {
  constexpr index_t chunk = index_t{1} << 16;
  std::vector<float> in, out(static_cast<std::size_t>(chunk));
  in.reserve(static_cast<std::size_t>(chunk));
  std::uint64_t worst = 0;
  float worst_x = 0;
  int special_failures = 0;
  std::string first_failure;
  auto flush = [&] {
    auto const n = static_cast<index_t>(in.size());
    evaluate_expr(true, kiln::view(out.data(), {n}), build(kiln::view(static_cast<float const*>(in.data()), {n})));
    for (std::size_t i = 0; i < in.size(); ++i) {
      float const want = static_cast<float>(ref(static_cast<double>(in[i])));
      float const got = out[i];
      if (std::isnan(want) || std::isnan(got) || std::isinf(want) || std::isinf(got) || (want == 0 && got == 0)) {
        bool const ok = (std::isnan(want) && std::isnan(got)) || (want == got && std::signbit(want) == std::signbit(got));
        if (!ok && special_failures++ == 0) first_failure = show(in[i]) + ": " + show_mismatch(got, want);
        continue;
      }
      std::uint64_t const d = ulp_distance(got, want);
      if (d > worst) worst = d, worst_x = in[i];
    }
    in.clear();
  };
  auto add = [&](std::uint64_t from, std::uint64_t to, std::uint64_t step) {
    for (std::uint64_t b = from; b < to; b += step) {
      in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
      if (static_cast<index_t>(in.size()) == chunk) flush();
    }
  };
  std::uint64_t const twelve = std::bit_cast<std::uint32_t>(12.0f), sign = std::uint64_t{1} << 31;
  add(0, std::uint64_t{1} << 32, 997);
  add(0, twelve, 509);
  add(sign, sign + twelve, 509);
  flush();
  CHECK_MESSAGE(special_failures == 0, what << ": " << special_failures << " NaN/inf/zero mismatches, first "
                                            << first_failure);
  CHECK_MESSAGE(worst <= bound, what << ": " << worst << " ulp at " << show(worst_x) << ", bound " << bound);
  if (std::getenv("KILN_TEST_SHOW_ULPS")) MESSAGE(what << ": worst " << worst << " ulp at " << show(worst_x));
}

TEST_CASE("float tanh, sigmoid and exp: dense sweeps against double") {
  sweep("tanh", 5, call(kiln::tanh), [](double x) { return std::tanh(x); });
  sweep("sigmoid", 3, call(kiln::sigmoid), ref_sigmoid);
  sweep("exp", 2, call(kiln::exp), [](double x) { return std::exp(x); });
}

// exp, exp2 and expm1 are finite up to where the result passes the largest finite value; xsimd's
// return inf a little before it (double exp and expm1 from 709.44, exp2 from 127 and 1023, float
// expm1 from 88.38). Rows on either side of each bound, against <cmath> on the value as the type
// holds it.
TEST_CASE("exp, exp2 and expm1 up to overflow") {
  auto rows = [](auto type, auto f, std::initializer_list<double> xs) {
    using T = decltype(type);
    std::vector<std::array<double, 2>> r;
    for (double x : xs) r.push_back({double(T(x)), f(double(T(x)))});
    return r;
  };
  auto const exp = [](double x) { return std::exp(x); };
  auto const exp2 = [](double x) { return std::exp2(x); };
  auto const expm1 = [](double x) { return std::expm1(x); };
  table<double, 2>("double exp near overflow", ulps(0, 2), call(kiln::exp),
                   rows(0.0, exp, {709.0, 709.4, 709.437, 709.5, 709.7, 709.78, 709.782712893384, 709.79, 1000.0, nan}));
  // exp2 past 127 and 1023 is 2 * 2^(x - 1): xsimd's accuracy; squared halves were 3-4 ulp at
  // the last rows.
  table<double, 2>("double exp2 near overflow", ulps(0, 2), call(kiln::exp2),
                   rows(0.0, exp2,
                        {1022.5, 1022.9, 1023.0, 1023.5, 1023.99, 1024.0, 1100.0, nan, 0x1.ff7fb328b6d87p+9}));
  table<double, 2>("double expm1 near overflow", ulps(0, 2), call(kiln::expm1),
                   rows(0.0, expm1, {709.0, 709.4, 709.5, 709.78, 709.79, 1000.0, nan}));
  table<float, 2>("float exp2 near overflow", ulps(2, 0), call(kiln::exp2),
                  rows(0.f, exp2, {126.5, 126.9, 127.0, 127.5, 127.99, 128.0, 200.0, nan, 0x1.fbfdap+6}));
  table<float, 2>("float expm1 near overflow", ulps(2, 0), call(kiln::expm1),
                  rows(0.f, expm1, {88.0, 88.3763, 88.5, 88.72, 88.73, 100.0, nan}));
}

TEST_CASE("float tanh, sigmoid and exp at their edges") {
  using F = float;
  F const tiny = lim<F>::denorm_min(), fmin = lim<F>::min();
  // tanh: odd (±0 keep their sign), exactly ±1 once tanh rounds to ±1 and at ±inf,
  // x itself for tiny and subnormal x. (9.1: tanh(9.1) = 1 - 2.5e-8 rounds to 1 from either side
  // of the comparison, std::tanh for kiln::seq included.)
  table<F, 2>("tanh at its edges", exact, call(kiln::tanh),
              {{0, 0}, {-0.0, -0.0}, {inf, 1}, {-inf, -1}, {nan, nan}, {9.1, 1}, {-9.1, -1}, {9.5, 1},
               {20, 1}, {-1e30, -1}, {tiny, tiny}, {-tiny, -tiny}, {fmin / 2, fmin / 2}, {1e-30, 1e-30},
               {-1e-30, -1e-30}, {lim<F>::max(), 1}, {lim<F>::lowest(), -1}});
  table<F, 2>("tanh near saturation", ulps(5, 0), call(kiln::tanh),
              {{7.5, std::tanh(7.5)}, {8.0, std::tanh(8.0)}, {8.5, std::tanh(8.5)}, {-8.875, std::tanh(-8.875)}});
#if XSIMD_WITH_SSE2
  // The same saturation where xsimd::fma is a multiply and an add (SSE2 batches, as a build without
  // -march gets): the rational then rounds above 1, and the result's clamp keeps it at ±1. (An
  // optimised build may contract them into FMA anyway; the unoptimised sanitizer build does not.)
  using sse2 = xsimd::batch<F, xsimd::sse2>;
  for (F x : {F(inf), F(9.1f), F(9.5f), F(20), F(1e30f), lim<F>::max()}) {
    CAPTURE(x);
    alignas(16) F out[sse2::size];
    kiln::math::tanh(sse2(x)).store_aligned(out);
    CHECK(out[0] == 1.f);
    kiln::math::tanh(sse2(-x)).store_aligned(out);
    CHECK(out[0] == -1.f);
  }
#endif
  // sigmoid: the tail keeps a small relative error down to the subnormals and is 0 below them.
  // (the expected values are computed from the inputs rounded to float, as the op sees them)
  auto sig = [](double x) { double const f = static_cast<F>(x); return std::array<double, 2>{f, ref_sigmoid(f)}; };
  table<F, 2>("sigmoid in its tail", ulps(3, 0), call(kiln::sigmoid),
              {sig(-0.0), sig(-1), sig(-5), sig(-9.5), sig(-20), sig(-50), sig(-87), sig(-87.5), sig(-88.7),
               sig(-100), sig(-103), sig(-103.9), sig(-104), sig(-1000), sig(20), sig(17), sig(16.6), sig(15)});
  // exp: gradual underflow (subnormal results, not 0), overflow to inf exactly past ln(FLT_MAX).
  auto ex = [](double x) { double const f = static_cast<F>(x); return std::array<double, 2>{f, std::exp(f)}; };
  table<F, 2>("exp at its edges", ulps(2, 0), call(kiln::exp),
              {ex(0), ex(-0.0), ex(inf), ex(-inf), ex(nan), ex(88.72283), ex(88.7228394), ex(88.8), ex(89),
               ex(1e30), ex(-87.3), ex(-87.4), ex(-88), ex(-90), ex(-100), ex(-103), ex(-103.9), ex(-103.98),
               ex(-104), ex(-105), ex(-1e30), ex(1e-30), ex(-1e-30), ex(tiny)});
}

// kiln's float exp scales by adding k to the exponent field (its fast path) in batches whose lanes
// all have |x| <= 86.5, and by two products otherwise: whole batches (and a tail) on either side
// of each end of that range, and on either side of where k = round(x / ln 2) leaves [-125, 127]
// (the fast path's add would stop being exact there), against the correctly rounded value.
TEST_CASE("float exp: whole batches at the ends of its fast path's range") {
  using F = float;
  for (double x : {86.5, 86.500008, -86.5, -86.500008, 88.0, 88.37, 88.3762, 88.3763, 88.72, -86.98, -86.9899, -86.99,
                   -87.0, -87.33, -87.68, -87.69, -100.0, 0.3466, -0.3466}) {
    F const f = static_cast<F>(x);
    F const want = static_cast<F>(std::exp(double(f)));
    kiln::tensor<F, 1> const e = kiln::exp(kiln::full<F>({19}, f));
    for (index_t i = 0; i < e.size(); ++i)
      CHECK_MESSAGE(matches(e(i), want, ulps(2, 0)), "exp(" << show(f) << ")[" << i << "] = " << show(e(i))
                                                             << ", want " << show(want));
  }
}

// Which of exp's two paths a batch takes depends on all of its lanes, so both must give the same
// bits: otherwise a result would change with its neighbours, and kiln::par (which splits rows
// into other batches) would differ from kiln::simd. The paths would most easily part where x / ln 2
// lies within a rounding error of k + 1/2 (the first five inputs: rounding the product before the
// sum picks the other k there); each x is evaluated with every lane equal and again beside a lane
// (1000, or a NaN with a payload) that sends the batch the other way.
TEST_CASE("float exp: a lane's result does not depend on the other lanes of its batch") {
  using F = float;
  constexpr index_t W = xsimd::batch<F>::size;
  F const payload_nan = std::bit_cast<F>(0x7fc00001u);
  for (F x : {0x1.62e43p-2f, 0x1.0a2b24p+0f, 0x1.bb9d3cp+0f, 0x1.3687aap+1f, -0x1.62e43p-2f, 1.f, -10.f, 50.f,
              86.5f, -86.5f, -86.9899f, -86.99f, 88.37f}) {
    kiln::tensor<F, 1> alone = kiln::full<F>({W}, x);
    kiln::tensor<F, 1> mixed = kiln::full<F>({W}, x), with_nan = kiln::full<F>({W}, x);
    mixed(W - 1) = 1000.f;
    with_nan(0) = payload_nan;
    kiln::tensor<F, 1> const a = kiln::exp(alone), m = kiln::exp(mixed), n = kiln::exp(with_nan);
    CHECK_MESSAGE(std::bit_cast<std::uint32_t>(a(0)) == std::bit_cast<std::uint32_t>(m(0)),
                  "exp(" << show(x) << ") = " << show(a(0)) << " alone, " << show(m(0)) << " beside 1000");
    CHECK_MESSAGE(std::bit_cast<std::uint32_t>(a(1)) == std::bit_cast<std::uint32_t>(n(1)),
                  "exp(" << show(x) << ") = " << show(a(1)) << " alone, " << show(n(1)) << " beside a NaN");
    CHECK(std::isinf(m(W - 1)));
    CHECK(std::isnan(n(0)));
  }
  // A NaN whose payload sits in the low bits stays NaN in a batch of finite lanes too.
  kiln::tensor<F, 1> nans = kiln::full<F>({W}, 1.f);
  for (index_t i = 0; i < W; i += 2) nans(i) = std::bit_cast<F>(0x7fc00001u + std::uint32_t(i) * 0x11u);
  kiln::tensor<F, 1> const e = kiln::exp(nans);
  for (index_t i = 0; i < W; ++i) CHECK(std::isnan(e(i)) == (i % 2 == 0));
}

// ---- integer and bool types -------------------------------------------------------------------

template <class I>
I wrap(std::uint64_t v) {
  return static_cast<I>(v);  // modular since C++20
}

TEST_CASE_TEMPLATE("integer arithmetic wraps around", I, std::int32_t, std::int64_t) {
  using U = std::uint64_t;
  column<I> const x(integer_values<I>());
  auto const [a, b] = cross(integer_values<I>(), integer_values<I>());
  check("add", exact, [](auto const& p, auto const& q) { return p + q; },
        [](I p, I q) { return wrap<I>(U(p) + U(q)); }, a, b);
  check("sub", exact, [](auto const& p, auto const& q) { return p - q; },
        [](I p, I q) { return wrap<I>(U(p) - U(q)); }, a, b);
  check("mul", exact, [](auto const& p, auto const& q) { return p * q; },
        [](I p, I q) { return wrap<I>(U(p) * U(q)); }, a, b);
  check("neg", exact, [](auto const& p) { return -p; }, [](I p) { return wrap<I>(U(0) - U(p)); }, x);
  check("abs", exact, call(kiln::abs), [](I p) { return p < 0 ? wrap<I>(U(0) - U(p)) : p; }, x);
  check("sign", exact, call(kiln::sign), [](I p) { return I((0 < p) - (p < 0)); }, x);
  check("square", exact, call(kiln::square), [](I p) { return wrap<I>(U(p) * U(p)); }, x);
  // Exponentiation by squaring modulo 2^64; a negative exponent gives 0 unless the base is ±1
  // (PyTorch raises an error there).
  check("pow", exact, call(kiln::pow),
        [](I base, I e) {
          if (e < 0) return base == 1 ? I(1) : base == -1 ? I(e % 2 == 0 ? 1 : -1) : I(0);
          U r = 1, m = U(base);
          for (U k = U(e); k != 0; k >>= 1, m *= m)
            if (k & 1) r *= m;
          return wrap<I>(r);
        },
        a, b);
  // C's % with the dividend's sign; remainder with the divisor's. Division by zero gives 0 (kiln's
  // choice; PyTorch raises ZeroDivisionError), and INT_MIN % -1 is 0, not a trap.
  auto const fmod_ref = [](I p, I q) { return q == 0 || q == -1 ? I(0) : I(p % q); };
  check("fmod", exact, call(kiln::fmod), fmod_ref, a, b);
  check("remainder", exact, call(kiln::remainder),
        [&](I p, I q) {
          I const r = fmod_ref(p, q);
          return r != 0 && ((q < 0) != (r < 0)) ? I(r + q) : r;
        },
        a, b);
  check("minimum", exact, call(kiln::minimum), [](I p, I q) { return std::min(p, q); }, a, b);
  check("maximum", exact, call(kiln::maximum), [](I p, I q) { return std::max(p, q); }, a, b);
  check("clamp(x, -7, 100)", exact, [](auto const& p) { return kiln::clamp(p, -7, 100); },
        [](I p) { return std::clamp(p, I(-7), I(100)); }, x);
  check("clamp(x, lo, 3), lo > 3 gives 3", exact,
        [](auto const& p, auto const& q) { return kiln::clamp(p, q, 3); },
        [](I p, I q) { return std::min(std::max(p, q), I(3)); }, a, b);
  check("fma", exact, [](auto const& p, auto const& q) { return kiln::fma(p, q, p); },
        [](I p, I q) { return wrap<I>(U(p) * U(q) + U(p)); }, a, b);
  check("addcmul", exact, [](auto const& p, auto const& q) { return kiln::addcmul(p, q, p, 3); },
        [](I p, I q) { return wrap<I>(U(p) + U(3) * U(q) * U(p)); }, a, b);
  check("floor round trunc ceil leave integers alone", exact,
        [](auto const& p) { return kiln::floor(p) + 0 * (kiln::round(p) + kiln::trunc(p) + kiln::ceil(p)); },
        [](I p) { return p; }, x);
  check("where", exact, [](auto const& p, auto const& q) { return kiln::where(p < q, p, q); },
        [](I p, I q) { return p < q ? p : q; }, a, b);
  // (lhs, rhs: Clang before 16 cannot capture structured bindings.)
  auto const compare = [&, &lhs = a, &rhs = b](std::string const& what, auto build, auto ref) {
    check(what, exact, build, ref, lhs, rhs);
  };
  compare("==", [](auto const& p, auto const& q) { return p == q; }, std::equal_to<I>{});
  compare("!=", [](auto const& p, auto const& q) { return p != q; }, std::not_equal_to<I>{});
  compare("<", [](auto const& p, auto const& q) { return p < q; }, std::less<I>{});
  compare("<=", [](auto const& p, auto const& q) { return p <= q; }, std::less_equal<I>{});
  compare(">", [](auto const& p, auto const& q) { return p > q; }, std::greater<I>{});
  compare(">=", [](auto const& p, auto const& q) { return p >= q; }, std::greater_equal<I>{});
  compare("&& || !", [](auto const& p, auto const& q) { return (p && q) || !p; },
          [](I p, I q) { return (p != 0 && q != 0) || p == 0; });
  check("isnan isinf isfinite on integers", exact,
        [](auto const& p) { return kiln::isnan(p) || kiln::isinf(p) || !kiln::isfinite(p); },
        [](I) { return false; }, x);
  // Overflow wraps, spelled out: INT_MAX + 1 == INT_MIN, INT_MIN + -1 == INT_MAX, -INT_MIN == INT_MIN.
  column<I> const big(std::vector<I>{lim<I>::max(), lim<I>::min(), lim<I>::min()});
  column<I> const small(std::vector<I>{I(1), I(-1), I(0)});
  column<I> const wrapped(std::vector<I>{lim<I>::min(), lim<I>::max(), lim<I>::min()});
  check_against("INT_MAX + 1 == INT_MIN", exact, [](auto const& p, auto const& q) { return p + q; }, wrapped,
                big, small);
  column<I> const int_min(std::vector<I>{lim<I>::min()});
  check_against("-INT_MIN == INT_MIN", exact, [](auto const& p) { return -p; }, int_min, int_min);
}

// ---- type promotion ---------------------------------------------------------------------------

template <class E>
using value_t = typename std::remove_cvref_t<E>::value_type;

TEST_CASE("type promotion follows PyTorch") {
  std::vector<double> const reals = {0, 1, -2, 3, 0.5, -0.25, 7, 100};
  std::vector<double> const ints = {0, 1, -2, 3, 5, -4, 7, 100};
  column<float> const f(reals);
  column<double> const d(reals);
  column<std::int32_t> const i(ints);
  column<std::int64_t> const l(ints);
  column<bool> const b(std::vector<int>{0, 1, 1, 0, 1, 0, 0, 1});
  auto const fv = f.cview(0, 8);
  auto const dv = d.cview(0, 8);
  auto const iv = i.cview(0, 8);
  auto const lv = l.cview(0, 8);
  auto const bv = b.cview(0, 8);

  static_assert(std::is_same_v<value_t<decltype(iv + fv)>, float>);        // int op float -> float
  static_assert(std::is_same_v<value_t<decltype(fv * dv)>, double>);       // float op double -> double
  static_assert(std::is_same_v<value_t<decltype(fv * 2.0)>, float>);       // a C++ double stays weak
  static_assert(std::is_same_v<value_t<decltype(2.0 - fv)>, float>);
  static_assert(std::is_same_v<value_t<decltype(iv * 2.5)>, float>);       // int tensor * 2.5 -> float
  static_assert(std::is_same_v<value_t<decltype(iv * 2)>, std::int32_t>);
  static_assert(std::is_same_v<value_t<decltype(iv + lv)>, std::int64_t>);
  static_assert(std::is_same_v<value_t<decltype(bv + iv)>, std::int32_t>);
  static_assert(std::is_same_v<value_t<decltype(fv < dv)>, bool>);         // comparisons give bool
  static_assert(std::is_same_v<value_t<decltype(iv == 3)>, bool>);
  static_assert(std::is_same_v<value_t<decltype(iv / lv)>, float>);        // true division
  static_assert(std::is_same_v<value_t<decltype(kiln::exp(iv))>, float>);  // floating ops on ints
  static_assert(std::is_same_v<value_t<decltype(kiln::sqrt(lv))>, float>);
  static_assert(std::is_same_v<value_t<decltype(kiln::exp(dv))>, double>);
  static_assert(std::is_same_v<value_t<decltype(kiln::abs(iv))>, std::int32_t>);
  static_assert(std::is_same_v<value_t<decltype(kiln::pow(iv, 2))>, std::int32_t>);
  static_assert(std::is_same_v<value_t<decltype(kiln::pow(iv, 0.5))>, float>);
  static_assert(std::is_same_v<value_t<decltype(kiln::where(bv, iv, fv))>, float>);
  static_assert(std::is_same_v<value_t<decltype(kiln::where(bv, fv, 1.0))>, float>);
  static_assert(std::is_same_v<value_t<decltype(kiln::clamp(iv, 0, 5))>, std::int32_t>);
  static_assert(std::is_same_v<value_t<decltype(kiln::logical_and(fv, iv))>, bool>);
  static_assert(std::is_same_v<value_t<decltype(kiln::isnan(iv))>, bool>);
  static_assert(std::is_same_v<value_t<decltype(kiln::relu(iv))>, std::int32_t>);
  static_assert(std::is_same_v<value_t<decltype(kiln::sigmoid(iv))>, float>);

  check("int + float", exact, [](auto const& p, auto const& q) { return p + q; },
        [](double p, double q) { return p + q; }, i, f);
  check("float * double", exact, [](auto const& p, auto const& q) { return p * q; },
        [](double p, double q) { return p * q; }, f, d);
  check("float * 0.1 (the scalar rounds to float)", exact, [](auto const& p) { return p * 0.1; },
        [](double p) { return p * double(0.1f); }, f);
  check("int * 2.5", exact, [](auto const& p) { return p * 2.5; }, [](double p) { return p * 2.5; }, i);
  check("int / int", exact, [](auto const& p, auto const& q) { return p / q; },
        [](double p, double q) { return p / q; }, i, l);
  check("exp(int)", tr, call(kiln::exp), [](double p) { return std::exp(p); }, i);
  check("float < double", exact, [](auto const& p, auto const& q) { return p < q; },
        [](double p, double q) { return p < q; }, f, d);
  check("bool + int", exact, [](auto const& p, auto const& q) { return p + q; },
        [](bool p, std::int32_t q) { return q + (p ? 1 : 0); }, b, i);
  check("where(bool, int, float)", exact, call(kiln::where),
        [](bool c, double p, double q) { return c ? p : q; }, b, i, f);
}

// 37 values (a SIMD body and a tail): of uint8 0, 7, ..., 252, of int8 -128, -121, ..., 124; of
// int32 its edges, values past float's 2^24 and steps of about 1e8 of both signs.
template <class I>
column<I> integer_steps() {
  column<I> c(37);
  if constexpr (sizeof(I) == 1) {
    for (index_t k = 0; k < c.size(); ++k) c[k] = I(lim<I>::min() + 7 * k);
  } else {
    std::vector<I> v = {0, 1, -1, 5, -5, 100, -100, lim<I>::max(), lim<I>::min(), 16777217, -16777219, 3000};
    for (index_t k = 0; k < c.size(); ++k) c[k] = k < index_t(v.size()) ? v[std::size_t(k)] : I((k - 24) * 98765431);
  }
  return c;
}

// An integer C++ scalar in an op that computes in float becomes a float, as a Python number does
// in PyTorch: `u8 / -2` divides by -2.f. Converted to the tensor's type first, it wrapped (-2 to
// 254, 300 to 44, 3000000000 to -1294967296 in int32). The references compute as PyTorch 2.15 does
// (in float, values checked against it).
TEST_CASE("an integer scalar keeps its value in ops that compute in float") {
  auto const u = integer_steps<std::uint8_t>();
  auto const s = integer_steps<std::int8_t>();
  auto const a = integer_steps<std::int32_t>();
  auto const uv = u.cview(0, 1);
  static_assert(std::is_same_v<decltype(uv / -2),
                               kiln::map<kiln::ops::div_op, kiln::leaf<std::uint8_t, 1>, kiln::constant<float>>>);
  static_assert(std::is_same_v<value_t<decltype(kiln::copysign(uv, -1))>, float>);
  static_assert(std::is_same_v<value_t<decltype(kiln::lerp(uv, -1, 0.5))>, float>);

  check("u8 / -2", exact, [](auto const& p) { return p / -2; }, [](float p) { return p / -2.f; }, u);
  check("300 / u8", exact, [](auto const& p) { return 300 / p; }, [](float p) { return 300.f / p; }, u);
  check("-1 / u8", exact, [](auto const& p) { return -1 / p; }, [](float p) { return -1.f / p; }, u);
  check("copysign(u8, -1)", exact, [](auto const& p) { return kiln::copysign(p, -1); },
        [](float p) { return std::copysign(p, -1.f); }, u);
  check("atan2(u8, -1)", tr, [](auto const& p) { return kiln::atan2(p, -1); },
        [](double p) { return std::atan2(p, -1.0); }, u);
  check("hypot(u8, 300)", tr, [](auto const& p) { return kiln::hypot(p, 300); },
        [](double p) { return std::hypot(p, 300.0); }, u);
  check("lerp(u8, -1, 0.5)", exact, [](auto const& p) { return kiln::lerp(p, -1, 0.5); },
        [](float p) { return -1.f - (-1.f - p) * 0.5f; }, u);
  check("int8 / 200", exact, [](auto const& p) { return p / 200; }, [](float p) { return p / 200.f; }, s);
  check("copysign(int8, 200)", exact, [](auto const& p) { return kiln::copysign(p, 200); },
        [](float p) { return std::fabs(p); }, s);
  check("int32 / 3000000000", exact, [](auto const& p) { return p / 3000000000LL; },
        [](float p) { return p / 3e9f; }, a);
  // So is an integer scalar beside a float one, which makes the op compute in float.
  using f32 = kiln::constant<float>;
  static_assert(std::is_same_v<decltype(kiln::fma(uv, -1, 2.5)),
                               kiln::map<kiln::ops::fma_op, kiln::leaf<std::uint8_t, 1>, f32, f32>>);
  check("fma(u8, -1, 2.5)", exact, [](auto const& p) { return kiln::fma(p, -1, 2.5); },
        [](float p) { return 2.5f - p; }, u);
  check("where(u8 > 100, -1, 2.5)", exact, [](auto const& p) { return kiln::where(p > 100, -1, 2.5); },
        [](std::uint8_t p) { return p > 100 ? -1.f : 2.5f; }, u);
  check("clamp(u8, 300, 400.5)", exact, [](auto const& p) { return kiln::clamp(p, 300, 400.5); },
        [](std::uint8_t) { return 300.f; }, u);
  check("clamp(int8, -200, 2.5)", exact, [](auto const& p) { return kiln::clamp(p, -200, 2.5); },
        [](float p) { return std::min(p, 2.5f); }, s);

  // Ops that compute in the integer type keep PyTorch's rule: the scalar wraps into the tensor's type.
  static_assert(std::is_same_v<value_t<decltype(uv + 300)>, std::uint8_t>);
  check("u8 + 300 adds 44", exact, [](auto const& p) { return p + 300; },
        [](std::uint8_t p) { return std::uint8_t(p + 44); }, u);
  check("u8 == -1 is u8 == 255", exact, [](auto const& p) { return p == -1; },
        [](std::uint8_t p) { return p == 255; }, u);
  check("int8 < 200 is int8 < -56", exact, [](auto const& p) { return p < 200; },
        [](std::int8_t p) { return p < -56; }, s);

  // linear_recurrence computes in float too: its coefficient -1 over uint8 is -1.f, not 255.
  kiln::tensor<std::uint8_t, 1> const b = {1, 2, 3, 4};
  kiln::tensor<float, 1> const y = kiln::linear_recurrence(b, -1, 0);
  CHECK(std::vector<float>(y.data(), y.data() + y.size()) == std::vector<float>{1, 1, 2, 2});
}

// clamp's integer scalar bounds saturate into an integer tensor's type, so one beyond the type's
// range does not bind, as in PyTorch (clamp(u8, -1, 300) is u8). Wrapped, -1 was 255 and 300 was
// 44. The result keeps the tensor's type.
TEST_CASE("clamp: integer bounds beyond the tensor's type do not bind") {
  auto const u = integer_steps<std::uint8_t>();
  auto const s = integer_steps<std::int8_t>();
  auto const a = integer_steps<std::int32_t>();
  using u8 = std::uint8_t;
  using i8 = std::int8_t;
  using i32 = std::int32_t;
  using bound = kiln::constant<u8>;
  static_assert(std::is_same_v<decltype(kiln::clamp(u.cview(0, 1), -1, 300)),
                               kiln::map<kiln::ops::clamp_op, kiln::leaf<u8, 1>, bound, bound>>);
  static_assert(std::is_same_v<value_t<decltype(kiln::clamp(a.cview(0, 1), 0, 3000000000LL))>, i32>);

  check("clamp(u8, -1, 300)", exact, [](auto const& p) { return kiln::clamp(p, -1, 300); }, [](u8 p) { return p; }, u);
  check("clamp(u8, -5, 10)", exact, [](auto const& p) { return kiln::clamp(p, -5, 10); },
        [](u8 p) { return std::min(p, u8(10)); }, u);
  check("clamp(u8, 0, 256)", exact, [](auto const& p) { return kiln::clamp(p, 0, 256); }, [](u8 p) { return p; }, u);
  check("clamp(int8, -200, 200)", exact, [](auto const& p) { return kiln::clamp(p, -200, 200); },
        [](i8 p) { return p; }, s);
  check("clamp(int8, -100, 200)", exact, [](auto const& p) { return kiln::clamp(p, -100, 200); },
        [](i8 p) { return std::max(p, i8(-100)); }, s);
  check("clamp(int32, 0, 3000000000)", exact, [](auto const& p) { return kiln::clamp(p, 0, 3000000000LL); },
        [](i32 p) { return std::max(p, 0); }, a);
  check("clamp(int32, -3000000000, -2)", exact, [](auto const& p) { return kiln::clamp(p, -3000000000LL, -2); },
        [](i32 p) { return std::min(p, -2); }, a);
  // A lower bound above the type's range or an upper one below it: PyTorch raises; kiln gives the
  // saturated bound (the value of the type nearest the true result).
  check("clamp(u8, 300, 400)", exact, [](auto const& p) { return kiln::clamp(p, 300, 400); },
        [](u8) { return u8(255); }, u);
  check("clamp(int8, 10, -200)", exact, [](auto const& p) { return kiln::clamp(p, 10, -200); },
        [](i8) { return i8(-128); }, s);
}

// Where PyTorch checks a scalar against the type it converts to (c10::overflows), kiln does too and
// throws kiln::value_error instead of wrapping: where's branches, an integer tensor's exponent in
// pow, addcmul's value. Elsewhere integer scalars wrap, as in PyTorch (the case above).
TEST_CASE("scalars PyTorch refuses: where's branches, pow's integer exponent, addcmul's value") {
  kiln::tensor<std::int8_t, 1> const s = {1, 2, 3};
  kiln::tensor<std::uint8_t, 1> const u = {1, 2, 3};
  kiln::tensor<std::int32_t, 1> const i = {1, 2, 3};
  kiln::tensor<std::int64_t, 1> const l = {1, 2, 3};
  kiln::tensor<float, 1> const f = {1, 2, 3};
  kiln::tensor<bool, 1> const m = {true, false, true};
  auto values = [](auto const& e) {
    auto const t = kiln::eval(e);
    std::vector<double> v;
    for (kiln::index_t k = 0; k < t.size(); ++k) v.push_back(double(t.data()[k]));
    return v;
  };
  using v = std::vector<double>;
  float const inf = std::numeric_limits<float>::infinity();

  CHECK_THROWS_WITH_AS(kiln::where(m, s, 200), "where: 200 cannot be converted to int8 without overflow", kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::where(m, 200, s), "where: 200 cannot be converted to int8 without overflow", kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::where(m, s, -129), "where: -129 cannot be converted to int8 without overflow", kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::where(m, u, -256), "where: -256 cannot be converted to uint8 without overflow", kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::where(m, i, 3000000000LL), "where: 3000000000 cannot be converted to int32 without overflow",
                       kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::where(m, f, 1e300), "where: 1e+300 cannot be converted to float without overflow", kiln::value_error);
  CHECK(values(kiln::where(m, s, 127)) == v{1, 127, 3});
  CHECK(values(kiln::where(m, s, -128)) == v{1, -128, 3});
  CHECK(values(kiln::where(m, u, -1)) == v{1, 255, 3});  // a negative integer wraps into an unsigned type
  CHECK(values(kiln::where(m, l, 3000000000LL)) == v{1, 3e9, 3});
  CHECK(values(kiln::where(m, s, 2.5)) == v{1, 2.5, 3});  // a float scalar: the result is float
  CHECK(values(kiln::where(m, f, 1e30)) == v{1, double(1e30f), 3});
  CHECK(values(kiln::where(m, f, inf)) == v{1, inf, 3});
  CHECK(std::isnan(values(kiln::where(m, f, std::nan("")))[1]));

  CHECK_THROWS_WITH_AS(kiln::pow(s, 200), "pow: 200 cannot be converted to int8 without overflow", kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::pow(u, 300), "pow: 300 cannot be converted to uint8 without overflow", kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::pow(s, -1),
                       "pow: -1 is a negative integer power of an integer tensor, refused as in PyTorch (a floating "
                       "exponent gives a floating result)",
                       kiln::value_error);
  CHECK_THROWS_AS(kiln::pow(u, -1), kiln::value_error);
  CHECK_THROWS_AS(kiln::pow(m, -1), kiln::value_error);
  CHECK(values(kiln::pow(s, 2)) == v{1, 4, 9});
  CHECK(values(kiln::pow(200, s)) == v{-56, 64, 0});  // a scalar base wraps, as in PyTorch
  CHECK(values(kiln::pow(s, i * -1)) == v{1, 0, 0});  // a tensor of negative exponents: the integer rule
  CHECK(values(kiln::pow(f, 1e300)) == v{1, inf, inf});  // a float tensor's exponent is not checked
  CHECK(values(kiln::pow(s, -1.0)) == v{1, 0.5, double(1.f / 3.f)});

  CHECK_THROWS_WITH_AS(kiln::addcmul(s, s, s, 300), "addcmul: 300 cannot be converted to int8 without overflow",
                       kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::addcmul(u, u, u, -1.5), "addcmul: -1.5 cannot be converted to uint8 without overflow",
                       kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::addcmul(i, i, i, 3e9), "addcmul: 3000000000 cannot be converted to int32 without overflow",
                       kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::addcmul(s, s, s, std::nan("")), "addcmul: nan cannot be converted to int8 without overflow",
                       kiln::value_error);
  CHECK_THROWS_WITH_AS(kiln::addcmul(f, f, f, 1e300), "addcmul: 1e+300 cannot be converted to float without overflow",
                       kiln::value_error);
  CHECK(values(kiln::addcmul(s, s, s, 127)) == v{-128, -2, 122});  // 1 + 127, 2 + 508, 3 + 1143, wrapped
  CHECK(values(kiln::addcmul(u, u, u, -1)) == v{0, 254, 250});      // -1 wraps to 255
  CHECK(values(kiln::addcmul(s, s, s, 0.5)) == v{1, 2, 3});         // truncated to 0
  CHECK(values(kiln::addcmul(f, f, f, inf)) == v{inf, inf, inf});
}

}  // namespace

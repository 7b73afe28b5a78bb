// Reductions and softmax: every op against a double-precision reference over every subset of axes,
// layouts, dtypes and both policies; fused producers; tails and accuracy; NaN and inf; integer and
// bool result types; errors; fusion boundaries and aliasing.
#include "bitwise.hpp"
#include "ulp.hpp"

#include <doctest/doctest.h>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using kiln::index_t;
constexpr int float_lanes = int(kiln::simd_detail::batch<float>::size);
constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr float finf = std::numeric_limits<float>::infinity();
constexpr float fnan = std::numeric_limits<float>::quiet_NaN();

std::string list_string(std::vector<index_t> const& v) {
  std::string s = "[";
  for (std::size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + std::to_string(v[k]);
  return s + "]";
}

// ---------------------------------------------------------------------------------------------
// The reference: elements copied row-major into doubles, and one generic reducer over them.

struct dense {
  std::vector<index_t> shape;
  std::vector<double> values;  // row-major
};
using bucket = std::vector<double>;

// The next multi-index of `shape` in row-major order; false after the last.
bool next_index(std::vector<index_t>& index, std::vector<index_t> const& shape) {
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    if (++index[d] < shape[d]) return true;
    index[d] = 0;
  }
  return false;
}
index_t count_of(std::vector<index_t> const& shape) {
  return std::accumulate(shape.begin(), shape.end(), index_t{1}, std::multiplies<>{});
}

// The elements a strided view reads, row-major.
template <class T>
dense read_strided(T const* base, std::vector<index_t> const& shape, std::vector<index_t> const& strides) {
  dense out{shape, {}};
  if (count_of(shape) == 0) return out;
  std::vector<index_t> index(shape.size(), 0);
  do {
    index_t offset = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) offset += index[d] * strides[d];
    out.values.push_back(static_cast<double>(base[offset]));
  } while (next_index(index, shape));
  return out;
}
template <class T, int R>
dense to_dense(kiln::tensor_view<T, R> const& v) {
  return read_strided(v.data(), {v.shape().begin(), v.shape().end()}, {v.strides().begin(), v.strides().end()});
}
template <class T, int R>
dense to_dense(kiln::tensor<T, R> const& t) {
  return to_dense(t.view());
}

// Groups the elements of `in` by output position when `axes` are reduced: each bucket holds one
// output's inputs in row-major order over the reduced dimensions. `kept_shape` receives the output
// shape with reduced dimensions kept as 1.
std::vector<bucket> buckets_of(dense const& in, std::vector<int> const& axes, std::vector<index_t>& kept_shape) {
  std::vector<bool> reduced(in.shape.size(), false);
  for (int a : axes) reduced[std::size_t(a)] = true;
  kept_shape.clear();
  for (std::size_t d = 0; d < in.shape.size(); ++d) kept_shape.push_back(reduced[d] ? 1 : in.shape[d]);
  std::vector<bucket> out(std::size_t(count_of(kept_shape)));
  if (in.values.empty()) return out;
  std::vector<index_t> index(in.shape.size(), 0);
  std::size_t k = 0;
  do {
    index_t o = 0;
    for (std::size_t d = 0; d < in.shape.size(); ++d)
      if (!reduced[d]) o = o * in.shape[d] + index[d];
    out[std::size_t(o)].push_back(in.values[k++]);
  } while (next_index(index, in.shape));
  return out;
}

// The ops in double, with PyTorch's conventions for NaN, infinities and empty inputs.
namespace ref {
double sum(bucket const& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double prod(bucket const& v) { return std::accumulate(v.begin(), v.end(), 1.0, std::multiplies<>{}); }
double mean(bucket const& v) { return sum(v) / double(v.size()); }  // 0 / 0 = NaN when empty
double var(bucket const& v, double correction) {
  double const m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / std::max(0.0, double(v.size()) - correction);
}
double amax(bucket const& v) {
  double m = -inf;
  for (double x : v) {
    if (std::isnan(x)) return nan;
    m = std::max(m, x);
  }
  return m;
}
double amin(bucket const& v) {
  double m = inf;
  for (double x : v) {
    if (std::isnan(x)) return nan;
    m = std::min(m, x);
  }
  return m;
}
// The first NaN if there is one, else the first extreme.
template <class Better>
double arg_best(bucket const& v, Better better) {
  std::size_t best = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return double(i);
    if (better(v[i], v[best])) best = i;
  }
  return double(best);
}
double argmax(bucket const& v) { return arg_best(v, std::greater<>{}); }
double argmin(bucket const& v) { return arg_best(v, std::less<>{}); }
// PyTorch's formula: the maximum is the shift unless it is infinite.
double logsumexp(bucket const& v) {
  double const m = amax(v);
  double const shift = std::isinf(m) ? 0.0 : m;
  double s = 0;
  for (double x : v) s += std::exp(x - shift);
  return std::log(s) + shift;
}
double norm1(bucket const& v) {
  double s = 0;
  for (double x : v) s += std::abs(x);
  return s;
}
double norm2(bucket const& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}
double norm_inf(bucket const& v) {
  bucket a(v.size());
  std::transform(v.begin(), v.end(), a.begin(), [](double x) { return std::abs(x); });
  return amax(a);
}
double all(bucket const& v) { return std::all_of(v.begin(), v.end(), [](double x) { return x != 0; }); }
double any(bucket const& v) { return std::any_of(v.begin(), v.end(), [](double x) { return x != 0; }); }
double count_nonzero(bucket const& v) {
  return double(std::count_if(v.begin(), v.end(), [](double x) { return x != 0; }));
}

// What rounding errors scale with, besides the result itself.
double sum_scale(bucket const& v) { return norm1(v); }
double mean_scale(bucket const& v) { return v.empty() ? 0 : norm1(v) / double(v.size()); }
double square_scale(bucket const& v) { return v.empty() ? 0 : norm2(v) * norm2(v) / double(v.size()); }
double root_scale(bucket const& v) { return std::sqrt(square_scale(v)); }
double exp_scale(bucket const& v) { return norm_inf(v) + 1; }
}  // namespace ref

// A reduction as the reference sees it.
struct reducer {
  std::string name;
  std::function<double(bucket const&)> value;
  double (*scale)(bucket const&) = nullptr;  // rounding errors are relative to |value| + scale
  bool needs_elements = false;               // amax, argmax...: an empty reduction is an error
  // The elementwise producer in front of the reduction (x, y) -> input; x alone by default.
  std::function<double(double, double)> producer = [](double x, double) { return x; };
};

bool close(double got, double want, double tolerance) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::abs(got - want) <= tolerance;
}

// ---------------------------------------------------------------------------------------------
// The sweep's inputs: shapes of rank 1 to 4 in several memory layouts, with several data sets.

enum class layout { contiguous, shifted, reversed, strided, transposed, expanded };
enum class dataset { values, zeros, specials, integers, truths };

constexpr char const* layout_names[] = {"contiguous", "shifted by one element", "reversed along dim 0",
                                        "every second element of the last dim", "transposed",
                                        "expanded along dim 0 (stride 0)"};
constexpr char const* dataset_names[] = {"values", "with zeros", "with NaN and inf", "integers", "booleans"};

std::uint64_t mix(std::uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Element i of a data set. Values are ±[0.5, 1.5) in steps of 1/64, exact in float and double, so
// both types reduce the same numbers and one reference serves both.
double sample(dataset d, std::uint64_t i, std::uint64_t seed) {
  std::uint64_t const h = mix(i * 0x9e3779b97f4a7c15ULL + seed);
  double const magnitude = double(32 + h % 64) / 64;
  double const v = (h >> 8 & 1) ? magnitude : -magnitude;
  std::uint64_t const pick = (h >> 16) % 16;
  switch (d) {
    case dataset::values: return v;
    case dataset::zeros: return pick < 5 ? 0.0 : v;
    case dataset::specials: return pick == 0 ? nan : pick == 1 ? inf : pick == 2 ? -inf : v;
    // Mostly 0 and ±1 with rare ±2, so that products stay well inside int64 and double.
    case dataset::integers: {
      double const one = v > 0 ? 1.0 : -1.0;
      return pick < 3 ? 0.0 : pick == 3 && (h >> 24) % 4 == 0 ? 2 * one : one;
    }
    case dataset::truths: return pick < 6 ? 0.0 : 1.0;
  }
  return 0;
}

// One input: storage in double (converted per element type), the view's shape/strides/offset into
// it, what that view reads, and a second contiguous operand for fused producers.
struct sweep_input {
  std::string label;
  std::vector<index_t> shape, strides;
  index_t offset = 0;
  std::vector<double> storage, second;
  dense logical, second_logical;
};

sweep_input make_input(std::vector<index_t> const& shape, layout l, dataset d, std::uint64_t seed) {
  int const rank = int(shape.size());
  sweep_input in;
  in.label = list_string(shape) + " " + layout_names[int(l)] + ", " + dataset_names[int(d)];
  in.shape = shape;
  std::vector<index_t> stored = shape;  // the storage's own (row-major) shape
  if (l == layout::strided) stored.back() = 2 * shape.back() + 1;
  if (l == layout::transposed) std::reverse(stored.begin(), stored.end());
  if (l == layout::expanded) stored[0] = 1;
  std::vector<index_t> contiguous(std::size_t(rank), 1);
  for (int k = rank - 2; k >= 0; --k)
    contiguous[std::size_t(k)] = contiguous[std::size_t(k) + 1] * stored[std::size_t(k) + 1];
  in.strides = contiguous;
  switch (l) {
    case layout::contiguous: break;
    case layout::shifted: in.offset = 1; break;
    case layout::reversed:
      in.strides[0] = -contiguous[0];
      in.offset = (shape[0] - 1) * contiguous[0];
      break;
    case layout::strided:
      in.strides.back() = 2;
      in.offset = 1;
      break;
    case layout::transposed:
      for (int k = 0; k < rank; ++k) in.strides[std::size_t(k)] = contiguous[std::size_t(rank - 1 - k)];
      break;
    case layout::expanded: in.strides[0] = 0; break;
  }
  in.storage.resize(std::size_t(count_of(stored) + (l == layout::shifted ? 1 : 0)));
  for (std::size_t i = 0; i < in.storage.size(); ++i) in.storage[i] = sample(d, i, seed);
  in.logical = read_strided(in.storage.data() + in.offset, in.shape, in.strides);
  in.second.resize(std::size_t(count_of(shape)));
  for (std::size_t i = 0; i < in.second.size(); ++i) in.second[i] = sample(dataset::values, i, seed + 1);
  in.second_logical = dense{shape, in.second};
  return in;
}

std::vector<sweep_input> make_inputs(std::vector<std::pair<layout, dataset>> const& kinds) {
  std::vector<std::vector<index_t>> shapes;
  for (index_t n = 0; n <= 3 * float_lanes + 1; ++n) shapes.push_back({n});  // every tail
  shapes.push_back({1100});                                                 // more than a block of 1024
  // [1030, 2]: more than a block of rows folds into each output of axis 0, and of short rows into
  // the full reduction of a strided layout.
  for (auto s : std::vector<std::vector<index_t>>{{5, 19}, {1, 7}, {37, 3}, {2, 70}, {0, 4}, {1030, 2}, {3, 1, 9},
                                                 {4, 6, 5}, {2, 0, 3}, {3, 5, 7, 2}, {2, 1, 3, 37}})
    shapes.push_back(s);
  std::vector<sweep_input> inputs;
  std::uint64_t seed = 1;
  for (auto const& shape : shapes)
    for (auto [l, d] : kinds)
      if (l == layout::contiguous || count_of(shape) != 0)  // odd layouts of nothing are nothing
        inputs.push_back(make_input(shape, l, d, seed++));
  return inputs;
}

// The same inputs in element type T, each seen as a rank-8 view: the input's dimensions followed by
// dimensions of extent 1. Reducing a subset S of the input's axes plus 4 - |S| of the extent-1
// dimensions is the reduction over S, always over exactly four axes: so one instantiation per op,
// type, policy and keepdim covers every subset of every rank, where real rank-R tensors would need
// one per subset size and rank (the compile time of this file is the budget). Reducing an extent-1
// dimension is exact for every op, and the planner drops those dimensions, so the loops run exactly
// as for the rank-R tensor. Real ranks are tested for their shapes below, and by the other tests.
template <class T>
struct typed_input {
  sweep_input const* in;
  kiln::tensor<T, 1> storage, second;

  kiln::tensor_view<T const, 8> view() const { return padded(storage.data() + in->offset, in->strides); }
  kiln::tensor_view<T const, 8> second_view() const {
    std::vector<index_t> contiguous(in->shape.size(), 1);
    for (int k = int(contiguous.size()) - 2; k >= 0; --k)
      contiguous[std::size_t(k)] = contiguous[std::size_t(k) + 1] * in->shape[std::size_t(k) + 1];
    return padded(second.data(), contiguous);
  }

 private:
  kiln::tensor_view<T const, 8> padded(T const* data, std::vector<index_t> const& strides) const {
    kiln::extents<8> shape, s;
    shape.fill(1);
    s.fill(1);
    std::copy(in->shape.begin(), in->shape.end(), shape.begin());
    std::copy(strides.begin(), strides.end(), s.begin());
    return {data, shape, s};
  }
};

template <class T>
kiln::tensor<T, 1> convert(std::vector<double> const& v) {
  kiln::tensor<T, 1> t(kiln::extents<1>{index_t(v.size())}, kiln::uninitialized);
  for (std::size_t i = 0; i < v.size(); ++i) t.data()[i] = static_cast<T>(v[i]);
  return t;
}

// The inputs for floating, integer or bool element types.
enum class category { floating, integer, boolean };
std::vector<sweep_input> const& inputs_for(category c) {
  using L = layout;
  using D = dataset;
  static std::vector<sweep_input> const floating =
      make_inputs({{L::contiguous, D::values}, {L::shifted, D::values}, {L::reversed, D::values},
                   {L::strided, D::values}, {L::transposed, D::values}, {L::expanded, D::values},
                   {L::contiguous, D::zeros}, {L::contiguous, D::specials}, {L::strided, D::specials}});
  static std::vector<sweep_input> const integer =
      make_inputs({{L::contiguous, D::integers}, {L::strided, D::integers}, {L::transposed, D::integers}});
  static std::vector<sweep_input> const boolean = make_inputs({{L::contiguous, D::truths}, {L::transposed, D::truths}});
  return c == category::floating ? floating : c == category::integer ? integer : boolean;
}
template <class T>
constexpr category category_of = std::is_floating_point_v<T> ? category::floating
                                 : std::is_same_v<T, bool>   ? category::boolean
                                                             : category::integer;

template <class T>
std::vector<typed_input<T>> const& sweep_inputs() {
  static std::vector<typed_input<T>> const typed = [] {
    std::vector<typed_input<T>> out;
    for (auto const& in : inputs_for(category_of<T>))
      out.push_back({&in, convert<T>(in.storage), convert<T>(in.second)});
    return out;
  }();
  return typed;
}

// One evaluation of the sweep and what it is checked against.
struct sweep_case {
  std::size_t input;              // index into the inputs
  std::vector<int> subset;        // the input's axes reduced
  int axes[4];                    // what kiln is given (see `plan_sweep`)
  std::vector<index_t> kept, dropped;  // the result's shape with keepdim and without
  std::vector<double> want, scale;
  bool throws;                    // the op needs elements and the reduced extents hold none
  std::string where;
};

// Every non-empty subset of the axes of every input of a category, with the reference's results
// (rounded to float for float: a product beyond float's range is an infinity there too).
std::vector<sweep_case> plan_sweep(reducer const& op, category c, bool round_to_float, std::string_view type) {
  std::vector<sweep_case> cases;
  auto const& inputs = inputs_for(c);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    sweep_input const& in = inputs[k];
    dense produced = in.logical;
    for (std::size_t i = 0; i < produced.values.size(); ++i)
      produced.values[i] = op.producer(in.logical.values[i], in.second_logical.values[i]);
    int const rank = int(in.shape.size());
    for (unsigned mask = 1; mask < 1u << rank; ++mask) {
      sweep_case sc{k, {}, {}, {}, {}, {}, {}, false, {}};
      for (int d = 0; d < rank; ++d)
        if (mask >> d & 1) sc.subset.push_back(d);
      // kiln gets the subset and trailing extent-1 dimensions, last first, every second one
      // counted from the end: normalising axes is part of what runs.
      std::vector<int> four = sc.subset;
      for (int pad = rank; four.size() < 4; ++pad) four.push_back(pad);
      for (int a = 0; a < 4; ++a) sc.axes[a] = a % 2 ? four[std::size_t(3 - a)] - 8 : four[std::size_t(3 - a)];
      for (auto const& b : buckets_of(produced, sc.subset, sc.kept)) {
        double const v = op.value(b);
        bool const beyond_float = std::abs(v) > std::numeric_limits<float>::max();
        sc.want.push_back(!round_to_float ? v : beyond_float ? std::copysign(inf, v) : double(float(v)));
        sc.scale.push_back(op.scale ? op.scale(b) : 0.0);
      }
      index_t reduced = 1;
      for (int d : sc.subset) reduced *= in.shape[std::size_t(d)];
      sc.throws = op.needs_elements && reduced == 0;
      for (int d = 0; d < rank; ++d)
        if (!(mask >> d & 1)) sc.dropped.push_back(in.shape[std::size_t(d)]);
      sc.where = op.name + " over axes " + list_string({sc.subset.begin(), sc.subset.end()}) + " of " + in.label +
                 " " + std::string(type);
      cases.push_back(std::move(sc));
    }
  }
  return cases;
}

// Relative tolerance of results in T (integers and indices are exact).
template <class T>
constexpr double tolerance = std::is_same_v<T, float> ? 2e-5 : std::is_same_v<T, double> ? 1e-12 : 0.0;

// kiln's result (rank 4 without keepdim, 8 with) against the reference: the shape is the input's
// kept dimensions in order (1 for reduced ones with keepdim), then extents of 1.
void check_result(dense const& got, bool keep, char const* policy, sweep_case const& c, double rtol) {
  std::vector<index_t> expected = keep ? c.kept : c.dropped;
  expected.resize(got.shape.size(), 1);
  std::string problem;
  if (got.shape != expected) problem = "shape " + list_string(got.shape) + ", expected " + list_string(expected);
  for (std::size_t i = 0; i < c.want.size() && problem.empty(); ++i)
    if (!close(got.values[i], c.want[i], rtol * (std::abs(c.want[i]) + c.scale[i])))
      problem = "element " + std::to_string(i) + " is " + std::to_string(got.values[i]) + ", expected " +
                std::to_string(c.want[i]);
  std::string const context = c.where + " (" + policy + (keep ? ", keepdim)" : ")");
  INFO(context);
  CHECK_MESSAGE(problem.empty(), problem);
}
// `message` is what building the reduction threw (empty if nothing was thrown).
void check_threw(std::string const& message, bool keep, char const* policy, sweep_case const& c) {
  std::string const context = c.where + " (" + policy + (keep ? ", keepdim)" : ")");
  INFO(context);
  CHECK_MESSAGE(message.find("cannot reduce over zero elements") != std::string::npos,
                "expected shape_error \"... cannot reduce over zero elements ...\", got \"", message, '"');
}

// Runs `fn` (fn(x, y, axes[, keepdim])) under `policy`, with or without keepdim, over every sweep
// input of element type T and every non-empty subset of its axes, against `op`. Only this loop is
// instantiated per op; the reference's work above is not.
template <class T, bool Keep, class Policy, class Fn>
void sweep(Policy const& policy, reducer const& op, Fn const& fn) {
  char const* const name = std::is_same_v<Policy, kiln::simd_policy> ? "simd" : "seq";
  auto const& inputs = sweep_inputs<T>();
  for (sweep_case const& c : plan_sweep(op, category_of<T>, std::is_same_v<T, float>, kiln::type_name<T>)) {
    auto const x = inputs[c.input].view();
    auto const y = inputs[c.input].second_view();
    auto build = [&] {
      if constexpr (Keep) return fn(x, y, c.axes, kiln::keepdim);
      else return fn(x, y, c.axes);
    };
    if (c.throws) {
      std::string message;
      try {
        (void)build();
      } catch (kiln::shape_error const& error) {
        message = error.what();
      }
      check_threw(message, Keep, name, c);
      continue;
    }
    auto const r = build();
    using Node = std::remove_const_t<decltype(r)>;
    kiln::tensor<typename Node::value_type, Node::rank> out(r.shape());
    kiln::eval(policy, out, r);
    check_result(to_dense(out), Keep, name, c, tolerance<T>);
  }
}

// The builders the sweep instantiates: they take the input x, a second operand y (for fused
// producers), then the axes and keepdim. They are named once so that the explicit cases further
// down can evaluate through the same instantiations (see reduce_all).
auto const sum_of = [](auto const& x, auto const&, auto const&... o) { return kiln::sum(x, o...); };
auto const prod_of = [](auto const& x, auto const&, auto const&... o) { return kiln::prod(x, o...); };
auto const mean_of = [](auto const& x, auto const&, auto const&... o) { return kiln::mean(x, o...); };
auto const amax_of = [](auto const& x, auto const&, auto const&... o) { return kiln::amax(x, o...); };
auto const amin_of = [](auto const& x, auto const&, auto const&... o) { return kiln::amin(x, o...); };
auto const argmax_of = [](auto const& x, auto const&, auto const&... o) { return kiln::argmax(x, o...); };
auto const argmin_of = [](auto const& x, auto const&, auto const&... o) { return kiln::argmin(x, o...); };
auto const logsumexp_of = [](auto const& x, auto const&, auto const&... o) { return kiln::logsumexp(x, o...); };
auto const norm1_of = [](auto const& x, auto const&, auto const&... o) { return kiln::norm<1>(x, o...); };
auto const norm2_of = [](auto const& x, auto const&, auto const&... o) { return kiln::norm(x, o...); };
auto const norm_inf_of = [](auto const& x, auto const&, auto const&... o) {
  return kiln::norm<kiln::infinity_norm>(x, o...);
};
auto const all_of = [](auto const& x, auto const&, auto const&... o) { return kiln::all(x, o...); };
auto const any_of = [](auto const& x, auto const&, auto const&... o) { return kiln::any(x, o...); };
auto const count_nonzero_of = [](auto const& x, auto const&, auto const&... o) { return kiln::count_nonzero(x, o...); };
// var and stddev carry their correction as a value: one type for corrections 0, 1 and 2.
struct var_of {
  double c;
  auto operator()(auto const& x, auto const&, auto const&... o) const {
    return kiln::variance(x, o..., kiln::correction{c});
  }
};
struct stddev_of {
  double c;
  auto operator()(auto const& x, auto const&, auto const&... o) const {
    return kiln::stddev(x, o..., kiln::correction{c});
  }
};

// builder(x) over the given axes of a view of rank 4 or less, evaluated under simd through the
// sweep's instantiation (the rank-8 view, four axes, no keepdim): explicit cases at no compile
// time. The result is row-major; reduce_all gives the one value of a full reduction.
template <class Fn, class T, int R>
dense reduce_padded(Fn const& fn, kiln::tensor_view<T const, R> const& x, std::vector<int> const& subset) {
  static_assert(R <= 4, "four extent-1 dimensions must remain");
  kiln::extents<8> shape, strides;
  shape.fill(1);
  strides.fill(1);
  std::copy(x.shape().begin(), x.shape().end(), shape.begin());
  std::copy(x.strides().begin(), x.strides().end(), strides.begin());
  kiln::tensor_view<T const, 8> const v(x.data(), shape, strides);
  std::vector<int> four = subset;
  for (int pad = R; four.size() < 4; ++pad) four.push_back(pad);
  int const axes[4] = {four[0], four[1], four[2], four[3]};
  auto const r = fn(v, v, axes);
  kiln::tensor<typename decltype(r)::value_type, 4> out(r.shape());
  kiln::eval(kiln::simd, out, r);
  return to_dense(out);
}
template <class Fn, class T>
double reduce_all(Fn const& fn, kiln::tensor<T, 1> const& x) {
  return reduce_padded(fn, kiln::tensor_view<T const, 1>(x), {0}).values.at(0);
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// Every op over every subset of axes.
//
// Each sweep line is one instantiation per op, element type, policy and keepdim, and those are
// what this file's compile time is made of (about a second each at -O3, two-pass ops twice that).
// So: every op as float under simd without keepdim; the plain and the NaN-aware fold again in
// double, whose vectors have half the lanes, with keepdim; the plain fold under seq with keepdim.
// The scalar loop that seq runs is also what simd runs for the strided and transposed layouts (for
// every op), and for integer and bool trees under either policy.

TEST_CASE("every reduction over every subset of axes of ranks 1 to 4, every layout, float and double, seq and simd") {
  reducer const r_sum{"sum", ref::sum, ref::sum_scale}, r_amax{"amax", ref::amax, nullptr, true};
  sweep<float, false>(kiln::simd, r_sum, sum_of);
  sweep<float, false>(kiln::simd, {"prod", ref::prod}, prod_of);
  sweep<float, false>(kiln::simd, {"mean", ref::mean, ref::mean_scale}, mean_of);
  sweep<float, false>(kiln::simd, r_amax, amax_of);
  sweep<float, false>(kiln::simd, {"amin", ref::amin, nullptr, true}, amin_of);
  sweep<float, false>(kiln::simd, {"argmax", ref::argmax, nullptr, true}, argmax_of);
  sweep<float, false>(kiln::simd, {"argmin", ref::argmin, nullptr, true}, argmin_of);
  sweep<float, false>(kiln::simd, {"logsumexp", ref::logsumexp, ref::exp_scale}, logsumexp_of);
  sweep<float, false>(kiln::simd, {"norm<1>", ref::norm1, ref::sum_scale}, norm1_of);
  sweep<float, false>(kiln::simd, {"norm<2>", ref::norm2}, norm2_of);
  sweep<float, false>(kiln::simd, {"norm<infinity_norm>", ref::norm_inf, nullptr, true}, norm_inf_of);
  sweep<float, false>(kiln::simd, {"all", ref::all}, all_of);
  sweep<float, false>(kiln::simd, {"any", ref::any}, any_of);
  sweep<float, false>(kiln::simd, {"count_nonzero", ref::count_nonzero}, count_nonzero_of);

  sweep<double, true>(kiln::simd, r_sum, sum_of);
  sweep<double, true>(kiln::simd, r_amax, amax_of);
  sweep<float, true>(kiln::seq, r_sum, sum_of);

  for (double c : {0.0, 1.0, 2.0}) {
    std::string const with = " (correction " + std::to_string(int(c)) + ")";
    reducer const r_var{"var" + with, [c](bucket const& b) { return ref::var(b, c); }, ref::square_scale};
    reducer const r_std{"stddev" + with, [c](bucket const& b) { return std::sqrt(ref::var(b, c)); }, ref::root_scale};
    sweep<float, false>(kiln::simd, r_var, var_of{c});
    sweep<float, false>(kiln::simd, r_std, stddev_of{c});
  }
}

TEST_CASE("reductions consume their elementwise producer in the same loop") {
  reducer op{"sum(exp(x - 0.5))", ref::sum, ref::sum_scale};
  op.producer = [](double x, double) { return std::exp(x - 0.5); };
  sweep<float, false>(kiln::simd, op, [](auto const& x, auto const&, auto const&... o) {
    return kiln::sum(kiln::exp(x - 0.5f), o...);
  });
  op = {"amax(x * y + 1)", ref::amax, nullptr, true};
  op.producer = [](double x, double y) { return x * y + 1; };
  sweep<float, false>(kiln::simd, op, [](auto const& x, auto const& y, auto const&... o) {
    return kiln::amax(x * y + 1, o...);
  });
}

TEST_CASE("an op whose two operands are one tensor read the same way loads it once, with the same bits") {
  // `A * A` is folded by a loop that loads A once. It must give exactly what the same tree over two
  // tensors holding equal values gives (two loads, the same accumulation order), and must not be
  // taken for operands over the same memory read differently (a transpose, shifted slices).
  auto twins_in = [](auto const& e) {
    using E = std::remove_cvref_t<decltype(e)>;
    kiln::detail::evaluator<E, E::rank> const ev(e, e.shape());
    return kiln::detail::has_twins(ev);
  };
  for (index_t n : {1, 7, 8, 31, 33, 256, 1023, 1025, 3000}) {
    CAPTURE(n);
    auto const A = kiln::randn<float>({3, n}, 40 + n);
    kiln::tensor<float, 2> const B = A;  // equal values, other memory
    CHECK(twins_in(A * A));
    CHECK_FALSE(twins_in(A * B));
    CHECK(twins_in(kiln::exp(A * A) + A));
    for (int policy = 0; policy < 3; ++policy) {
      CAPTURE(policy);
      auto fold = [&](auto const& e, auto... axes) {
        if (policy == 0) return kiln::eval(kiln::seq, kiln::sum(e, axes...));
        if (policy == 1) return kiln::eval(kiln::simd, kiln::sum(e, axes...));
        return kiln::eval(kiln::par, kiln::sum(e, axes...));
      };
      auto const rows = fold(A * A, kiln::axes<1>), rows_apart = fold(A * B, kiln::axes<1>);
      auto const cols = fold(A + A, kiln::axes<0>), cols_apart = fold(A + B, kiln::axes<0>);
      auto const all = fold(kiln::exp(A * A) - A), all_apart = fold(kiln::exp(A * B) - B);
      for (index_t r = 0; r < 3; ++r) CHECK(rows(r) == rows_apart(r));
      for (index_t j = 0; j < n; ++j) CHECK(cols(j) == cols_apart(j));
      CHECK(all.item() == all_apart.item());
      CHECK(float(kiln::amax(A * A)) == float(kiln::amax(A * B)));
    }
  }
  // The same memory read another way is not a twin.
  auto const S = kiln::randn<float>({37, 37}, 41);
  kiln::tensor<float, 2> const St = kiln::transpose(S);
  CHECK_FALSE(twins_in(S * kiln::transpose(S)));
  kiln::tensor<float, 1> const crossed = kiln::sum(S * kiln::transpose(S), kiln::axes<1>);
  kiln::tensor<float, 1> const crossed_apart = kiln::sum(S * St, kiln::axes<1>);
  // (The transpose is read with strides, through the scalar loop: the sums round differently.)
  for (index_t r = 0; r < 37; ++r) CHECK(crossed(r) == doctest::Approx(crossed_apart(r)).epsilon(1e-5));
  auto const x = kiln::randn<float>({100}, 42);
  auto const head = kiln::slice(x, 0, 0, 99), tail = kiln::slice(x, 0, 1, 100);
  CHECK_FALSE(twins_in(head * tail));
  kiln::tensor<float, 1> const head_copy = head, tail_copy = tail;
  CHECK(float(kiln::sum(head * tail)) == float(kiln::sum(head_copy * tail_copy)));
}

TEST_CASE("integer and bool inputs over every subset of axes, with PyTorch's result types") {
  sweep<std::int32_t, false>(kiln::simd, {"sum", ref::sum}, sum_of);
  sweep<std::int32_t, false>(kiln::simd, {"prod", ref::prod}, prod_of);
  sweep<std::int32_t, false>(kiln::simd, {"amax", ref::amax, nullptr, true}, amax_of);
  sweep<bool, false>(kiln::simd, {"sum", ref::sum}, sum_of);
  sweep<bool, false>(kiln::simd, {"all", ref::all}, all_of);
  sweep<bool, false>(kiln::simd, {"any", ref::any}, any_of);
  sweep<bool, false>(kiln::simd, {"count_nonzero", ref::count_nonzero}, count_nonzero_of);

  [[maybe_unused]] kiln::tensor<std::int32_t, 2> i;
  [[maybe_unused]] kiln::tensor<bool, 2> b;
  [[maybe_unused]] kiln::tensor<float, 2> f;
  [[maybe_unused]] kiln::tensor<double, 1> d;
  static_assert(std::is_same_v<decltype(kiln::sum(i))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(kiln::prod(i, 0))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(kiln::sum(b))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(kiln::prod(b))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(kiln::amax(i, 1))::value_type, std::int32_t>);
  static_assert(std::is_same_v<decltype(kiln::amin(b))::value_type, bool>);
  static_assert(std::is_same_v<decltype(kiln::argmax(i))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(kiln::argmin(f, 0))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(kiln::all(f))::value_type, bool>);
  static_assert(std::is_same_v<decltype(kiln::any(b, 1))::value_type, bool>);
  static_assert(std::is_same_v<decltype(kiln::count_nonzero(f))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(kiln::count_nonzero(b))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(kiln::sum(f))::value_type, float>);
  static_assert(std::is_same_v<decltype(kiln::mean(d))::value_type, double>);
  static_assert(std::is_same_v<decltype(kiln::logsumexp(i))::value_type, float>);  // as torch.logsumexp

  // all, any and count_nonzero of floats (NaN is non-zero) and of bools.
  kiln::tensor<float, 1> const truthy = {0.5f, -0.f, fnan, 0.f};
  CHECK(reduce_all(all_of, truthy) == 0);
  CHECK(reduce_all(any_of, truthy) == 1);
  CHECK(reduce_all(count_nonzero_of, truthy) == 2);
  CHECK(reduce_all(all_of, kiln::tensor<float, 1>{fnan, 1.f}) == 1);

  // Integer sums and products wrap (two's complement) as PyTorch's do, never overflow into UB.
  kiln::tensor<std::int64_t, 1> big = {std::numeric_limits<std::int64_t>::max(), 1, 1};
  std::int64_t const wrapped = kiln::sum(big);
  CHECK(wrapped == std::numeric_limits<std::int64_t>::min() + 1);
  CHECK(reduce_all(prod_of, kiln::tensor<std::int32_t, 1>{65536, 65536, 65536, 3, 65536}) == 0);  // 3 * 2^64
  CHECK(reduce_all(prod_of, kiln::tensor<std::int32_t, 1>{65536, -3, 65536}) == -3 * 0x1p32);
}

// -----------------------------------------------------------------------------------------------
// Real ranks, full reductions, tails and accuracy.

namespace {
// Calls f(std::integral_constant<int, N>{}, axes) for every non-empty subset of the axes of a rank-R
// tensor, with the subset as `int const (&)[N]`.
template <int R, class F>
void for_each_subset(F&& f) {
  [&]<int... N>(std::integer_sequence<int, N...>) {
    (
        [&] {
          constexpr int n = N + 1;
          for (unsigned mask = 1; mask < 1u << R; ++mask) {
            if (std::popcount(mask) != n) continue;
            int axes[n];
            for (int d = 0, k = 0; d < R; ++d)
              if (mask >> d & 1) axes[k++] = d;
            f(std::integral_constant<int, n>{}, axes);
          }
        }(),
        ...);
  }(std::make_integer_sequence<int, R>{});
}

template <int R>
void check_shapes(kiln::extents<R> const& shape) {
  kiln::tensor<float, R> const x(shape);
  for_each_subset<R>([&]<int N>(std::integral_constant<int, N>, int const (&axes)[N]) {
    auto const r = kiln::sum(x, axes);
    auto const k = kiln::amax(x, axes, kiln::keepdim);
    static_assert(decltype(r)::rank == R - N && decltype(k)::rank == R);
    std::vector<index_t> dropped, kept;
    for (int d = 0; d < R; ++d) {
      bool const reduced = std::find(std::begin(axes), std::end(axes), d) != std::end(axes);
      if (!reduced) dropped.push_back(shape[d]);
      kept.push_back(reduced ? 1 : shape[d]);
    }
    CAPTURE(list_string({std::begin(axes), std::end(axes)}));
    CHECK(std::vector<index_t>(r.shape().begin(), r.shape().end()) == dropped);
    CHECK(std::vector<index_t>(k.shape().begin(), k.shape().end()) == kept);
    CHECK(r.reduced_size() == count_of({shape.begin(), shape.end()}) / std::max<index_t>(1, count_of(dropped)));
  });
  // Every axis: rank 0, or all ones with keepdim.
  static_assert(decltype(kiln::sum(x))::rank == 0 && decltype(kiln::sum(x, kiln::keepdim))::rank == R);
  auto const ones = kiln::mean(x, kiln::keepdim).shape();
  CHECK(std::all_of(ones.begin(), ones.end(), [](index_t e) { return e == 1; }));
}
}  // namespace

TEST_CASE("real tensors of rank 1 to 4: result shapes for every subset of axes, keepdim and not") {
  check_shapes<1>({7});
  check_shapes<2>({5, 1});
  check_shapes<3>({3, 1, 9});
  check_shapes<4>({3, 5, 7, 2});

  // Compile-time axes are the same reduction as run-time ones; negative axes count from the end.
  kiln::tensor<float, 4> x = kiln::randn<float>({3, 5, 7, 2}, 3);
  auto const a = kiln::mean(x, kiln::axes<1, -1>, kiln::keepdim);
  auto const b = kiln::mean(x, {-3, 3}, kiln::keepdim);
  static_assert(std::is_same_v<decltype(a), decltype(b)>);
  CHECK(a.reduced_axes() == std::array<int, 2>{1, 3});
  CHECK(b.reduced_axes() == a.reduced_axes());
  CHECK(a.shape() == kiln::extents<4>{3, 1, 7, 1});
  // norm takes the axes as sum does.
  CHECK(kiln::norm(x, {1, -1}).shape() == kiln::extents<2>{3, 7});
  CHECK(kiln::norm<1>(x, kiln::axes<0>, kiln::keepdim).shape() == kiln::extents<4>{1, 5, 7, 2});
  CHECK(kiln::norm<kiln::infinity_norm>(x, 2).shape() == kiln::extents<3>{3, 5, 2});
}

TEST_CASE("tails: sum, amax and mean of every length to 3W+1 at every starting offset") {
  // The views start 0 to 3 elements into 64-byte aligned storage. (The sweep runs every op over
  // these lengths too, seq and simd, at offset 1 and with a stride.)
  index_t const longest = 3 * float_lanes + 1;
  auto const data = kiln::randn<float>({longest + 4}, 11);
  for (index_t n = 0; n <= longest; ++n) {
    for (index_t offset = 0; offset < 4; ++offset) {
      CAPTURE(n);
      CAPTURE(offset);
      auto const x = kiln::view(data.data() + offset, kiln::extents<1>{n});
      bucket const v(data.data() + offset, data.data() + offset + n);
      kiln::tensor<float, 0> seq_sum;
      kiln::eval(kiln::seq, seq_sum, kiln::sum(x));
      float const simd_sum = kiln::sum(x), mean = kiln::mean(x);
      CHECK(close(simd_sum, ref::sum(v), 1e-6 * ref::norm1(v)));
      CHECK(close(seq_sum(), ref::sum(v), 1e-6 * ref::norm1(v)));
      CHECK(close(mean, ref::mean(v), 1e-6 * ref::mean_scale(v)));  // NaN for n = 0
      if (n == 0) CHECK_THROWS_AS(kiln::amax(x), kiln::shape_error);
      else CHECK(float(kiln::amax(x)) == ref::amax(v));
    }
  }
  // Around the 1024-element blocks of the cascade.
  auto const y = kiln::randn<float>({4100}, 12);
  for (index_t n : {1023, 1024, 1025, 2047, 2048, 2049, 3072, 4097}) {
    CAPTURE(n);
    auto const x = kiln::view(y.data() + 1, kiln::extents<1>{n});
    bucket const v(y.data() + 1, y.data() + 1 + n);
    kiln::tensor<float, 0> seq_sum;
    kiln::eval(kiln::seq, seq_sum, kiln::sum(x));
    CHECK(close(float(kiln::sum(x)), ref::sum(v), 1e-6 * ref::norm1(v)));
    CHECK(close(seq_sum(), ref::sum(v), 1e-6 * ref::norm1(v)));
    CHECK(float(kiln::amax(x)) == ref::amax(v));
  }
}

// Row folds (one output per row) run on one of two paths: rows that follow one another in every
// leaf are folded as spans of one long row, other rows one at a time as for_each_row steps to them.
// Both fold a row of n elements with the same instructions, so every row's result is the same bits
// as the full reduction of that row alone (kiln::par relies on it: a thread's rows start anywhere).
template <class T>
void check_row_folds(index_t rows, index_t n) {
  CAPTURE(rows);
  CAPTURE(n);
  auto const A = kiln::randn<T>({rows, n}, 21);
  auto const wide = kiln::randn<T>({rows, n + 3}, 22);  // rows that do not follow one another
  auto const padded = kiln::slice(wide, 1, 1, n + 1);
  auto const b = kiln::randn<T>({n}, 23);                // broadcast along the rows
  kiln::tensor<T, 1> const scalar = kiln::full<T>({1}, T(0.75));  // broadcast everywhere
  kiln::tensor<T, 1> const squares = kiln::sum(A * A, kiln::axes<1>);
  kiln::tensor<T, 1> const scaled = kiln::sum(A * scalar, kiln::axes<-1>);  // compile-time, negative
  kiln::tensor<T, 1> const shifted = kiln::sum(A + b, 1);
  kiln::tensor<T, 1> const strided = kiln::sum(padded, 1);
  kiln::tensor<T, 2> const kept = kiln::sum(A * A, kiln::axes<1>, kiln::keepdim);
  kiln::tensor<T, 1> const seq = kiln::eval(kiln::seq, kiln::sum(A * A, 1));
  REQUIRE(kept.shape() == kiln::extents<2>{rows, 1});
  index_t wrong = -1, far = -1;
  for (index_t r = 0; r < rows && wrong < 0 && far < 0; ++r) {
    auto const a = kiln::view(A.data() + r * n, kiln::extents<1>{n});
    auto const p = kiln::view(padded.data() + r * (n + 3), kiln::extents<1>{n});
    T const alone = kiln::sum(a * a);
    if (!kiln_test::same_bits(squares(r), alone) || kept(r, 0) != squares(r) || T(kiln::sum(a * scalar)) != scaled(r) ||
        T(kiln::sum(a + b)) != shifted(r) || T(kiln::sum(p)) != strided(r))
      wrong = r;
    bucket sq, sc, sh, st;
    for (index_t j = 0; j < n; ++j) {
      double const x = A(r, j);
      sq.push_back(x * x), sc.push_back(x * 0.75), sh.push_back(x + double(b(j))), st.push_back(padded(r, j));
    }
    double const tolerance = std::is_same_v<T, float> ? 1e-6 : 1e-14;
    if (!close(squares(r), ref::sum(sq), tolerance * ref::norm1(sq)) ||
        !close(seq(r), ref::sum(sq), tolerance * ref::norm1(sq)) ||
        !close(scaled(r), ref::sum(sc), tolerance * ref::norm1(sc)) ||
        !close(shifted(r), ref::sum(sh), tolerance * ref::norm1(sh)) ||
        !close(strided(r), ref::sum(st), tolerance * ref::norm1(st)))
      far = r;
  }
  CHECK(wrong < 0);
  CHECK(far < 0);
}

TEST_CASE("row folds: each row the same bits as its own full reduction, on either path") {
  // Row lengths around the batch, the four- and eight-batch steps and the 1024-element blocks;
  // row counts that are not multiples of anything.
  std::vector<index_t> const lengths = {1,
                                        2,
                                        float_lanes - 1,
                                        float_lanes,
                                        float_lanes + 1,
                                        4 * float_lanes - 1,
                                        4 * float_lanes + 3,
                                        8 * float_lanes,
                                        8 * float_lanes + 1,
                                        12 * float_lanes + 5,
                                        256,
                                        1023,
                                        1024,
                                        1025,
                                        2500};
  for (index_t rows : {1, 2, 7}) {
    for (index_t n : lengths) {
      check_row_folds<float>(rows, n);
      check_row_folds<double>(rows, n);
    }
  }
  check_row_folds<float>(33, 256);
}

TEST_CASE("row folds over several trailing axes, of integers, and of extent 1") {
  // [2, 3, 50] over its last two axes: rows of 150 elements, each the same bits as its own sum.
  auto const x = kiln::randn<float>({2, 3, 50}, 24);
  kiln::tensor<float, 1> const s = kiln::sum(kiln::exp(x), kiln::axes<1, 2>);
  kiln::tensor<float, 3> const k = kiln::sum(kiln::exp(x), {1, 2}, kiln::keepdim);
  for (index_t r = 0; r < 2; ++r) {
    auto const row = kiln::view(x.data() + r * 150, kiln::extents<1>{150});
    CHECK(float(kiln::sum(kiln::exp(row))) == s(r));
    CHECK(k(r, 0, 0) == s(r));
  }
  // Integers fold on the scalar path, exactly (int64 accumulators).
  kiln::tensor<int, 1> const flat = kiln::arange<int>(0, 7 * 300);
  auto const n = kiln::reshape(flat, {7, 300});
  kiln::tensor<std::int64_t, 1> const ns = kiln::sum(n * n, kiln::axes<1>);
  for (index_t r = 0; r < 7; ++r) {
    std::int64_t want = 0;
    for (index_t j = 0; j < 300; ++j) want += std::int64_t(r * 300 + j) * (r * 300 + j);
    CHECK(ns(r) == want);
  }
  // A reduced axis of extent 1 keeps its elements.
  auto const c = kiln::randn<float>({9, 1}, 25);
  kiln::tensor<float, 1> const cs = kiln::sum(c, kiln::axes<1>);
  for (index_t r = 0; r < 9; ++r) CHECK(cs(r) == c(r, 0));
}

TEST_CASE("contiguous row folds run without a plan, with the same bits as the planned loop") {
  // A reduction over trailing axes whose leaves are contiguous views of the argument's whole
  // shape, into a contiguous destination, folds its rows without planning (fold_contiguous_rows).
  // The padded copy holds the same values in rows that do not follow one another, which only the
  // planned loop reads: the two must agree bit for bit, for every op and row length. kiln::par on
  // so few elements runs one thread and takes the same path; with the padded copy it plans.
  auto direct = [](auto const& arg, auto... axes) {
    return kiln::detail::contiguous_fold_rows(arg, std::array<int, sizeof...(axes)>{axes...}, true).applies;
  };
  for (index_t rows : {2, 5}) {  // (one row of the padded copy would be contiguous)
    for (index_t n : {index_t{2}, index_t{float_lanes - 1}, index_t{float_lanes + 1}, index_t{4 * float_lanes + 3},
                      index_t{256}, index_t{1024}}) {
      CAPTURE(rows);
      CAPTURE(n);
      auto const A = kiln::randn<float>({rows, n}, 60 + n);
      auto wide = kiln::zeros<float>({rows, n + 5});
      auto const padded = kiln::slice(wide, 1, 2, n + 2);
      padded = A;
      REQUIRE(direct(A * A, 1));
      CHECK(direct(kiln::exp(A - 0.5f), 0, 1) == (rows * n <= 1024));
      REQUIRE_FALSE(direct(padded * padded, 1));
      auto same = [](auto const& a, auto const& b) { return kiln_test::bitwise_equal(kiln::eval(a), kiln::eval(b)); };
      CHECK(same(kiln::sum(A * A, kiln::axes<1>), kiln::sum(padded * padded, kiln::axes<1>)));  // twins
      CHECK(same(kiln::sum(A * A, kiln::axes<1>, kiln::keepdim), kiln::sum(padded * padded, kiln::axes<1>, kiln::keepdim)));
      CHECK(same(kiln::sum(kiln::exp(A - 0.5f), 1), kiln::sum(kiln::exp(padded - 0.5f), 1)));
      CHECK(same(kiln::amax(A, 1), kiln::amax(padded, 1)));
      CHECK(same(kiln::amin(-A, 1), kiln::amin(-padded, 1)));
      CHECK(same(kiln::prod(kiln::exp(A * 0.01f), 1), kiln::prod(kiln::exp(padded * 0.01f), 1)));
      CHECK(same(kiln::mean(A, 1), kiln::mean(padded, 1)));
      CHECK(same(kiln::norm(A, 1), kiln::norm(padded, 1)));
      auto par = [](auto const& r) { return kiln::eval(kiln::par, r); };
      CHECK(kiln_test::bitwise_equal(kiln::eval(kiln::sum(A * A, 1)), par(kiln::sum(A * A, 1))));
      CHECK(kiln_test::bitwise_equal(kiln::eval(kiln::sum(A * A, 1)), par(kiln::sum(padded * padded, 1))));
      CHECK(kiln_test::bitwise_equal(kiln::eval(kiln::amax(A, 1)), par(kiln::amax(padded, 1))));
      CHECK(kiln_test::bitwise_equal(kiln::eval(kiln::sum(kiln::exp(A - 0.5f))), par(kiln::sum(kiln::exp(A - 0.5f)))));
      // Rank 3, over the last axis and the last two.
      auto const B = kiln::reshape(A, {rows, 1, n});
      auto const padded3 = kiln::unsqueeze(padded, 1);
      REQUIRE(direct(B + B, 2));
      CHECK(same(kiln::sum(B + B, kiln::axes<2>), kiln::sum(padded3 + padded3, kiln::axes<2>)));
      CHECK(same(kiln::sum(B, kiln::axes<1, 2>), kiln::sum(padded3, kiln::axes<1, 2>)));
    }
  }
  // Planned: broadcast leaves, leading or middle axes, rows of one element or beyond one block, and
  // strided destinations. The results stay right.
  auto const A = kiln::randn<float>({4, 8}, 70);
  auto const b = kiln::randn<float>({8}, 71);
  CHECK_FALSE(direct(A + b, 1));
  CHECK_FALSE(direct(A, 0));
  CHECK_FALSE(direct(kiln::randn<float>({4, 1}, 72), 1));
  CHECK_FALSE(direct(kiln::randn<float>({2, 1025}, 73), 1));
  CHECK_FALSE(kiln::detail::contiguous_fold_rows(A, std::array<int, 1>{1}, false).applies);
  auto out = kiln::zeros<float>({4, 2});
  kiln::eval(kiln::simd, kiln::slice(out, 1, 1, 2), kiln::sum(A, kiln::axes<1>, kiln::keepdim));
  for (index_t r = 0; r < 4; ++r) {
    double want = 0;
    for (index_t j = 0; j < 8; ++j) want += A(r, j);
    CHECK(out(r, 0) == 0.f);
    CHECK(out(r, 1) == doctest::Approx(want).epsilon(1e-6));
  }
}

// Row folds write each output once, without storing the identity first; other plans start from
// it. A destination's old contents (NaN here) must leak into neither, under any policy.
TEST_CASE("a reduction overwrites what its destination held") {
  auto const a = kiln::randn<float>({5, 300}, 26);
  auto const long_rows = kiln::randn<float>({2, 3000}, 27);
  float const nan = std::numeric_limits<float>::quiet_NaN();
  auto overwrites = [&](auto const& policy, auto const& reduction) {
    using Result = decltype(kiln::eval(reduction));
    Result fresh = kiln::full<float>(reduction.shape(), 0.f), stale = kiln::full<float>(reduction.shape(), nan);
    kiln::eval(policy, fresh, reduction);
    kiln::eval(policy, stale, reduction);
    CHECK(kiln_test::bitwise_equal(fresh, stale));
    CHECK_FALSE(std::isnan(float(kiln::sum(stale))));
  };
  auto each_policy = [&](auto const& reduction) {
    overwrites(kiln::seq, reduction);
    overwrites(kiln::simd, reduction);
    overwrites(kiln::par, reduction);
  };
  each_policy(kiln::sum(a, kiln::axes<1>));                    // rows
  each_policy(kiln::sum(a));                                   // one row
  each_policy(kiln::prod(kiln::exp(a * 0.01f), kiln::axes<1>));
  each_policy(kiln::amax(a, kiln::axes<1>));
  each_policy(kiln::mean(a, kiln::axes<1>, kiln::keepdim));
  each_policy(kiln::sum(long_rows, kiln::axes<1>));            // rows beyond one block
  each_policy(kiln::sum(a, kiln::axes<0>));                    // a kept inner dimension
  each_policy(kiln::sum(kiln::transpose(a), kiln::axes<1>));   // strided rows
  each_policy(kiln::sum(kiln::transpose(a)));                  // rows folding into one output
}

TEST_CASE("accuracy: long sums are pairwise, along the inner and the outer axes") {
  // 1e7 floats in [0, 1): within 1e-5 of the double sum (about 1e-9 here).
  auto const x = kiln::rand<float>({10'000'000}, 5);
  double exact = 0;
  float naive = 0;
  for (index_t i = 0; i < x.size(); ++i) {
    exact += x.data()[i];
    naive += x.data()[i];
  }
  float const simd = kiln::sum(x);
  kiln::tensor<float, 0> seq;
  kiln::eval(kiln::seq, seq, kiln::sum(x));
  double const simd_error = std::abs(simd - exact) / exact, seq_error = std::abs(seq() - exact) / exact;
  double const naive_error = std::abs(naive - exact) / exact;
  CAPTURE(simd_error);
  CAPTURE(seq_error);
  CAPTURE(naive_error);
  CHECK(simd_error < 1e-5);
  CHECK(seq_error < 1e-5);
  // The contrast: a plain float loop drifts as its partial sum grows (the spacing of floats near
  // 5e6 is 0.5): about 1e-5 here, thousands of times further off.
  CHECK(naive_error > 100 * std::max(simd_error, seq_error));

  // The outer axis: 100000 rows folded into 8 outputs. Accumulating row by row is off by up to
  // 8e-6 here (and it grows with the rows); summed pairwise, the error is about 1e-8.
  auto const y = kiln::rand<float>({100'000, 8}, 6);
  kiln::tensor<float, 1> simd_cols = kiln::sum(y, 0), seq_cols = kiln::zeros<float>({8});
  kiln::eval(kiln::seq, seq_cols, kiln::sum(y, 0));
  for (index_t j = 0; j < 8; ++j) {
    double col = 0;
    for (index_t i = 0; i < 100'000; ++i) col += y(i, j);
    CAPTURE(j);
    CHECK(std::abs(simd_cols(j) - col) / col < 1e-6);
    CHECK(std::abs(seq_cols(j) - col) / col < 1e-6);
  }
  // A full sum whose planned rows are short (3 of every 8 columns): pairwise across rows too.
  double const some = reduce_padded(sum_of, kiln::slice(y, 1, 0, 3), {0, 1}).values.at(0);
  double some_exact = 0;
  for (index_t i = 0; i < 100'000; ++i) some_exact += double(y(i, 0)) + y(i, 1) + y(i, 2);
  CHECK(std::abs(some - some_exact) / some_exact < 1e-6);
}

// -----------------------------------------------------------------------------------------------
// NaN, infinities and softmax.

TEST_CASE("NaN propagates through sum, mean, amax and amin; argmax and argmin return the NaN's index") {
  for (index_t at : {index_t{0}, index_t{5}, index_t{2 * float_lanes + 2}}) {
    CAPTURE(at);
    auto x = kiln::randn<float>({2 * float_lanes + 3}, 7);
    x(at) = fnan;
    x(1) = finf;  // an infinity elsewhere changes nothing
    CHECK(std::isnan(float(kiln::sum(x))));
    CHECK(std::isnan(float(kiln::mean(x))));
    CHECK(std::isnan(float(kiln::amax(x))));
    CHECK(std::isnan(reduce_all(amin_of, x)));
    // A later NaN does not move the index: the first NaN wins, as in PyTorch.
    x(x.size() - 1) = fnan;
    CHECK(reduce_all(argmax_of, x) == double(at));
    CHECK(reduce_all(argmin_of, x) == double(at));
  }
  kiln::tensor<float, 1> const infinities = {-finf, -finf};
  CHECK(float(kiln::amax(infinities)) == -finf);
  CHECK(float(kiln::sum(infinities)) == -finf);
  kiln::tensor<float, 1> const opposite = {finf, -finf, 1.f};
  CHECK(std::isnan(float(kiln::sum(opposite))));
  CHECK(reduce_all(argmax_of, opposite) == 0);
  CHECK(reduce_all(argmin_of, opposite) == 1);
  // Ties: the first index.
  kiln::tensor<float, 1> const ties = {1.f, 3.f, -2.f, 3.f, -2.f};
  CHECK(reduce_all(argmax_of, ties) == 1);
  CHECK(reduce_all(argmin_of, ties) == 2);
}

// amax and amin step with the bare max or min instruction and a sum of the inputs beside it (the
// probe): a NaN the instruction drops must still come out, wherever it sits in a row (the four
// accumulators, the batches after them, the tail, a second block, a lane of the final batch), and a
// probe that turns NaN without one (+inf and -inf in one lane, or a sum that overflowed and then
// met -inf) must still give the exact extremum.
TEST_CASE("amax and amin: NaN at every position of a row, infinities of both signs in one lane") {
  constexpr index_t W = float_lanes;
  auto reference = [](kiln::tensor<float, 2> const& x, index_t r, bool max) {
    float m = max ? -finf : finf;
    for (index_t i = 0; i < x.extent(1); ++i) {
      float const v = x(r, i);
      if (std::isnan(v)) return v;
      m = max ? std::max(m, v) : std::min(m, v);
    }
    return m;
  };
  // The same value: NaN matches any NaN, and otherwise the bits (the sign of a zero, infinities).
  auto same = [](float a, float b) {
    return std::isnan(a) ? std::isnan(b) : kiln_test::same_bits(a, b);
  };
  auto check_rows = [&](kiln::tensor<float, 2> const& x) {
    auto check = [&](auto const& policy) {
      auto const hi = kiln::eval(policy, kiln::amax(x, kiln::axes<1>));
      auto const lo = kiln::eval(policy, kiln::amin(x, kiln::axes<1>));
      auto const fused = kiln::eval(policy, kiln::amax(x * 2.f, kiln::axes<1>, kiln::keepdim));
      for (index_t r = 0; r < x.extent(0); ++r) {
        CAPTURE(r);
        CHECK(same(hi(r), reference(x, r, true)));
        CHECK(same(lo(r), reference(x, r, false)));
        CHECK(same(fused(r, 0), 2.f * reference(x, r, true)));
      }
      // One row of the tensor as a full reduction.
      auto const first = kiln::reshape(kiln::slice(x, 0, 0, 1), {x.extent(1)});
      CHECK(same(kiln::eval(policy, kiln::amax(first))(), reference(x, 0, true)));
      CHECK(same(kiln::eval(policy, kiln::amin(first))(), reference(x, 0, false)));
    };
    check(kiln::simd);
    check(kiln::seq);
    check(kiln::par);
  };
  for (index_t n : {index_t{1}, index_t{3}, W, W + 1, 4 * W, 4 * W + 3, 5 * W + 2, 1024 + 4 * W + 1}) {
    CAPTURE(n);
    kiln::tensor<float, 2> x = kiln::randn<float>({3, n}, 41);
    std::vector<index_t> at;
    if (n <= 5 * W + 2)
      for (index_t p = 0; p < n; ++p) at.push_back(p);
    else
      at = {0, W - 1, 4 * W - 1, 4 * W, 1023, 1024, 1024 + 4 * W, n - 1};
    for (index_t p : at) {
      CAPTURE(p);
      kiln::tensor<float, 2> y = x;
      y(0, p) = fnan;
      y(2, p) = -finf;  // (a lone infinity: no NaN anywhere in that row)
      check_rows(y);
    }
  }
  // +inf and -inf four batches apart land in the same accumulator and lane (batches 0, 4, 8, and
  // 12 after the fours, all in the first); so do values near FLT_MAX whose sum overflows before a
  // -inf arrives.
  index_t const n = 13 * W + 5;
  kiln::tensor<float, 2> x = kiln::randn<float>({4, n}, 43);
  x(0, 1) = finf, x(0, 4 * W + 1) = -finf;
  x(1, 2) = -finf, x(1, 12 * W + 2) = finf;
  for (index_t k = 0; k < 3; ++k) x(2, k * 4 * W + 3) = 3e38f;
  x(2, 12 * W + 3) = -finf;
  for (index_t i = 0; i < n; ++i) x(3, i) = -finf;
  check_rows(x);
}

TEST_CASE("float var and std whose squared deviations overflow float: computed again in double, as PyTorch") {
  // Deviations of ±1e19 square to 1e38, and their sum passes FLT_MAX, while the variance
  // (1.1e38) and the standard deviation (1.05e19) are floats: PyTorch 2.15 gives both.
  index_t const n = 2 * float_lanes + 3;  // batches and a tail
  kiln::tensor<float, 1> big(kiln::extents<1>{n}, kiln::uninitialized);
  kiln::tensor<float, 1> const normal = kiln::randn<float>({n}, 11);
  kiln::tensor<float, 2> x(kiln::extents<2>{2, n}, kiln::uninitialized);
  bucket wide;
  for (index_t i = 0; i < n; ++i) {
    big(i) = x(0, i) = i % 2 ? -1e19f : 1e19f;
    x(1, i) = normal(i);
    wide.push_back(double(big(i)));
  }
  for (double c : {1.0, 0.0}) {
    CAPTURE(c);
    kiln::correction const corr{c};
    double const want = ref::var(wide, c);
    CHECK(float(kiln::variance(big, corr)) == doctest::Approx(want).epsilon(1e-6));
    CHECK(float(kiln::stddev(big, corr)) == doctest::Approx(std::sqrt(want)).epsilon(1e-6));
    auto check_rows = [&](auto const& policy) {
      auto const v = kiln::eval(policy, kiln::variance(x, kiln::axes<1>, corr));
      auto const sd = kiln::eval(policy, kiln::stddev(x, kiln::axes<1>, kiln::keepdim, corr));
      CHECK(v(0) == doctest::Approx(want).epsilon(1e-6));
      CHECK(sd(0, 0) == doctest::Approx(std::sqrt(want)).epsilon(1e-6));
      // The row that did not overflow keeps its float bits.
      CHECK(kiln_test::same_bits(v(1), kiln::eval(policy, kiln::variance(normal, corr))()));
      CHECK(kiln_test::same_bits(sd(1, 0), kiln::eval(policy, kiln::stddev(normal, corr))()));
      // Along the outer axis: one output per column.
      auto const cols = kiln::eval(policy, kiln::variance(kiln::transpose(x), kiln::axes<0>, corr));
      CHECK(cols(0) == doctest::Approx(want).epsilon(1e-6));
    };
    check_rows(kiln::seq);
    check_rows(kiln::simd);
    check_rows(kiln::par);
  }
  // Past float even in double: +inf, as PyTorch. An infinite input: NaN, not recomputed into a number.
  kiln::tensor<float, 1> const huge = {3e38f, -3e38f};
  CHECK(float(kiln::variance(huge)) == finf);
  CHECK(float(kiln::stddev(huge)) == finf);
  kiln::tensor<float, 1> const infinite = {finf, 1.f, 2.f};
  CHECK(std::isnan(float(kiln::variance(infinite))));
  CHECK(std::isnan(float(kiln::stddev(infinite))));
}

TEST_CASE("var and std of a product over a single element: 0 with correction 0, NaN with correction 1, as PyTorch") {
  // The product is rounded before its deviation from the mean is taken: contracted into one fused
  // multiply-add, the deviation was the product's rounding error, and the variance with
  // correction 1 was inf instead of 0 / 0.
  auto check = [](auto zero) {
    using T = decltype(zero);
    index_t const n = 2 * float_lanes + 3;  // batches and a tail
    kiln::tensor<T, 2> const x = kiln::randn<T>({n, 1}, 21), y = kiln::randn<T>({n, 1}, 22);
    auto const xt = kiln::transpose(x), yt = kiln::transpose(y);
    kiln::tensor<T, 1> const one = {T(0.3)}, other = {T(1.1)};
    auto each = [&](auto const& policy) {
      for (double c : {0.0, 1.0}) {
        CAPTURE(c);
        kiln::correction const corr{c};
        auto expect = [&](auto const& t) {
          for (index_t i = 0; i < t.size(); ++i) {
            CAPTURE(i);
            if (c == 0) CHECK(t.data()[i] == T(0));
            else CHECK(std::isnan(t.data()[i]));
          }
        };
        expect(kiln::eval(policy, kiln::variance(x * y, kiln::axes<1>, corr)));       // rows of one
        expect(kiln::eval(policy, kiln::stddev(xt * yt, kiln::axes<0>, corr)));       // along the outer axis
        expect(kiln::eval(policy, kiln::variance(x * y, {1}, kiln::keepdim, corr)));  // run-time axes
        expect(kiln::eval(policy, kiln::variance(one * other, corr)));                // a full reduction
        // Inside an expression (the rows fused, the blocks).
        kiln::tensor<T, 2> const fused = kiln::eval(policy, x * y - kiln::variance(x * y, kiln::axes<1>, kiln::keepdim, corr));
        for (index_t i = 0; i < n; ++i) CHECK((c == 0 ? fused(i, 0) == T(x(i, 0) * y(i, 0)) : std::isnan(fused(i, 0))));
      }
    };
    each(kiln::seq);
    each(kiln::simd);
    each(kiln::par);
  };
  check(0.f);
  check(0.0);
}

TEST_CASE("the 2-norm of a single element is |x|, where its square under- or overflows, as PyTorch") {
  float const inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Full reductions of one element (PyTorch 2.15: torch.linalg.vector_norm of float [1e-30] is
  // 1e-30, of [1e-30, 1e-30] 0: two elements are a sum of squares).
  for (float const v : {1e-30f, -3e30f, -0.f, 1e-45f, -inf})
    CHECK(float(kiln::norm(kiln::tensor<float, 1>{v})) == std::abs(v));
  CHECK(std::isnan(float(kiln::norm(kiln::tensor<float, 1>{nan}))));
  CHECK(float(kiln::norm(kiln::tensor<float, 1>{1e-30f, 1e-30f})) == 0.f);
  CHECK(float(kiln::norm(kiln::tensor<float, 1>{3e30f, 1.f})) == inf);
  CHECK(double(kiln::norm(kiln::tensor<double, 1>{-1e-200})) == 1e-200);
  // Along an axis of extent 1 (and over several such axes), keepdim and not, under every policy.
  kiln::tensor<float, 2> const column{{1e-30f}, {-3e30f}, {-0.f}, {nan}, {-inf}, {2.f}};
  for (int policy : {0, 1, 2}) {
    CAPTURE(policy);
    auto run = [&](auto const& e) {
      return policy == 0 ? kiln::eval(kiln::seq, e) : policy == 1 ? kiln::eval(kiln::simd, e) : kiln::eval(kiln::par, e);
    };
    kiln::tensor<float, 1> const along = run(kiln::norm(column, kiln::axes<1>));
    kiln::tensor<float, 2> const kept = run(kiln::norm(column, kiln::axes<1>, kiln::keepdim));
    for (index_t i = 0; i < 6; ++i) {
      CAPTURE(i);
      float const want = std::abs(column(i, 0));
      if (std::isnan(want)) {
        CHECK(std::isnan(along(i)));
        CHECK(std::isnan(kept(i, 0)));
      } else {
        CHECK(along(i) == want);
        CHECK(kept(i, 0) == want);
        CHECK(!std::signbit(along(i)));
      }
    }
  }
  kiln::tensor<float, 3> const deep = kiln::reshape(column, {6, 1, 1});
  kiln::tensor<float, 1> const over_two = kiln::norm(deep, kiln::axes<1, 2>);
  CHECK(over_two(0) == 1e-30f);
  CHECK(over_two(1) == 3e30f);
  // Inside an expression and in row blocks (the reduction keeps dimension 0).
  kiln::tensor<float, 2> const scaled = column / kiln::norm(column, kiln::axes<1>, kiln::keepdim);
  CHECK(scaled(0, 0) == 1.f);
  CHECK(scaled(1, 0) == -1.f);
  CHECK(scaled(5, 0) == 1.f);
}

// var, std and logsumexp fold their two passes a block of rows of dimension 0 at a time (16384
// elements) when that dimension is kept, under seq and simd. kiln::par runs each pass whole (on
// one thread at these sizes), with the same bits per row as simd.
TEST_CASE("var, std and logsumexp over blocks of rows: the bits of kiln::par's whole passes") {
  // [300, 100]: blocks of 163 rows, the second partial; b is broadcast along dimension 0.
  kiln::tensor<float, 2> x = kiln::randn<float>({300, 100}, 51);
  kiln::tensor<float, 1> const b = kiln::randn<float>({100}, 52);
  for (index_t i = 0; i < 100; ++i) x(200, i) = i % 2 ? -1e19f : 1e19f;  // a row whose float variance overflows
  auto check = [&](auto const& op) {
    auto const rows = kiln::eval(kiln::simd, op(x + b, kiln::axes<1>));
    auto const kept = kiln::eval(kiln::simd, op(x + b, kiln::axes<1>, kiln::keepdim));
    auto const serial = kiln::eval(kiln::seq, op(x + b, kiln::axes<1>));
    auto const whole = kiln::eval(kiln::par, op(x + b, kiln::axes<1>));
    CHECK(kiln_test::bitwise_equal(rows, whole));
    for (index_t r = 0; r < 300; ++r) {
      CAPTURE(r);
      CHECK(kiln_test::same_bits(kept(r, 0), rows(r)));
      CHECK(serial(r) == doctest::Approx(rows(r)).epsilon(1e-5));
    }
    // Rank 3, dimension 0 kept: [40, 30, 20] in blocks of 27 slices, over one axis and over two.
    auto const y = kiln::randn<float>({40, 30, 20}, 53);
    CHECK(kiln_test::bitwise_equal(kiln::eval(kiln::simd, op(y, kiln::axes<2>)), kiln::eval(kiln::par, op(y, kiln::axes<2>))));
    CHECK(kiln_test::bitwise_equal(kiln::eval(kiln::simd, op(y * 2.f, kiln::axes<1, 2>, kiln::keepdim)),
                                   kiln::eval(kiln::par, op(y * 2.f, kiln::axes<1, 2>, kiln::keepdim))));
  };
  check([](auto const& e, auto const&... o) { return kiln::variance(e, o...); });
  check([](auto const& e, auto const&... o) { return kiln::stddev(e, o..., kiln::correction{0}); });
  check([](auto const& e, auto const&... o) { return kiln::logsumexp(e, o...); });
  // The overflowed row was computed again in double inside its block.
  CHECK(kiln::eval(kiln::variance(x, kiln::axes<1>))(200) == doctest::Approx(1.0101e38).epsilon(1e-3));
}

TEST_CASE("logsumexp is stable for large inputs and exact for infinities, as PyTorch") {
  auto lse = [](std::initializer_list<float> v) { return reduce_all(logsumexp_of, kiln::tensor<float, 1>(v)); };
  double const log2 = std::log(2.0);
  CHECK(lse({1e4f, 1e4f}) == doctest::Approx(1e4 + log2).epsilon(1e-7));
  CHECK(lse({-1e4f, -1e4f}) == doctest::Approx(-1e4 + log2).epsilon(1e-7));
  CHECK(lse({1e4f, -1e4f}) == 1e4);
  CHECK(lse({-finf, -finf}) == -inf);
  CHECK(lse({finf, 1.f}) == inf);
  CHECK(lse({-finf, 0.f}) == 0);
  CHECK(lse({finf, -finf}) == inf);
  CHECK(std::isnan(lse({fnan, 1.f})));
  CHECK(lse({}) == -inf);
}

namespace {
// softmax and log_softmax by PyTorch's formula, exp(x - max) / sum(exp(x - max)), in double, along
// `dim` of a rank-2 tensor.
dense softmax_ref(dense const& x, int dim, bool log) {
  dense out = x;
  index_t const rows = x.shape[0], cols = x.shape[1];
  index_t const lines = dim == 0 ? cols : rows, length = dim == 0 ? rows : cols;
  for (index_t l = 0; l < lines; ++l) {
    auto at = [&](index_t k) -> std::size_t { return std::size_t(dim == 0 ? k * cols + l : l * cols + k); };
    bucket v;
    for (index_t k = 0; k < length; ++k) v.push_back(x.values[at(k)]);
    double const m = ref::amax(v);
    double s = 0;
    for (double e : v) s += std::exp(e - m);
    for (index_t k = 0; k < length; ++k)
      out.values[at(k)] = log ? (v[std::size_t(k)] - m) - std::log(s) : std::exp(v[std::size_t(k)] - m) / s;
  }
  return out;
}

// softmax (Log = false) or log_softmax of x along every dimension, seq and simd, against the
// formula; also through the transposed view (rows read with a stride).
template <bool Log>
void check_softmax(kiln::tensor<float, 2> const& x, double rtol) {
  auto f = [](auto const& e, int dim) {
    if constexpr (Log) return kiln::log_softmax(e, dim);
    else return kiln::softmax(e, dim);
  };
  auto const xt = kiln::transpose(x);
  for (int dim : {0, 1, -1}) {
    for (bool transposed : {false, true}) {
      CAPTURE(dim);
      CAPTURE(transposed);
      dense const want = softmax_ref(transposed ? to_dense(xt) : to_dense(x), dim < 0 ? dim + 2 : dim, Log);
      auto const shape = transposed ? xt.shape() : x.shape();
      kiln::tensor<float, 2> a(shape), b(shape);
      if (transposed) {
        kiln::eval(kiln::seq, a, f(xt, dim));
        kiln::eval(kiln::simd, b, f(xt, dim));
      } else {
        kiln::eval(kiln::seq, a, f(x, dim));
        kiln::eval(kiln::simd, b, f(x, dim));
      }
      dense const got_seq = to_dense(a), got_simd = to_dense(b);
      for (std::size_t i = 0; i < want.values.size(); ++i) {
        double const tol = rtol * (std::abs(want.values[i]) + 1e-3);
        CAPTURE(i);
        CHECK(close(got_seq.values[i], want.values[i], tol));
        CHECK(close(got_simd.values[i], want.values[i], tol));
      }
    }
  }
}
}  // namespace

TEST_CASE("softmax and log_softmax along every dimension, seq and simd, against PyTorch's formula") {
  // Rows longer than a vector and with a tail, and a column count of one (the three-pass path).
  check_softmax<false>(kiln::randn<float>({7, 2 * float_lanes + 5}, 8), 1e-5);
  check_softmax<true>(kiln::randn<float>({7, 2 * float_lanes + 5}, 8), 1e-5);
  check_softmax<false>(kiln::randn<float>({9, 1}, 9), 1e-5);

  // Stable for ±1e4: log_softmax keeps (x - max) - log(sum) exact near the maximum.
  kiln::tensor<float, 2> big = {{1e4f, 1e4f, -1e4f}, {-1e4f, -1e4f + 1, -1e4f}};
  check_softmax<false>(big, 1e-6);
  check_softmax<true>(big, 1e-6);
  kiln::tensor<float, 2> const ls = kiln::log_softmax(big, 1);
  CHECK(ls(0, 0) == doctest::Approx(-std::log(2.0)).epsilon(1e-6));

  // Infinities: exactly what the formula gives. One +inf and finite others: inf - inf is NaN, so
  // the row's sum is NaN and so is every entry; a row of -inf: NaN; -inf among finite values: 0
  // (log: -inf).
  kiln::tensor<float, 2> const special = {{finf, 1.f, 2.f}, {-finf, -finf, -finf}, {-finf, 0.f, 1.f}, {fnan, 0.f, 1.f}};
  check_softmax<false>(special, 1e-6);
  check_softmax<true>(special, 1e-6);
  kiln::tensor<float, 2> const sm = kiln::softmax(special, 1), lsm = kiln::log_softmax(special, 1);
  for (int j = 0; j < 3; ++j) {
    CHECK(std::isnan(sm(0, j)));
    CHECK(std::isnan(sm(1, j)));
    CHECK(std::isnan(lsm(1, j)));
  }
  CHECK(sm(2, 0) == 0.f);
  CHECK(lsm(2, 0) == -finf);
  CHECK(sm(2, 1) + sm(2, 2) == doctest::Approx(1.f));

  // Probabilities below FLT_MIN are the subnormals they should be under every policy, not 0 (a
  // batch exp that flushes them would pass the relative checks above).
  kiln::tensor<float, 2> const far = {{0.f, -88.f, -90.f, -95.f, -100.f, -103.f, -1.f, -2.f, -3.f, -4.f, -5.f}};
  dense const far_want = softmax_ref(to_dense(far), 1, false);
  for (int policy = 0; policy < 2; ++policy) {
    kiln::tensor<float, 2> p(far.shape());
    if (policy == 0) kiln::eval(kiln::seq, p, kiln::softmax(far, 1));
    else kiln::eval(kiln::simd, p, kiln::softmax(far, 1));
    for (index_t j = 1; j < 6; ++j) {
      CAPTURE(policy);
      CAPTURE(j);
      float const want = static_cast<float>(far_want.values[std::size_t(j)]);
      CHECK(p(0, j) > 0.f);
      CHECK(kiln_test::ulp_distance(p(0, j), want) <= 2);
    }
  }

  // A producer whose rows are read in the mixed mode (c [R, 1] broadcasts along the row, b [C]
  // is contiguous in it): the formula's values under both policies. (Not the bits of the
  // materialized producer's softmax: fused, the product and the shift by the maximum may become
  // one multiply-add.)
  {
    index_t const cols = 2 * float_lanes + 3;
    auto const A = kiln::randn<float>({5, cols}, 10);
    auto const b = kiln::randn<float>({cols}, 11);
    auto const c = kiln::randn<float>({5, 1}, 12);
    kiln::tensor<float, 2> const x = kiln::relu(A + b) * c;
    for (bool log : {false, true}) {
      CAPTURE(log);
      dense const want = softmax_ref(to_dense(x), 1, log);
      kiln::tensor<float, 2> fused(x.shape()), fused_seq(x.shape());
      if (log) {
        kiln::eval(kiln::simd, fused, kiln::log_softmax(kiln::relu(A + b) * c, 1));
        kiln::eval(kiln::seq, fused_seq, kiln::log_softmax(kiln::relu(A + b) * c, 1));
      } else {
        kiln::eval(kiln::simd, fused, kiln::softmax(kiln::relu(A + b) * c, 1));
        kiln::eval(kiln::seq, fused_seq, kiln::softmax(kiln::relu(A + b) * c, 1));
      }
      dense const got = to_dense(fused), got_seq = to_dense(fused_seq);
      for (std::size_t i = 0; i < want.values.size(); ++i) {
        CAPTURE(i);
        double const tol = 1e-5 * (std::abs(want.values[i]) + 1e-3);
        CHECK(close(got.values[i], want.values[i], tol));
        CHECK(close(got_seq.values[i], want.values[i], tol));
      }
    }
  }

  // Integer inputs give float, as in PyTorch.
  static_assert(std::is_same_v<decltype(kiln::softmax(kiln::tensor<std::int32_t, 2>{}, 1))::value_type, float>);
}

// -----------------------------------------------------------------------------------------------
// Errors.

TEST_CASE("errors: axes out of range or repeated, nothing to reduce") {
  auto const x = kiln::zeros<float>({2, 3, 4});
  CHECK_THROWS_WITH_AS(kiln::sum(x, 3), "sum: axis 3 is out of range for a tensor of rank 3", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::mean(x, -4), "mean: axis -4 is out of range for a tensor of rank 3", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::amax(x, {0, 7}), "amax: axis 7 is out of range for a tensor of rank 3", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::sum(x, {0, -3}), "sum: axis 0 is given more than once", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::variance(x, {2, 1, 2}), "var: axis 2 is given more than once", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::softmax(x, 3), "softmax: axis 3 is out of range for a tensor of rank 3",
                       kiln::shape_error);

  // No identity for amax, amin, argmax, argmin: an output with nothing to reduce is an error.
  auto const empty = kiln::zeros<float>({0});
  auto const rows = kiln::zeros<float>({0, 4});
  CHECK_THROWS_WITH_AS(kiln::amax(empty), "amax: cannot reduce over zero elements (input shape [0])",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::argmax(empty), "argmax: cannot reduce over zero elements (input shape [0])",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::amin(rows, 0), "amin: cannot reduce over zero elements (input shape [0, 4])",
                       kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::argmin(rows, 0, kiln::keepdim),
                       "argmin: cannot reduce over zero elements (input shape [0, 4])", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::norm<kiln::infinity_norm>(rows),
                       "norm<infinity_norm>: cannot reduce over zero elements (input shape [0, 4])", kiln::shape_error);
  // ...but an empty result is fine where the reduced dimension is not empty; where it is empty
  // too, PyTorch raises all the same.
  CHECK(kiln::amax(rows, 1).shape() == kiln::extents<1>{0});
  CHECK_THROWS_WITH_AS(kiln::amin(kiln::zeros<float>({0, 0, 3}), {0, 2}),
                       "amin: cannot reduce over zero elements (input shape [0, 0, 3])", kiln::shape_error);
  CHECK_THROWS_WITH_AS(kiln::argmax(kiln::zeros<float>({0, 0}), 1),
                       "argmax: cannot reduce over zero elements (input shape [0, 0])", kiln::shape_error);

  // The sum of nothing is 0, its mean NaN, as in PyTorch; over an empty dimension, zeros.
  CHECK(float(kiln::sum(empty)) == 0.f);
  CHECK(std::isnan(float(kiln::mean(empty))));
  kiln::tensor<float, 1> const zeros = kiln::sum(rows, 0);
  CHECK(zeros.shape() == kiln::extents<1>{4});
  CHECK(std::all_of(zeros.data(), zeros.data() + 4, [](float v) { return v == 0; }));
  kiln::tensor<float, 2> kept = kiln::full<float>({1, 4}, 9.f);
  kept = kiln::sum(rows, 0, kiln::keepdim);
  CHECK(std::all_of(kept.data(), kept.data() + 4, [](float v) { return v == 0; }));
}

// -----------------------------------------------------------------------------------------------
// Fusion boundaries, aliasing, strided operands and destinations.

TEST_CASE("a reduction inside an elementwise expression is materialised once: a fusion boundary") {
  auto const x = kiln::randn<float>({4, 2 * float_lanes + 3}, 13);
  index_t const cols = x.extent(1);
  auto const centred_expr = x - kiln::mean(x, 1, kiln::keepdim);
  kiln::tensor<float, 2> centred = centred_expr;
  for (index_t i = 0; i < 4; ++i) {
    double m = 0;
    for (index_t j = 0; j < cols; ++j) m += x(i, j);
    m /= double(cols);
    for (index_t j = 0; j < cols; ++j) CHECK(centred(i, j) == doctest::Approx(x(i, j) - m).epsilon(1e-5).scale(1));
  }
  std::string const listing = kiln::to_string(centred_expr);
  CAPTURE(listing);
  CHECK(listing.find("%1 = mean[axes=1, keepdim](%0) : float[4, 1]  // materialized: fusion boundary\n") !=
        std::string::npos);
  std::string const shape = "float[4, " + std::to_string(cols) + "]";
  CHECK(listing.find("%2 = sub(%0, %1) : " + shape) != std::string::npos);
  std::string const soft = kiln::to_string(kiln::softmax(x, -1) * 2.f);
  CAPTURE(soft);
  CHECK(soft.find("softmax[dim=1](%0) : " + shape + "  // materialized: fusion boundary") != std::string::npos);
  // The root reduction is not marked: it is the assignment's own loop.
  CHECK(kiln::to_string(kiln::sum(x, 1)).find("fusion boundary") == std::string::npos);

  // softmax inside an expression.
  kiln::tensor<float, 2> const doubled = kiln::softmax(x, 1) * 2.f;
  dense const want = softmax_ref(to_dense(x), 1, false);
  for (std::size_t i = 0; i < want.values.size(); ++i)
    CHECK(doubled.data()[i] == doctest::Approx(2 * want.values[i]).epsilon(1e-5));

  // A reduction of a reduction: the inner one is materialised, the outer reads it.
  float const sum_of_max = kiln::sum(kiln::amax(x, 1));
  double want_sum = 0;
  for (index_t i = 0; i < 4; ++i) {
    float m = x(i, 0);
    for (index_t j = 1; j < cols; ++j) m = std::max(m, x(i, j));
    want_sum += m;
  }
  CHECK(sum_of_max == doctest::Approx(want_sum).epsilon(1e-6));
  CHECK(kiln::to_string(kiln::sum(kiln::amax(x, 1))).find("amax[axes=1](%0) : float[4]  // materialized") !=
        std::string::npos);
  // The infinity norm lists under its own name, over abs(x).
  std::string const norm_listing = kiln::to_string(kiln::norm<kiln::infinity_norm>(x, 1));
  CHECK(norm_listing.find("abs(%0)") != std::string::npos);
  CHECK(norm_listing.find("norm<infinity_norm>[axes=1](%1) : float[4]") != std::string::npos);
}

TEST_CASE("row blocks: an expression over reductions that keep dimension 0, with the whole evaluation's bits") {
  // Rows enough for several blocks (each writes at most 16 KB of the destination and 2 KB per
  // boundary), the last one partial, and a single row.
  for (index_t const rows : {index_t(1), index_t(600), index_t(1100)})
    for (index_t const cols : {index_t(3), index_t(2 * float_lanes + 1), index_t(40)}) {
      CAPTURE(rows);
      CAPTURE(cols);
      kiln::tensor<float, 2> const x = kiln::randn<float>({rows, cols}, 61);
      auto const w = kiln::randn<float>({cols}, 62);
      auto const b = kiln::randn<float>({rows, 1}, 63);
      for (int policy : {0, 1}) {
        CAPTURE(policy);
        auto boundary = [&](auto const& e) { return policy == 0 ? kiln::eval(kiln::seq, e) : kiln::eval(kiln::simd, e); };
        auto const m = boundary(kiln::amax(x, kiln::axes<1>, kiln::keepdim));
        auto const mean = boundary(kiln::mean(x, kiln::axes<1>, kiln::keepdim));
        auto const sd = boundary(kiln::stddev(x, kiln::axes<1>, kiln::keepdim));
        auto const wm = boundary(kiln::sum(x * w, 1, kiln::keepdim));
        auto const positive = boundary(kiln::sum(x > 0.f, 1, kiln::keepdim));  // int64
        auto run = [&](auto const& e) {  // run(x - m): the boundaries evaluated beforehand
          kiln::tensor<float, 2> out = kiln::full<float>({rows, cols}, -7.f);
          if (policy == 0) kiln::eval(kiln::seq, out, e);
          else kiln::eval(kiln::simd, out, e);
          return out;
        };
        CHECK(kiln_test::bitwise_equal(run(x - kiln::amax(x, kiln::axes<1>, kiln::keepdim)), run(x - m)));
        CHECK(kiln_test::bitwise_equal(run((x - kiln::mean(x, kiln::axes<1>, kiln::keepdim)) / kiln::stddev(x, kiln::axes<1>, kiln::keepdim)),
                                     run((x - mean) / sd)));
        CHECK(kiln_test::bitwise_equal(run(x * w - kiln::sum(x * w, 1, kiln::keepdim) + b), run(x * w - wm + b)));
        CHECK(kiln_test::bitwise_equal(run(x - kiln::sum(x > 0.f, 1, kiln::keepdim)), run(x - positive)));
        kiln::tensor<float, 2> in_place = x;  // x = x - amax(x): each block reads its rows before writing them
        if (policy == 0) kiln::eval(kiln::seq, in_place, in_place - kiln::amax(in_place, kiln::axes<1>, kiln::keepdim));
        else in_place = in_place - kiln::amax(in_place, kiln::axes<1>, kiln::keepdim);
        CHECK(kiln_test::bitwise_equal(in_place, run(x - m)));
      }
    }
}

TEST_CASE("rows fused: rank 2 under kiln::simd, a row's boundaries then the row, with the bits of the boundaries evaluated first") {
  // Same bits, or NaN on both sides (a NaN's sign follows the batch it was computed in).
  auto same = [](auto const& a, auto const& b) {
    if (a.shape() != b.shape()) return false;
    for (index_t i = 0; i < a.size(); ++i) {
      auto const u = a.data()[i], v = b.data()[i];
      if (!kiln_test::same_bits(u, v) && !(std::isnan(u) && std::isnan(v))) return false;
    }
    return true;
  };
  float const inf = std::numeric_limits<float>::infinity();
  // Rows of one block and of two (1500 > fold_block), every tail around the batch width.
  for (index_t const rows : {index_t(1), index_t(4), index_t(33)})
    for (index_t const cols : {index_t(2), index_t(3), index_t(float_lanes), index_t(float_lanes + 1), index_t(40), index_t(1500)}) {
      CAPTURE(rows);
      CAPTURE(cols);
      kiln::tensor<float, 2> x = kiln::randn<float>({rows, cols}, 71);
      if (rows > 1) x(1, 1) = std::numeric_limits<float>::quiet_NaN();  // amax's NaN probe fails over this row
      if (rows > 2) x(2, 0) = 2e19f, x(2, 1) = -2e19f;  // the squared deviations overflow a float sum: var in double
      if (rows > 3) x(3, 0) = -inf;
      auto const w = kiln::randn<float>({cols}, 72);
      auto const c = kiln::randn<float>({rows, 1}, 73);
      auto first = [](auto const& boundary) { return kiln::eval(boundary); };
      auto const m = first(kiln::amax(x, kiln::axes<1>, kiln::keepdim));
      CHECK(same(kiln::eval(x - kiln::amax(x, kiln::axes<1>, kiln::keepdim)), kiln::eval(x - m)));
      auto const mean = first(kiln::mean(x, 1, kiln::keepdim));
      auto const var = first(kiln::variance(x, 1, kiln::keepdim, kiln::correction{0}));
      auto const norm = [&](auto const& mu, auto const& v) { return (x - mu) / kiln::sqrt(v + 1e-5f) * w + c; };
      CHECK(same(kiln::eval(norm(kiln::mean(x, 1, kiln::keepdim), kiln::variance(x, 1, kiln::keepdim, kiln::correction{0}))),
                 kiln::eval(norm(mean, var))));
      if (rows > 2 && cols > 2) CHECK(std::isfinite(var(2, 0)));
      auto const sd = first(kiln::stddev(x, 1, kiln::keepdim));
      CHECK(same(kiln::eval(x / kiln::stddev(x, 1, kiln::keepdim)), kiln::eval(x / sd)));
      auto const lse = first(kiln::logsumexp(x * w, 1, kiln::keepdim));
      CHECK(same(kiln::eval(x * w - kiln::logsumexp(x * w, 1, kiln::keepdim)), kiln::eval(x * w - lse)));
      auto const length = first(kiln::norm(x, 1, kiln::keepdim));
      CHECK(same(kiln::eval(x / kiln::norm(x, 1, kiln::keepdim)), kiln::eval(x / length)));
      // Twin leaves (x * x loads x once), two boundaries, a product.
      auto const squares = first(kiln::sum(x * x, 1, kiln::keepdim));
      auto const low = first(kiln::amin(x, 1, kiln::keepdim));
      CHECK(same(kiln::eval(kiln::sum(x * x, 1, kiln::keepdim) + x * kiln::amin(x, 1, kiln::keepdim)), kiln::eval(squares + x * low)));
      auto const product = first(kiln::prod(x, 1, kiln::keepdim));
      CHECK(same(kiln::eval(x + kiln::prod(x, 1, kiln::keepdim)), kiln::eval(x + product)));
      // In place: each row's maximum read before the row is written.
      kiln::tensor<float, 2> in_place = x;
      in_place = in_place - kiln::amax(in_place, kiln::axes<1>, kiln::keepdim);
      CHECK(same(in_place, kiln::eval(x - m)));
      // A truth-valued destination, and one that is an unaligned view.
      kiln::tensor<bool, 2> const above = x > kiln::mean(x, 1, kiln::keepdim);
      CHECK(kiln_test::bitwise_equal(above, kiln::eval(x > mean)));
      kiln::tensor<float, 2> wide = kiln::full<float>({rows, cols + 1}, -3.f);
      kiln::slice(wide, 1, 1, cols + 1) = x - kiln::amax(x, kiln::axes<1>, kiln::keepdim);
      CHECK(same(kiln::eval(kiln::slice(wide, 1, 1, cols + 1)), kiln::eval(x - m)));
      CHECK(kiln::all(kiln::slice(wide, 1, 0, 1) == -3.f));  // the column left of the view untouched
      // An argument that is a view with rows apart, and a boundary over rows of another length.
      kiln::tensor<float, 2> const padded = kiln::randn<float>({rows, cols + 3}, 76);
      auto const inner = kiln::slice(padded, 1, 1, cols + 1);
      auto const inner_max = first(kiln::amax(inner, 1, kiln::keepdim));
      CHECK(same(kiln::eval(inner - kiln::amax(inner, 1, kiln::keepdim)), kiln::eval(inner - inner_max)));
      auto const padded_mean = first(kiln::mean(padded, 1, kiln::keepdim));
      CHECK(same(kiln::eval(x - kiln::mean(padded, 1, kiln::keepdim)), kiln::eval(x - padded_mean)));
      // A boundary over a large tree (more than 16 nodes: its fold flattened, as the blocks' is).
      auto const large = [&] {
        return kiln::tanh(x * 0.5f + w) * w - x * x * 0.25f + kiln::exp(x * w - 1.f) * 0.125f +
               kiln::sigmoid(x) * w * x - x * 0.75f + w;
      };
      auto const large_sum = first(kiln::sum(large(), 1, kiln::keepdim));
      CHECK(same(kiln::eval(x * w - kiln::sum(large(), 1, kiln::keepdim)), kiln::eval(x * w - large_sum)));
      auto const large_var = first(kiln::variance(large(), 1, kiln::keepdim));
      CHECK(same(kiln::eval(x * kiln::variance(large(), 1, kiln::keepdim)), kiln::eval(x * large_var)));
      // Left to the blocks: a boundary's argument broadcast along its rows, or read across them.
      auto const scaled = first(kiln::sum(x * c, 1, kiln::keepdim));
      CHECK(same(kiln::eval(x - kiln::sum(x * c, 1, kiln::keepdim)), kiln::eval(x - scaled)));
      kiln::tensor<float, 2> const square = kiln::randn<float>({cols, cols}, 74);
      auto const columns = first(kiln::amax(kiln::transpose(square), kiln::axes<1>, kiln::keepdim));
      CHECK(same(kiln::eval(square - kiln::amax(kiln::transpose(square), kiln::axes<1>, kiln::keepdim)), kiln::eval(square - columns)));
      // Double.
      kiln::tensor<double, 2> const xd = kiln::randn<double>({rows, cols}, 75);
      auto const vd = first(kiln::variance(xd, 1, kiln::keepdim));
      CHECK(same(kiln::eval(xd * kiln::variance(xd, 1, kiln::keepdim)), kiln::eval(xd * vd)));
    }
}

TEST_CASE("rows fused above rank 2: the outer dimensions merged into rows, with the bits of the boundaries evaluated first") {
  auto same = [](auto const& a, auto const& b) {  // as in the rank-2 case
    if (a.shape() != b.shape()) return false;
    for (index_t i = 0; i < a.size(); ++i) {
      auto const u = a.data()[i], v = b.data()[i];
      if (!kiln_test::same_bits(u, v) && !(std::isnan(u) && std::isnan(v))) return false;
    }
    return true;
  };
  auto first = [](auto const& boundary) { return kiln::eval(boundary); };
  // [B, T, C]: single rows and batches, and 900 rows, past the 512 of a block's buffer (the
  // blocks left those to temporaries).
  for (auto const& outer : {std::pair<index_t, index_t>{1, 1}, {1, 4}, {3, 1}, {2, 5}, {3, 300}})
    for (index_t const cols : {index_t(2), index_t(float_lanes + 1), index_t(40)}) {
      index_t const batches = outer.first, steps = outer.second;
      CAPTURE(batches);
      CAPTURE(steps);
      CAPTURE(cols);
      kiln::tensor<float, 3> x = kiln::randn<float>({batches, steps, cols}, 81);
      if (steps > 1) x(0, 1, 1) = std::numeric_limits<float>::quiet_NaN();
      if (steps > 2) x(0, 2, 0) = 2e19f, x(0, 2, 1) = -2e19f;  // a variance in double
      auto const w = kiln::randn<float>({cols}, 82);
      auto const per_step = kiln::randn<float>({batches, steps, 1}, 83);
      auto const shared = kiln::randn<float>({steps, cols}, 84);       // merges only over one batch
      auto const per_batch = kiln::randn<float>({batches, 1, cols}, 85);  // merges only over one step
      auto const one_row = kiln::randn<float>({1, 1, cols}, 86);
      auto const mean = first(kiln::mean(x, 2, kiln::keepdim));
      auto const var = first(kiln::variance(x, 2, kiln::keepdim, kiln::correction{0}));
      auto const norm = [&](auto const& mu, auto const& v) { return (x - mu) / kiln::sqrt(v + 1e-5f) * w + per_step; };
      CHECK(same(kiln::eval(norm(kiln::mean(x, 2, kiln::keepdim), kiln::variance(x, 2, kiln::keepdim, kiln::correction{0}))),
                 kiln::eval(norm(mean, var))));
      auto const m = first(kiln::amax(x, kiln::axes<2>, kiln::keepdim));
      CHECK(same(kiln::eval(x - kiln::amax(x, kiln::axes<-1>, kiln::keepdim)), kiln::eval(x - m)));
      auto const lse = first(kiln::logsumexp(x * shared, 2, kiln::keepdim));
      CHECK(same(kiln::eval(x * shared - kiln::logsumexp(x * shared, 2, kiln::keepdim)), kiln::eval(x * shared - lse)));
      auto const across = first(kiln::sum(x * per_batch, 2, kiln::keepdim));
      CHECK(same(kiln::eval(x * per_batch - kiln::sum(x * per_batch, 2, kiln::keepdim)),
                 kiln::eval(x * per_batch - across)));
      auto const weighted = first(kiln::mean(x * one_row, 2, kiln::keepdim));
      CHECK(same(kiln::eval(one_row - kiln::mean(x * one_row, 2, kiln::keepdim)), kiln::eval(one_row - weighted)));
      // Each batch's first step, [B, 1, C] with the strides of x: they chain as x's do, but the
      // view broadcasts along the steps.
      auto const firsts = kiln::view(std::as_const(x).data(), kiln::extents<3>{batches, 1, cols},
                                     kiln::extents<3>{steps * cols, cols, 1});
      auto const from_first = first(kiln::amax(x - firsts, 2, kiln::keepdim));
      CHECK(same(kiln::eval(x - firsts - kiln::amax(x - firsts, 2, kiln::keepdim)),
                 kiln::eval(x - firsts - from_first)));
      auto const squares = first(kiln::sum(x * x, 2, kiln::keepdim));  // twin leaves
      CHECK(same(kiln::eval(x / kiln::sum(x * x, 2, kiln::keepdim)), kiln::eval(x / squares)));
      // In place, and into a truth-valued destination.
      kiln::tensor<float, 3> in_place = x;
      in_place = in_place - kiln::amax(in_place, kiln::axes<2>, kiln::keepdim);
      CHECK(same(in_place, kiln::eval(x - m)));
      kiln::tensor<bool, 3> const above = x > kiln::mean(x, 2, kiln::keepdim);
      CHECK(kiln_test::bitwise_equal(above, kiln::eval(x > mean)));
      // A destination whose rows are apart (a slice of the last dimension: they still merge), an
      // argument whose batches are apart (they do not), and rows read backwards.
      kiln::tensor<float, 3> wide = kiln::full<float>({batches, steps, cols + 1}, -3.f);
      kiln::slice(wide, 2, 1, cols + 1) = x - kiln::amax(x, kiln::axes<2>, kiln::keepdim);
      CHECK(same(kiln::eval(kiln::slice(wide, 2, 1, cols + 1)), kiln::eval(x - m)));
      CHECK(kiln::all(kiln::slice(wide, 2, 0, 1) == -3.f));
      kiln::tensor<float, 3> const padded = kiln::randn<float>({batches, steps + 1, cols}, 87);
      auto const apart = kiln::slice(padded, 1, 0, steps);
      auto const apart_max = first(kiln::amax(apart, kiln::axes<2>, kiln::keepdim));
      CHECK(same(kiln::eval(apart - kiln::amax(apart, kiln::axes<2>, kiln::keepdim)), kiln::eval(apart - apart_max)));
      auto const backwards = kiln::view(std::as_const(x).data() + (batches * steps - 1) * cols, kiln::extents<3>{batches, steps, cols},
                                        kiln::extents<3>{-steps * cols, -cols, 1});
      auto const backwards_mean = first(kiln::mean(backwards, 2, kiln::keepdim));
      CHECK(same(kiln::eval(backwards - kiln::mean(backwards, 2, kiln::keepdim)), kiln::eval(backwards - backwards_mean)));
      // A boundary broadcast along the batches, [1, T, 1] in [B, T, C]: it does not merge, and the
      // rank-2 tree built while finding that out must not throw.
      auto const one_batch = kiln::randn<float>({1, steps, cols}, 92);
      auto const one_batch_mean = first(kiln::mean(one_batch, 2, kiln::keepdim));
      CHECK(same(kiln::eval(x - kiln::mean(one_batch, 2, kiln::keepdim)), kiln::eval(x - one_batch_mean)));
      CHECK(same(kiln::eval(x * w - kiln::amax(one_batch, 2, kiln::keepdim) - kiln::mean(x, 2, kiln::keepdim)),
                 kiln::eval(x * w - first(kiln::amax(one_batch, 2, kiln::keepdim)) - mean)));
      // Reductions of the last two dimensions (rows of steps * cols), a leaf [T, 1] that does not
      // merge into them, and boundaries reducing different numbers of dimensions (the blocks).
      auto const mean2 = first(kiln::mean(x, kiln::axes<1, 2>, kiln::keepdim));
      auto const var2 = first(kiln::variance(x, kiln::axes<1, 2>, kiln::keepdim));
      auto const norm2 = [&](auto const& mu, auto const& v) { return (x - mu) / kiln::sqrt(v + 1e-5f) * w; };
      auto const mean_of = [&] { return kiln::mean(x, kiln::axes<1, 2>, kiln::keepdim); };
      CHECK(same(kiln::eval(norm2(mean_of(), kiln::variance(x, kiln::axes<1, 2>, kiln::keepdim))),
                 kiln::eval(norm2(mean2, var2))));
      kiln::tensor<float, 2> const per_row = kiln::randn<float>({steps, 1}, 90);
      CHECK(same(kiln::eval(x * per_row - mean_of()), kiln::eval(x * per_row - mean2)));
      CHECK(same(kiln::eval(x - mean_of() + kiln::amax(x, kiln::axes<2>, kiln::keepdim)), kiln::eval(x - mean2 + m)));
      // A reduction over a dimension of extent 1 that is not the last: the shapes alone would merge.
      kiln::tensor<float, 3> const single = kiln::randn<float>({batches, 1, cols}, 91);
      auto const over_one = first(kiln::sum(single, kiln::axes<1>, kiln::keepdim));
      CHECK(same(kiln::eval(single * 2.f - kiln::sum(single, kiln::axes<1>, kiln::keepdim)),
                 kiln::eval(single * 2.f - over_one)));
      // Rank 4: the last dimension, and the last two (an instance norm over [N, B, T, C]).
      kiln::tensor<float, 4> const x4 = kiln::randn<float>({2, batches, steps, cols}, 88);
      auto const sd4 = first(kiln::stddev(x4, 3, kiln::keepdim));
      CHECK(same(kiln::eval(x4 / kiln::stddev(x4, 3, kiln::keepdim) + w), kiln::eval(x4 / sd4 + w)));
      auto const mean4 = first(kiln::mean(x4, kiln::axes<2, 3>, kiln::keepdim));
      CHECK(same(kiln::eval(x4 - kiln::mean(x4, kiln::axes<2, 3>, kiln::keepdim)), kiln::eval(x4 - mean4)));
      kiln::tensor<double, 3> const xd = kiln::randn<double>({batches, steps, cols}, 89);
      auto const vd = first(kiln::variance(xd, 2, kiln::keepdim));
      CHECK(same(kiln::eval(xd * kiln::variance(xd, 2, kiln::keepdim)), kiln::eval(xd * vd)));
    }
}

TEST_CASE("row blocks: rank 3, kept trailing dimensions, and the cases left to the whole evaluation") {
  kiln::tensor<float, 3> const x = kiln::randn<float>({700, 5, 6}, 64);
  auto whole = [](auto const& boundary, auto const& outer) { return kiln::eval(outer(kiln::eval(boundary))); };
  SUBCASE("reductions over the trailing axes, over a middle one (six outputs per row), and over dimension 0") {
    auto const by_rows = kiln::amax(x, kiln::axes<1, 2>, kiln::keepdim);
    auto const by_middle = kiln::sum(x, kiln::axes<1>, kiln::keepdim);
    auto const by_first = kiln::mean(x, kiln::axes<0>, kiln::keepdim);
    auto minus = [&](auto const& m) { return x - m; };
    CHECK(kiln_test::bitwise_equal(kiln::eval(x - by_rows), whole(by_rows, minus)));
    CHECK(kiln_test::bitwise_equal(kiln::eval(x - by_middle), whole(by_middle, minus)));
    CHECK(kiln_test::bitwise_equal(kiln::eval(x - by_first), whole(by_first, minus)));
  }
  SUBCASE("a boundary reads more of the destination's tensor than the destination") {
    kiln::tensor<float, 2> y = kiln::randn<float>({600, 40}, 65);
    kiln::tensor<float, 2> const before = y;
    auto const m = kiln::eval(kiln::amax(before, kiln::axes<1>, kiln::keepdim));
    kiln::slice(y, 1, 0, 20) = kiln::slice(y, 1, 0, 20) - kiln::amax(y, kiln::axes<1>, kiln::keepdim);
    for (index_t i = 0; i < 600; ++i)
      for (index_t j = 0; j < 40; ++j) CHECK(y(i, j) == (j < 20 ? before(i, j) - m(i, 0) : before(i, j)));
  }
  SUBCASE("a boundary reads the destination transposed") {
    kiln::tensor<float, 2> y = kiln::randn<float>({300, 300}, 66);
    kiln::tensor<float, 2> const before = y;
    auto const m = kiln::eval(kiln::amax(kiln::transpose(before), kiln::axes<1>, kiln::keepdim));  // column maxima
    y = y - kiln::amax(kiln::transpose(y), kiln::axes<1>, kiln::keepdim);
    for (index_t i = 0; i < 300; ++i)
      for (index_t j = 0; j < 300; ++j) CHECK(y(i, j) == before(i, j) - m(i, 0));
  }
}

TEST_CASE("a reduction node copies and moves whole: shape, axes and an argument it owns") {
  kiln::tensor<float, 1> const flat = kiln::arange<float>(0, 24);
  kiln::tensor<float, 3> const x = kiln::reshape(flat, {2, 3, 4});  // x(i, j, k) = 12 i + 4 j + k
  auto const kept = kiln::amax(x, {0, 2}, kiln::keepdim);  // [1, 3, 1]
  auto const copy = kept;
  CHECK(copy.shape() == kiln::extents<3>{1, 3, 1});
  CHECK(copy.reduced_axes() == std::array<int, 2>{0, 2});
  kiln::tensor<float, 3> const from_copy = x - copy;
  CHECK(from_copy(1, 2, 3) == 0.f);   // 23 - 23
  CHECK(from_copy(0, 0, 0) == -15.f);  // 0 - the largest x(i, 0, k), 15
  // Over an rvalue tensor the node owns its argument; moved, the new node keeps it alive.
  auto owning = kiln::sum(kiln::ones<float>({5, 7}), kiln::axes<1>);
  auto moved = std::move(owning);
  CHECK(moved.shape() == kiln::extents<1>{5});
  auto nested = moved * 2.f;  // the map holds a copy of the node
  kiln::tensor<float, 1> const twice = nested;
  for (index_t i = 0; i < 5; ++i) CHECK(twice(i) == 14.f);
}

TEST_CASE("aliasing: a reduction of the destination itself") {
  auto const original = kiln::randn<float>({5, 2 * float_lanes + 1}, 14);
  index_t const cols = original.extent(1);
  std::vector<double> row_mean(5, 0.0), col_sum(std::size_t(cols), 0.0);
  for (index_t i = 0; i < 5; ++i)
    for (index_t j = 0; j < cols; ++j) {
      row_mean[std::size_t(i)] += original(i, j) / double(cols);
      col_sum[std::size_t(j)] += original(i, j);
    }

  // x = x - mean(x, 1, keepdim): the mean is materialised before x is overwritten.
  kiln::tensor<float, 2> x = original;
  x = x - kiln::mean(x, 1, kiln::keepdim);
  for (index_t i = 0; i < 5; ++i)
    for (index_t j = 0; j < cols; ++j)
      CHECK(x(i, j) == doctest::Approx(original(i, j) - row_mean[std::size_t(i)]).epsilon(1e-5).scale(1));

  // m = sum(m, 0, keepdim): [1, cols] broadcast back into every row of m.
  kiln::tensor<float, 2> m = original;
  m = kiln::sum(m, 0, kiln::keepdim);
  for (index_t i = 0; i < 5; ++i)
    for (index_t j = 0; j < cols; ++j)
      CHECK(m(i, j) == doctest::Approx(col_sum[std::size_t(j)]).epsilon(1e-5).scale(1));

  // A row of m receives the column sums of all of m, itself included.
  kiln::tensor<float, 2> r = original;
  kiln::select(r, 0, 2) = kiln::sum(r, 0);
  for (index_t j = 0; j < cols; ++j) {
    CHECK(r(2, j) == doctest::Approx(col_sum[std::size_t(j)]).epsilon(1e-5).scale(1));
    CHECK(r(1, j) == original(1, j));
  }

  // x = softmax(x, 1) in place.
  kiln::tensor<float, 2> s = original;
  s = kiln::softmax(s, 1);
  dense const want = softmax_ref(to_dense(original), 1, false);
  for (std::size_t i = 0; i < want.values.size(); ++i)
    CHECK(s.data()[i] == doctest::Approx(want.values[i]).epsilon(1e-5));
}

TEST_CASE("strided and broadcast operands, and destinations that are views or of another shape or type") {
  auto const A = kiln::randn<float>({5, 19}, 15);
  auto const b = kiln::randn<float>({19}, 16);
  auto const c = kiln::randn<float>({5, 1}, 17);
  auto at = [](auto const& t, index_t i, index_t j) { return double(t(i, j)); };

  // sum(A + b, 0): b broadcasts along the reduced axis (stride 0 there); sum(A + b, 1): along the
  // kept one, b varying along the reduced one.
  kiln::tensor<float, 1> const s0 = kiln::sum(A + b, 0);
  kiln::tensor<float, 1> const s1 = kiln::sum(A + b, 1);
  for (index_t j = 0; j < 19; ++j) {
    double want = 0;
    for (index_t i = 0; i < 5; ++i) want += at(A, i, j) + b(j);
    CHECK(s0(j) == doctest::Approx(want).epsilon(1e-5).scale(1));
  }
  for (index_t i = 0; i < 5; ++i) {
    double want = 0;
    for (index_t j = 0; j < 19; ++j) want += at(A, i, j) + b(j);
    CHECK(s1(i) == doctest::Approx(want).epsilon(1e-5).scale(1));
  }

  // Transposed, stepped and expanded views as the reduced input.
  kiln::tensor<float, 1> const t = kiln::sum(kiln::transpose(A), 1);
  kiln::tensor<float, 1> const stepped = kiln::sum(kiln::slice(A, 1, 1, 19, 3), 0);
  kiln::tensor<float, 1> const wide = kiln::sum(kiln::expand(c, {5, 19}), 1);
  for (index_t j = 0; j < 19; ++j) {
    double want = 0;
    for (index_t i = 0; i < 5; ++i) want += at(A, i, j);
    CHECK(t(j) == doctest::Approx(want).epsilon(1e-5).scale(1));
  }
  for (index_t k = 0; k < stepped.extent(0); ++k) {
    double want = 0;
    for (index_t i = 0; i < 5; ++i) want += at(A, i, 1 + 3 * k);
    CHECK(stepped(k) == doctest::Approx(want).epsilon(1e-5).scale(1));
  }
  for (index_t i = 0; i < 5; ++i) CHECK(wide(i) == doctest::Approx(19 * c(i, 0)).epsilon(1e-6));

  // Destinations: a column of a matrix (strided) and a tensor of another element type, seq and
  // simd; a matrix the result broadcasts into.
  for (int policy = 0; policy < 2; ++policy) {
    CAPTURE(policy);
    kiln::tensor<float, 2> cols = kiln::full<float>({5, 3}, -1.f);
    kiln::tensor<double, 1> wider = kiln::zeros<double>({19});
    if (policy == 0) {
      kiln::eval(kiln::seq, kiln::select(cols, 1, 2), kiln::sum(A, 1));
      kiln::eval(kiln::seq, wider, kiln::sum(A, 0));
    } else {
      kiln::eval(kiln::simd, kiln::select(cols, 1, 2), kiln::sum(A, 1));
      kiln::eval(kiln::simd, wider, kiln::sum(A, 0));
    }
    for (index_t i = 0; i < 5; ++i) {
      double want = 0;
      for (index_t j = 0; j < 19; ++j) want += at(A, i, j);
      CHECK(cols(i, 2) == doctest::Approx(want).epsilon(1e-5).scale(1));
      CHECK(cols(i, 1) == -1.f);
    }
    for (index_t j = 0; j < 19; ++j) CHECK(wider(j) == double(t(j)));
  }
  // A result broadcasts into a destination of its rank or of a higher one.
  kiln::tensor<float, 2> rows = kiln::zeros<float>({4, 19});
  rows = kiln::sum(A, 0, kiln::keepdim);
  for (index_t i = 0; i < 4; ++i)
    for (index_t j = 0; j < 19; ++j) CHECK(rows(i, j) == t(j));
  rows = kiln::zeros<float>({4, 19});
  rows = kiln::sum(A, 0);
  for (index_t i = 0; i < 4; ++i)
    for (index_t j = 0; j < 19; ++j) CHECK(rows(i, j) == t(j));
  rows = kiln::amax(A);
  CHECK(rows(3, 18) == float(kiln::amax(A)));
  kiln::tensor<float, 1> four = kiln::zeros<float>({4});
  CHECK_THROWS_WITH_AS(four = kiln::sum(A, 0),
                       "cannot assign an expression of shape [19] to a destination of shape [4]", kiln::shape_error);
}

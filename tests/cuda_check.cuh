// tests/cuda_check.cuh: what the CUDA tests share: comparing a device result with the host's.
#pragma once

#include <doctest/doctest.h>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kiln_cuda_test {

using kiln::index_t;

template <class T>
struct tolerance {
  static constexpr double rtol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  static constexpr double atol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
};

// Every element of got against want: exact for integers and bools, within tolerance otherwise.
template <class T, int R>
void check_same(kiln::tensor<T, R> const& got, kiln::tensor<T, R> const& want, std::string const& what,
                double rtol = tolerance<T>::rtol, double atol = tolerance<T>::atol) {
  REQUIRE_MESSAGE(got.shape() == want.shape(), what);
  int failures = 0;
  for (index_t i = 0; i < want.size() && failures < 5; ++i) {
    double const g = static_cast<double>(got.data()[i]), w = static_cast<double>(want.data()[i]);
    bool ok;
    if constexpr (!std::is_floating_point_v<T>) ok = g == w;
    else if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::abs(g - w) <= atol + rtol * std::abs(w);
    if (!ok) {
      ++failures;
      FAIL_CHECK(what << ": element " << i << " is " << g << " on the device, " << w << " on the host");
    }
  }
}

// Edge values and a grid over [lo, hi].
template <class T>
kiln::tensor<T, 1> sample(double lo, double hi, bool edges = true) {
  std::vector<T> v;
  if (edges) {
    T const inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
    v = {T(0), T(-0.0), inf, -inf, nan, T(1), T(-1), T(0.5), T(-0.5), T(2), T(-2)};
  }
  for (int k = 0; k <= 200; ++k) v.push_back(static_cast<T>(lo + (hi - lo) * k / 200.0));
  kiln::tensor<T, 1> t(kiln::extents<1>{index_t(v.size())});
  std::copy(v.begin(), v.end(), t.data());
  return t;
}
// A second input for binary ops: the same values in another order.
template <class T>
kiln::tensor<T, 1> reversed(kiln::tensor<T, 1> const& x) {
  kiln::tensor<T, 1> r = x;
  std::reverse(r.data(), r.data() + r.size());
  return r;
}

// build(args...) evaluated on the host and, on device copies of the same arguments, by kiln::cuda{}.
template <class Build, class... X>
void same_as_host(std::string const& what, Build const& build, X const&... x) {
  auto const want = kiln::eval(build(x...));
  auto const got = kiln::to_host(kiln::eval(kiln::cuda{}, build(kiln::to_device(x)...)));
  check_same(got, want, what);
}

}  // namespace kiln_cuda_test

// kiln/core/factories.hpp: tensors made from a shape: zeros, ones, full, empty, rand, randn,
// and the ranges arange and linspace. Shapes are braced lists: kiln::zeros<float>({3, 4}).
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/random.hpp>
#include <kiln/core/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln {

namespace detail {
template <std::size_t R>
extents<int(R)> to_extents(index_t const (&shape)[R]) {
  extents<int(R)> s{};
  std::copy_n(shape, R, s.begin());
  return s;
}
}  // namespace detail

template <element T, std::size_t N>
tensor<T, int(N)> zeros(std::array<index_t, N> const& shape) { return tensor<T, int(N)>(shape); }
template <element T, std::size_t R>
tensor<T, int(R)> zeros(index_t const (&shape)[R]) { return zeros<T>(detail::to_extents(shape)); }

// Elements left uninitialised, as torch.empty: for outputs about to be overwritten.
template <element T, std::size_t N>
tensor<T, int(N)> empty(std::array<index_t, N> const& shape) { return tensor<T, int(N)>(shape, uninitialized); }
template <element T, std::size_t R>
tensor<T, int(R)> empty(index_t const (&shape)[R]) { return empty<T>(detail::to_extents(shape)); }

template <element T, std::size_t N>
tensor<T, int(N)> full(std::array<index_t, N> const& shape, T value) {
  tensor<T, int(N)> t(shape, uninitialized);
  std::fill_n(t.data(), t.size(), value);
  return t;
}
template <element T, std::size_t R>
tensor<T, int(R)> full(index_t const (&shape)[R], T value) { return full<T>(detail::to_extents(shape), value); }

template <element T, std::size_t N>
tensor<T, int(N)> ones(std::array<index_t, N> const& shape) { return full<T>(shape, T(1)); }
template <element T, std::size_t R>
tensor<T, int(R)> ones(index_t const (&shape)[R]) { return ones<T>(detail::to_extents(shape)); }

// Uniform in [0, 1), reproducible from the seed.
template <std::floating_point T, std::size_t N>
tensor<T, int(N)> rand(std::array<index_t, N> const& shape, std::uint64_t seed = 0) {
  tensor<T, int(N)> t(shape, uninitialized);
  detail::seeded_stream stream(seed);
  for (index_t i = 0; i < t.size(); ++i) t.data()[i] = stream.template uniform<T>();
  return t;
}
template <std::floating_point T, std::size_t R>
tensor<T, int(R)> rand(index_t const (&shape)[R], std::uint64_t seed = 0) {
  return rand<T>(detail::to_extents(shape), seed);
}

// Standard normal, reproducible from the seed.
template <std::floating_point T, std::size_t N>
tensor<T, int(N)> randn(std::array<index_t, N> const& shape, std::uint64_t seed = 0) {
  tensor<T, int(N)> t(shape, uninitialized);
  detail::seeded_stream stream(seed);
  for (index_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(stream.normal());
  return t;
}
template <std::floating_point T, std::size_t R>
tensor<T, int(R)> randn(index_t const (&shape)[R], std::uint64_t seed = 0) {
  return randn<T>(detail::to_extents(shape), seed);
}

// start, start + step, ... while below stop (above, for a negative step), as torch.arange; a step
// whose sign leads away from stop is an error, as there.
template <element T>
tensor<T, 1> arange(T start, T stop, T step = T(1)) {
  if (step == T(0)) throw shape_error("arange: step must not be zero");
  if ((step > T(0) && stop < start) || (step < T(0) && stop > start))
    throw shape_error("arange: the step's sign leads away from stop");
  if constexpr (std::is_integral_v<T>) {
    // Exact, in 64-bit unsigned arithmetic: the distance and each element may wrap there, the
    // values they stand for do not (through double, arange<int64_t> lost odd values past 2^53).
    using U = std::uint64_t;
    bool const up = step > T(0);
    U const distance = up ? U(stop) - U(start) : U(start) - U(stop);
    U const stride = up ? U(step) : U(0) - U(step);
    U const count = distance / stride + (distance % stride != 0);
    if (count > U(std::numeric_limits<index_t>::max())) throw shape_error("arange: the range is too long");
    tensor<T, 1> t(extents<1>{index_t(count)}, uninitialized);
    for (index_t i = 0; i < index_t(count); ++i) t.data()[i] = static_cast<T>(U(start) + U(i) * U(step));
    return t;
  } else {
    double const count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
    // Converting a NaN, infinite or huge count to index_t would be undefined: reject it in words.
    if (!(count < 0x1p62)) throw shape_error("arange: the range is infinite, NaN or too long");
    auto const n = static_cast<index_t>(std::max(0.0, count));
    tensor<T, 1> t(extents<1>{n}, uninitialized);
    for (index_t i = 0; i < n; ++i)
      t.data()[i] = static_cast<T>(static_cast<double>(start) + static_cast<double>(i) * static_cast<double>(step));
    return t;
  }
}
template <element T>
tensor<T, 1> arange(T stop) { return arange<T>(T(0), stop, T(1)); }

// `steps` points from start to stop inclusive, as torch.linspace.
template <std::floating_point T>
tensor<T, 1> linspace(T start, T stop, index_t steps) {
  if (steps < 0) throw shape_error("linspace: steps must not be negative");
  tensor<T, 1> t(extents<1>{steps}, uninitialized);
  double const step = steps > 1 ? (static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(steps - 1) : 0.0;
  // Fill from both ends, as PyTorch, so the last point is exactly `stop`; the first half (and the
  // single point of steps == 1, which is `start` as in PyTorch and NumPy) counts from `start`.
  index_t const half = (steps + 1) / 2;
  for (index_t i = 0; i < steps; ++i)
    t.data()[i] = i < half ? static_cast<T>(start + step * static_cast<double>(i))
                           : static_cast<T>(stop - step * static_cast<double>(steps - 1 - i));
  return t;
}

}  // namespace kiln

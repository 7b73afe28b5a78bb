// kiln/cuda/kernels.hpp: the elementwise kernel. One grid-stride kernel per expression type; the
// common case (destination and every operand contiguous, or an operand broadcast as a single
// element) reads element i of each operand directly, anything else (broadcasting along some
// dimensions, transposed or strided views) through the output coordinates.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/cuda/evaluator.hpp>

#include <cstdint>
#include <span>

namespace kiln::detail {

// The output's extents and strides, and the coordinates of its i-th element (row-major).
template <int R>
struct output_layout {
  static constexpr int dims = R > 0 ? R : 1;
  index_t extent[dims] = {};
  index_t stride[dims] = {};

  output_layout(extents<R> const& shape, extents<R> const& strides) {
    for (int d = 0; d < R; ++d) extent[d] = shape[d], stride[d] = strides[d];
  }
  KILN_HD void unravel(index_t i, index_t* c) const noexcept {
    for (int d = R - 1; d >= 0; --d) {
      c[d] = i % extent[d];
      i /= extent[d];
    }
  }
  KILN_HD index_t offset(index_t const* c) const noexcept {
    index_t o = 0;
    for (int d = 0; d < R; ++d) o += c[d] * stride[d];
    return o;
  }
};

// Whether strides walk `shape` in row-major order without gaps.
template <int R>
bool dense(extents<R> const& shape, extents<R> const& strides) {
  extents<R> const want = contiguous_strides<R>(shape);
  for (int d = 0; d < R; ++d)
    if (shape[d] != 1 && strides[d] != want[d]) return false;
  return true;
}

// How a loop reads its operands, from the fastest: chunks of consecutive elements (every tensor
// contiguous in the output's order or broadcast as one element, its address aligned to a chunk),
// element i of each (the same without the alignment), or through the output coordinates.
enum class loop_mode { chunked, flat, strided };

// The mode of a loop over `shape` reading ev and writing T to each of `out` (laid out as `strides`).
template <class T, int R, class Ev>
loop_mode choose_loop_mode(Ev const& ev, extents<R> const& shape, extents<R> const& strides, std::span<T* const> out) {
  if (!ev.is_flat() || !dense<R>(shape, strides)) return loop_mode::strided;
  constexpr int K = chunk_elements<T, Ev>;
  bool aligned = ev.template chunk_aligned<K>();
  for (T* p : out) aligned = aligned && reinterpret_cast<std::uintptr_t>(p) % sizeof(chunk<T, K>) == 0;
  return K > 1 && aligned ? loop_mode::chunked : loop_mode::flat;
}

// The chunked loop's skeleton, grid-stride: body(c, read) for each whole chunk c of this thread's
// share, where read(k) reads element k of the chunk's loaded values (cached_read), then tail(i)
// for this thread's element, if any, of the last n mod K.
template <int K, class Ev, class Body, class Tail>
__device__ KILN_ALWAYS_INLINE void for_each_chunk(Ev const& ev, index_t n, Body&& body, Tail&& tail) {
  index_t const first = index_t(blockIdx.x) * blockDim.x + threadIdx.x, threads = index_t(blockDim.x) * gridDim.x;
  index_t const chunks = n / K;
  for (index_t c = first; c < chunks; c += threads) {
    auto const cache = device_prefetch<K>(ev, c * K);
    body(c, [&](int k) { return cached_read<std::remove_const_t<decltype(cache)>>{cache, k}; });
  }
  if (index_t const i = chunks * K + first; i < n) tail(i);
}

// Elements per thread per step of the flat loop: independent loads in flight, each step still
// coalesced (thread t reads elements t, t + blockDim, t + 2 blockDim, ...).
inline constexpr int items_per_thread = 4;

// One kernel per mode, so that each gets the registers its own loop needs (one kernel with every
// loop in it takes the most any of them needs, which halves the occupancy of the chunked loop).
template <loop_mode Mode, class T, class Ev, int R>
__global__ void __launch_bounds__(block_size)
    elementwise_kernel(T* out, Ev const ev, output_layout<R> const layout, index_t const n) {
  if constexpr (Mode == loop_mode::chunked) {
    constexpr int K = chunk_elements<T, Ev>;
    for_each_chunk<K>(
        ev, n,
        [&](index_t c, auto read) {
          chunk<T, K> v;
#pragma unroll
          for (int k = 0; k < K; ++k) v.v[k] = static_cast<T>(ev.read(read(k)));
          reinterpret_cast<chunk<T, K>*>(out)[c] = v;
        },
        [&](index_t i) { out[i] = static_cast<T>(ev.read(flat_read{i})); });
  } else if constexpr (Mode == loop_mode::flat) {
    index_t const tile = index_t(blockDim.x) * items_per_thread;
    for (index_t base = index_t(blockIdx.x) * tile + threadIdx.x; base < n; base += tile * gridDim.x) {
      typename Ev::value_type v[items_per_thread] = {};
#pragma unroll
      for (int k = 0; k < items_per_thread; ++k)
        if (index_t const i = base + k * index_t(blockDim.x); i < n) v[k] = ev.read(flat_read{i});
#pragma unroll
      for (int k = 0; k < items_per_thread; ++k)
        if (index_t const i = base + k * index_t(blockDim.x); i < n) out[i] = static_cast<T>(v[k]);
    }
  } else {
    index_t const first = index_t(blockIdx.x) * blockDim.x + threadIdx.x, threads = index_t(blockDim.x) * gridDim.x;
    for (index_t i = first; i < n; i += threads) {
      index_t c[output_layout<R>::dims];
      layout.unravel(i, c);
      out[layout.offset(c)] = static_cast<T>(ev.read(strided_read{c}));
    }
  }
}

// Evaluates `root` (maps, constants and device tensors; no fusion boundaries) into dst, which it
// may read only element for element.
template <class T, int R, class Root>
void run_elementwise(cuda_tensor<T, R> const& dst, Root const& root) {
  index_t const n = dst.size();
  if (n == 0) return;
  using Ev = device_evaluator<Root, R>;
  Ev const ev(root, dst.shape());
  T* const out[] = {dst.data()};
  loop_mode const mode = choose_loop_mode<T, R>(ev, dst.shape(), dst.strides(), out);
  output_layout<R> const layout(dst.shape(), dst.strides());
  auto launch = [&]<loop_mode Mode>(index_t per_thread) {
    elementwise_kernel<Mode, T, Ev, R>
        <<<grid_size(n, index_t(block_size) * per_thread), block_size, 0, stream()>>>(dst.data(), ev, layout, n);
  };
  if (mode == loop_mode::chunked) launch.template operator()<loop_mode::chunked>(chunk_elements<T, Ev>);
  else if (mode == loop_mode::flat) launch.template operator()<loop_mode::flat>(items_per_thread);
  else launch.template operator()<loop_mode::strided>(1);
  check_launch("kiln elementwise kernel");
}

}  // namespace kiln::detail

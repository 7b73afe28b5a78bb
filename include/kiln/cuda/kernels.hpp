// kiln/cuda/kernels.hpp: the elementwise kernel. One grid-stride kernel per expression type; the
// common case (destination and every operand contiguous, or an operand broadcast as a single
// element) reads element i of each operand directly, anything else (broadcasting along some
// dimensions, transposed or strided views) through the output coordinates.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/cuda/evaluator.hpp>

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

// Elements per thread per step of the flat loop: independent loads in flight, each step still
// coalesced (thread t reads elements t, t + blockDim, t + 2 blockDim, ...).
inline constexpr int items_per_thread = 4;

template <class T, class Ev, int R>
__global__ void __launch_bounds__(block_size)
    elementwise_kernel(T* out, Ev const ev, output_layout<R> const layout, index_t const n, bool const flat) {
  if (flat) {
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
    index_t const stride = index_t(blockDim.x) * gridDim.x;
    for (index_t i = index_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
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
  device_evaluator<Root, R> const ev(root, dst.shape());
  bool const flat = ev.is_flat() && dense<R>(dst.shape(), dst.strides());
  unsigned const grid = grid_size(n, index_t(block_size) * (flat ? items_per_thread : 1));
  elementwise_kernel<T, device_evaluator<Root, R>, R>
      <<<grid, block_size, 0, stream()>>>(dst.data(), ev, output_layout<R>(dst.shape(), dst.strides()), n, flat);
  check_launch("kiln elementwise kernel");
}

}  // namespace kiln::detail

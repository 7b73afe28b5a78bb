// kiln/cuda/reduce.hpp: reductions and softmax on the device. A reduction over every element is
// one CUB transform-reduce whose transform is the producer expression (read once, never stored);
// a reduction over some axes is one kernel over the outputs. Two-pass ops (variance, stddev,
// logsumexp) and softmax compose these as eval/reduce.hpp does on the host, and a boundary inside
// an elementwise expression is materialised first (`device_lower`).
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/cuda/kernels.hpp>
#include <kiln/eval/reduce.hpp>

#include <cub/block/block_reduce.cuh>
#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <span>

namespace kiln::detail {

template <class Op>
struct combine_with {
  template <class A>
  KILN_HD A operator()(A const& a, A const& b) const {
    return Op::combine(a, b);
  }
};

// A contiguous tensor seen as one dimension.
template <class T, int R>
cuda_tensor<T, 1> flatten(cuda_tensor<T, R> const& t) {
  return {t, t.data(), extents<1>{t.size()}, extents<1>{1}};
}

// Element i of the producer, as Op's contribution: the transform of the full reduction.
template <class Op, class A, class Ev, int R>
struct prepared_element {
  Ev ev;
  output_layout<R> layout;
  bool flat;
  KILN_HD A operator()(index_t i) const {
    if (flat) return Op::template prepare<A>(ev.read(flat_read{i}));
    index_t c[output_layout<R>::dims];
    layout.unravel(i, c);
    return Op::template prepare<A>(ev.read(strided_read{c}));
  }
};

// dst (one element) = Op over every element of arg.
template <class Op, class A, class Arg>
void fold_all(cuda_tensor<A, 0> const& dst, Arg const& arg) {
  constexpr int RA = Arg::rank;
  index_t const n = element_count<RA>(arg.shape());
  A const identity = Op::template identity<A>();
  if (n == 0) {
    check(cudaMemcpyAsync(dst.data(), &identity, sizeof(A), cudaMemcpyHostToDevice, stream()), "cudaMemcpyAsync");
    return synchronize();  // `identity` is a local
  }
  using Ev = device_evaluator<Arg, RA>;
  Ev const ev(arg, arg.shape());
  prepared_element<Op, A, Ev, RA> const transform{ev, output_layout<RA>(arg.shape(), contiguous_strides<RA>(arg.shape())),
                                                  ev.is_flat()};
  thrust::counting_iterator<index_t> const first(0);
  std::size_t bytes = 0;
  auto reduce = [&](void* temp) {
    check(cub::DeviceReduce::TransformReduce(temp, bytes, first, dst.data(), n, combine_with<Op>{}, transform, identity,
                                             stream()),
          "cub::DeviceReduce::TransformReduce");
  };
  reduce(nullptr);
  auto const temp = device_allocate<unsigned char>(index_t(bytes));
  reduce(temp.get());
}

// Which of the input's dimensions an output keeps and which it reduces, and the input
// coordinates of the j-th element reduced into output o.
template <int R>
struct fold_layout {
  static constexpr int dims = R > 0 ? R : 1;
  int kept = 0, reduced = 0;
  int kept_dim[dims] = {}, reduced_dim[dims] = {};
  index_t kept_extent[dims] = {}, reduced_extent[dims] = {};

  fold_layout(extents<R> const& shape, std::span<int const> axes) {
    for (int d = 0; d < R; ++d) {
      bool const is_reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (is_reduced) reduced_dim[reduced] = d, reduced_extent[reduced++] = shape[d];
      else kept_dim[kept] = d, kept_extent[kept++] = shape[d];
    }
  }
  KILN_HD void coordinates(index_t o, index_t j, index_t* c) const noexcept {
    for (int k = kept - 1; k >= 0; --k) {
      c[kept_dim[k]] = o % kept_extent[k];
      o /= kept_extent[k];
    }
    for (int k = reduced - 1; k >= 0; --k) {
      c[reduced_dim[k]] = j % reduced_extent[k];
      j /= reduced_extent[k];
    }
  }
};

// out[o] = Op over the `per_output` inputs of output o. Long reductions take a block per output
// (a block reduction at the end); short ones, and those whose innermost input dimension is kept
// (adjacent threads then read adjacent elements), a thread per output.
template <class Op, class A, class Ev, int R>
__global__ void __launch_bounds__(block_size)
    fold_axes_kernel(A* out, Ev const ev, fold_layout<R> const layout, index_t const outputs,
                     index_t const per_output, bool const block_per_output) {
  auto contribution = [&](index_t o, index_t j) {
    index_t c[fold_layout<R>::dims];
    layout.coordinates(o, j, c);
    return Op::template prepare<A>(ev.read(strided_read{c}));
  };
  if (block_per_output) {
    using block_reduce = cub::BlockReduce<A, block_size>;
    __shared__ typename block_reduce::TempStorage temp;
    for (index_t o = blockIdx.x; o < outputs; o += gridDim.x) {
      A acc = Op::template identity<A>();
      for (index_t j = threadIdx.x; j < per_output; j += blockDim.x) acc = Op::combine(acc, contribution(o, j));
      A const total = block_reduce(temp).Reduce(acc, combine_with<Op>{});
      if (threadIdx.x == 0) out[o] = Op::finalize(total, per_output);
      __syncthreads();  // temp is reused by the next output
    }
  } else {
    for (index_t o = index_t(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs; o += index_t(blockDim.x) * gridDim.x) {
      A acc = Op::template identity<A>();
      for (index_t j = 0; j < per_output; ++j) acc = Op::combine(acc, contribution(o, j));
      out[o] = Op::finalize(acc, per_output);
    }
  }
}

// dst (contiguous, the kept dimensions in order, with or without the reduced ones as extent 1)
// = Op over `axes` of arg, finalised, by the kernel above.
template <class Op, class A, int R, class Arg>
void fold_axes(cuda_tensor<A, R> const& dst, Arg const& arg, std::span<int const> axes) {
  constexpr int RA = Arg::rank;
  index_t const outputs = dst.size();
  if (outputs == 0) return;
  using Ev = device_evaluator<Arg, RA>;
  Ev const ev(arg, arg.shape());
  fold_layout<RA> const layout(arg.shape(), axes);
  index_t const per_output = element_count<RA>(arg.shape()) / outputs;
  bool const innermost_reduced = RA > 0 && std::find(axes.begin(), axes.end(), RA - 1) != axes.end();
  bool const block_per_output = per_output > 32 && (innermost_reduced || outputs < 1024);
  unsigned const grid = block_per_output ? grid_size(outputs, 1) : grid_size(outputs, block_size);
  fold_axes_kernel<Op, A, Ev, RA>
      <<<grid, block_size, 0, stream()>>>(dst.data(), ev, layout, outputs, per_output, block_per_output);
  check_launch("kiln reduction kernel");
}

// The same over every element, by CUB's device-wide reduction (dst has one element).
template <class Op, class A, int R, class Arg>
void fold_every(cuda_tensor<A, R> const& dst, Arg const& arg) {
  fold_all<Op>(cuda_tensor<A, 0>(dst, dst.data(), extents<0>{}, extents<0>{}), arg);
  if constexpr (requires { Op::finalizes; })
    run_elementwise(flatten(dst), make_map(finalize_op<Op>{{}, element_count<Arg::rank>(arg.shape())}, flatten(dst)));
}

// Op over the axes fixed by a reduction node's type: CUB when they are all of them, the axis
// kernel otherwise (only the one that can run is instantiated).
template <class Op, class A, int R, class Arg, std::size_t N>
void fold(cuda_tensor<A, R> const& dst, Arg const& arg, std::array<int, N> const& axes) {
  if constexpr (int(N) == Arg::rank)
    fold_every<Op>(dst, arg);
  else
    fold_axes<Op>(dst, arg, axes);
}

template <class T, int R, class Node>
void device_materialize(cuda_tensor<T, R> const& dst, Node const& node);

// A boundary evaluated into a new device tensor.
template <class Node>
auto device_evaluate_boundary(Node const& node) {
  cuda_tensor<typename Node::value_type, Node::rank> result(node.shape(), uninitialized);
  if (result.size() != 0) device_materialize(result, node);
  return result;
}

// The tree with every boundary replaced by a device tensor holding its result.
template <class Node>
auto device_lower(Node const& node) {
  return replace_boundaries(node, [](auto const& boundary) { return device_evaluate_boundary(boundary); });
}

template <class T, int R, class Op, class Arg, int N, bool Keep>
void device_materialize_reduction(cuda_tensor<T, R> const& dst, reduction<Op, Arg, N, Keep> const& node) {
  auto const arg = device_lower(node.arg());
  using Lowered = std::remove_const_t<decltype(arg)>;
  static_assert(!requires { &Op::template better<typename Lowered::value_type>; },
                "kiln: argmax and argmin do not run under kiln::cuda{} yet");
  auto const& axes = node.reduced_axes();
  if constexpr (requires { typename Op::pre; }) {
    using M = typename reduction<typename Op::pre, Lowered, N, true>::value_type;
    extents<Lowered::rank> m_shape = arg.shape();
    for (int a : axes) m_shape[a] = 1;
    cuda_tensor<M, Lowered::rank> const m(m_shape, uninitialized);
    fold<typename Op::pre>(m, arg, axes);
    fold<typename Op::fold>(dst, make_map(typename Op::input{}, arg, m), axes);
    run_elementwise(flatten(dst), make_map(node.op().make_output(node.reduced_size()), flatten(dst), flatten(m)));
  } else {
    fold<Op>(dst, arg, axes);
  }
}

// softmax and log_softmax as three fused passes: the maximum along dim, the sum of
// exp(x - max), then the result.
template <class T, int R, class Arg, bool Log>
void device_materialize_softmax(cuda_tensor<T, R> const& dst, softmax_node<Arg, Log> const& node) {
  auto const x = device_lower(node.arg());
  using V = typename std::remove_const_t<decltype(x)>::value_type;
  std::array<int, 1> const axis{node.dim()};
  extents<R> kept = x.shape();
  kept[node.dim()] = 1;
  cuda_tensor<V, R> const m(kept, uninitialized);
  fold<ops::amax_red>(m, x, axis);
  auto const shifted = make_map(ops::sub_op{}, x, m);
  cuda_tensor<T, R> const s(kept, uninitialized);
  fold<ops::sum_red>(s, make_map(ops::exp_op{}, shifted), axis);
  if constexpr (Log)
    run_elementwise(dst, make_map(ops::sub_op{}, shifted, make_map(ops::log_op{}, s)));
  else
    run_elementwise(dst, make_map(ops::div_op{}, make_map(ops::exp_op{}, shifted), s));
}

// Evaluates a boundary node into dst: contiguous, of exactly its shape and type, sharing no
// memory with its inputs.
template <class T, int R, class Node>
void device_materialize(cuda_tensor<T, R> const& dst, Node const& node) {
  if constexpr (requires { node.reduced_axes(); })
    device_materialize_reduction(dst, node);
  else
    device_materialize_softmax(dst, node);
}

}  // namespace kiln::detail

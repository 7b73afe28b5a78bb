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
#include <cub/warp/warp_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <span>

namespace kiln::detail {

// How a device reduction folds with Op into results of type A from inputs of type V: its
// accumulator, the contribution of input `index` (counted row-major over the reduced dimensions),
// how two accumulators combine, and the result. For most ops the accumulator is A and Op says
// the rest.
template <class Op, class A, class V>
struct device_fold {
  using acc = A;
  KILN_HD static acc identity() { return Op::template identity<A>(); }
  KILN_HD static acc contribution(V v, index_t) { return Op::template prepare<A>(v); }
  KILN_HD static acc combine(acc const& a, acc const& b) { return Op::combine(a, b); }
  KILN_HD static A finalize(acc const& a, index_t n) { return Op::finalize(a, n); }
};

// argmax and argmin: the best value so far and its index. Of two equally good (or two NaN) the
// smaller index wins, so the combination picks the greatest under one total order: associative
// and commutative, as CUB's and the block's reductions need, and the first best element wins
// whatever order they combine in, as on the host. The identity, index -1, loses to everything.
template <class V>
struct value_index {
  V value;
  index_t index;
};
template <class Op, class A, class V>
  requires ops::index_picking<Op, V>
struct device_fold<Op, A, V> {
  using acc = value_index<V>;
  KILN_HD static acc identity() { return {V{}, -1}; }
  KILN_HD static acc contribution(V v, index_t index) { return {v, index}; }
  KILN_HD static acc combine(acc const& a, acc const& b) {
    if (a.index < 0 || Op::better(b.value, a.value)) return b;
    if (b.index < 0 || Op::better(a.value, b.value)) return a;
    return b.index < a.index ? b : a;
  }
  KILN_HD static A finalize(acc const& a, index_t) { return static_cast<A>(a.index); }
};

template <class Fold>
struct combine_with {
  template <class Acc>
  KILN_HD Acc operator()(Acc const& a, Acc const& b) const {
    return Fold::combine(a, b);
  }
};

// A contiguous tensor seen as one dimension.
template <class T, int R>
cuda_tensor<T, 1> flatten(cuda_tensor<T, R> const& t) {
  return {t, t.data(), extents<1>{t.size()}, extents<1>{1}};
}

// Element i of the producer (row-major), as the fold's contribution: the transform of the full
// reduction.
template <class Fold, class Ev, int R>
struct prepared_element {
  Ev ev;
  output_layout<R> layout;
  bool flat;
  KILN_HD typename Fold::acc operator()(index_t i) const {
    if (flat) return Fold::contribution(ev.read(flat_read{i}), i);
    index_t c[output_layout<R>::dims];
    layout.unravel(i, c);
    return Fold::contribution(ev.read(strided_read{c}), i);
  }
};

// *out = the result of the accumulator *total (a fold whose accumulator is not its result).
template <class Fold, class A>
__global__ void finalize_one(A* out, typename Fold::acc const* total, index_t n) {
  *out = Fold::finalize(*total, n);
}

// dst (one element) = Op over every element of arg: CUB's transform-reduce, straight into dst
// when the accumulator is the result; otherwise into a device accumulator, then finalised.
template <class Op, class A, class Arg>
void fold_all(cuda_tensor<A, 0> const& dst, Arg const& arg) {
  constexpr int RA = Arg::rank;
  using Ev = device_evaluator<Arg, RA>;
  using Fold = device_fold<Op, A, typename Ev::value_type>;
  using Acc = typename Fold::acc;
  constexpr bool direct = std::is_same_v<Acc, A>;
  index_t const n = element_count<RA>(arg.shape());
  Acc const identity = Fold::identity();
  if constexpr (direct) {
    if (n == 0) {  // (argmax and argmin never get here: their nodes refuse empty reductions)
      check(cudaMemcpyAsync(dst.data(), &identity, sizeof(A), cudaMemcpyHostToDevice, stream()), "cudaMemcpyAsync");
      return synchronize();  // `identity` is a local
    }
  }
  Ev const ev(arg, arg.shape());
  prepared_element<Fold, Ev, RA> const transform{ev, output_layout<RA>(arg.shape(), contiguous_strides<RA>(arg.shape())),
                                                 ev.is_flat()};
  std::shared_ptr<Acc> const total = direct ? nullptr : device_allocate<Acc>(1);
  Acc* const out = direct ? reinterpret_cast<Acc*>(dst.data()) : total.get();
  thrust::counting_iterator<index_t> const first(0);
  std::size_t bytes = 0;
  auto reduce = [&](void* temp) {
    check(cub::DeviceReduce::TransformReduce(temp, bytes, first, out, n, combine_with<Fold>{}, transform, identity, stream()),
          "cub::DeviceReduce::TransformReduce");
  };
  reduce(nullptr);
  auto const temp = device_allocate<unsigned char>(index_t(bytes));
  reduce(temp.get());
  if constexpr (!direct) {
    finalize_one<Fold><<<1, 1, 0, stream()>>>(dst.data(), total.get(), n);
    check_launch("kiln reduction kernel");
  }
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
  // The input coordinates of output o's kept dimensions.
  KILN_HD void kept_coordinates(index_t o, index_t* c) const noexcept {
    for (int k = kept - 1; k >= 0; --k) {
      c[kept_dim[k]] = o % kept_extent[k];
      o /= kept_extent[k];
    }
  }
  // Those of the j-th element reduced into an output. With one reduced dimension (rows, columns)
  // that is j itself: no 64-bit division per element, which the GPU does in software.
  KILN_HD void reduced_coordinates(index_t j, index_t* c) const noexcept {
    if (reduced == 1) {
      c[reduced_dim[0]] = j;
      return;
    }
    for (int k = reduced - 1; k >= 0; --k) {
      c[reduced_dim[k]] = j % reduced_extent[k];
      j /= reduced_extent[k];
    }
  }
};

// How many threads fold one output: one (short reductions, and those whose innermost input
// dimension is kept: adjacent threads then read adjacent elements), a warp (many rows of up to a
// few thousand elements: each row read by 32 adjacent threads, combined by shuffles), or a block
// (long rows, or too few of them to fill the device with warps).
enum class fold_shape { thread, warp, block };

// out[o] = Op over the `per_output` inputs of output o, each output folded by a thread, a warp or
// a block as `shape` says.
template <class Op, class A, class Ev, int R>
__global__ void __launch_bounds__(block_size)
    fold_axes_kernel(A* out, Ev const ev, fold_layout<R> const layout, index_t const outputs,
                     index_t const per_output, fold_shape const shape) {
  using Fold = device_fold<Op, A, typename Ev::value_type>;
  using Acc = typename Fold::acc;
  // Output o's inputs first, first + step, ...: its kept coordinates once, the reduced ones per input.
  auto fold_inputs = [&](index_t o, index_t first, index_t step) {
    index_t c[fold_layout<R>::dims];
    layout.kept_coordinates(o, c);
    Acc acc = Fold::identity();
    for (index_t j = first; j < per_output; j += step) {
      layout.reduced_coordinates(j, c);
      acc = Fold::combine(acc, Fold::contribution(ev.read(strided_read{c}), j));
    }
    return acc;
  };
  if (shape == fold_shape::block) {
    using block_reduce = cub::BlockReduce<Acc, block_size>;
    __shared__ typename block_reduce::TempStorage temp;
    for (index_t o = blockIdx.x; o < outputs; o += gridDim.x) {
      Acc const total = block_reduce(temp).Reduce(fold_inputs(o, threadIdx.x, blockDim.x), combine_with<Fold>{});
      if (threadIdx.x == 0) out[o] = Fold::finalize(total, per_output);
      __syncthreads();  // temp is reused by the next output
    }
  } else if (shape == fold_shape::warp) {
    constexpr int warps = block_size / 32;
    using warp_reduce = cub::WarpReduce<Acc>;
    __shared__ typename warp_reduce::TempStorage temp[warps];
    int const warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    for (index_t o = index_t(blockIdx.x) * warps + warp; o < outputs; o += index_t(gridDim.x) * warps) {
      Acc const total = warp_reduce(temp[warp]).Reduce(fold_inputs(o, lane, 32), combine_with<Fold>{});
      if (lane == 0) out[o] = Fold::finalize(total, per_output);
      __syncwarp();  // temp is reused by the warp's next output
    }
  } else {
    for (index_t o = index_t(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs; o += index_t(blockDim.x) * gridDim.x)
      out[o] = Fold::finalize(fold_inputs(o, 0, 1), per_output);
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
  fold_shape const shape = per_output <= 32 || (!innermost_reduced && outputs >= 1024) ? fold_shape::thread
                           : innermost_reduced && outputs >= 2048 && per_output <= 4096 ? fold_shape::warp
                                                                                        : fold_shape::block;
  index_t const per_block = shape == fold_shape::block ? 1 : shape == fold_shape::warp ? block_size / 32 : block_size;
  fold_axes_kernel<Op, A, Ev, RA>
      <<<grid_size(outputs, per_block), block_size, 0, stream()>>>(dst.data(), ev, layout, outputs, per_output, shape);
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
  auto const& axes = node.reduced_axes();
  if constexpr (requires { typename Op::pre; }) {
    using M = typename reduction<typename Op::pre, Lowered, N, true>::value_type;
    extents<Lowered::rank> m_shape = arg.shape();
    for (int a : axes) m_shape[a] = 1;
    cuda_tensor<M, Lowered::rank> const m(m_shape, uninitialized);
    fold<typename Op::pre>(m, arg, axes);
    fold<typename Op::fold>(dst, make_map(typename Op::input{}, arg, m), axes);
    run_elementwise(flatten(dst), make_map(node.op().make_output(node.reduced_size()), flatten(dst), flatten(m)));
  } else if constexpr (requires { typename Op::single_element; }) {
    // Its result over one element, as on the host (materialize_reduction, eval/reduce.hpp).
    if (node.reduced_size() == 1) fold<ops::amax_red>(dst, make_map(typename Op::single_element{}, arg), axes);
    else fold<Op>(dst, arg, axes);
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

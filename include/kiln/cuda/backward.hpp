// kiln/cuda/backward.hpp: kiln::value_and_grad(kiln::cuda{}, f, x...) for a loss that is one full
// sum or mean of an elementwise expression of f's inputs: one kernel recomputes the forward per
// element in registers, applies the ops' grad rules top down (as autodiff/backward.hpp does on the
// host, `where` masking included) and writes every input's gradient, while a block reduction sums
// the loss. Inputs broadcast in the expression get their per-element gradients reduced back to
// their own shape by a second kernel.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/autodiff/functional.hpp>
#include <kiln/cuda/assign.hpp>

#include <vector>

namespace kiln {

// f's I-th input in kiln::value_and_grad(kiln::cuda{}, f, x...): the device tensor x_I, read like
// any other, whose gradient the backward kernel computes.
template <class T, int R, std::size_t I>
class cuda_input : public cuda_tensor<T, R> {
 public:
  static constexpr std::size_t input_index = I;
  explicit cuda_input(cuda_tensor<T, R> const& x) : cuda_tensor<T, R>(x) {}
};

namespace detail {

template <class T, int R, std::size_t I>
inline constexpr bool on_device<cuda_input<T, R, I>> = true;

template <class Node>
inline constexpr bool is_cuda_input = false;
template <class T, int R, std::size_t I>
inline constexpr bool is_cuda_input<cuda_input<T, R, I>> = true;

template <class T, int LR, std::size_t I, int R>
struct device_evaluator<cuda_input<T, LR, I>, R> : device_evaluator<cuda_tensor<T, LR>, R> {
  using node_type = cuda_input<T, LR, I>;
  device_evaluator(cuda_input<T, LR, I> const& x, extents<R> const& out_shape)
      : device_evaluator<cuda_tensor<T, LR>, R>(x, out_shape) {}
};

// Whether gradients flow through a node: a floating-point value with an input below it.
template <class Node>
inline constexpr bool device_differentiable = false;
template <class T, int R, std::size_t I>
inline constexpr bool device_differentiable<cuda_input<T, R, I>> = std::is_floating_point_v<T>;
template <class Op, class... Args>
inline constexpr bool device_differentiable<map<Op, Args...>> =
    std::is_floating_point_v<typename map<Op, Args...>::value_type> && (device_differentiable<Args> || ...);

// The forward values of one element are kept for the reverse walk in the host's value_tape
// (autodiff/backward.hpp): a node's value and its children's tapes; nodes without inputs below
// keep only their value.

template <class Ev, class Read>
KILN_HD auto device_record(Ev const& ev, Read r);

template <class Ev, class Read, std::size_t... I>
KILN_HD auto device_record_map(Ev const& ev, Read r, std::index_sequence<I...>) {
  using Children =
      indexed_pack<std::index_sequence<I...>, decltype(device_record(slot<I>(ev.args), child_read<I>(r)))...>;
  Children const children{{device_record(slot<I>(ev.args), child_read<I>(r))}...};
  auto const value = ev.apply(value_of(slot<I>(children))...);
  return value_tape<std::remove_const_t<decltype(value)>, Children>{children, value};
}

template <class Ev, class Read>
KILN_HD auto device_record(Ev const& ev, Read r) {
  using Node = typename Ev::node_type;
  if constexpr (device_differentiable<Node> && !is_cuda_input<Node>)
    return device_record_map(ev, r, std::make_index_sequence<Ev::arity>{});
  else
    return ev.read(r);
}

template <class Ev, class Tape, class G, class T, std::size_t N>
KILN_HD void device_backprop(Ev const& ev, Tape const& tape, G g, bool reached, T (&grads)[N]);

// Child K of a map node, given the map's partial derivatives d. Below a `where`, only the chosen
// side is reached: whatever the other side's derivative is there, nothing leaks into the inputs.
template <std::size_t K, class Ev, class Tape, class D, class T, std::size_t N>
KILN_HD void device_backprop_child(Ev const& ev, Tape const& tape, D const& d, bool reached, T (&grads)[N]) {
  using Op = typename Ev::node_type::op_type;
  using Child = typename std::remove_cvref_t<decltype(slot<K>(ev.args))>::node_type;
  if constexpr (device_differentiable<Child>) {
    if constexpr (Op::kind == op_kind::select) {
      bool const chosen = device_argument<Op, 0, typename Ev::compute_type>(value_of(slot<0>(tape.children)));
      reached = reached && (K == 1 ? chosen : !chosen);
    }
    device_backprop(slot<K>(ev.args), slot<K>(tape.children), static_cast<typename Child::value_type>(d[K]), reached,
                    grads);
  }
}

template <class Ev, class Tape, class G, class T, std::size_t N, std::size_t... I>
KILN_HD void device_backprop_map(Ev const& ev, Tape const& tape, G g, bool reached, T (&grads)[N],
                                 std::index_sequence<I...>) {
  using Op = typename Ev::node_type::op_type;
  using C = typename Ev::compute_type;
  static_assert(requires { ev.op.grad(static_cast<C>(g), tape.value, device_argument<Op, I, C>(value_of(slot<I>(tape.children)))...); },
                "kiln: an op in this expression has no grad rule, so it cannot be differentiated (give its struct a "
                "`grad` member, see ops/arithmetic.hpp)");
  auto const d = ev.op.grad(static_cast<C>(g), tape.value, device_argument<Op, I, C>(value_of(slot<I>(tape.children)))...);
  (device_backprop_child<I>(ev, tape, d, reached, grads), ...);
}

// g is dL/d(node); adds what reaches each input into grads[input].
template <class Ev, class Tape, class G, class T, std::size_t N>
KILN_HD void device_backprop(Ev const& ev, Tape const& tape, G g, bool reached, T (&grads)[N]) {
  using Node = typename Ev::node_type;
  if constexpr (is_cuda_input<Node>) {
    if (reached) grads[Node::input_index] += g;
  } else {
    device_backprop_map(ev, tape, g, reached, grads, std::make_index_sequence<Ev::arity>{});
  }
}

// Where the kernel writes each input's per-element gradient: the gradient itself for an input of
// the expression's size, a temporary of the expression's shape for a broadcast one.
template <class T, std::size_t N>
struct gradient_targets {
  T* out[N];
};

// One kernel per loop mode, as elementwise_kernel.
template <loop_mode Mode, class T, class Ev, int R, std::size_t N>
__global__ void __launch_bounds__(block_size)
    backward_kernel(Ev const ev, output_layout<R> const layout, index_t const n, T const upstream,
                    gradient_targets<T, N> const targets, T* block_sums) {
  // One element: its forward value (returned) and what reaches each input (added to grads).
  auto step = [&](auto read, T (&grads)[N]) {
    auto const tape = device_record(ev, read);
    T const value = static_cast<T>(value_of(tape));
    if constexpr (device_differentiable<typename Ev::node_type>) device_backprop(ev, tape, upstream, true, grads);
    return value;
  };
  auto element = [&](index_t i, auto read) {
    T grads[N] = {};
    T const value = step(read, grads);
#pragma unroll
    for (std::size_t k = 0; k < N; ++k) targets.out[k][i] = grads[k];
    return value;
  };
  T sum = 0;
  if constexpr (Mode == loop_mode::chunked) {
    constexpr int K = chunk_elements<T, Ev>;
    for_each_chunk<K>(
        ev, n,
        [&](index_t c, auto read) {
          chunk<T, K> out[N];
#pragma unroll
          for (int k = 0; k < K; ++k) {
            T grads[N] = {};
            sum += step(read(k), grads);
#pragma unroll
            for (std::size_t j = 0; j < N; ++j) out[j].v[k] = grads[j];
          }
#pragma unroll
          for (std::size_t j = 0; j < N; ++j) reinterpret_cast<chunk<T, K>*>(targets.out[j])[c] = out[j];
        },
        [&](index_t i) { sum += element(i, flat_read{i}); });
  } else {
    index_t const first = index_t(blockIdx.x) * blockDim.x + threadIdx.x, threads = index_t(blockDim.x) * gridDim.x;
    for (index_t i = first; i < n; i += threads) {
      if constexpr (Mode == loop_mode::flat) {
        sum += element(i, flat_read{i});
      } else {
        index_t c[output_layout<R>::dims];
        layout.unravel(i, c);
        sum += element(i, strided_read{c});
      }
    }
  }
  using block_reduce = cub::BlockReduce<T, block_size>;
  __shared__ typename block_reduce::TempStorage temp;
  T const block_sum = block_reduce(temp).Sum(sum);
  if (threadIdx.x == 0) block_sums[blockIdx.x] = block_sum;
}

template <class O>
inline constexpr bool device_single_pass_loss = false;
template <class Op, class Arg, int N, bool Keep>
inline constexpr bool device_single_pass_loss<reduction<Op, Arg, N, Keep>> =
    reduction<Op, Arg, N, Keep>::rank == 0 && !contains_materialized<Arg>::value &&
    (std::is_same_v<Op, ops::sum_red> || std::is_same_v<Op, ops::mean_red>);

// The axes of `shape` along which an operand of shape `in` (right-aligned) is broadcast.
template <int R, std::size_t LR>
std::vector<int> broadcast_axes(extents<R> const& shape, std::array<index_t, LR> const& in) {
  std::vector<int> axes;
  for (int d = 0; d < R; ++d) {
    int const k = d - (R - int(LR));
    if (shape[d] != 1 && (k < 0 || in[k] == 1)) axes.push_back(d);
  }
  return axes;
}

// The loss's value and the inputs' gradients (new device tensors), for a loss that is the sum of
// `producer` times `scale` (1 for sum, 1/n for mean).
template <class T, class Producer, class... X, std::size_t... I>
auto device_backward(Producer const& producer, T scale, std::tuple<X...> const& inputs, std::index_sequence<I...>) {
  constexpr int R = Producer::rank;
  constexpr std::size_t N = sizeof...(X);
  auto const& shape = producer.shape();
  index_t const n = element_count<R>(shape);
  std::tuple grads{cuda_tensor<T, X::rank>(std::get<I>(inputs).shape(), uninitialized)...};
  // Per-element gradients: straight into an input's gradient when it has the expression's size,
  // into a temporary of the expression's shape when the input is broadcast.
  std::array<bool, N> const broadcast{(std::get<I>(inputs).size() != n)...};
  std::array<cuda_tensor<T, R>, N> spread;
  gradient_targets<T, N> targets{};
  ((targets.out[I] = broadcast[I] ? (spread[I] = cuda_tensor<T, R>(shape, uninitialized)).data()
                                  : std::get<I>(grads).data()),
   ...);
  using Ev = device_evaluator<Producer, R>;
  Ev const ev(producer, shape);
  loop_mode const mode = choose_loop_mode<T, R>(ev, shape, contiguous_strides<R>(shape), std::span<T* const>(targets.out));
  unsigned const grid = grid_size(n, block_size * (mode == loop_mode::chunked ? chunk_elements<T, Ev> : 1));
  cuda_tensor<T, 1> const block_sums(extents<1>{index_t(grid)}, uninitialized);
  if (n == 0) {  // nothing reaches the inputs
    (eval(cuda{}, std::get<I>(grads), constant<T>(0)), ...);
  } else {
    output_layout<R> const layout(shape, contiguous_strides<R>(shape));
    auto launch = [&]<loop_mode Mode>() {
      backward_kernel<Mode, T, Ev, R, N><<<grid, block_size, 0, stream()>>>(ev, layout, n, scale, targets, block_sums.data());
    };
    if (mode == loop_mode::chunked) launch.template operator()<loop_mode::chunked>();
    else if (mode == loop_mode::flat) launch.template operator()<loop_mode::flat>();
    else launch.template operator()<loop_mode::strided>();
    check_launch("kiln backward kernel");
    // Broadcast inputs: their per-element gradients summed over the axes they were broadcast along.
    auto reduce_spread = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
      if (!broadcast[K]) return;
      std::vector<int> const axes = broadcast_axes<R>(shape, std::get<K>(inputs).shape());
      if (std::get<K>(grads).size() == 1) fold_every<ops::sum_red>(std::get<K>(grads), spread[K]);
      else fold_axes<ops::sum_red>(std::get<K>(grads), spread[K], axes);
    };
    (reduce_spread(std::integral_constant<std::size_t, I>{}), ...);
  }
  // The loss: the blocks' sums, added in double on the host.
  std::vector<T> sums(n == 0 ? 0 : grid);
  if (!sums.empty())
    check(cudaMemcpyAsync(sums.data(), block_sums.data(), sums.size() * sizeof(T), cudaMemcpyDeviceToHost, stream()),
          "cudaMemcpyAsync");
  synchronize();
  double total = 0;
  for (T s : sums) total += static_cast<double>(s);
  return std::pair{static_cast<T>(total), std::move(grads)};
}

}  // namespace detail

// (f(x...), the gradient of f with respect to each x) on the device, for f returning kiln::sum or
// kiln::mean of an elementwise expression of its inputs (the single-pass loss of the host's
// value_and_grad): x are device tensors of one floating-point type, f is called with them as
// kiln::cuda_input values, and the gradients come back as device tensors (one input: a
// cuda_tensor; several: a std::tuple).
// (f is taken by const reference: that overload is the more specialised one against the host's
// value_and_grad(f, x...), whatever the caller's f is.)
template <class F, class... X>
auto value_and_grad(cuda, F const& f, X const&... x) {
  static_assert(sizeof...(X) > 0, "kiln::value_and_grad: give f's inputs after f");
  static_assert((detail::is_cuda_tensor<X> && ...),
                "kiln::value_and_grad(kiln::cuda{}, f, x...): the inputs must be kiln::cuda_tensor (copy host tensors "
                "with kiln::to_device)");
  using T = std::tuple_element_t<0, std::tuple<typename X::value_type...>>;
  static_assert(std::is_floating_point_v<T> && (std::is_same_v<typename X::value_type, T> && ...),
                "kiln::value_and_grad(kiln::cuda{}, f, x...): the inputs must share one floating-point type");
  return [&]<std::size_t... I>(std::index_sequence<I...> seq) {
    std::tuple<cuda_input<T, X::rank, I>...> const inputs{cuda_input<T, X::rank, I>(x)...};
    auto const out = std::apply(f, inputs);
    using O = std::remove_cvref_t<decltype(out)>;
    static_assert(detail::device_single_pass_loss<O>,
                  "kiln::value_and_grad(kiln::cuda{}, f, x...): f must return kiln::sum or kiln::mean over every "
                  "element of an elementwise expression of its inputs (other losses run on the host for now)");
    using P = typename O::arg_type;
    static_assert(std::is_same_v<typename P::value_type, T>,
                  "kiln::value_and_grad(kiln::cuda{}, f, x...): the loss must be of the inputs' type");
    index_t const n = out.reduced_size();
    constexpr bool mean = std::is_same_v<typename O::op_type, ops::mean_red>;
    auto [total, grads] = detail::device_backward(out.arg(), mean ? T(1) / T(n) : T(1), inputs, seq);
    T const value = mean ? total / T(n) : total;
    return std::pair{value, detail::unwrap_single(std::move(grads))};
  }(std::index_sequence_for<X...>{});
}

}  // namespace kiln

// kiln/cuda/evaluator.hpp: the device-side mirror of an expression tree, as eval/evaluator.hpp is
// the host's. Built on the host from the user's nodes, copied to the kernel as its parameter, and
// read one element at a time: the same op structs (their KILN_HD call operators) compute it.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/core/indexed_pack.hpp>
#include <kiln/cuda/tensor.hpp>
#include <kiln/eval/evaluator.hpp>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>

namespace kiln::detail {

// How a kernel reads an operand: element i of a loop in which every operand is either
// contiguous in the output's order or one element broadcast everywhere (`flat`), the element at
// the output coordinates c (any strides, broadcasting included), or element k of chunks loaded
// beforehand (`cached_read`, below).
struct flat_read {
  index_t i;
};
struct strided_read {
  index_t const* c;
};

// K consecutive elements, loaded or stored as one aligned access: a flat loop whose operands are
// all aligned reads each tensor once per K elements (16-byte loads for float, 2 per double...).
template <class T, int K>
struct alignas(sizeof(T) * K) chunk {
  T v[K];
};

// Element k of chunks loaded by device_prefetch: `cache` has the evaluator tree's shape (a chunk
// per tensor, an empty cache per constant, a pack of its children's caches per map).
template <class Cache>
struct cached_read {
  Cache const& cache;
  int k;
};
struct no_cache {};

// What a map passes to its child I: the same read, or the child's part of the cache.
template <std::size_t I, class Read>
KILN_ALWAYS_INLINE KILN_HD Read child_read(Read r) noexcept {
  return r;
}
template <std::size_t I, class Cache>
KILN_ALWAYS_INLINE KILN_HD auto child_read(cached_read<Cache> r) noexcept {
  using Child = std::remove_cvref_t<decltype(slot<I>(r.cache))>;
  return cached_read<Child>{slot<I>(r.cache), r.k};
}

// Elements per chunk for a loop writing T: 16 bytes of the widest type it loads or stores.
template <class T, class Ev>
inline constexpr int chunk_elements = int(16 / std::max(sizeof(T), Ev::load_bytes));

template <class Node, int R>
struct device_evaluator {
  static_assert(always_false<Node>,
                "kiln: kiln::cuda{} reads device memory only: every tensor in the expression must be a "
                "kiln::cuda_tensor (kiln::var is host-only)");
};

template <class T, int LR, int R>
struct device_evaluator<leaf<T, LR>, R> {
  static_assert(always_false<T>,
                "kiln: kiln::cuda{} cannot read a host tensor: copy it to the device with kiln::to_device first");
  using value_type = T;
  static constexpr std::size_t load_bytes = 0;
  device_evaluator(leaf<T, LR> const&, extents<R> const&) {}
  bool is_flat() const noexcept { return true; }
  template <class Read>
  KILN_HD T read(Read) const noexcept {
    return T{};
  }
};

// An rvalue host tensor in the expression: the same error.
template <class T, int LR, int R>
struct device_evaluator<owned_leaf<T, LR>, R> : device_evaluator<leaf<T, LR>, R> {
  using device_evaluator<leaf<T, LR>, R>::device_evaluator;
};

// The other way round: a host loop (a CPU policy, or a host tensor's assignment) over device memory.
template <class T, int LR, int R>
struct evaluator<cuda_tensor<T, LR>, R> {
  static_assert(always_false<T>, "kiln: a CPU policy cannot read device memory (a kiln::cuda_tensor): use "
                                 "kiln::cuda{}, or copy the tensor with kiln::to_host");
  using node_type = cuda_tensor<T, LR>;
  using value_type = T;
  static constexpr bool is_leaf = true;
  static constexpr std::size_t leaf_count = 1;
  evaluator(cuda_tensor<T, LR> const&, extents<R> const&) {}
};

// A tensor in device memory, its strides broadcast to the output's shape.
template <class T, int LR, int R>
struct device_evaluator<cuda_tensor<T, LR>, R> {
  using node_type = cuda_tensor<T, LR>;
  using value_type = T;

  device_evaluator(cuda_tensor<T, LR> const& t, extents<R> const& out_shape) : data(t.data()) {
    extents<R> const s = broadcast_strides<R, LR>(t.shape(), t.strides(), out_shape);
    extents<R> const dense = contiguous_strides<R>(out_shape);
    bool in_order = true, everywhere = true;
    for (int d = 0; d < R; ++d) {
      strides[d] = s[d];
      if (out_shape[d] == 1) continue;
      in_order = in_order && s[d] == dense[d];
      everywhere = everywhere && s[d] == 0;
    }
    flat = in_order || everywhere;
    step = in_order ? 1 : 0;
  }

  static constexpr std::size_t load_bytes = sizeof(T);

  bool is_flat() const noexcept { return flat; }
  // Whether chunks of K elements from here on are aligned (a broadcast element always is).
  template <int K>
  bool chunk_aligned() const noexcept {
    return step == 0 || reinterpret_cast<std::uintptr_t>(data) % sizeof(chunk<T, K>) == 0;
  }
  KILN_HD T read(flat_read r) const noexcept { return data[r.i * step]; }
  KILN_HD T read(strided_read r) const noexcept {
    index_t offset = 0;
    for (int d = 0; d < R; ++d) offset += r.c[d] * strides[d];
    return data[offset];
  }
  template <int K>
  KILN_HD T read(cached_read<chunk<T, K>> r) const noexcept {
    return r.cache.v[r.k];
  }
  // Elements i .. i + K - 1 of a flat loop (i a multiple of K).
  template <int K>
  KILN_HD chunk<T, K> load(index_t i) const noexcept {
    if (step != 0) return *reinterpret_cast<chunk<T, K> const*>(data + i);
    chunk<T, K> c;
    for (int k = 0; k < K; ++k) c.v[k] = data[0];
    return c;
  }

  T const* data;
  index_t step = 0;
  index_t strides[R > 0 ? R : 1] = {};
  bool flat = true;
};

template <class T, int R>
struct device_evaluator<constant<T>, R> {
  using node_type = constant<T>;
  using value_type = T;

  device_evaluator(constant<T> const& node, extents<R> const&) : value(node.value()) {}

  static constexpr std::size_t load_bytes = 0;
  bool is_flat() const noexcept { return true; }
  template <int K>
  bool chunk_aligned() const noexcept {
    return true;
  }
  template <class Read>
  KILN_HD T read(Read) const noexcept {
    return value;
  }

  T value;
};

// A child's value as argument I of Op reads it: a truth value for mask arguments, the op's
// compute type otherwise (as eval/evaluator.hpp's as_argument does for scalars).
template <class Op, std::size_t I, class Compute, class V>
KILN_HD auto device_argument(V const& v) noexcept {
  if constexpr (!reads_as_mask<Op>(I))
    return static_cast<Compute>(v);
  else if constexpr (std::is_same_v<V, bool>)
    return v;
  else
    return v != V(0);
}

template <class Op, class... Args, int R>
struct device_evaluator<map<Op, Args...>, R> {
  using node_type = map<Op, Args...>;
  using value_type = typename node_type::value_type;
  using compute_type = typename node_type::compute_type;
  using children = indexed_pack<std::index_sequence_for<Args...>, device_evaluator<Args, R>...>;
  static constexpr std::size_t arity = sizeof...(Args);
  static constexpr std::size_t load_bytes = std::max({sizeof(value_type), device_evaluator<Args, R>::load_bytes...});

  device_evaluator(node_type const& node, extents<R> const& out_shape)
      : op(node.op()), args(apply_pack([&](Args const&... a) { return children{{device_evaluator<Args, R>(a, out_shape)}...}; },
                                       node.args())) {}

  bool is_flat() const noexcept { return flat(std::index_sequence_for<Args...>{}); }
  template <int K>
  bool chunk_aligned() const noexcept {
    return apply_pack([](auto const&... a) { return (a.template chunk_aligned<K>() && ...); }, args);
  }
  template <class Read>
  KILN_HD value_type read(Read r) const noexcept {
    return read_impl(r, std::index_sequence_for<Args...>{});
  }
  // Op applied to its children's values, each converted as the op reads it; in the compute type.
  template <class... V>
  KILN_HD auto apply(V const&... v) const noexcept {
    return apply_impl(std::index_sequence_for<Args...>{}, v...);
  }

  Op op;
  children args;

 private:
  template <std::size_t... I>
  bool flat(std::index_sequence<I...>) const noexcept {
    return (slot<I>(args).is_flat() && ...);
  }
  template <class Read, std::size_t... I>
  KILN_HD value_type read_impl(Read r, std::index_sequence<I...>) const noexcept {
    return static_cast<value_type>(apply(slot<I>(args).read(child_read<I>(r))...));
  }
  template <std::size_t... I, class... V>
  KILN_HD auto apply_impl(std::index_sequence<I...>, V const&... v) const noexcept {
    return op(device_argument<Op, I, compute_type>(v)...);
  }
};

// Loads the chunks of elements i .. i + K - 1 of every tensor below ev, for cached_read.
template <int K, class Ev>
KILN_ALWAYS_INLINE KILN_HD auto device_prefetch(Ev const& ev, index_t i) noexcept;

template <int K, class Ev, std::size_t... I>
KILN_ALWAYS_INLINE KILN_HD auto device_prefetch_children(Ev const& ev, index_t i, std::index_sequence<I...>) noexcept {
  using Cache = indexed_pack<std::index_sequence<I...>, decltype(device_prefetch<K>(slot<I>(ev.args), i))...>;
  return Cache{{device_prefetch<K>(slot<I>(ev.args), i)}...};
}

template <int K, class Ev>
KILN_ALWAYS_INLINE KILN_HD auto device_prefetch(Ev const& ev, index_t i) noexcept {
  if constexpr (requires { ev.template load<K>(i); }) return ev.template load<K>(i);
  else if constexpr (requires { ev.args; }) return device_prefetch_children<K>(ev, i, std::make_index_sequence<Ev::arity>{});
  else return no_cache{};
}

}  // namespace kiln::detail

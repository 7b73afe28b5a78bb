// kiln/eval/reduce.hpp: evaluating fusion boundaries. Reductions run their producer inside their
// own loop (fold kernels below); softmax runs three such loops. When a boundary node is an operand
// of an elementwise expression, `lower` materialises it once into a temporary that the outer loop
// then reads as a leaf.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/eval/kernels.hpp>
#include <kiln/expr/reduce.hpp>
#include <kiln/ops/transcendental.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace kiln::detail {

template <class Node>
inline constexpr bool is_materialized = requires { requires Node::is_materialized; };

template <class Node>
struct contains_materialized : std::bool_constant<is_materialized<Node>> {};
template <class Op, class... Args>
struct contains_materialized<map<Op, Args...>> : std::bool_constant<(contains_materialized<Args>::value || ...)> {};

// Calls f on every leaf of a user's tree, through boundaries too. Always inlined, as plan.hpp's
// visit_leaves: assignments run it on every call.
template <class Node, class F>
KILN_ALWAYS_INLINE void for_each_leaf_node(Node const& node, F&& f);
template <class Node, class F, std::size_t... I>
KILN_ALWAYS_INLINE void for_each_leaf_child(Node const& node, F& f, std::index_sequence<I...>) {
  (for_each_leaf_node(slot<I>(node.args()), f), ...);
}
template <class Node, class F>
KILN_ALWAYS_INLINE void for_each_leaf_node(Node const& node, F&& f) {
  if constexpr (requires { node.view(); }) f(node);
  else if constexpr (requires { node.args(); })
    for_each_leaf_child(node, f, std::make_index_sequence<pack_size_v<decltype(node.args())>>{});
  else if constexpr (requires { node.arg(); }) for_each_leaf_node(node.arg(), f);
}

template <class Policy, class T, int R, class Node>
void materialize(Policy const& policy, tensor_view<T, R> const& dst, Node const& node);

// The tree with every boundary replaced by what replace(boundary) makes of it, called on the
// boundaries in order, left to right (braced: a replacement may number them).
template <class Node, class Replace>
auto replace_boundaries(Node const& node, Replace const& replace) {
  if constexpr (is_materialized<Node>) {
    return replace(node);
  } else if constexpr (contains_materialized<Node>::value) {
    return apply_pack([&](auto const&... a) {
      return map<typename Node::op_type, decltype(replace_boundaries(a, replace))...>{node.op(),
                                                                                      replace_boundaries(a, replace)...};
    }, node.args());
  } else {
    return node;
  }
}

// A boundary evaluated into a leaf over its result.
template <class Policy, class Node>
auto evaluate_boundary(Policy const& policy, Node const& node) {
  tensor<typename Node::value_type, Node::rank> result(node.shape(), uninitialized);
  if (result.size() != 0) materialize(policy, result.view(), node);
  return owned_leaf<typename Node::value_type, Node::rank>(std::move(result));
}

// The tree with every boundary replaced by a leaf over its evaluated result.
template <class Policy, class Node>
auto lower(Policy const& policy, Node const& node) {
  return replace_boundaries(node, [&](auto const& boundary) { return evaluate_boundary(policy, boundary); });
}

// Pairwise summation over blocks: block results enter a binary counter of partial sums, so the
// rounding error grows with log(n) rather than n (as numpy's and PyTorch's cascade sums).
template <class A, class Op>
class cascade {
 public:
  void push(A x) {
    int k = 0;
    for (; occupied_ >> k & 1u; ++k) {
      x = Op::combine(level_[k], x);
      occupied_ &= ~(std::uint64_t{1} << k);
    }
    level_[k] = x;
    occupied_ |= std::uint64_t{1} << k;
  }
  A total() const {
    A t = Op::template identity<A>();
    for (int k = 0; k < 64 && occupied_ >> k != 0; ++k)
      if (occupied_ >> k & 1u) t = Op::combine(t, level_[k]);
    return t;
  }
  void clear() { occupied_ = 0; }

 private:
  std::array<A, 64> level_;  // only occupied levels are read: no need to clear 64 batches per row
  std::uint64_t occupied_ = 0;
};

inline constexpr index_t fold_block = 1024;

// Folds elements [start, end) of the current row, scalar, in blocks summed pairwise.
template <class Op, class A, class Ev>
A fold_span(Ev const& ev, index_t start, index_t end) {
  cascade<A, Op> partial;
  for (index_t block = start; block < end; block += fold_block) {
    A acc = Op::template identity<A>();
    index_t const block_end = std::min(end, block + fold_block);
    for (index_t i = block; i < block_end; ++i) acc = Op::combine(acc, Op::template prepare<A>(ev.scalar(i)));
    partial.push(acc);
  }
  return partial.total();
}
template <class Op, class A, class Ev>
A fold_row(Ev const& ev, index_t n) {
  return fold_span<Op, A>(ev, 0, n);
}

// t combined with itself rotated by half its lanes, the result with itself rotated by a quarter,
// and so on down to one lane. (Rotations computed by a function: nvcc's front end misreads a shift
// inside the template argument list.)
constexpr std::size_t rotation(std::size_t lanes, std::size_t step) { return lanes / (std::size_t{2} << step); }
template <class B, class Combine, std::size_t... Step>
KILN_ALWAYS_INLINE B combine_rotations(B t, Combine const& combine, std::index_sequence<Step...>) {
  ((t = combine(t, simd_detail::rotate_lanes<rotation(B::size, Step)>(t))), ...);
  return t;
}

// amax and amin (the infinity norm too) over float or double batches: the folds whose combine
// has a cheaper form for inputs without NaN (combine_ignoring_nan).
template <class Op, class A>
inline constexpr bool nan_probed = (std::is_base_of_v<ops::amax_red, Op> || std::is_base_of_v<ops::amin_red, Op>) &&
                                   std::is_floating_point_v<A>;

// Combines the lanes of a batch with Op. Sums add horizontally. amax and amin combine in
// registers, the batch with itself rotated by half its lanes, then a quarter...: four dependent
// steps with 16 lanes instead of a chain of fifteen through memory, which cost every row of
// softmax or of an amax over rows about 100 cycles with AVX-512. Lane 0 then holds the chain's
// result (a tie keeps the earlier lane, as combine does). A batch without NaN lanes rotates with
// combine_ignoring_nan, the same bits in two instructions per step instead of four. Other ops
// keep the chain, and with it their rounding.
template <class Op, class B>
KILN_ALWAYS_INLINE auto fold_lanes(B const& b) {
  using A = typename B::value_type;
  if constexpr (std::is_same_v<Op, ops::sum_red> || std::is_base_of_v<ops::sum_red, Op>) {
    return simd_detail::reduce_add(b);
  } else if constexpr (nan_probed<Op, A>) {  // (xsimd 8 permutes these on every ISA)
    constexpr auto steps = std::make_index_sequence<std::bit_width(B::size) - 1>{};
    if (xsimd::any(xsimd::isnan(b)))
      return combine_rotations(b, [](B const& x, B const& y) KILN_INLINE_LAMBDA { return Op::combine(x, y); }, steps).get(0);
    return combine_rotations(b, [](B const& x, B const& y) KILN_INLINE_LAMBDA { return Op::combine_ignoring_nan(x, y); }, steps).get(0);
  } else {
    alignas(storage_alignment) A lanes[B::size];
    b.store_aligned(lanes);
    A t = lanes[0];
    for (std::size_t k = 1; k < B::size; ++k) t = Op::combine(t, lanes[k]);
    return t;
  }
}

template <class A, index_t W>
std::array<A, W> const& lane_iota() {
  static constexpr std::array<A, W> iota = [] {
    std::array<A, W> a{};
    for (index_t k = 0; k < W; ++k) a[k] = A(k);
    return a;
  }();
  return iota;
}

// b with its lanes from n on replaced by `fill`: the unused lanes of a padded tail batch made
// harmless (the identity of a fold, 0 for a sum).
template <class B>
KILN_ALWAYS_INLINE B first_lanes(B const& b, index_t n, B const& fill) {
  using A = typename B::value_type;
  B const lane = B::load_unaligned(lane_iota<A, index_t(B::size)>().data());
  return xsimd::select(lane < B(A(n)), b, fill);
}

// A padded tail batch's number of used lanes, or a whole batch (whole_batch).
struct whole_batch_t {};
inline constexpr whole_batch_t whole_batch{};

// b as a fold takes it: whole, or with the unused lanes of a padded tail replaced by fill.
template <class B, class Lanes>
KILN_ALWAYS_INLINE B used_lanes(B const& b, Lanes lanes, B const& fill) {
  if constexpr (std::is_same_v<Lanes, whole_batch_t>) return b;
  else return first_lanes(b, lanes, fill);
}

// The prepared batches of one block [start, end) of a row, in the order every block fold takes
// them: four independent accumulators hide the combine's latency, batch j going into accumulator
// j % 4 while four remain; the batches after go into the first, and the tail, a padded batch,
// into the second. Calls step(accumulator, batch, lanes): the accumulator an integral_constant,
// lanes whole_batch or the tail's used lanes (used_lanes above).
template <class Op, class A, inner_mode Mode, class Ev, class Step>
KILN_ALWAYS_INLINE void for_each_batch(Ev const& ev, index_t start, index_t end, Step&& step) {
  using B = simd_detail::batch<A>;
  constexpr index_t W = B::size;
  auto const whole = [&](index_t i) KILN_INLINE_LAMBDA {
    return Op::template prepare<B>(ev.template packet<A, Mode, batch_cover::whole>(i, W));
  };
  // The loops' bounds computed first, relative to start (W is a power of two): the compiler knows
  // where each loop leaves j, and a loop over rows of one length computes them once.
  index_t const count = end - start;
  index_t const fours = count & ~(4 * W - 1), batches = count & ~(W - 1);
  index_t j = 0;
  for (; j < fours; j += 4 * W) {
    step(std::integral_constant<int, 0>{}, whole(start + j), whole_batch);
    step(std::integral_constant<int, 1>{}, whole(start + j + W), whole_batch);
    step(std::integral_constant<int, 2>{}, whole(start + j + 2 * W), whole_batch);
    step(std::integral_constant<int, 3>{}, whole(start + j + 3 * W), whole_batch);
  }
  for (; j < batches; j += W) step(std::integral_constant<int, 0>{}, whole(start + j), whole_batch);
  if (j < count)
    step(std::integral_constant<int, 1>{},
         Op::template prepare<B>(ev.template packet<A, Mode, batch_cover::tail>(start + j, count - j)), count - j);
}

// amax's and amin's block (fold_block_simd below, the same accumulators and order) for inputs
// without NaN: combine costs three instructions per batch on the accumulator's chain (max or min,
// an unordered compare, a blend), which made amax over rows twice a row sum's time. The
// accumulators step with combine_ignoring_nan alone, which keeps the accumulator where an input
// is NaN, and a sum of the inputs beside each, one add, probes for NaN: it ends NaN where an input
// was (or where +inf met -inf in one lane). Where no sum did, every step gave combine's bits (no
// accumulator ever held NaN, and a tie keeps the accumulator as combine does): returns true with
// the block's batch. Otherwise false, and the caller folds the block again with combine.
template <class Op, class A, inner_mode Mode, class Ev>
KILN_ALWAYS_INLINE bool fold_block_probed(Ev const& ev, index_t start, index_t end, simd_detail::batch<A>& out) {
  using B = simd_detail::batch<A>;
  B const identity(Op::template identity<A>()), zero(A(0));
  std::array<B, 4> acc{identity, identity, identity, identity}, sum{zero, zero, zero, zero};
  for_each_batch<Op, A, Mode>(ev, start, end, [&](auto k, B const& b, auto lanes) KILN_INLINE_LAMBDA {
    acc[k] = Op::combine_ignoring_nan(acc[k], used_lanes(b, lanes, identity));
    sum[k] += used_lanes(b, lanes, zero);
  });
  if (xsimd::any(xsimd::isnan((sum[0] + sum[1]) + (sum[2] + sum[3])))) return false;
  out = Op::combine_ignoring_nan(Op::combine_ignoring_nan(acc[0], acc[1]), Op::combine_ignoring_nan(acc[2], acc[3]));
  return true;
}

// One block [start, end) of a row, with batches (for_each_batch). Inline, so that a loop over
// short rows keeps its constants and the leaves' pointers in registers. (Eight batches per step
// cut W6's instructions by a tenth but not its time, and added a sixth to the compile time of
// bench/reduce.cpp.) amax and amin try fold_block_probed first, except for large trees, whose
// code it would double.
template <class Op, class A, inner_mode Mode, class Ev>
KILN_ALWAYS_INLINE simd_detail::batch<A> fold_block_simd(Ev const& ev, index_t start, index_t end) {
  using B = simd_detail::batch<A>;
  constexpr index_t W = B::size;
  if constexpr (nan_probed<Op, A> && !large_tree<Ev>) {
    B probed;
    if (fold_block_probed<Op, A, Mode>(ev, start, end, probed)) [[likely]]
      return probed;
  }
  B const identity(Op::template identity<A>());
  std::array<B, 4> acc{identity, identity, identity, identity};
  if constexpr (large_tree<Ev>) {
    // One copy of a large tree's code for every step instead of six (four in the loop over fours,
    // one for the batches after, one for the tail; see simd_row). The accumulators rotate instead
    // of being named, so each batch lands where for_each_batch puts it: the same result, bit for
    // bit.
    index_t const count = end - start;
    index_t const fours = count & ~(4 * W - 1);
    for (index_t j = 0; j < count; j += W) {
      index_t const left = count - j;
      B const p = Op::template prepare<B>(
          ev.template packet<A, Mode, batch_cover::whole_or_tail>(start + j, left < W ? left : W));
      if (left < W) {
        acc[1] = Op::combine(acc[1], first_lanes(p, left, identity));
      } else {
        acc[0] = Op::combine(acc[0], p);
        if (j < fours) std::tie(acc[0], acc[1], acc[2], acc[3]) = std::tuple(acc[1], acc[2], acc[3], acc[0]);
      }
    }
  } else {
    for_each_batch<Op, A, Mode>(ev, start, end, [&](auto k, B const& b, auto lanes) KILN_INLINE_LAMBDA {
      acc[k] = Op::combine(acc[k], used_lanes(b, lanes, identity));
    });
  }
  return Op::combine(Op::combine(acc[0], acc[1]), Op::combine(acc[2], acc[3]));
}

// Elements [start, end) of the current row folded with batches: one block, or blocks pairwise
// (cascade). The result depends only on the elements and on end - start, not on where the span
// starts. A call, one instance per tree for every row length (the loop over short rows of
// fold_adjoining_rows inlines its own block instead).
template <class Op, class A, inner_mode Mode, class Ev>
A fold_span_simd(Ev const& shared, index_t start, index_t end) {
  using B = simd_detail::batch<A>;
  Ev const ev = shared;  // a local copy keeps the leaves' pointers in registers (see simd_row)
  bool const one_block = end - start <= fold_block;
  cascade<B, Op> partial;
  B single(Op::template identity<A>());  // a span of one block (the common case) skips the cascade
  inline_tree<Ev>([&]() KILN_INLINE_LAMBDA {
    for (index_t block = start; block < end; block += fold_block) {
      B const sum = fold_block_simd<Op, A, Mode>(ev, block, std::min(end, block + fold_block));
      if (one_block) single = sum;
      else partial.push(sum);
    }
  });
  return fold_lanes<Op>(one_block ? single : partial.total());
}
template <class Op, class A, inner_mode Mode, class Ev>
A fold_row_simd(Ev const& ev, index_t n) {
  return fold_span_simd<Op, A, Mode>(ev, 0, n);
}

// Accumulates row elements into out[i * step] (the row's dimension is kept), scalar.
template <class Op, class A, class Ev>
void fold_into_row(Ev const& ev, A* out, index_t step, index_t n) {
  for (index_t i = 0; i < n; ++i) out[i * step] = Op::combine(out[i * step], Op::template prepare<A>(ev.scalar(i)));
}

// The same across a contiguous kept dimension, a batch of outputs at a time.
template <class Op, class A, inner_mode Mode, class Ev>
void fold_into_row_simd(Ev const& shared, A* out, index_t n) {
  Ev const ev = shared;
  using B = simd_detail::batch<A>;
  constexpr index_t W = B::size;
  inline_tree<Ev>([&]() KILN_INLINE_LAMBDA {
    index_t i = 0;
    if constexpr (large_tree<Ev>) {  // one copy of the tree's code, as in simd_row
      for (; i < n; i += W) {
        index_t const left = n - i;
        B const p = Op::template prepare<B>(
            ev.template packet<A, Mode, batch_cover::whole_or_tail>(i, left < W ? left : W));
        if (left >= W)  // (spelled apart from the leaves' n == W: see simd_row)
          Op::combine(B::load_unaligned(out + i), p).store_unaligned(out + i);
        else
          simd_detail::store_partial(
              out + i, Op::combine(simd_detail::load_partial<B>(out + i, std::size_t(left)), p), std::size_t(left));
      }
    } else {
      for (; i + W <= n; i += W)
        Op::combine(B::load_unaligned(out + i), Op::template prepare<B>(ev.template packet<A, Mode, batch_cover::whole>(i, W)))
            .store_unaligned(out + i);
      if (i < n) {
        std::size_t const tail = std::size_t(n - i);
        simd_detail::store_partial(out + i,
                                   Op::combine(simd_detail::load_partial<B>(out + i, tail),
                                               Op::template prepare<B>(ev.template packet<A, Mode, batch_cover::tail>(i, n - i))),
                                   tail);
      }
    }
  });
}

// The strides of a reduction's destination in its input's index space: the output's stride along
// kept dimensions, 0 along reduced ones (every input there lands on the same output).
template <int RA, bool Keep, std::size_t N, std::size_t R>
extents<RA> reduction_strides(std::array<int, N> const& axes, std::array<index_t, R> const& out_strides) {
  extents<RA> s{};
  for (int d = 0, o = 0, k = 0; d < RA; ++d) {
    bool const reduced = k < int(N) && axes[k] == d;
    if (reduced) ++k;
    s[d] = reduced ? 0 : out_strides[o];
    if (!reduced || Keep) ++o;
  }
  return s;
}

// A reduction over N axes of `shape` seen as rows: `rows` is the product of the kept extents, `n`
// that of the reduced ones, and `trailing` says whether the axes are the last N (they are sorted
// and distinct, so the first one says it).
struct row_split {
  index_t rows = 1, n = 1;
  bool trailing = false;
};
template <int R, std::size_t N>
KILN_ALWAYS_INLINE row_split split_rows(extents<R> const& shape, std::array<int, N> const& axes) {
  static_assert(N > 0);
  // (Signed indices: with unsigned ones nvcc flags `d < 0` in the R == N instances.)
  constexpr int kept = R - int(N);
  row_split r;
  for (int d = 0; d < R; ++d) (d < kept ? r.rows : r.n) *= shape[d];
  r.trailing = axes[0] == kept;
  return r;
}

// The common case without the general planner (as make_flat_plan for assignments): a reduction
// over the trailing axes of an input whose leaves are all contiguous over its whole shape (or
// broadcast scalars), into a contiguous destination. Plans the rows the general planner would
// find: [rows, n] with output r for row r, or one row [n] folding into the single output.
// Returns false, and changes nothing, when the case does not apply (or n is 1, which the general
// planner folds as a kept dimension).
template <int R, std::size_t N, class Ev>
KILN_ALWAYS_INLINE bool make_trailing_plan(extents<R> const& shape, std::array<int, N> const& axes,
                                           bool dst_contiguous, Ev& ev, loop_plan<R>& plan) {
  if constexpr (N == 0) {
    return false;
  } else {
    // (Not a structured binding: the lambda below captures rows and n, which Clang before 16
    // refuses for bindings.)
    row_split const split = split_rows<R>(shape, axes);
    index_t const rows = split.rows, n = split.n;
    if (!dst_contiguous || !split.trailing || n <= 1) return false;
    return replan_leaf_strides<R>(ev, [&](auto& strides) {
      if (!make_flat_plan<R>(shape, contiguous_strides<R>(shape), strides, plan)) return false;
      if (rows == 1) {
        plan.out_strides[0] = 0;
      } else if constexpr (R >= 2) {  // (rank 1 has one row)
        plan.dims = 2;
        plan.shape[0] = rows;
        plan.shape[1] = n;
        plan.out_strides[0] = 1;
        plan.out_strides[1] = 0;
        for (auto& s : strides) s[1] = s[0], s[0] *= n;  // 1 (contiguous) or 0 (broadcast scalar)
      }
      return true;
    });
  }
}

// The cascade for partial results that are whole rows of outputs (a reduction over outer
// dimensions, the inner one kept): blocks of rows accumulate into block(), and push() moves the
// block into the binary counter, level k holding 2^k blocks combined.
template <class A, class Op>
class row_cascade {
 public:
  explicit row_cascade(index_t width) : block_(extents<1>{width}, uninitialized) { restart(); }
  A* block() noexcept { return block_.data(); }
  void push() {
    std::size_t k = 0;
    for (; occupied_ >> k & 1u; ++k) {
      combine_into(block_, levels_[k]);
      occupied_ &= ~(std::uint64_t{1} << k);
    }
    if (k == levels_.size()) levels_.emplace_back(block_.shape(), uninitialized);
    std::swap(levels_[k], block_);
    occupied_ |= std::uint64_t{1} << k;
    restart();
  }
  // out[i * step] combined with the total of every block pushed; the cascade is empty afterwards.
  void take_into(A* out, index_t step) {
    for (std::size_t k = 0; k < levels_.size(); ++k)
      if (occupied_ >> k & 1u)
        for (index_t i = 0; i < block_.size(); ++i) out[i * step] = Op::combine(out[i * step], levels_[k].data()[i]);
    occupied_ = 0;
  }

 private:
  void restart() { std::fill_n(block_.data(), block_.size(), Op::template identity<A>()); }
  static void combine_into(tensor<A, 1>& to, tensor<A, 1> const& from) {
    for (index_t i = 0; i < to.size(); ++i) to.data()[i] = Op::combine(from.data()[i], to.data()[i]);
  }

  tensor<A, 1> block_;
  std::vector<tensor<A, 1>> levels_;
  std::uint64_t occupied_ = 0;
};

// Moves the plan's reduced outer dimensions (destination stride 0) inside its kept ones, in their
// order, so that the rows folding into the same outputs come one after another; returns how many
// rows that is. The fold then sums those rows pairwise too: without this, a reduction whose inner
// dimension is short or kept (axis 0 of [100000, 8]) accumulates one output element by element.
template <int R, class Ev>
index_t group_reduced_rows(loop_plan<R>& plan, Ev& ev) {
  int const outer = plan.dims - 1;
  plan_strides<R> order{};
  int k = 0;
  index_t rows = 1;
  for (int d = 0; d < outer; ++d)
    if (plan.out_strides[d] != 0) order[k++] = d;
  for (int d = 0; d < outer; ++d)
    if (plan.out_strides[d] == 0) order[k++] = d, rows *= plan.shape[d];
  auto permute = [&](plan_strides<R>& s) {
    plan_strides<R> const old = s;
    for (int i = 0; i < outer; ++i) s[i] = old[order[i]];
  };
  permute(plan.shape);
  permute(plan.out_strides);
  for_each_leaf(ev, [&](auto& leaf) { permute(leaf.strides); });
  return rows;
}

// Elements [start, end) of the current row folded into one value, with batches (Vector) or scalar.
template <class Op, class A, inner_mode Mode, bool Vector, class Ev>
KILN_ALWAYS_INLINE A fold_one_span(Ev const& ev, index_t start, index_t end) {
  if constexpr (Vector) return fold_span_simd<Op, A, Mode>(ev, start, end);
  else return fold_span<Op, A>(ev, start, end);
}

// Rows k = 0, 1, ... rows - 1 of n elements, row k the span [k n, k n + n) of the leaves' current
// row, each folded into o[k * step]; with step 0 and several rows (a general plan's grouped rows)
// their values combine into o[0] first. Each output is written once, whatever it held before (a
// sum's identity need not be stored first). ShortRows (vector code, n <= fold_block): the block
// loop is inlined here, the same instructions as fold_span_simd's, so each row's result is the
// same bits whichever path folds it, and wherever a thread's part of the rows (kiln::par)
// starts; otherwise each row is a call of fold_one_span.
template <class Op, class A, inner_mode Mode, bool Vector, bool ShortRows, class Ev>
KILN_ALWAYS_INLINE void fold_consecutive_rows(Ev const& ev, A* o, index_t step, index_t rows, index_t n) {
  bool const one_output = step == 0 && rows > 1;
  A total = Op::template identity<A>();
  for (index_t k = 0; k < rows; ++k) {
    A value;
    if constexpr (ShortRows) value = fold_lanes<Op>(fold_block_simd<Op, A, Mode>(ev, k * n, k * n + n));
    else value = fold_one_span<Op, A, Mode, Vector>(ev, k * n, k * n + n);
    if (one_output) total = Op::combine(total, value);
    else o[k * step] = value;
  }
  if (one_output) *o = total;
}

// The common case of the loop below, without its stepping from row to row: rows folding in place
// into one value each (row sums, full reductions) that follow one another in every leaf (a plan
// of one or two dimensions whose leaves' strides along the outer dimension are the row length
// times their inner strides: contiguous rows of a contiguous input, or a broadcast scalar).
// The leaves point at the first row once, and row k is the span [k n, k n + n) of one long row.
// One copy of the evaluator per call, local to this function, whose address never leaves it (as
// run_rows' in kernels.hpp): the compiler keeps the leaves' pointers in registers across the
// stores to `out`. Returns false when the rows do not follow one another.
struct rows_adjoin {
  int outer;  // the outer dimension
  index_t n;
  bool& adjoin;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf const& leaf) const noexcept {
    adjoin = adjoin && leaf.strides[outer] == n * leaf.strides[outer + 1];
  }
};
template <class Op, class A, inner_mode Mode, bool Vector, int R, class Ev>
bool fold_adjoining_rows(loop_plan<R> const& plan, Ev const& shared, A* out) {
  int const outer = plan.dims - 2;  // -1 for a single row
  index_t const n = plan.shape[plan.dims - 1];
  bool adjoin = outer <= 0;
  if (outer == 0) visit_leaves(shared, rows_adjoin{outer, n, adjoin});
  if (!adjoin) return false;
  Ev ev = shared;
  index_t const first = plan.first_row;
  index_t const rows = plan.row_count >= 0 ? plan.row_count : outer == 0 ? plan.shape[0] : 1;
  index_t const step = outer == 0 ? plan.out_strides[0] : 0;
  plan_strides<R> index{};
  index[0] = first;
  visit_leaves(ev, start_leaf_rows<R>{index, outer + 1});
  A* const o = out + first * step;
  if constexpr (Vector && Mode != inner_mode::mixed) {  // (mixed: the call, for compile time)
    if (n <= fold_block) {
      inline_tree<Ev>([&]() KILN_INLINE_LAMBDA { fold_consecutive_rows<Op, A, Mode, true, true>(ev, o, step, rows, n); });
      return true;
    }
  }
  fold_consecutive_rows<Op, A, Mode, Vector, false>(ev, o, step, rows, n);
  return true;
}

// Folds every row of a grouped plan into `out`, vector (Vector, only for inner strides 0 and 1)
// or scalar: into one output per row (inner stride 0), or across the row's outputs. Runs of
// `group` rows fold into the same outputs: beyond one block (about fold_block elements per
// output) they are summed in blocks, and the blocks pairwise, as within a row.
template <class Op, class A, inner_mode Mode, bool Vector, int R, class Ev>
void fold_runs(loop_plan<R> const& plan, Ev& ev, A* out, index_t group, index_t rows_per_block) {
  index_t const n = plan.shape[plan.dims - 1];
  index_t const step = plan.out_strides[plan.dims - 1];
  bool const blocked = group > rows_per_block;  // otherwise each output takes one block, in place
  A const identity = Op::template identity<A>();
  A block = identity;      // inner stride 0: the current block's value,
  cascade<A, Op> partial;  // and the blocks so far
  row_cascade<A, Op> partial_rows(blocked && step != 0 ? n : 0);  // the same, n outputs at a time
  index_t row = 0;         // in the current run
  for_each_row(plan, ev, [&](index_t offset, auto const&) {
    if (step == 0) {
      A const value = fold_one_span<Op, A, Mode, Vector>(ev, 0, n);
      if (!blocked) {
        out[offset] = Op::combine(out[offset], value);
        return;
      }
      block = Op::combine(block, value);
    } else {
      A* const target = blocked ? partial_rows.block() : out + offset;
      if constexpr (Vector) fold_into_row_simd<Op, A, Mode>(ev, target, n);  // Vector: step is 1
      else fold_into_row<Op, A>(ev, target, blocked ? 1 : step, n);
      if (!blocked) return;
    }
    if (++row < group && row % rows_per_block != 0) return;
    if (step == 0) {
      partial.push(block);
      block = identity;
    } else {
      partial_rows.push();
    }
    if (row < group) return;
    if (step == 0) {
      out[offset] = Op::combine(out[offset], partial.total());
      partial.clear();
    } else {
      partial_rows.take_into(out + offset, step);
    }
    row = 0;
  });
}

// The same, adjoining rows that fold in place first.
template <class Op, class A, inner_mode Mode, bool Vector, int R, class Ev>
KILN_ALWAYS_INLINE void fold_rows(loop_plan<R> const& plan, Ev& ev, A* out, index_t group) {
  index_t const n = plan.shape[plan.dims - 1];
  index_t const step = plan.out_strides[plan.dims - 1];
  // Each output one block or less (group <= rows_per_block below, without its division).
  bool const in_place = step == 0 && (group == 1 || group * n <= fold_block);
  if (in_place && fold_adjoining_rows<Op, A, Mode, Vector>(plan, ev, out)) return;
  fold_runs<Op, A, Mode, Vector>(plan, ev, out, group, step == 0 ? std::max<index_t>(1, fold_block / n) : fold_block);
}

// Folds every row of a grouped plan (or of its part) into `out` on one thread: vector code where
// the tree and the reads allow it, scalar otherwise.
template <class A, class Node>
inline constexpr bool folds_in_batches =
    simd_detail::has_batch<A> && ops::vector_foldable<A> && std::is_same_v<lane_t<Node>, A>;
template <class Op, class A, class Policy, int R, class Ev>
void fold_plan(Policy const&, loop_plan<R> const& plan, Ev& ev, A* out, index_t group) {
  if constexpr (std::is_base_of_v<simd_policy, Policy> && folds_in_batches<A, typename Ev::node_type>) {
    index_t const step = plan.out_strides[plan.dims - 1];
    inner_reads const reads = step == 0 || step == 1 ? leaf_reads(plan, ev) : inner_reads::strided;
    if (reads == inner_reads::contiguous) {
      if constexpr (may_have_twins<Ev>)
        if (has_twins(ev)) return fold_rows<Op, A, inner_mode::twins, true>(plan, ev, out, group);
      return fold_rows<Op, A, inner_mode::contiguous, true>(plan, ev, out, group);
    }
    if (reads == inner_reads::mixed) return fold_rows<Op, A, inner_mode::mixed, true>(plan, ev, out, group);
  }
  fold_rows<Op, A, inner_mode::contiguous, false>(plan, ev, out, group);
}

// The same on all cores. Where the outputs split between threads (whole runs of rows folding
// into the same outputs, or the columns of a kept inner dimension), each thread folds its own
// outputs exactly as kiln::simd would: the same result, bit for bit. A reduction with one run of
// rows (a full reduction, or over every outer dimension) folds each thread's rows or columns into
// partial outputs of its own, combined in thread order: the same result for the same thread
// count.
template <class Op, class A, int R, class Ev>
void fold_plan(par_policy const& policy, loop_plan<R> const& plan, Ev& ev, A* out, index_t group) {
  simd_policy const& single = policy;
  index_t const rows = plan_rows(plan), n = plan.shape[plan.dims - 1], runs = rows / group;
  index_t const step = plan.out_strides[plan.dims - 1];
  int threads = par_threads(rows * n);
  if (runs > 1) threads = static_cast<int>(std::min<index_t>(threads, runs));
  if (threads == 1) return fold_plan<Op>(single, plan, ev, out, group);
  auto fold_part = [&](plan_part const& mine, A* target, index_t part_group) {
    if (mine.count == 0) return;
    loop_plan<R> narrowed = plan;
    Ev local = ev;
    narrow_to(mine, narrowed, local, target);
    fold_plan<Op>(single, narrowed, local, target, part_group);
  };
  if (runs > 1) {  // whole runs per thread
    return par_run(threads, [&](int part, int parts) {
      auto const [b, e] = piece(runs, part, parts);
      fold_part(plan_part{true, b * group, (e - b) * group}, out, group);
    });
  }
  index_t const line = line_elements(sizeof(A));
  if (step != 0 && n >= 4 * line * threads) {  // the columns of a kept inner dimension
    return par_run(threads, [&](int part, int parts) {
      auto const [b, e] = piece(n, part, parts, line);
      fold_part(plan_part{false, b, e - b}, out, group);
    });
  }
  // One run: partial outputs per thread. They span the outputs' offsets (0, or i * step).
  index_t const span = step == 0 ? 1 : (n - 1) * step + 1;
  // (A plain array: std::vector<bool>, for all and any, packs bits and has no data().)
  std::unique_ptr<A[]> const partials(new A[static_cast<std::size_t>(span * threads)]);
  std::fill_n(partials.get(), span * threads, Op::template identity<A>());
  int used = 1;
  par_run(threads, [&](int part, int parts) {
    if (part == 0) used = parts;
    plan_part const mine = split_plan(plan, part, parts, sizeof(A));
    fold_part(mine, partials.get() + part * span, mine.by_rows ? mine.count : rows);
  });
  index_t const outputs = step == 0 ? 1 : n;
  for (index_t i = 0; i < outputs; ++i) {
    A total = partials[static_cast<std::size_t>(i * step)];
    for (int t = 1; t < used; ++t) total = Op::combine(total, partials[static_cast<std::size_t>(t * span + i * step)]);
    out[i * step] = total;
  }
}

// Whether every tensor leaf of a tree is a contiguous view of exactly `shape`: each leaf then
// holds the element of flat index i of `shape` at its data() + i.
template <int R>
struct contiguous_leaves_of {
  extents<R> const& shape;
  bool& all;
  template <class Leaf>
  KILN_ALWAYS_INLINE void operator()(Leaf const& leaf) const noexcept {
    auto const& v = leaf.view();
    if constexpr (std::remove_cvref_t<decltype(v)>::rank == R)
      all = all && same_extents(v.shape(), shape) && (whole_tensor_leaf(leaf) || v.is_contiguous());
    else all = false;
  }
  // A leaf over a whole tensor is contiguous: only its shape needs comparing.
  template <class Leaf>
  static bool whole_tensor_leaf(Leaf const& leaf) noexcept {
    if constexpr (requires { leaf.whole(); }) return leaf.whole();
    else return false;
  }
};

// The common case of `fold`, which needs no plan: a reduction over trailing axes, rows of at
// most one block, a contiguous destination, and every leaf a contiguous view of the argument's
// whole shape. Row k is then the span [k n, k n + n) of one long row. `applies` says whether a
// reduction is that case.
struct contiguous_rows {
  bool applies = false;
  index_t rows = 0, n = 0;
};
template <class Arg, std::size_t N>
KILN_ALWAYS_INLINE contiguous_rows contiguous_fold_rows(Arg const& arg, std::array<int, N> const& axes,
                                                        bool dst_contiguous) {
  constexpr int RA = Arg::rank;
  if constexpr (N == 0) {
    return {};
  } else {
    extents<RA> const& shape = arg.shape();
    row_split const split = split_rows<RA>(shape, axes);
    contiguous_rows r{dst_contiguous && split.trailing && split.n > 1 && split.n <= fold_block, split.rows, split.n};
    if (r.applies) for_each_leaf_node(arg, contiguous_leaves_of<RA>{shape, r.applies});
    return r;
  }
}

// That case on one thread with batches (kiln::simd, or kiln::par on too few elements for a second
// thread): each row folded into dst[k] by fold_consecutive_rows, as fold_adjoining_rows folds it,
// with the same bits. Inline from the evaluator's construction to the loop, so that the evaluator
// never goes through memory: the general path plans through arrays and hands the evaluator to a
// call, which copies it back out of the stores that built it.
// On small tensors that cost more than the fold itself (W6 at 1K elements took 2.5x Eigen's time).
// Returns false, having done nothing, when the case does not apply.
template <class Op, class Policy, class A, int R, class Arg, std::size_t N>
KILN_ALWAYS_INLINE bool fold_contiguous_rows(Policy const&, tensor_view<A, R> const& dst, Arg const& arg,
                                             std::array<int, N> const& axes) {
  constexpr int RA = Arg::rank;
  using Ev = evaluator<Arg, RA>;
  constexpr bool batches = std::is_same_v<Policy, simd_policy> || std::is_same_v<Policy, par_policy>;
  if constexpr (!batches || !folds_in_batches<A, Arg>) {
    return false;
  } else {
    contiguous_rows const c = contiguous_fold_rows(arg, axes, dst.is_contiguous());
    if (!c.applies) return false;
    // kiln::par folds on one thread, as fold_plan would for so few elements.
    if constexpr (std::is_same_v<Policy, par_policy>)
      if (par_threads(c.rows * c.n) > 1) return false;
    Ev ev(arg, contiguous_reading{});
    visit_leaves(ev, start_leaf_rows<RA>{plan_strides<RA>{}, 0});
    inline_tree<Ev>([&]() KILN_INLINE_LAMBDA {
      if constexpr (may_have_twins<Ev>)
        if (has_twins(ev))
          return fold_consecutive_rows<Op, A, inner_mode::twins, true, true>(ev, dst.data(), 1, c.rows, c.n);
      fold_consecutive_rows<Op, A, inner_mode::contiguous, true, true>(ev, dst.data(), 1, c.rows, c.n);
    });
    return true;
  }
}

// fold's planned case: any axes, strides and broadcasts.
template <class Op, class Policy, class A, int R, class Arg, std::size_t N, bool Keep>
[[gnu::noinline]] void fold_planned(Policy const& policy, tensor_view<A, R> const& dst, Arg const& arg,
                                    std::array<int, N> const& axes, std::bool_constant<Keep>) {
  constexpr int RA = Arg::rank;
  auto const fill = [&] { std::fill_n(dst.data(), dst.size(), Op::template identity<A>()); };
  evaluator<Arg, RA> ev(arg, arg.shape());
  loop_plan<RA> plan;
  index_t group = 1;
  // A trailing plan's rows each write their own output once (fold_adjoining_rows); the general
  // plan's may combine into outputs, which then start at the identity.
  if (!make_trailing_plan<RA>(arg.shape(), axes, dst.is_contiguous(), ev, plan)) {
    fill();
    plan = make_plan<RA>(arg.shape(), reduction_strides<RA, Keep>(axes, dst.strides()), ev);
    group = group_reduced_rows(plan, ev);
  }
  fold_plan<Op>(policy, plan, ev, dst.data(), group);
}

// dst (the reduction's shape) = fold of `arg` over `axes` with Op: the common case here, the
// planned one a call of its own (one function with both took W6 at 1K elements 0.9 ns longer,
// 20.4 against 19.5: the common case shared its registers and frame with the general one's
// evaluator, plan and loops).
template <class Op, class Policy, class A, int R, class Arg, std::size_t N, bool Keep>
void fold(Policy const& policy, tensor_view<A, R> const& dst, Arg const& arg, std::array<int, N> const& axes,
          std::bool_constant<Keep> keep) {
  if (element_count<Arg::rank>(arg.shape()) == 0)
    return void(std::fill_n(dst.data(), dst.size(), Op::template identity<A>()));
  if (fold_contiguous_rows<Op>(policy, dst, arg, axes)) return;
  fold_planned<Op>(policy, dst, arg, axes, keep);
}

// dst = index of the best element over `axes`, in row-major order over the reduced dimensions.
template <class Op, int R, class Arg, std::size_t N, bool Keep>
void arg_fold(tensor_view<std::int64_t, R> const& dst, Arg const& arg, std::array<int, N> const& axes,
              std::bool_constant<Keep>) {
  constexpr int RA = Arg::rank;
  using V = typename Arg::value_type;
  std::fill_n(dst.data(), dst.size(), std::int64_t{0});
  tensor<V, R> best(dst.shape(), uninitialized);  // same contiguous layout as dst
  evaluator<Arg, RA> ev(arg, arg.shape());
  loop_plan<RA> const plan = make_plan<RA>(arg.shape(), reduction_strides<RA, Keep>(axes, dst.strides()), ev);
  int const inner = plan.dims - 1;
  // Row-major weights of the planned reduced dimensions (destination stride 0).
  plan_strides<RA> weight{};
  index_t w = 1;
  for (int k = inner; k >= 0; --k) {
    weight[k] = plan.out_strides[k] == 0 ? w : 0;
    if (plan.out_strides[k] == 0) w *= plan.shape[k];
  }
  index_t const n = plan.shape[inner], step = plan.out_strides[inner];
  std::vector<bool> seen(static_cast<std::size_t>(dst.size()), false);
  for_each_row(plan, ev, [&](index_t offset, auto const& index) {
    index_t base = 0;
    for (int k = 0; k < inner; ++k) base += index[k] * weight[k];
    for (index_t i = 0; i < n; ++i) {
      index_t const o = offset + i * step;
      V const v = ev.scalar(i);
      auto taken = seen[static_cast<std::size_t>(o)];
      if (!taken || Op::better(v, best.data()[o])) {
        taken = true;
        best.data()[o] = v;
        dst.data()[o] = base + i * weight[inner];
      }
    }
  });
}

// A fold op's finalize (mean's division, norm's square root) as an elementwise op, applied in
// place to a reduction's result (on the device too).
template <class Op>
struct finalize_op : math::op_base<1, op_kind::same> {
  static constexpr std::string_view name = Op::name;
  index_t count = 0;
  template <class A> KILN_HD A operator()(A a) const { return Op::finalize(a, count); }
};
// A reduction's result (contiguous) as one dimension: the elementwise steps that finish it do not
// depend on its shape, so they are instantiated once per element type rather than once per rank.
template <class T, int R>
tensor_view<T, 1> flat(tensor_view<T, R> const& v) {
  return {v.data(), extents<1>{v.size()}};
}
template <class Policy, class T, int R, class Op>
void finish(Policy const& policy, tensor_view<T, R> const& dst, Op const&, index_t count) {
  assign(policy, flat(dst), make_map(finalize_op<Op>{{}, count}, tensor_view<T const, 1>(flat(dst))));
}

template <class Policy, class T, int R, class Op, class Arg, int N, bool Keep, class Lowered>
void materialize_reduction(Policy const& policy, tensor_view<T, R> const& dst, reduction<Op, Arg, N, Keep> const& node,
                           Lowered const& arg);

// Whether a contiguous view holds +inf: a float variance that overflowed (below).
template <class T, int R>
bool holds_infinity(tensor_view<T, R> const& v) {
  bool any = false;
  for (index_t i = 0; i < v.size(); ++i) any |= v.data()[i] == std::numeric_limits<T>::infinity();
  return any;
}
// Float var and std square the deviations in float, which overflows once they pass ~1.8e19 where
// the result may still be a float (the variance of ±1e19 is 1.1e38, the standard deviation of ±3e37
// is 3e37): PyTorch accumulates them in double. A result of +inf from such a fold (finite inputs
// give it no other way: an infinite input makes the mean and the deviations NaN) is computed again
// in double and rounded; the other results keep their float bits. Every call pays a scan of its
// results, and only one that overflowed the second evaluation.
template <class Policy, class T, int R, class Op, class Arg, int N, bool Keep, class Lowered>
[[gnu::noinline, gnu::cold]] void materialize_in_double(Policy const& policy, tensor_view<T, R> const& dst,
                                                        reduction<Op, Arg, N, Keep> const& node, Lowered const& arg) {
  constexpr int RA = Lowered::rank;
  tensor<double, RA> wide(arg.shape(), uninitialized);
  assign(policy, wide.view(), arg, destination::whole_tensor);
  tensor<double, R> result(dst.shape(), uninitialized);
  materialize_reduction(policy, result.view(), node, leaf<double, RA>(std::as_const(wide).view(), true));
  for (index_t i = 0; i < dst.size(); ++i)  // (both contiguous, in the same order)
    if (dst.data()[i] == std::numeric_limits<T>::infinity()) dst.data()[i] = static_cast<T>(result.data()[i]);
}

// The most bytes of a two-pass reduction's first result (var's and std's mean, logsumexp's maximum)
// that materialize_reduction keeps on the stack.
inline constexpr std::size_t pre_buffer_bytes = 1024;

// var, std and logsumexp: m = pre(arg) with the reduced dimensions kept (a mean, a maximum), then
// dst = output(fold(input(arg, m)), m).
template <class Policy, class T, int R, class Op, class Arg, int N, bool Keep, class Lowered>
void fold_two_passes(Policy const& policy, tensor_view<T, R> const& dst, reduction<Op, Arg, N, Keep> const& node,
                     Lowered const& arg) {
  std::bool_constant<Keep> const keep;
  constexpr int RA = Lowered::rank;
  using M = typename reduction<typename Op::pre, Lowered, N, true>::value_type;
  extents<RA> m_shape = arg.shape();
  for (int a : node.reduced_axes()) m_shape[a] = 1;
  // m on the stack when it is small (the statistics of a few rows, a layer norm's block of rows),
  // else on the heap.
  alignas(storage_alignment) std::byte small[pre_buffer_bytes];
  tensor<M, RA> large;
  bool const fits = element_count<RA>(m_shape) <= index_t(pre_buffer_bytes / sizeof(M));
  if (!fits) large = tensor<M, RA>(m_shape, uninitialized);
  tensor_view<M, RA> const m(fits ? reinterpret_cast<M*>(small) : large.data(), m_shape);
  tensor_view<M const, RA> const m_read(m);
  fold<typename Op::pre>(policy, m, arg, node.reduced_axes(), std::true_type{});
  if constexpr (requires { Op::pre::finalizes; }) finish(policy, m, typename Op::pre{}, node.reduced_size());
  fold<typename Op::fold>(policy, dst, make_map(typename Op::input{}, arg, m_read), node.reduced_axes(), keep);
  // m has dst's elements in dst's order (its reduced dimensions have extent 1).
  assign(policy, flat(dst), make_map(node.op().make_output(node.reduced_size()), tensor_view<T const, 1>(flat(dst)),
                                     flat(m_read)));
  if constexpr (std::is_base_of_v<ops::var_red, Op> && std::is_same_v<T, float>)
    if (holds_infinity(dst)) materialize_in_double(policy, dst, node, arg);
}

// Node (of rank R, without boundaries) over rows [start, start + count) of dimension 0: the
// leaves of rank R with all `rows` rows narrowed, the others (broadcast along dimension 0) kept.
// Same types as Node's.
template <int R, class Node>
Node rows_of(Node const& node, index_t rows, index_t start, index_t count) {
  if constexpr (requires { node.view(); }) {
    Node kept = node;
    if constexpr (Node::rank == R)
      if (node.shape()[0] == rows) kept.keep_rows(start, count);
    return kept;
  } else if constexpr (requires { node.args(); }) {
    return apply_pack([&](auto const&... a) { return Node(node.op(), rows_of<R>(a, rows, start, count)...); },
                      node.args());
  } else {
    return node;
  }
}

// Elements of the argument per block of rows in fold_two_passes_by_rows: its rows stay in L1 or L2
// between the two passes.
inline constexpr index_t two_pass_block_elements = 16384;

// fold_two_passes where dimension 0 is kept, a block of its rows at a time: the second pass reads
// rows the first has just brought into cache, where over the whole argument both read it from
// memory. Each row's result is the same bits either way (a fold's result depends only on the row).
template <class Policy, class T, int R, class Op, class Arg, int N, bool Keep, class Lowered>
void fold_two_passes_by_rows(Policy const& policy, tensor_view<T, R> const& dst, reduction<Op, Arg, N, Keep> const& node,
                             Lowered const& arg) {
  constexpr int RA = Lowered::rank;
  index_t const rows = arg.shape()[0];
  index_t const row_size = rows == 0 ? 0 : element_count<RA>(arg.shape()) / rows;
  index_t const block = std::max<index_t>(1, two_pass_block_elements / std::max<index_t>(1, row_size));
  if (block >= rows) return fold_two_passes(policy, dst, node, arg);
  for (index_t start = 0; start < rows; start += block) {
    index_t const count = std::min(block, rows - start);
    extents<R> shape = dst.shape();
    shape[0] = count;
    fold_two_passes(policy, tensor_view<T, R>(dst.data() + start * dst.strides()[0], shape, dst.strides()), node,
                    rows_of<RA>(arg, rows, start, count));
  }
}

// The reduction `node` of `arg`, its argument with every boundary already evaluated.
template <class Policy, class T, int R, class Op, class Arg, int N, bool Keep, class Lowered>
void materialize_reduction(Policy const& policy, tensor_view<T, R> const& dst, reduction<Op, Arg, N, Keep> const& node,
                           Lowered const& arg) {
  std::bool_constant<Keep> const keep;
  if constexpr (requires { typename Op::pre; }) {
    // Under kiln::par each pass splits its rows between the threads instead.
    if constexpr (R >= 1 && Lowered::rank >= 2 && (std::is_same_v<Policy, seq_policy> || std::is_same_v<Policy, simd_policy>))
      if (node.reduced_axes()[0] != 0) return fold_two_passes_by_rows(policy, dst, node, arg);
    fold_two_passes(policy, dst, node, arg);
  } else if constexpr (ops::index_picking<Op, typename Lowered::value_type>) {
    arg_fold<Op>(dst, arg, node.reduced_axes(), keep);
  } else {
    // An op that says its result over one element (the 2-norm's |x|, ops/reduction.hpp).
    if constexpr (requires { typename Op::single_element; })
      if (node.reduced_size() == 1)
        return fold<ops::amax_red>(policy, dst, make_map(typename Op::single_element{}, arg), node.reduced_axes(), keep);
    fold<Op>(policy, dst, arg, node.reduced_axes(), keep);
    if constexpr (requires { Op::finalizes; }) finish(policy, dst, node.op(), node.reduced_size());
  }
}
template <class Policy, class T, int R, class Op, class Arg, int N, bool Keep>
void materialize_reduction(Policy const& policy, tensor_view<T, R> const& dst, reduction<Op, Arg, N, Keep> const& node) {
  // An argument without boundaries is read as it is: lowering would copy its tree.
  if constexpr (contains_materialized<Arg>::value) materialize_reduction(policy, dst, node, lower(policy, node.arg()));
  else materialize_reduction(policy, dst, node, node.arg());
}

// An evaluator seen through an elementwise step f (a generic lambda for scalars and batches), so
// one row can be read again under another step without building a new tree.
template <class Ev, class F>
struct mapped_evaluator {
  Ev const& ev;
  F f;
  auto scalar(index_t i) const { return f(ev.scalar(i)); }
  template <class Lane, inner_mode Mode, batch_cover Cover>
  KILN_ALWAYS_INLINE auto packet(index_t i, index_t n) const { return f(ev.template packet<Lane, Mode, Cover>(i, n)); }
};
template <class Ev, class F>
mapped_evaluator(Ev const&, F) -> mapped_evaluator<Ev, F>;
template <class Ev, class F>
inline constexpr std::size_t subtree_nodes<mapped_evaluator<Ev, F>> = subtree_nodes<Ev> + 1;

// A contiguous row of the destination read back as a leaf.
template <class T>
struct contiguous_row {
  T const* data;
  T scalar(index_t i) const { return data[i]; }
  template <class Lane, inner_mode, batch_cover Cover>
  KILN_ALWAYS_INLINE auto packet(index_t i, index_t n) const {
    return simd_detail::load_covered<simd_detail::batch<T>, Cover>(data + i, std::size_t(n));
  }
};
template <class T>
contiguous_row(T*) -> contiguous_row<T>;

// The steps softmax reads its rows through (mapped_evaluator): named and always inlined, since a
// lambda's call operator is left out of line at -O2, a call per batch (W7 twice as slow).
// e^(x - m), with kiln's exp, which keeps subnormal results on batches as on scalars.
template <class T>
struct shifted_exp {
  T m;
  template <class V>
  KILN_ALWAYS_INLINE V operator()(V v) const { return math::exp(v - V(m)); }
};
// (x - m) - log(s), as PyTorch: one shift m + log(s) would be rounded to the spacing of m (5e-4
// at 1e4 in float), and every result would carry that error.
template <class T>
struct log_softmax_of {
  T m, log_sum;
  template <class V>
  KILN_ALWAYS_INLINE V operator()(V v) const { return (v - V(m)) - V(log_sum); }
};

// row[i] *= scale, in batches written out: GCC vectorizes the plain loop only at -O3 (W7 at -O2
// was 1.6x slower). A product rounds once either way, so batches and scalars agree.
template <class T>
KILN_ALWAYS_INLINE void scale_row(T* row, index_t n, T scale) {
  index_t i = 0;
  if constexpr (simd_detail::has_batch<T>) {
    using B = simd_detail::batch<T>;
    for (; i + index_t(B::size) <= n; i += index_t(B::size)) (B::load_unaligned(row + i) * B(scale)).store_unaligned(row + i);
  }
  for (; i < n; ++i) row[i] *= scale;
}

// Softmax along the last dimension, one row at a time: max, sum of exp, then the write, each
// pass over a row that is still in L1. Memory sees one read of x and one write of dst. `row` is
// the destination of the plan's first row (contiguous rows, in the plan's order).
template <bool Log, class Policy, class T, int R, class Ev>
void softmax_plan_rows(Policy const&, loop_plan<R> const& plan, Ev& ev, T* row) {
  using X = typename Ev::node_type;
  index_t const n = plan.shape[plan.dims - 1];
  constexpr bool vector = std::is_base_of_v<simd_policy, Policy> && simd_detail::has_batch<T> &&
                          std::is_same_v<lane_t<X>, T>;
  inner_reads const reads = vector ? leaf_reads(plan, ev) : inner_reads::strided;
  auto each_row = [&]<inner_mode Mode>(std::integral_constant<inner_mode, Mode>) {
    // A row written through step f: in the mixed mode from a copy of the leaves with fresh inner
    // strides, so that GCC can split the row's loop on each leaf's test (fresh_inner_stride; it
    // does for log_softmax, 4-6% faster over relu(A + b) * c; softmax's exp leaves the loop above
    // its size limit, which still splits it on one leaf).
    auto write_row = [&](auto const& f) {
      if constexpr (Mode == inner_mode::mixed) {
        Ev local = ev;
        visit_leaves(local, fresh_inner_stride{});
        simd_row<T, Mode>(row, n, mapped_evaluator{local, f});
      } else {
        simd_row<T, Mode>(row, n, mapped_evaluator{ev, f});
      }
    };
    for_each_row(plan, ev, [&](index_t, auto const&) {
      auto fold_with = [&]<class Op>(Op, auto const& source) {
        if constexpr (vector)
          if (reads != inner_reads::strided) return fold_row_simd<Op, T, Mode>(source, n);
        return fold_row<Op, T>(source, n);
      };
      T const m = fold_with(ops::amax_red{}, ev);
      if constexpr (Log) {
        using std::log;
        T const log_sum = log(fold_with(ops::sum_red{}, mapped_evaluator{ev, shifted_exp<T>{m}}));
        log_softmax_of<T> const out{m, log_sum};
        if constexpr (vector)
          if (reads != inner_reads::strided) return write_row(out), void(row += n);
        for (index_t i = 0; i < n; ++i) row[i] = out(ev.scalar(i));
      } else {
        // exp(x - m) is stored while it is summed, then scaled in place: one exp per element.
        shifted_exp<T> const e{m};
        T s = 0;
        if constexpr (vector) {
          if (reads != inner_reads::strided) {
            write_row(e);
            s = fold_row_simd<ops::sum_red, T, inner_mode::contiguous>(contiguous_row{row}, n);
          }
        }
        if (!vector || reads == inner_reads::strided)
          for (index_t i = 0; i < n; ++i) s += (row[i] = e(ev.scalar(i)));
        scale_row(row, n, T(1) / s);  // as PyTorch: one division per row, then multiplications
      }
      row += n;
    });
  };
  auto const rows = [&] {
    if (reads == inner_reads::mixed) each_row(std::integral_constant<inner_mode, inner_mode::mixed>{});
    else each_row(std::integral_constant<inner_mode, inner_mode::contiguous>{});
  };
  if constexpr (large_tree<Ev>) flattened(rows);
  else rows();
}

// On all cores: whole rows per thread, each as kiln::simd computes it.
template <bool Log, class T, int R, class Ev>
void softmax_plan_rows(par_policy const& policy, loop_plan<R> const& plan, Ev& ev, T* row) {
  simd_policy const& single = policy;
  index_t const rows = plan_rows(plan), n = plan.shape[plan.dims - 1];
  int const threads = static_cast<int>(std::min<index_t>(par_threads(rows * n), rows));
  if (threads == 1) return softmax_plan_rows<Log>(single, plan, ev, row);
  par_run(threads, [&](int part, int parts) {
    auto const [b, e] = piece(rows, part, parts);
    if (b == e) return;
    loop_plan<R> narrowed = plan;
    narrowed.first_row = b;
    narrowed.row_count = e - b;
    Ev local = ev;
    softmax_plan_rows<Log>(single, narrowed, local, row + b * n);
  });
}

template <bool Log, class Policy, class T, int R, class X>
void softmax_rows(Policy const& policy, tensor_view<T, R> const& dst, X const& x) {
  evaluator<X, R> ev(x, x.shape());
  extents<R> row_strides = dst.strides();
  row_strides[R - 1] = 0;  // the last dimension folds; it cannot merge with the kept ones
  loop_plan<R> const plan = make_plan<R>(x.shape(), row_strides, ev);
  softmax_plan_rows<Log>(policy, plan, ev, dst.data());
}

// Softmax along another dimension: three whole-tensor passes (max, sum of exp, write), each fused
// with the producer.
template <bool Log, class Policy, class T, int R, class X>
void softmax_passes(Policy const& policy, tensor_view<T, R> const& dst, X const& x, int dim) {
  extents<R> kept = x.shape();
  kept[dim] = 1;
  std::array<int, 1> const axis{dim};
  tensor<typename X::value_type, R> m(kept, uninitialized);
  fold<ops::amax_red>(policy, m.view(), x, axis, std::true_type{});
  auto const shifted = make_map(ops::sub_op{}, x, std::as_const(m));
  tensor<T, R> s(kept, uninitialized);
  fold<ops::sum_red>(policy, s.view(), make_map(ops::exp_op{}, shifted), axis, std::true_type{});
  if constexpr (Log)
    assign(policy, dst, make_map(ops::sub_op{}, shifted, make_map(ops::log_op{}, std::as_const(s))));
  else
    assign(policy, dst, make_map(ops::div_op{}, make_map(ops::exp_op{}, shifted), std::as_const(s)));
}

template <class Policy, class T, int R, class Arg, bool Log>
void materialize_softmax(Policy const& policy, tensor_view<T, R> const& dst, softmax_node<Arg, Log> const& node) {
  auto const x = lower(policy, node.arg());
  if constexpr (std::is_same_v<typename decltype(x)::value_type, T>)
    if (node.dim() == R - 1 && x.shape()[R - 1] > 1) return softmax_rows<Log>(policy, dst, x);
  softmax_passes<Log>(policy, dst, x, node.dim());
}

template <class Policy, class T, int R, class Node>
void materialize(Policy const& policy, tensor_view<T, R> const& dst, Node const& node) {
  if constexpr (requires { node.materialize(policy, dst); })  // a boundary that evaluates itself
    node.materialize(policy, dst);
  else if constexpr (requires { node.reduced_axes(); })
    materialize_reduction(policy, dst, node);
  else
    materialize_softmax(policy, dst, node);
}

}  // namespace kiln::detail

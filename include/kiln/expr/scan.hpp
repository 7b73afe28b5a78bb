// kiln/expr/scan.hpp: kiln::linear_recurrence, a first-order linear recurrence along one
// dimension (an AR(1) filter): y[0] = b[0], y[t] = a y[t-1] + b[t]. A fusion boundary like
// softmax: every output depends on all earlier ones along the dimension, so no elementwise loop
// can produce it. The node evaluates b into its destination (one fused loop) and then runs the
// recurrence over it in place; inside a larger expression it is materialised once.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/eval/parallel.hpp>
#include <kiln/expr/map.hpp>
#include <kiln/expr/reduce.hpp>

#include <array>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

// y = linear_recurrence(b, a, dim): B is b's node, A the coefficient's (rank 0). Its shape is b's.
template <class B, class A>
class linear_recurrence_node {
  static_assert(B::rank >= 1, "kiln: linear_recurrence runs along a dimension: b must have rank 1 or more");
  static_assert(A::rank == 0,
                "kiln: linear_recurrence's coefficient a must be a scalar: a number, or a rank-0 tensor, var or "
                "expression");

 public:
  using arg_type = B;
  using value_type = floating_t<promote_t<typename B::value_type, typename A::value_type>>;
  static constexpr int rank = B::rank;
  static constexpr bool is_kiln_expression = true;
  static constexpr bool is_materialized = true;
  static constexpr std::string_view name = "linear_recurrence";

  linear_recurrence_node(B b, A a, int dim)
      : b_(std::move(b)), a_(std::move(a)), dim_(detail::normalize_axes<1>({dim}, rank, name)[0]) {}

  B const& arg() const noexcept { return b_; }
  A const& coefficient() const noexcept { return a_; }
  int dim() const noexcept { return dim_; }
  extents<rank> const& shape() const noexcept { return b_.shape(); }

  // The coefficient's value (an expression of vars or tensors is evaluated under `policy`).
  template <class Policy>
  value_type coefficient_value(Policy const& policy) const {
    if constexpr (requires { a_.value(); }) {
      return static_cast<value_type>(a_.value());
    } else {
      value_type a{};
      detail::assign(policy, tensor_view<value_type, 0>(&a, extents<0>{}), a_);
      return a;
    }
  }

  // A contiguous tensor of this shape seen as [outer, n, inner], n along dim.
  struct layout {
    index_t outer = 1, n = 0, inner = 1;
  };
  layout around_dim() const noexcept {
    layout l{1, shape()[dim_], 1};
    for (int d = 0; d < dim_; ++d) l.outer *= shape()[d];
    for (int d = dim_ + 1; d < rank; ++d) l.inner *= shape()[d];
    return l;
  }

  // The recurrences a thread runs: blocks [first_outer, first_outer + outers) of the outer
  // dimensions, columns [first_inner, first_inner + inners) of the inner ones.
  struct part {
    index_t first_outer, outers, first_inner, inners;
  };

  // Runs f(part) over parts covering every recurrence: one part, or under kiln::par (when the
  // tensor is worth several threads) one per thread: whole outer blocks when there are at least
  // four per thread or the columns are too few to cut on cache lines, else columns. The
  // recurrences are independent, so each element is computed as on one thread; a single sequence
  // (rank 1, or every other extent 1) stays on one thread. f returns its part's share of a total
  // (the adjoint's dL/da); the shares are added in part order, so the total is repeatable for a
  // given thread count.
  template <class Policy, class F>
  static double sum_over_parts(Policy const&, layout l, F const& f) {
    if constexpr (std::is_base_of_v<par_policy, Policy>) {
      int threads = detail::par_threads(l.outer * l.n * l.inner);
      index_t const line = detail::line_elements(sizeof(value_type));
      bool const by_outer = l.outer >= 4 * index_t(threads) || l.inner / line < threads;
      threads = static_cast<int>(std::min<index_t>(threads, by_outer ? l.outer : l.inner / line));
      if (threads > 1) {
        std::vector<double> shares(static_cast<std::size_t>(threads), 0.0);
        detail::par_run(threads, [&](int k, int parts) {
          auto const [b, e] = detail::piece(by_outer ? l.outer : l.inner, k, parts, by_outer ? 1 : line);
          shares[static_cast<std::size_t>(k)] = f(by_outer ? part{b, e - b, 0, l.inner} : part{0, l.outer, b, e - b});
        });
        double total = 0;
        for (double share : shares) total += share;  // parts OpenMP did not start left 0
        return total;
      }
    }
    return f(part{0, l.outer, 0, l.inner});
  }

  // Along the last dimension (inner 1) each sequence is one dependency chain: its running value is
  // kept in a register (through memory, every step waited for a store to be forwarded: 4.5 ns per
  // element), and four sequences run interleaved, so their chains overlap. Calls f<4>(o) for each
  // group of four sequences from o on, then f<1>(o) for the rest; n >= 1.
  template <class F>
  static void along_last(part p, F const& f) {
    index_t o = p.first_outer;
    index_t const end = p.first_outer + p.outers;
    for (; o + 4 <= end; o += 4) f.template operator()<4>(o);
    for (; o < end; ++o) f.template operator()<1>(o);
  }

  // Forward, in place: y holds b (contiguous) and becomes the recurrence. The inner loop runs
  // across the independent recurrences next to each other in memory, so it vectorises whenever
  // dim is not the last dimension.
  template <class Policy>
  static void recur(Policy const& policy, value_type a, value_type* y, layout l) {
    if (l.n == 0) return;
    sum_over_parts(policy, l, [&](part p) {
      if (l.inner == 1) {  // along the last dimension: see along_last
        along_last(p, [&]<int G>(index_t o) {
          std::array<value_type*, G> s;
          std::array<value_type, G> carry;
          for (int k = 0; k < G; ++k) s[k] = y + (o + k) * l.n, carry[k] = s[k][0];
          for (index_t t = 1; t < l.n; ++t)
            for (int k = 0; k < G; ++k) s[k][t] = carry[k] = a * carry[k] + s[k][t];
        });
        return 0.0;  // (no total)
      }
      for (index_t o = p.first_outer; o < p.first_outer + p.outers; ++o) {
        value_type* const block = y + o * l.n * l.inner + p.first_inner;
        for (index_t t = 1; t < l.n; ++t) {
          value_type* const row = block + t * l.inner;
          value_type const* const prev = row - l.inner;
          for (index_t i = 0; i < p.inners; ++i) row[i] = a * prev[i] + row[i];
        }
      }
      return 0.0;
    });
  }

  // Backward, from y and its adjoint g (contiguous): writes gb = dL/db, the recurrence run
  // backwards (gb[n-1] = g[n-1], gb[t] = g[t] + a gb[t+1]), and returns dL/da = the sum over every
  // recurrence of gb[t] y[t-1] for t >= 1, accumulated in double (under kiln::par, per part, the
  // parts' sums added in part order: repeatable for a given thread count).
  template <class Policy>
  static value_type adjoint(Policy const& policy, value_type a, value_type const* y, value_type const* g,
                            value_type* gb, layout l) {
    if (l.n == 0) return 0;
    return static_cast<value_type>(sum_over_parts(policy, l, [&](part p) {
      double sum = 0;
      if (l.inner == 1) {  // along the last dimension, as in recur
        along_last(p, [&]<int G>(index_t o) {
          index_t const last = l.n - 1;
          std::array<value_type, G> next;
          std::array<double, G> sums{};
          for (int j = 0; j < G; ++j) next[j] = gb[(o + j) * l.n + last] = g[(o + j) * l.n + last];
          for (index_t t = last; t >= 1; --t)
            for (int j = 0; j < G; ++j) {
              index_t const at = (o + j) * l.n + t - 1;
              sums[j] += static_cast<double>(next[j]) * static_cast<double>(y[at]);
              gb[at] = next[j] = g[at] + a * next[j];
            }
          for (int j = 0; j < G; ++j) sum += sums[j];
        });
        return sum;
      }
      for (index_t o = p.first_outer; o < p.first_outer + p.outers; ++o) {
        index_t const at = o * l.n * l.inner + p.first_inner;
        value_type const* const yo = y + at;
        value_type const* const go = g + at;
        value_type* const gbo = gb + at;
        for (index_t i = 0, last = (l.n - 1) * l.inner; i < p.inners; ++i) gbo[last + i] = go[last + i];
        for (index_t t = l.n - 1; t >= 1; --t) {
          value_type* const row = gbo + (t - 1) * l.inner;
          value_type const* const next = row + l.inner;
          value_type const* const g_row = go + (t - 1) * l.inner;
          value_type const* const y_prev = yo + (t - 1) * l.inner;
          for (index_t i = 0; i < p.inners; ++i) {
            sum += static_cast<double>(next[i]) * static_cast<double>(y_prev[i]);
            row[i] = g_row[i] + a * next[i];
          }
        }
      }
      return sum;
    }));
  }

  // Evaluation (detail::materialize calls it for every boundary that has it): the coefficient
  // first (it may read the destination's memory), then b into dst, then the recurrence in place.
  // dst is contiguous and of this shape (as for every boundary).
  template <class Policy>
  void materialize(Policy const& policy, tensor_view<value_type, rank> const& dst) const {
    value_type const a = coefficient_value(policy);
    detail::assign(policy, dst, b_);
    recur(policy, a, dst.data(), around_dim());
  }

 private:
  B b_;
  A a_;
  int dim_;
};

// y = kiln::linear_recurrence(b, a, dim): y[0] = b[0], y[t] = a * y[t-1] + b[t] along dim (negative
// counts from the end), independently for every other index. b is any expression; a is a scalar:
// a number, or a rank-0 tensor, var or expression. The result has b's shape and the floating type
// of a * b. Differentiable in b and a (autodiff/record.hpp sends the adjoints of `adjoint`).
template <expression X, operand A>
auto linear_recurrence(X&& b, A&& a, int dim) {
  using strong = typename detail::strong_promote<X, A>::type;
  using compute = floating_t<promote_t<strong, typename detail::operand_type<strong, A>::type>>;
  using BN = decltype(detail::as_node<strong>(std::forward<X>(b)));
  using AN = decltype(detail::as_node<strong, void, compute>(std::forward<A>(a)));
  return linear_recurrence_node<BN, AN>(detail::as_node<strong>(std::forward<X>(b)),
                                        detail::as_node<strong, void, compute>(std::forward<A>(a)), dim);
}

}  // namespace kiln

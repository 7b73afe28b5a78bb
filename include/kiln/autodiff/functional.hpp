// kiln/autodiff/functional.hpp: the functional API. f runs on fresh vars over the inputs' memory,
// on a tape of its own, and the gradients come back as new tensors; the inputs and their own
// gradients are left alone.
//   auto [L, g] = kiln::value_and_grad(f, x, y);   // g: std::tuple of tensors shaped like x, y
//   auto df = kiln::grad(f);                        // df(x, y) -> the same gradients
//   auto [out, g] = kiln::vjp(f, cotangent, x, y);  // any output shape
//   bool ok = kiln::gradcheck(f, x, y);             // central differences in double
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/autodiff/record.hpp>
#include <kiln/core/factories.hpp>

#include <cmath>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

namespace kiln {
namespace detail {

// The node of a fresh var over an input's memory (a var's value, a tensor or a view), with an
// adjoint of its own; a non-contiguous view is copied first.
template <class X>
auto input_node(X const& x) {
  if constexpr (requires { X::is_kiln_var; }) {
    return var_node<typename X::value_type, X::rank>(x.value());
  } else {
    auto const v = as_view(x);
    using T = std::remove_const_t<typename decltype(v)::value_type>;
    constexpr int R = decltype(v)::rank;
    static_assert(std::is_floating_point_v<T>, "kiln: gradients are taken with respect to float or double tensors");
    if (!v.is_contiguous()) return var_node<T, R>(tensor<T, R>(v));
    // The var only reads this memory; the const is restored by the var's read-only leaves.
    return var_node<T, R>(tensor_view<T, R>(const_cast<T*>(v.data()), v.shape()));
  }
}

// f's input vars for one call of the functional API: their nodes live here, built in place, and
// the vars handed to f refer to them (f's vars must not outlive the call, as JAX's tracers).
template <class T, int R>
var<T, R> var_over(var_node<T, R>& node) {
  return var<T, R>::over(node);
}

template <class... X>
struct input_vars {
  indexed_pack<std::index_sequence_for<X...>, decltype(input_node(std::declval<X const&>()))...> nodes;

  auto vars() {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple{var_over(slot<I>(nodes))...};
    }(std::index_sequence_for<X...>{});
  }
};

template <class T, int R>
tensor<T, R> take_grad(var<T, R> const& v) {
  auto& node = *v.node();
  node.grad();  // zeros where no gradient arrived
  return node.release_adjoint();
}

template <class O>
inline constexpr bool is_var = requires { O::is_kiln_var; };

template <class O>
inline constexpr bool is_single_pass_loss = false;
template <class Op, class Arg, int N, bool Keep>
inline constexpr bool is_single_pass_loss<reduction<Op, Arg, N, Keep>> =
    reduction<Op, Arg, N, Keep>::rank == 0 && differentiable<Arg> &&
    (std::is_same_v<Op, ops::sum_red> || std::is_same_v<Op, ops::mean_red>);

// The value of f's scalar output, after back-propagating 1 from it into the tape's vars. A loss
// that is one full sum or mean of an elementwise tree runs forward and backward as one loop.
template <class Policy, class O>
auto evaluate_and_backward(Policy const& policy, O const& out, tape& t) {
  using T = typename O::value_type;
  if constexpr (is_var<O>) {
    T const value = out.item();
    if (out.requires_grad()) out.backward();
    return value;
  } else if constexpr (is_single_pass_loss<O>) {
    auto const producer = lower_recording(policy, out.arg());
    T value;
    if (!any_requires_grad(producer)) {
      value = T(with_arg(out, producer));  // the boundaries inside are evaluated already
    } else {
      index_t const n = out.reduced_size();
      if constexpr (std::is_same_v<typename O::op_type, ops::mean_red>)
        value = backward_pass<true>(policy, producer, constant_upstream<T>{T(1) / T(n)}) / T(n);
      else
        value = backward_pass<true>(policy, producer, unit_upstream{});
    }
    t.backward_and_clear();
    return value;
  } else if constexpr (differentiable<decltype(as_node<void>(out))>) {
    return evaluate_and_backward(policy, var<T, 0>(out), t);
  } else {  // f does not depend on its inputs: the gradients are zeros
    tensor<T, 0> value(extents<0>{}, uninitialized);
    assign(policy, value.view(), out);
    return value.item();
  }
}

template <class F, class Inputs>
decltype(auto) call(F& f, Inputs const& inputs) {
  return std::apply([&](auto const&... v) -> decltype(auto) { return f(v...); }, inputs);
}

template <class Grads>
auto unwrap_single(Grads&& grads) {
  if constexpr (std::tuple_size_v<std::remove_cvref_t<Grads>> == 1) return std::move(std::get<0>(grads));
  else return std::move(grads);
}

}  // namespace detail

// Where value_and_grad writes the gradients, instead of returning new tensors:
//   float L = kiln::value_and_grad(f, kiln::into(gx, gy), x, y);
// gx and gy are tensors of the inputs' element types and ranks; ones of the inputs' shapes are
// written in place (no allocation in a loop that calls this again), others are resized.
template <class... G>
struct gradients_into {
  std::tuple<G&...> targets;
};
template <class... G>
gradients_into<G...> into(G&... targets) {
  return {std::tie(targets...)};
}

namespace detail {

// Runs f on fresh vars over the inputs and back-propagates its scalar result; returns the value
// and what finish(input vars) makes of their adjoints, the gradients.
template <class P, class F, class Lend, class Finish, class... X>
auto run_value_and_grad(P const& policy, F& f, Lend lend, Finish finish, X const&... x) {
  static_assert(sizeof...(X) > 0, "kiln::value_and_grad: give f's inputs after f");
  tape_scope scope;
  input_vars<X...> scoped{{{input_node(x)}...}};
  auto const inputs = scoped.vars();
  lend(inputs);
  auto const out = call(f, inputs);
  using O = std::remove_cvref_t<decltype(out)>;
  static_assert(expression<O>, "kiln::value_and_grad: f must return a kiln expression or var");
  static_assert(O::rank == 0,
                "kiln::value_and_grad: f must return a scalar (rank 0), such as a sum or mean; use kiln::vjp with a "
                "cotangent for other outputs");
  auto const value = evaluate_and_backward(policy, out, scope.get());
  return std::pair{value, finish(inputs)};
}

}  // namespace detail

// (f(x...), gradient of f with respect to each x) for f returning a scalar: a rank-0 expression
// or var. One input gives one tensor, several a std::tuple of tensors. Inputs are vars, tensors
// or views of float or double.
template <policy P, class F, class... X>
auto value_and_grad(P const& policy, F&& f, X const&... x) {
  auto take_all = [](auto const& inputs) {
    return detail::unwrap_single(std::apply([](auto const&... v) { return std::tuple{detail::take_grad(v)...}; }, inputs));
  };
  return detail::run_value_and_grad(policy, f, [](auto const&) {}, take_all, x...);
}
template <class F, class... X>
  requires(!policy<std::remove_cvref_t<F>>)
auto value_and_grad(F&& f, X const&... x) {
  return value_and_grad(default_policy{}, std::forward<F>(f), x...);
}
// The same, writing the gradients into kiln::into(g...); returns f's value.
template <policy P, class F, class... G, class... X>
auto value_and_grad(P const& policy, F&& f, gradients_into<G...> out, X const&... x) {
  static_assert(sizeof...(G) == sizeof...(X), "kiln::into: give one gradient tensor per input");
  auto lend = [&](auto const& inputs) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (std::get<I>(inputs).node()->lend_adjoint(std::move(std::get<I>(out.targets))), ...);
    }(std::index_sequence_for<X...>{});
  };
  auto give_back = [&](auto const& inputs) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((std::get<I>(out.targets) = detail::take_grad(std::get<I>(inputs))), ...);
    }(std::index_sequence_for<X...>{});
    return 0;
  };
  return detail::run_value_and_grad(policy, f, lend, give_back, x...).first;
}
template <class F, class... G, class... X>
  requires(!policy<std::remove_cvref_t<F>>)
auto value_and_grad(F&& f, gradients_into<G...> out, X const&... x) {
  return value_and_grad(default_policy{}, std::forward<F>(f), out, x...);
}

// f's gradient as a callable: kiln::grad(f)(x, y) is value_and_grad(f, x, y).second.
template <class F>
auto grad(F f) {
  return [f = std::move(f)](auto const&... x) { return value_and_grad(f, x...).second; };
}

// (f(x...), cotangent^T times the Jacobian of f with respect to each x): the vector-Jacobian
// product, for f of any output shape; the cotangent has f's output shape.
template <class F, class C, class... X>
auto vjp(F&& f, C const& cotangent, X const&... x) {
  detail::tape_scope scope;
  detail::input_vars<X...> scoped{{{detail::input_node(x)}...}};
  auto const inputs = scoped.vars();
  auto const out = detail::call(f, inputs);
  using O = std::remove_cvref_t<decltype(out)>;
  static_assert(expression<O>, "kiln::vjp: f must return a kiln expression or var");
  var<typename O::value_type, O::rank> const y = [&] {
    if constexpr (detail::is_var<O>) return out;
    else return var<typename O::value_type, O::rank>(out);
  }();
  if (y.requires_grad()) y.backward(cotangent);
  else if (as_view(cotangent).shape() != y.shape())
    throw shape_error("vjp: cotangent of shape " + shape_string(as_view(cotangent).shape()) + " for an output of shape " +
                      shape_string(y.shape()));
  auto grads = std::apply([](auto const&... v) { return std::tuple{detail::take_grad(v)...}; }, inputs);
  return std::pair{detach(y), detail::unwrap_single(std::move(grads))};
}

// Tolerances of kiln::gradcheck, as torch.autograd.gradcheck's: an analytical gradient a passes
// against the numerical n when |a - n| <= atol + rtol |n|.
struct gradcheck_options {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

// The verdict: true when every gradient element matches; otherwise `message` names the first
// input and element that does not, with both values.
struct gradcheck_result {
  bool ok = true;
  std::string message;
  operator bool() const noexcept { return ok; }
  friend std::ostream& operator<<(std::ostream& os, gradcheck_result const& r) {
    return os << (r.ok ? std::string("gradcheck passed") : r.message);
  }
};

namespace detail {

// Flat index -> "[i, j, ...]" for messages.
template <std::size_t R>
std::string index_string(std::array<index_t, R> const& shape, index_t flat) {
  std::array<index_t, R> idx{};
  for (int d = int(R) - 1; d >= 0; --d) {
    if (shape[d] > 0) {
      idx[d] = flat % shape[d];
      flat /= shape[d];
    }
  }
  return shape_string(idx);
}

template <class F, class... X>
gradcheck_result gradcheck_double(F& f, gradcheck_options const& o, X&... x) {
  // f's output, forward only (through the same statement code the gradient runs).
  auto project = [&](auto const&... in) {
    no_grad_guard no_grad;
    input_vars<std::remove_cvref_t<decltype(in)>...> scoped{{{input_node(in)}...}};
    auto const inputs = scoped.vars();
    auto const out = call(f, inputs);
    using O = std::remove_cvref_t<decltype(out)>;
    if constexpr (is_var<O>) return detach(out);
    else return detach(var<double, O::rank>(out));
  };
  auto const y0 = project(x...);
  using Y = std::remove_const_t<decltype(y0)>;
  // Both sides differentiate y . cotangent: 1 for a scalar (through value_and_grad, as a loss),
  // fixed random weights otherwise (through vjp).
  Y const cotangent = Y::rank == 0 ? Y(ones<double>(y0.shape())) : Y(rand<double>(y0.shape(), 12345) + 0.5);
  auto const dot = [&](auto const& y) {
    double s = 0;
    for (index_t i = 0; i < y.size(); ++i) s += y.data()[i] * cotangent.data()[i];
    return s;
  };
  auto const analytical = std::tuple_cat([&] {
    auto g = [&] {
      if constexpr (Y::rank == 0) return value_and_grad(f, x...).second;
      else return vjp(f, cotangent, x...).second;
    }();
    if constexpr (sizeof...(X) == 1) return std::tuple{std::move(g)};
    else return g;
  }());
  gradcheck_result result;
  std::size_t input = 0;
  auto check = [&](auto& xk, auto const& ak) {
    for (index_t i = 0; i < xk.size() && result.ok; ++i) {
      double& e = xk.data()[i];
      double const saved = e;
      e = saved + o.eps;
      double const up = dot(project(x...));
      e = saved - o.eps;
      double const down = dot(project(x...));
      e = saved;
      double const numerical = (up - down) / (2 * o.eps);
      double const a = ak.data()[i];
      bool const same_inf = std::isinf(a) && a == numerical;
      if (!(std::abs(a - numerical) <= o.atol + o.rtol * std::abs(numerical)) && !same_inf) {
        std::ostringstream m;
        m.precision(10);
        m << "gradcheck: input " << input << ", element " << index_string(xk.shape(), i) << ": analytical " << a
          << " vs numerical " << numerical << " (eps " << o.eps << ", atol " << o.atol << ", rtol " << o.rtol << ")";
        result = {false, m.str()};
      }
    }
    ++input;
  };
  std::apply([&](auto const&... a) { (check(x, a), ...); }, analytical);
  return result;
}

template <class X>
auto as_double_tensor(X const& x) {
  if constexpr (requires { X::is_kiln_var; }) return tensor<double, X::rank>(x.value());
  else return tensor<double, decltype(as_view(x))::rank>(as_view(x));
}

}  // namespace detail

// Checks f's gradients with respect to every input against central differences, in double (the
// inputs are converted; f must be generic over the element type, e.g. a lambda taking auto).
// Outputs of any shape are checked through a fixed random cotangent. The last argument may be a
// kiln::gradcheck_options.
template <class F, class... Args>
gradcheck_result gradcheck(F&& f, Args const&... args) {
  constexpr bool has_options = (std::is_same_v<Args, gradcheck_options> || ...);
  auto const all = std::forward_as_tuple(args...);
  constexpr std::size_t inputs = sizeof...(Args) - (has_options ? 1 : 0);
  static_assert(inputs > 0, "kiln::gradcheck: give f's inputs after f");
  gradcheck_options options;
  if constexpr (has_options) {
    static_assert(std::is_same_v<std::tuple_element_t<sizeof...(Args) - 1, std::tuple<Args...>>, gradcheck_options>,
                  "kiln::gradcheck: the options go last");
    options = std::get<sizeof...(Args) - 1>(all);
  }
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    auto doubles = std::tuple{detail::as_double_tensor(std::get<I>(all))...};
    return std::apply([&](auto&... d) { return detail::gradcheck_double(f, options, d...); }, doubles);
  }(std::make_index_sequence<inputs>{});
}

}  // namespace kiln

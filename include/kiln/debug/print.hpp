// kiln/debug/print.hpp: an expression tree as text. to_string gives a numbered listing like a
// captured PyTorch graph; to_dot the same graph for Graphviz. The same tensor read twice is one
// input.
// IWYU pragma: private, include <kiln/kiln.hpp>
#pragma once

#include <kiln/expr/reduce.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace kiln {
namespace detail {

// One numbered line per node; leaves first time they are seen.
struct graph_listing {
  struct entry {
    std::string label;            // "tensor", "scalar 0.5", "tanh"
    std::string type_and_shape;   // "float[1024, 256]"
    std::vector<int> inputs;
  };
  std::vector<entry> entries;
  std::vector<int> boundaries;  // ids of reductions/softmax nodes
  std::vector<std::pair<void const*, std::string>> seen_leaves;  // (data, shape/strides key) -> id

  template <class T, int R>
  int add(leaf<T, R> const& node) {
    auto const& v = node.view();
    std::string key = shape_string(v.shape()) + shape_string(v.strides());
    for (std::size_t k = 0; k < seen_leaves.size(); ++k)
      if (seen_leaves[k].first == v.data() && seen_leaves[k].second == key) return find_leaf(k);
    seen_leaves.emplace_back(v.data(), key);
    entries.push_back({v.is_contiguous() ? "tensor" : "view", describe<T>(v.shape()), {}});
    leaf_ids.push_back(static_cast<int>(entries.size()) - 1);
    return leaf_ids.back();
  }
  template <class T>
  int add(constant<T> const& node) {
    std::ostringstream s;
    s << "scalar " << +node.value();
    entries.push_back({s.str(), describe<T>(extents<0>{}), {}});
    return static_cast<int>(entries.size()) - 1;
  }
  // A var reads like a tensor leaf; it is labelled as what it is.
  template <class V>
    requires requires(V const& v) { v.node(); }
  int add(V const& node) {
    int const id = add(static_cast<leaf<typename V::value_type, V::rank> const&>(node));
    entries[static_cast<std::size_t>(id)].label = "var";
    return id;
  }
  template <class Op, class... Args>
  int add(map<Op, Args...> const& node) {
    std::vector<int> inputs;
    detail::apply_pack([&](auto const&... a) { (inputs.push_back(add(a)), ...); }, node.args());
    entries.push_back({std::string(Op::name), describe<typename map<Op, Args...>::value_type>(node.shape()),
                       std::move(inputs)});
    return static_cast<int>(entries.size()) - 1;
  }

  // Reductions, softmax and linear_recurrence: a fusion boundary when something consumes them
  // (listed below). A recurrence's second input is its coefficient.
  template <class Node>
    requires requires(Node const& n) { n.arg(); }
  int add(Node const& node) {
    std::vector<int> inputs{add(node.arg())};
    if constexpr (requires { node.coefficient(); }) inputs.push_back(add(node.coefficient()));
    std::ostringstream label;
    if constexpr (requires { node.reduced_axes(); }) {
      label << Node::op_type::name << "[axes=";
      for (std::size_t k = 0; k < node.reduced_axes().size(); ++k) label << (k ? "," : "") << node.reduced_axes()[k];
      label << (Node::keeps_dims ? ", keepdim]" : "]");
    } else {
      label << Node::name << "[dim=" << node.dim() << "]";
    }
    entries.push_back({label.str(), describe<typename Node::value_type>(node.shape()), std::move(inputs)});
    boundaries.push_back(static_cast<int>(entries.size()) - 1);
    return boundaries.back();
  }

  template <class T, std::size_t R>
  static std::string describe(std::array<index_t, R> const& shape) {
    return std::string(type_name<T>) + shape_string(shape);
  }

 private:
  std::vector<int> leaf_ids;
  int find_leaf(std::size_t k) const { return leaf_ids[k]; }
};

template <expression E>
graph_listing list_graph(E const& e) {
  graph_listing g;
  if constexpr (requires { typename E::element_type; })
    g.add(leaf<typename E::value_type, E::rank>(tensor_view<typename E::value_type const, E::rank>(e)));
  else
    g.add(e);
  return g;
}

}  // namespace detail

// The expression as a numbered listing, one node per line, inputs before their users:
//   %0 = tensor : float[1024, 256]
//   %1 = tanh(%0) : float[1024, 256]
template <expression E>
std::string to_string(E const& e) {
  auto const g = detail::list_graph(e);
  std::ostringstream out;
  for (std::size_t i = 0; i < g.entries.size(); ++i) {
    auto const& n = g.entries[i];
    out << '%' << i << " = " << n.label;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) out << (k ? ", %" : "(%") << n.inputs[k];
    if (!n.inputs.empty()) out << ')';
    out << " : " << n.type_and_shape;
    bool const boundary = std::find(g.boundaries.begin(), g.boundaries.end(), int(i)) != g.boundaries.end();
    if (boundary && i + 1 != g.entries.size()) out << "  // materialized: fusion boundary";
    out << '\n';
  }
  return out.str();
}

// The expression as a Graphviz digraph (edges point from inputs to their users).
template <expression E>
std::string to_dot(E const& e) {
  auto const g = detail::list_graph(e);
  std::ostringstream out;
  out << "digraph kiln {\n  rankdir=BT;\n";
  for (std::size_t i = 0; i < g.entries.size(); ++i) {
    auto const& n = g.entries[i];
    out << "  n" << i << " [label=\"%" << i << ' ' << n.label << "\\n" << n.type_and_shape << '"'
        << (n.inputs.empty() ? ", shape=box" : "") << "];\n";
    for (int in : n.inputs) out << "  n" << in << " -> n" << i << ";\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace kiln

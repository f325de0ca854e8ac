// The graph picture: mg::autograd::to_dot(outputs) writes the recorded graph behind some tensors
// as Graphviz text (`dot -Tsvg graph.dot -o graph.svg`).
//
// One vertex per graph node reachable from the outputs' grad_fn: a box with the node's name(),
// the shapes and dtypes of its forward outputs ("-> f32[3]") and what it saved for backward
// ("saved: f32[3] (input)", a number by value, "freed" once backward released it); a leaf's
// grad accumulator is a light blue ellipse with the leaf's shape. Arrows follow next_functions()
// in the direction the values flowed in forward: from the node of an input to the node that
// consumed it (as torchviz draws them), one arrow per edge. The outputs are filled green and
// named "output i". The walk is iterative, so graphs of millions of nodes are fine (the text
// grows by about 80 bytes a node).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <metagrad/error.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/profiler_report.hpp>
#include <metagrad/runtime/saved.hpp>
#include <metagrad/tensor.hpp>

namespace mg {

namespace detail {
// Reads a saved_variable without unpacking it: no hook runs, no version check, nothing thrown.
struct graph_dot_access {
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  static std::string describe(const saved_variable& v) {
    using k = saved_variable::kind;
    if (v.freed_) return "freed";
    const auto meta = [](const tensor_impl& t) {
      return std::string(dtype_name(t.dtype())) + prof::shape_text(t.shape);
    };
    switch (v.kind_) {
      case k::empty:
        return "";
      case k::number: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6g", std::bit_cast<double>(v.word_));
        return std::string("number ") + buf + " (" + dtype_name(v.number_dtype_) + ")";
      }
      case k::packed:
        return "packed by a saved-tensor hook";
      default:
        break;
    }
    if (!v.payload_) return "freed";
    const char* what = v.kind_ == k::shape    ? " (shape only)"
                       : v.kind_ == k::leaf   ? " (leaf)"
                       : v.kind_ == k::output ? " (output)"
                                              : " (input)";
    if (v.kind_ == k::leaf) return meta(*static_cast<const tensor_impl*>(v.payload_.get())) + what;
    if (v.bare_)  // a 0-d value: its storage
      return std::string(dtype_name(static_cast<const storage*>(v.payload_.get())->dtype)) +
             prof::shape_text(shape_t{}) + what;
    const auto& w = *static_cast<const saved_variable::view*>(v.payload_.get());
    return std::string(dtype_name(w.store->dtype)) +
           prof::shape_text(shape_t(w.shape().begin(), w.shape().end())) + what;
  }
};

// Graphviz's quoted strings: quotes and backslashes escaped; lines joined with "\n".
template <int = 0>
std::string dot_quote(const std::vector<std::string>& lines) {
  std::string r = "\"";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) r += "\\n";
    for (const char c : lines[i]) {
      if (c == '"' || c == '\\') r += '\\';
      r += c;
    }
  }
  return r + "\"";
}
}  // namespace detail

namespace autograd {

/// Options of `to_dot`: `mg::autograd::to_dot({loss}, {.show_saved = false})`.
struct dot_options {
  /// List what each node saved for backward (shape and dtype, read without unpacking).
  bool show_saved = true;
};

/// Graphviz `digraph` text of the recorded graph behind `outputs` (see the top of
/// <metagrad/graph_dot.hpp> for what is drawn). An undefined output throws mg::error; an output
/// that does not require grad is drawn alone:
/// ```cpp
/// auto y = (x * w).sum();
/// std::ofstream("graph.dot") << mg::autograd::to_dot({y});   // dot -Tsvg graph.dot
/// ```
template <int I = 0>  // Note [Lazy members] in runtime/lazy.hpp
std::string to_dot(const tensor_list& outputs, const dot_options& options = {}) {
  MG_DETAIL_LAZY_ENGINE(I);
  using detail::graph_node;
  std::unordered_map<const graph_node*, std::size_t> id;  // a node's position in order
  std::vector<graph_node*> order;
  std::unordered_map<const graph_node*, std::vector<std::size_t>> output_of;
  std::string extra;  // outputs without a node
  const auto shape_of = [](const tensor& t) {
    return std::string(detail::dtype_name(t.dtype())) + detail::prof::shape_text(t.shape());
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const tensor& t = outputs[i];
    if (!t.defined())
      detail::fail("to_dot: output ", i,
                   " is an undefined tensor (default-constructed, or an unused gradient); pass "
                   "the tensors whose graph to draw");
    std::shared_ptr<graph_node> n = t.grad_fn();
    if (!n && t.requires_grad()) n = t.impl()->grad_accumulator.lock();
    if (!n) {
      const std::string why = t.requires_grad() ? "leaf" : "does not require grad";
      extra += "  o" + std::to_string(i) +
               " [label=" + detail::dot_quote({"output " + std::to_string(i), shape_of(t), why}) +
               ", shape=ellipse, style=filled, fillcolor=darkolivegreen1, penwidth=2];\n";
      continue;
    }
    output_of[n.get()].push_back(i);
    if (id.try_emplace(n.get(), order.size()).second) order.push_back(n.get());
  }
  // Breadth first from the outputs, without recursion: a node is numbered when first seen.
  for (std::size_t k = 0; k < order.size(); ++k)
    for (const auto& e : order[k]->next_edges())
      if (e && id.try_emplace(e.function.get(), order.size()).second)
        order.push_back(e.function.get());
  std::string out = "digraph autograd {\n  node [shape=box, fontname=\"monospace\"];\n";
  std::vector<std::string> lines;
  for (graph_node* n : order) {
    lines.clear();
    const auto outs = output_of.find(n);
    if (outs != output_of.end())
      for (const std::size_t i : outs->second) lines.push_back("output " + std::to_string(i));
    const bool leaf = n->is_accumulator();
    lines.emplace_back(leaf ? "leaf" : n->name());
    std::string shapes;
    for (const auto& m : n->outputs()) {
      shapes += shapes.empty() ? "" : ", ";
      shapes += std::string(detail::dtype_name(m.dtype)) + detail::prof::shape_text(m.shape());
      if (m.device != device::cpu) shapes += std::string(" ") + detail::device_name(m.device);
    }
    lines.push_back(leaf ? shapes : "-> " + shapes);
    if (options.show_saved)
      for (const auto& s : n->saved())
        if (auto d = detail::graph_dot_access::describe(s); !d.empty())
          lines.push_back("saved: " + std::move(d));
    out += "  n" + std::to_string(id.at(n)) + " [label=" + detail::dot_quote(lines);
    if (leaf) out += ", shape=ellipse";
    if (outs != output_of.end())
      out += ", style=filled, fillcolor=darkolivegreen1, penwidth=2";
    else if (leaf)
      out += ", style=filled, fillcolor=lightblue";
    out += "];\n";
  }
  for (graph_node* n : order)
    for (const auto& e : n->next_edges())
      if (e)
        out += "  n" + std::to_string(id.at(e.function.get())) + " -> n" +
               std::to_string(id.at(n)) + ";\n";
  return out + extra + "}\n";
}

}  // namespace autograd
}  // namespace mg

// The backward engine (torch's autograd engine): a topological traversal of the recorded graph
// with an explicit worklist, never recursion (a chain of a million nodes runs on the default
// stack).
//
// Note [Dependencies]: a first pass from the roots counts, for every reachable node, the edges
// that point to it. A node runs once all of them have delivered their gradient (the sum of which
// is its input), so every node runs exactly once, after all its consumers.
//
// Note [Targets]: with `inputs` (mg::autograd::grad, or backward's .inputs) only the nodes from
// which a target is reachable run; a second pass in reverse topological order marks them. The
// gradient arriving at a target's node is captured (grad) or accumulated into its .grad
// (backward); the grad accumulators of other leaves do not run.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <utility>
#include <vector>

#include <metagrad/detail/graph.hpp>
#include <metagrad/detail/nodes.hpp>
#include <metagrad/detail/runtime_ops.hpp>
#include <metagrad/detail/tensor_kernels.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg::detail {

struct backward_call {
  const char* api;  // "backward" or "autograd::grad", for messages
  bool keep_graph = false;
  bool create_graph = false;
  bool accumulate = true;  // into .grad (backward) or captured and returned (grad)
  bool allow_unused = false;
};

struct node_state {
  std::size_t deps = 0;
  bool need = true;  // a target is reachable from here (or is this node)
  bool exec = true;  // this node's apply runs
  bool target = false;
  impl_ptr buffer;
};

inline void add_to_buffer(impl_ptr& buffer, impl_ptr g) {
  if (!g) return;
  buffer = buffer ? (tensor(buffer) + tensor(g)).impl() : std::move(g);
}

inline impl_ptr root_gradient(const tensor& out, const tensor& grad, const char* api,
                              std::size_t i) {
  if (!grad.defined()) {
    if (out.numel() != 1)
      fail(api, ": grad can be implicitly created only for scalar outputs; got shape ",
           shape_string(out.shape()), "; pass a gradient tensor of that shape");
    return fill_kernel(out.shape(), 1.0, out.dtype(), out.device());
  }
  if (grad.shape() != out.shape())
    fail(api, ": the gradient for output ", i, " has shape ", shape_string(grad.shape()),
         " but the output has shape ", shape_string(out.shape()),
         "; pass a gradient of the output's shape");
  if (grad.device() != out.device())
    fail(api, ": the gradient for output ", i, " is on device ", device_name(grad.device()),
         " but the output is on device ", device_name(out.device()),
         "; move it with .to(mg::device::", device_name(out.device()), ")");
  return grad.to(out.dtype()).impl();
}

// Runs backward from outputs; returns one gradient per input when !accumulate.
inline std::vector<impl_ptr> run_backward(const tensor_list& outputs, const tensor_list& grads,
                                          const tensor_list& inputs, const backward_call& c) {
  if (!grads.empty() && grads.size() != outputs.size())
    fail(c.api, ": got ", grads.size(), " gradients for ", outputs.size(),
         " outputs; pass one gradient per output (or none for scalar outputs)");
  std::unordered_map<graph_node*, node_state> graph;
  std::vector<std::pair<std::shared_ptr<graph_node>, impl_ptr>> roots;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const tensor& out = outputs[i];
    if (!out.requires_grad())
      fail(c.api, ": output ", i, " (shape ", shape_string(out.shape()),
           ") does not require grad and has no grad_fn; create the leaves with "
           ".requires_grad = true (or call requires_grad_()) and do not compute under "
           "no_grad_guard");
    impl_ptr g;
    {
      grad_mode_guard mode(c.create_graph);
      g = root_gradient(out, i < grads.size() ? grads[i] : tensor{}, c.api, i);
    }
    roots.emplace_back(gradient_edge(out.impl()), std::move(g));
  }
  // The target nodes of the inputs (Note [Targets]).
  std::vector<std::shared_ptr<graph_node>> input_nodes;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad())
      fail(c.api, ": input ", i,
           " does not require grad; every input must be a tensor that "
           "requires grad (a leaf created with .requires_grad = true, or computed from one)");
    input_nodes.push_back(gradient_edge(inputs[i].impl()));
  }
  // Note [Dependencies]
  std::vector<graph_node*> stack;
  for (auto& [n, g] : roots)
    if (graph.try_emplace(n.get()).second) stack.push_back(n.get());
  while (!stack.empty()) {
    graph_node* n = stack.back();
    stack.pop_back();
    for (auto& child : n->next) {
      if (!child) continue;
      auto [it, fresh] = graph.try_emplace(child.get());
      ++it->second.deps;
      if (fresh) stack.push_back(child.get());
    }
  }
  for (auto& n : input_nodes)  // an input the outputs do not reach stays unused
    if (auto it = graph.find(n.get()); it != graph.end()) it->second.target = true;
  if (!inputs.empty()) {
    // Kahn's order; then, in reverse, need = target || a child needs, and exec = a child needs
    // || a target accumulator when accumulating.
    std::vector<graph_node*> order;
    std::unordered_map<graph_node*, std::size_t> pending;
    for (auto& [n, s] : graph) {
      pending[n] = s.deps;
      if (s.deps == 0) order.push_back(n);
    }
    for (std::size_t k = 0; k < order.size(); ++k)
      for (auto& child : order[k]->next)
        if (child && --pending[child.get()] == 0) order.push_back(child.get());
    for (std::size_t k = order.size(); k-- > 0;) {
      graph_node* n = order[k];
      bool child_needs = false;
      for (auto& child : n->next) child_needs = child_needs || (child && graph[child.get()].need);
      node_state& s = graph[n];
      s.need = s.target || child_needs;
      s.exec = child_needs || (s.target && c.accumulate && n->leaf != nullptr);
    }
  }
  for (auto& [n, g] : roots) add_to_buffer(graph[n.get()].buffer, std::move(g));
  std::vector<graph_node*> ready;
  for (auto& [n, g] : roots)
    if (graph[n.get()].deps == 0) ready.push_back(n.get());
  std::vector<impl_ptr> captured(inputs.size());
  grad_mode_guard mode(c.create_graph);
  while (!ready.empty()) {
    graph_node* n = ready.back();
    ready.pop_back();
    node_state& s = graph[n];
    if (s.deps == static_cast<std::size_t>(-1)) continue;  // a root listed twice: already run
    s.deps = static_cast<std::size_t>(-1);
    impl_ptr grad = std::move(s.buffer);
    if (s.target)
      for (std::size_t i = 0; i < inputs.size(); ++i)
        if (input_nodes[i].get() == n) {
          if (c.accumulate && !n->leaf)
            accumulate_into(*inputs[i].impl(), grad);
          else if (!c.accumulate)
            captured[i] = grad;
        }
    for (auto& w : n->retained)
      if (auto t = w.lock()) accumulate_into(*t, grad);
    if (!s.exec) continue;
    std::vector<impl_ptr> out;
    if (grad) out = n->apply(grad);
    if (!c.keep_graph) n->release_saved();
    for (std::size_t k = 0; k < n->next.size(); ++k) {
      graph_node* child = n->next[k].get();
      if (!child) continue;
      node_state& cs = graph[child];
      if (k < out.size() && cs.need) add_to_buffer(cs.buffer, std::move(out[k]));
      if (--cs.deps == 0) ready.push_back(child);
    }
  }
  if (!c.accumulate)
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (!captured[i] && !c.allow_unused)
        fail(c.api, ": input ", i, " (shape ", shape_string(inputs[i].shape()),
             ") was not used in the graph of the outputs; pass .allow_unused = true to get an "
             "undefined tensor for it");
  return captured;
}

}  // namespace mg::detail

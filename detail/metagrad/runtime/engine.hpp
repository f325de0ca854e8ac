// The backward engine (torch's autograd engine): a graph task that finds which nodes run and in
// what order, and one call step per node where hooks, captures, anomaly checks and profiler
// ranges attach. It never recurses (a chain of a million nodes runs on the default stack); a hook
// or a custom backward may start another backward (re-entrant: a nested task on this thread).
//
// Note [Dependencies]: a first pass from the roots counts, for every reachable node, the edges
// that point to it. A node runs once all of them have delivered their gradient (the sum of which
// is its input), so every node runs exactly once, after all its consumers. Among the nodes ready
// to run, the one recorded last runs first (torch's order; grad accumulators first of all).
//
// Note [Targets]: with `inputs` (mg::autograd::grad, or backward's .inputs) only the nodes from
// which a target is reachable run: the first pass also lists the nodes in post-order, and a
// node is needed when it is a target or a child is needed. The gradient arriving at a target is
// captured (grad) or accumulated into its .grad (backward), after its tensor hooks ran (Note
// [Hook order]); the grad accumulators of other leaves do not run. With backward, a target's
// node runs too, as torch's does (its pre-hooks and post-hooks see the gradient; what it
// computes for its inputs goes nowhere unless a child is needed); with grad, a target's node
// runs only when a child is needed.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <span>
#include <utility>
#include <vector>

#include <metagrad/backend/parallel.hpp>
#include <metagrad/backend/tensor_kernels.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/runtime/apply.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/hooks.hpp>
#include <metagrad/runtime/nodes.hpp>
#include <metagrad/runtime/profiler.hpp>
#include <metagrad/runtime/saved.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg::detail {

struct backward_call {
  const char* api;  // "backward" or "autograd::grad", for messages
  bool keep_graph = false;
  bool create_graph = false;
  bool accumulate = true;  // into .grad (backward) or captured and returned (grad)
  bool allow_unused = false;
  const engine_ops* ops = nullptr;  // Note [Engine ops] in nodes.hpp; set by the entry point
};

// Note [Task state]: a graph task keeps, for every node it reaches, its dependency count, its
// flags and the index of its input buffer (task_state). One task at a time keeps them in the
// nodes themselves (node::task, stamped with the task's id in node::task_id: 16 bytes a node and
// no lookup); a task that starts while another one does (a backward inside a hook or a custom
// function's backward, or on another thread) keeps them in an open-addressing table (16 bytes a
// slot, at most half full, and the old table while it grows: up to 48 bytes a node). The intrusive
// task is whichever takes intrusive_task_owner first; it releases it when it ends (the release
// orders its writes to the nodes before the next owner's reads).
class node_table {
 public:
  static constexpr std::uint32_t need = 1, exec = 2, target = 4, done = 8;
  static constexpr std::uint32_t max_buffers = (1u << 27) - 2;

  // The state of n, inserted (flags need|exec) if absent; fresh tells which.
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  task_state& find(const graph_node* n, bool& fresh) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    std::size_t i = hash(n) & (slots_.size() - 1);
    while (slots_[i].key && slots_[i].key != n) i = (i + 1) & (slots_.size() - 1);
    fresh = slots_[i].key == nullptr;
    if (fresh) {
      slots_[i].key = n;
      slots_[i].state.flags = need | exec;
      ++size_;
    }
    return slots_[i].state;
  }
  task_state* lookup(const graph_node* n) {
    if (slots_.empty()) return nullptr;
    std::size_t i = hash(n) & (slots_.size() - 1);
    while (slots_[i].key && slots_[i].key != n) i = (i + 1) & (slots_.size() - 1);
    return slots_[i].key ? &slots_[i].state : nullptr;
  }

 private:
  struct slot {
    const graph_node* key = nullptr;
    task_state state;
  };
  static std::size_t hash(const graph_node* n) {
    return static_cast<std::size_t>(
        (reinterpret_cast<std::uintptr_t>(n) >> 4) * 0x9E3779B97F4A7C15ULL >> 16);
  }
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  void grow() {
    std::vector<slot> old(std::max<std::size_t>(64, slots_.size() * 2));
    old.swap(slots_);
    for (const slot& s : old) {
      if (!s.key) continue;
      std::size_t i = hash(s.key) & (slots_.size() - 1);
      while (slots_[i].key) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = s;
    }
  }
  std::vector<slot> slots_;
  std::size_t size_ = 0;
};

inline std::atomic<bool>& intrusive_task_owner() {
  static std::atomic<bool> taken{false};
  return taken;
}

struct graph_task {
  backward_call call;
  std::uint64_t id = 0;
  bool has_targets = false;
  bool intrusive = false;  // keeps its state in the nodes (Note [Task state])
  node_table table;

  // n's state, inserted (flags need|exec) if absent; fresh tells which.
  task_state& find(const graph_node* n, bool& fresh) {
    if (!intrusive) return table.find(n, fresh);
    fresh = n->task_id != id;
    if (fresh) {
      n->task_id = id;
      n->task = task_state{};
      n->task.flags = node_table::need | node_table::exec;
    }
    return n->task;
  }
  // n's state, or null if this task does not reach n.
  task_state* lookup(const graph_node* n) {
    if (!intrusive) return table.lookup(n);
    return n->task_id == id ? &n->task : nullptr;
  }

  // the gradients a pending node has received so far, one per output; self keeps it for unpack
  struct input_buffer {
    std::shared_ptr<graph_node> self;
    std::vector<impl_ptr> grads;
  };
  std::vector<input_buffer> buffers;
  std::vector<std::uint32_t> free_buffers;
  struct capture {
    const graph_node* node;
    std::uint32_t output_nr;
    std::size_t input;
  };
  std::vector<capture> captures;
  std::vector<impl_ptr> captured;
  const tensor_list* inputs = nullptr;
};

inline graph_task*& current_task() {
  thread_local graph_task* t = nullptr;
  return t;
}

inline std::uint64_t next_task_id() {
  static std::atomic<std::uint64_t> n{1};
  return n.fetch_add(1, std::memory_order_relaxed);
}

// Will the running task call n's hooks (run it, or capture at it)?
inline bool will_execute(const graph_task& t, const graph_node* n) {
  auto* s = const_cast<graph_task&>(t).lookup(n);
  if (!s) return false;
  if (!t.has_targets) return true;
  return (s->flags & (node_table::exec | node_table::target)) != 0;
}

inline const engine_ops& task_ops() { return *current_task()->call.ops; }

// Note [Buffers summed in place]: a node's input buffer sums the gradients its uses send. The
// first is kept; a later one is added into it in place when create_graph is off and nothing else
// holds the buffer's tensor or its elements (as torch's InputBuffer accumulates), else the sum is
// a new tensor. A parameter read by many ops of a loop, each sending a gradient of its shape, then
// costs one kernel per use rather than a new tensor.
//
// Such a sum is nobody's but the buffer's: no handle, view or saved value can see it, so the add
// needs none of an in-place op's bookkeeping (version counter, views, tangents, history) and runs
// as the add kernel alone, when no forward-mode level is open (a gradient may then carry a
// tangent, which the op's own path adds too) and no profile is recorded (it lists the add_, as
// torch's lists its buffer's).
// to[k] += from[k] (or =, when `assign`) for k < n: n contiguous CPU elements of dtype d.
inline void add_elements(void* to, const void* from, std::int64_t n, dtype d, bool assign) {
  dispatch_floating(d, [&]<class T>(std::type_identity<T>) {
    T* t = static_cast<T*>(to);
    const T* f = static_cast<const T*>(from);
    if (assign)
      std::copy_n(f, n, t);
    else
      for (std::int64_t k = 0; k < n; ++k) t[k] += f[k];
  });
}

template <int = 0>
bool add_kernel_into(tensor_impl& sum, const tensor_impl& g) {
  if (forward_ad_active() || prof::profiler_flags.load(std::memory_order_relaxed) ||
      g.store == sum.store)
    return false;
  // a plain loop up to the size the CPU kernels would split across threads
  if (sum.device() == mg::device::cpu && is_floating(sum.dtype()) && g.is_contiguous() &&
      sum.numel() < 2 * parallel_grain) {
    add_elements(element_address(sum), element_address(g), sum.numel(), sum.dtype(), false);
    return true;
  }
  const std::array<const tensor_impl*, 2> in{&sum, &g};
  elementwise_kernel_into(add_op{}, in, sum, sum.dtype());
  return true;
}

template <int = 0>
void add_gradient(const engine_ops& ops, impl_ptr& slot, impl_ptr g) {
  if (!g) return;
  if (!slot) {
    slot = std::move(g);
  } else if (!grad_mode() && sole_owner(slot) && slot->dtype() == g->dtype() &&
             slot->device() == g->device() && slot->shape == g->shape) {
    if (add_kernel_into(*slot, *g)) return;
    tensor sum(std::move(slot));
    ops.add_in_place(sum, tensor(std::move(g)));
    slot = sum.impl();
  } else {
    slot = ops.add(tensor(slot), tensor(g)).impl();
  }
}

template <int = 0>
impl_ptr root_gradient(const engine_ops& ops, const tensor& out, const tensor& grad,
                       const char* api, std::size_t i) {
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
         " but the output is on device ", device_name(out.device()), "; move it with .to(",
         device_spelling(out.device()), ")");
  return ops.to(grad, out.dtype()).impl();
}

// The gradient g computed by node `from` for its input i, fitted to what the receiving node
// expects (m): summed back over broadcast dimensions, cast to its dtype; an error otherwise.
template <int = 0>
impl_ptr fit_gradient(const engine_ops& ops, impl_ptr g, const tensor_meta& m,
                      const graph_node& from, std::size_t i) {
  if (!g) return g;
  if (g->device() != m.device)
    fail(from.name(), ": backward returned a gradient on device ", device_name(g->device()),
         " for input ", i, " on device ", device_name(m.device),
         "; return it on the input's device");
  tensor r(std::move(g));
  if (!m.same_shape(r.shape())) {
    const shape_t shape = m.shape();
    if (!broadcastable_to(shape, r.shape()))
      fail(from.name(), ": backward returned a gradient of shape ", shape_string(r.shape()),
           " for input ", i, " of shape ", shape_string(shape),
           "; return one gradient per input, in the input's shape (or broadcastable to it)");
    r = ops.sum_to(r, shape);
  }
  if (r.dtype() != m.dtype) {
    if (!is_floating(r.dtype()))
      fail(from.name(), ": backward returned a gradient of dtype ", dtype_name(r.dtype()),
           " for input ", i, " of dtype ", dtype_name(m.dtype), "; gradients are floating-point");
    r = ops.to(r, m.dtype);
  }
  return r.impl();
}

// A hook's replacement for a gradient described by m must match it exactly.
template <int = 0>
void check_hook_result(const tensor& r, const tensor_meta& m, const char* what, const graph_node& n,
                       std::size_t i) {
  if (!r.defined()) return;
  if (!m.same_shape(r.shape()) || r.dtype() != m.dtype || r.device() != m.device)
    fail(what, " of ", n.name(), " returned, for gradient ", i, ", a tensor of shape ",
         shape_string(r.shape()), ", dtype ", dtype_name(r.dtype()), ", device ",
         device_name(r.device()), " where the gradient has shape ", shape_string(m.dims()),
         ", dtype ", dtype_name(m.dtype), ", device ", device_name(m.device),
         "; a hook must return a gradient like the one it received (or nothing to keep it)");
}

template <int = 0>
void check_anomaly(const graph_node& n, std::span<const impl_ptr> out);  // anomaly.hpp
template <int = 0>
[[noreturn]] void rethrow_with_trace(const graph_node& n, const mg::error& e);

template <int = 0>
tensor_list as_list(const std::vector<impl_ptr>& v) {
  tensor_list r;
  r.reserve(v.size());
  for (const auto& p : v) r.emplace_back(p);
  return r;
}

// Steps 1-2 of Note [Hook order]: tensor hooks, retain_grad, captures. Returns whether the node
// runs.
template <int = 0>
bool before_node(graph_task& task, graph_node& n, std::vector<impl_ptr>& grads,
                 std::uint32_t flags) {
  if (hook_set* hs = n.tensor_hook_set()) {
    const auto meta = n.outputs();
    for (std::size_t k = 0; k < grads.size(); ++k) {
      if (!grads[k]) {  // only hooks that asked to see it learn that no gradient arrived
        const auto hooks = hs->tensor_hooks;
        for (const auto& h : hooks)
          if (h.output_nr == k && h.sees_undefined) (void)h.fn(tensor{});
        continue;
      }
      // a copy: a hook may register or remove hooks
      const auto hooks = hs->tensor_hooks;
      for (const auto& h : hooks) {
        if (h.output_nr != k || !grads[k]) continue;
        tensor r = h.fn(tensor(grads[k]));
        check_hook_result(r, meta[k], "a tensor hook", n, k);
        if (r.defined()) grads[k] = r.impl();
      }
      for (const auto& r : hs->retains)
        if (r.output_nr == k)
          if (auto t = r.tensor.lock()) accumulate_into(*task.call.ops, *t, grads[k]);
    }
  }
  if (flags & node_table::target)
    for (const auto& c : task.captures)
      if (c.node == &n) {
        const impl_ptr& g = grads[c.output_nr];
        if (!task.call.accumulate)
          task.captured[c.input] = g;
        else if (!n.is_accumulator())
          accumulate_into(*task.call.ops, *(*task.inputs)[c.input].impl(), g);
      }
  return !task.has_targets || (flags & node_table::exec);
}

// Steps 3-5: pre-hooks, the node, post-hooks; out gets one gradient per edge, fitted.
template <int = 0>
void call_node(graph_task& task, const std::shared_ptr<graph_node>& self,
               std::vector<impl_ptr>& grads, std::vector<impl_ptr>& out) {
  graph_node& n = *self;
  const prof::node_range profiled(n);  // <metagrad/profiler.hpp>
  hook_set* hs = n.hooks.get();
  const auto meta = n.outputs();
  if (hs && !hs->pre_hooks.empty()) {
    const auto hooks = hs->pre_hooks;
    for (const auto& [id, fn] : hooks) {
      if (auto r = fn(as_list(grads))) {
        if (r->size() != grads.size())
          fail("a pre-hook of ", n.name(), " returned ", r->size(), " gradients for ", grads.size(),
               " outputs; return one per output (or std::nullopt to keep them)");
        for (std::size_t k = 0; k < grads.size(); ++k) {
          check_hook_result((*r)[k], meta[k], "a pre-hook", n, k);
          grads[k] = (*r)[k].impl();
        }
      }
    }
  }
  const auto edges = n.next_edges();
  out.assign(edges.size(), nullptr);
  bool any = n.wants_undefined();
  for (const auto& g : grads) any = any || g != nullptr;
  const bool post = hs && !hs->post_hooks.empty();
  tensor_list received;
  if (post) received = as_list(grads);
  if (any) {
    const auto* previous = running_node();
    running_node() = &self;
    struct restore {
      const std::shared_ptr<graph_node>* p;
      ~restore() { running_node() = p; }
    } r{previous};
    n.apply(grads, out);  // may move from grads
  }
  for (std::size_t i = 0; i < edges.size(); ++i)
    if (edges[i] && out[i])
      out[i] = fit_gradient(*task.call.ops, std::move(out[i]),
                            edges[i]->outputs()[edges[i].input_nr], n, i);
    else
      out[i] = nullptr;
  if (anomaly_mode().load(std::memory_order_relaxed) &&
      anomaly_check_nan().load(std::memory_order_relaxed))
    check_anomaly(n, out);
  if (!task.call.keep_graph)
    for (auto& s : n.saved()) s.release();
  if (post) {
    // the hooks see one gradient per operand, undefined at a number's (Note [Number operands])
    const edge_list operands = n.next_functions();
    const std::size_t all = operands.size();
    const auto position = [&](std::size_t i) { return operands.position(i); };
    const auto hooks = hs->post_hooks;
    for (const auto& [id, fn] : hooks) {
      tensor_list given(all);
      for (std::size_t i = 0; i < out.size(); ++i) given[position(i)] = tensor(out[i]);
      if (auto r = fn(given, received)) {
        if (r->size() != all)
          fail("a hook of ", n.name(), " returned ", r->size(), " gradients for ", all,
               " inputs; return one per input (or std::nullopt to keep them)");
        for (std::size_t i = 0; i < out.size(); ++i) {
          const tensor& g = (*r)[position(i)];
          if (edges[i])
            check_hook_result(g, edges[i]->outputs()[edges[i].input_nr], "a hook", n, position(i));
          out[i] = edges[i] ? g.impl() : nullptr;
        }
      }
    }
  }
}

// The roots of a backward call: the outputs' gradient edges, each with its seed (the gradient
// given, or ones for a scalar output).
template <int = 0>
std::vector<std::pair<edge, impl_ptr>> task_roots(const tensor_list& outputs,
                                                  const tensor_list& grads,
                                                  const backward_call& c) {
  if (!grads.empty() && grads.size() != outputs.size())
    fail(c.api, ": got ", grads.size(), " gradients for ", outputs.size(),
         " outputs; pass one gradient per output (or none for scalar outputs)");
  std::vector<std::pair<edge, impl_ptr>> roots;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const tensor& out = outputs[i];
    if (!out.defined() || !out.requires_grad())
      fail(c.api, ": output ", i, out.defined() ? " (shape " + shape_string(out.shape()) + ")" : "",
           " does not require grad and has no grad_fn; create the leaves with "
           ".requires_grad = true (or call requires_grad_()) and do not compute under "
           "no_grad_guard");
    impl_ptr g;
    {
      grad_mode_guard mode(c.create_graph);
      g = root_gradient(*c.ops, out, i < grads.size() ? grads[i] : tensor{}, c.api, i);
    }
    roots.emplace_back(gradient_edge(out.impl()), std::move(g));
  }
  return roots;
}

// The edges of the inputs: where their gradients arrive (Note [Targets]).
template <int = 0>
std::vector<edge> target_edges(const tensor_list& inputs, const backward_call& c) {
  std::vector<edge> edges;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad())
      fail(c.api, ": input ", i,
           " does not require grad; every input must be a tensor that "
           "requires grad (a leaf created with .requires_grad = true, or computed from one)");
    edges.push_back(gradient_edge(inputs[i].impl()));
  }
  return edges;
}

// Note [Dependencies]: counts the edges into every node reachable from the roots. With targets,
// also returns the nodes in post-order (Note [Targets]); without, any order counts the
// dependencies, and a worklist holds no more than the graph's width (a depth-first stack would
// hold a chain's every node).
template <int = 0>
std::vector<const graph_node*> count_dependencies(
    graph_task& task, const std::vector<std::pair<edge, impl_ptr>>& roots) {
  std::vector<const graph_node*> post;
  bool fresh = false;
  if (!task.has_targets) {
    std::vector<graph_node*> work;
    for (auto& [e, g] : roots)
      if (task.find(e.function.get(), fresh), fresh) work.push_back(e.function.get());
    while (!work.empty()) {
      graph_node* n = work.back();
      work.pop_back();
      for (const edge& e : n->next_edges())
        if (graph_node* child = e.function.get()) {
          ++task.find(child, fresh).deps;
          if (fresh) work.push_back(child);
        }
    }
  } else {
    std::vector<std::pair<graph_node*, std::uint32_t>> stack;
    for (auto& [e, g] : roots)
      if (task.find(e.function.get(), fresh), fresh) stack.emplace_back(e.function.get(), 0);
    while (!stack.empty()) {
      auto [n, i] = stack.back();
      const auto edges = n->next_edges();
      if (i < edges.size()) {
        ++stack.back().second;
        if (graph_node* child = edges[i].function.get()) {
          auto& s = task.find(child, fresh);
          ++s.deps;
          if (fresh) stack.emplace_back(child, 0);
        }
      } else {
        post.push_back(n);
        stack.pop_back();
      }
    }
  }
  return post;
}

// Note [Targets]: the inputs' nodes are targets whose arriving gradient is captured; with
// targets, a node is needed when it is a target or a child is needed (post: children first).
template <int = 0>
void mark_targets(graph_task& task, const std::vector<edge>& input_edges,
                  const std::vector<const graph_node*>& post) {
  task.captured.resize(input_edges.size());
  for (std::size_t i = 0; i < input_edges.size(); ++i)  // an input the outputs do not reach: unused
    if (auto* s = task.lookup(input_edges[i].function.get())) {
      s->flags |= node_table::target;
      task.captures.push_back({input_edges[i].function.get(), input_edges[i].input_nr, i});
    }
  if (!task.has_targets) return;
  for (const graph_node* n : post) {
    bool child_needs = false;
    for (const auto& e : const_cast<graph_node*>(n)->next_edges())
      if (e) child_needs = child_needs || (task.lookup(e.function.get())->flags & node_table::need);
    auto& s = *task.lookup(n);
    const bool target = s.flags & node_table::target;
    s.flags = (s.flags & ~(node_table::need | node_table::exec)) |
              (target || child_needs ? node_table::need : 0) |
              (child_needs || (target && task.call.accumulate) ? node_table::exec : 0);
  }
}

// The input buffer of node n, whose slot is s: created (or reused) on the first gradient.
template <int = 0>
graph_task::input_buffer& task_buffer(graph_task& task, const std::shared_ptr<graph_node>& n,
                                      task_state& s) {
  if (!s.buffer) {
    std::uint32_t i;
    if (task.free_buffers.empty()) {
      i = static_cast<std::uint32_t>(task.buffers.size());
      if (i > node_table::max_buffers)
        fail(task.call.api, ": more than ", node_table::max_buffers,
             " nodes wait for gradients at once");
      task.buffers.emplace_back();
    } else {
      i = task.free_buffers.back();
      task.free_buffers.pop_back();
    }
    s.buffer = i + 1;
    auto& b = task.buffers[i];
    b.self = n;
    b.grads.assign(n->num_outputs(), nullptr);
  }
  return task.buffers[s.buffer - 1];
}

// Note [Gradients added where they land]: the backward of slice and select writes the gradient
// it receives into zeros of its input's shape, and the receiving buffer then adds that whole
// tensor to its sum: for a parameter row read in 14-element slices at every step of a loop, an
// allocation, a fill and an add of the whole row per slice. When create_graph is off and the
// node has no hooks (nothing would see the padded tensor), the engine instead adds the gradient
// into the slice's elements of the buffer's sum, which it starts as zeros when it is the first
// to arrive (embeds_gradient says where; the node does not run). Otherwise, or when the sum is
// not the buffer's alone or differs in dtype or device, the node runs as usual.
// Called for a node that embeds_gradient, with one gradient, grad mode off (run_nodes checks
// those first, so that other nodes pay one virtual call).
template <int = 0>
bool add_where_it_lands(graph_task& task, graph_node& n, std::vector<impl_ptr>& grads) {
  slice_range r{};
  bool drop = false;
  if (forward_ad_active() || anomaly_mode().load(std::memory_order_relaxed) ||
      prof::profiler_flags.load(std::memory_order_relaxed))
    return false;
  if (const hook_set* hs = n.hooks.get(); hs && (!hs->pre_hooks.empty() || !hs->post_hooks.empty()))
    return false;
  const auto edges = n.next_edges();
  if (edges.size() != 1 || !edges[0]) return false;
  const edge& e = edges[0];
  const tensor_meta& m = e.function->outputs()[e.input_nr];
  n.embeds_gradient(&m, r, drop);
  auto& s = *task.lookup(e.function.get());
  if (task.has_targets && !(s.flags & node_table::need)) return false;
  const tensor_impl& g = *grads[0];
  if (g.dtype() != m.dtype || g.device() != m.device || !is_floating(g.dtype())) return false;
  const shape_t shape = m.shape();
  impl_ptr& sum = task_buffer(task, e.function, s).grads[e.input_nr];
  const bool fresh = !sum;
  if (fresh)
    sum = fill_kernel(shape, 0.0, g.dtype(), g.device());
  else if (!sole_owner(sum) || sum->dtype() != g.dtype() || sum->device() != g.device() ||
           sum->shape != shape)
    return false;
  // the slice's shape, which g has (the engine fitted it to the node's output)
  shape_t part = shape;
  if (drop)
    part.erase(part.begin() + static_cast<std::ptrdiff_t>(r.dim));
  else
    part[r.dim] = r.length;
  if (g.shape != part) return false;  // the node's own backward says what is wrong
  std::int64_t outer = 1;
  for (std::size_t i = 0; i < r.dim; ++i) outer *= shape[i];
  if (g.device() == mg::device::cpu && g.is_contiguous() && outer == 1 &&
      (drop || r.step == 1 || r.length <= 1) && g.numel() < 2 * parallel_grain) {
    // one run of the sum's (contiguous) elements: a plain loop
    const std::int64_t at = r.start * sum->strides[r.dim] * std::int64_t(element_size(g.dtype()));
    add_elements(static_cast<char*>(element_address(*sum)) + at, element_address(g), g.numel(),
                 g.dtype(), fresh);
    return true;
  }
  const tensor whole(sum);
  const tensor v =
      drop ? algebra<tensor>::select(whole, r.dim, r.start) : algebra<tensor>::slice(whole, r);
  if (fresh) {
    copy_into(*v.impl(), g);
  } else {
    const std::array<const tensor_impl*, 2> in{v.impl().get(), &g};
    elementwise_kernel_into(add_op{}, in, *v.impl(), g.dtype());
  }
  return true;
}

// Runs the nodes, the ready one recorded last first (Note [Dependencies]), from the roots' seeds.
template <int = 0>
void run_nodes(graph_task& task, std::vector<std::pair<edge, impl_ptr>>& roots) {
  const engine_ops& ops = *task.call.ops;
  using ready_entry = std::pair<std::uint64_t, graph_node*>;
  std::priority_queue<ready_entry> ready;
  for (auto& [e, g] : roots) {
    auto& s = *task.lookup(e.function.get());
    add_gradient(ops, task_buffer(task, e.function, s).grads[e.input_nr], std::move(g));
    if (s.deps == 0) ready.emplace(e.function->sequence_nr, e.function.get());
  }
  std::vector<impl_ptr> out, grads_in;
  while (!ready.empty()) {
    graph_node* n = ready.top().second;
    ready.pop();
    auto& s = *task.lookup(n);
    if (s.flags & node_table::done) continue;  // a root listed twice: already run
    s.flags |= node_table::done;
    const std::uint32_t bi = s.buffer - 1;
    s.buffer = 0;
    std::shared_ptr<graph_node> self = std::move(task.buffers[bi].self);
    grads_in.swap(task.buffers[bi].grads);
    task.free_buffers.push_back(bi);
    if (!before_node(task, *n, grads_in, s.flags)) continue;
    bool landed = false;  // in the buffer of the node's one edge
    try {
      slice_range r;  // not written when asked only whether n embeds
      bool drop;
      landed = grads_in.size() == 1 && grads_in[0] && !grad_mode() &&
               n->embeds_gradient(nullptr, r, drop) && add_where_it_lands(task, *n, grads_in);
      if (landed) {
        if (!task.call.keep_graph)
          for (auto& sv : n->saved()) sv.release();
      } else {
        call_node(task, self, grads_in, out);
      }
    } catch (const mg::error& e) {  // Note [Anomaly detection]: the error names n's forward
      if (anomaly_mode().load(std::memory_order_relaxed)) rethrow_with_trace(*n, e);
      throw;
    }
    const auto edges = n->next_edges();
    for (std::size_t k = 0; k < edges.size(); ++k) {
      const auto& e = edges[k];
      if (!e) continue;
      auto& cs = *task.lookup(e.function.get());
      if (!landed && (!task.has_targets || (cs.flags & node_table::need))) {
        auto& b = task_buffer(task, e.function, cs);
        add_gradient(ops, b.grads[e.input_nr], std::move(out[k]));
      }
      if (--cs.deps == 0) {
        if (task.has_targets && !(cs.flags & node_table::need)) continue;
        task_buffer(task, e.function, cs);  // a node reached without a gradient still runs
        ready.emplace(e.function->sequence_nr, e.function.get());
      }
    }
    grads_in.clear();
  }
}

// Runs backward from outputs; returns one gradient per input when !accumulate.
template <int I = 0>
std::vector<impl_ptr> run_backward(const tensor_list& outputs, const tensor_list& grads,
                                   const tensor_list& inputs, const backward_call& c) {
  MG_DETAIL_LAZY_ENGINE(I);
  if (!c.ops) fail(c.api, ": internal error: the engine was entered without its ops");
  graph_task task;
  task.call = c;
  task.id = next_task_id();
  struct owner_scope {  // Note [Task state]
    bool owns = !intrusive_task_owner().exchange(true, std::memory_order_acquire);
    ~owner_scope() {
      if (owns) intrusive_task_owner().store(false, std::memory_order_release);
    }
  } owner;
  task.intrusive = owner.owns;
  task.inputs = &inputs;
  auto roots = task_roots(outputs, grads, c);
  const std::vector<edge> input_edges = target_edges(inputs, c);
  task.has_targets = !inputs.empty();
  const std::vector<const graph_node*> post = count_dependencies(task, roots);
  mark_targets(task, input_edges, post);
  struct task_scope {
    graph_task* previous;
    ~task_scope() { current_task() = previous; }
  } scope{current_task()};
  current_task() = &task;
  grad_mode_guard mode(c.create_graph);
  run_nodes(task, roots);
  if (!c.accumulate)
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (!task.captured[i] && !c.allow_unused)
        fail(c.api, ": input ", i, " (shape ", shape_string(inputs[i].shape()),
             ") was not used in the graph of the outputs; pass .allow_unused = true to get an "
             "undefined tensor for it");
  return std::move(task.captured);
}

}  // namespace mg::detail

// The recorded graph of the runtime engine, at the level of implementation objects: tensor_impl
// (what an mg::tensor handle points to), edge, graph_node (one recorded operation), and the
// thread-local modes (grad mode, inference mode).
//
// Note [Graph ownership]: ownership points from outputs to inputs only. A tensor owns its
// grad_fn; a node owns the nodes of its inputs (its edges) and the tensors it saved. A node never
// owns its own outputs: an output saved by its own grad_fn is kept without grad_fn and
// re-attached on unpack (torch's SavedVariable; saved.hpp). A leaf owns its grad accumulator
// weakly. So the graph has no reference cycles, and dropping the last tensor frees it. Hooks may
// capture tensors and so close cycles; see Note [Hooks that capture their tensor] in hooks.hpp.
//
// Note [Iterative destruction]: freeing the head of a chain of a million nodes must not recurse a
// million times, whatever holds the chain together (edges, saved tensors, hooks that captured
// tensors). Every node is created by new_graph_node, whose most-derived destructor first moves
// everything the node owns that can own other nodes (edges, saved tensors, hooks) onto a
// thread-local list; the outermost such destructor then drains the list. A destruction that
// starts while the list is being drained only adds to it, so destructors nest two levels deep.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <metagrad/call_site.hpp>
#include <metagrad/core/storage.hpp>
#include <metagrad/core/tensor_impl.hpp>
#include <metagrad/error.hpp>

namespace mg::detail {

// Gives a view whose base was written in place since its grad_fn was recorded a grad_fn that
// reads the base's current history (tensor_members.hpp; Note [Views and in-place writes]).
template <int = 0>
void refresh_view(tensor_impl& t);

inline bool requires_grad(const tensor_impl& t) { return t.requires_grad || t.grad_fn != nullptr; }

// Grad mode: thread-local, as in torch. Backward runs with it set to create_graph.
inline bool& grad_mode() {
  thread_local bool enabled = true;
  return enabled;
}

class grad_mode_guard {
 public:
  explicit grad_mode_guard(bool enabled) : previous_(grad_mode()) { grad_mode() = enabled; }
  grad_mode_guard(const grad_mode_guard&) = delete;
  grad_mode_guard& operator=(const grad_mode_guard&) = delete;
  ~grad_mode_guard() { grad_mode() = previous_; }

 private:
  bool previous_;
};

/// Where the gradient of one forward input goes: input `input_nr` of the node `function` (the
/// node's forward output number input_nr). Empty when the input needs no gradient.
struct edge {
  std::shared_ptr<graph_node> function;
  std::uint32_t input_nr = 0;

  explicit operator bool() const { return function != nullptr; }
  graph_node* operator->() const { return function.get(); }
  graph_node& operator*() const { return *function; }
  friend bool operator==(const edge& e, std::nullptr_t) { return e.function == nullptr; }
};

// What a node knows of each of its forward outputs: the gradients it receives must match.
struct tensor_meta {
  shape_t shape;
  mg::dtype dtype = mg::dtype::f32;
  mg::device device = mg::device::cpu;
};

class saved_variable;  // saved.hpp

/// What `node->next_functions()` returns: one edge per forward operand, in order, like a span
/// (`size()`, `[i]`, range-for). An operand that gets no gradient (a C++ number, a tensor that
/// does not require grad) has an empty edge.
class edge_list {
 public:
  edge_list(std::span<const edge> stored, std::uint32_t gaps) : stored_(stored), gaps_(gaps) {}
  std::size_t size() const { return stored_.size() + static_cast<std::size_t>(popcount(gaps_)); }
  bool empty() const { return size() == 0; }
  // The operand position of stored edge k (next_edges()[k]).
  std::size_t position(std::size_t k) const {
    std::size_t p = 0;
    for (std::size_t seen = 0;; ++p)
      if (!(p < 32 && (gaps_ >> p & 1)) && seen++ == k) return p;
  }
  const edge& operator[](std::size_t i) const {
    if (i < 32 && (gaps_ >> i & 1)) return none();
    const std::uint32_t before = i < 32 ? gaps_ & ((1u << i) - 1) : gaps_;
    return stored_[i - static_cast<std::size_t>(popcount(before))];
  }
  class iterator {
   public:
    using value_type = edge;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const edge_list* l, std::size_t i) : l_(l), i_(i) {}
    const edge& operator*() const { return (*l_)[i_]; }
    const edge* operator->() const { return &(*l_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    iterator operator++(int) {
      iterator r = *this;
      ++i_;
      return r;
    }
    friend bool operator==(const iterator& a, const iterator& b) { return a.i_ == b.i_; }

   private:
    const edge_list* l_ = nullptr;
    std::size_t i_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }

 private:
  static int popcount(std::uint32_t m) { return std::popcount(m); }
  static const edge& none() {
    static const edge e{};
    return e;
  }
  std::span<const edge> stored_;
  std::uint32_t gaps_;
};

// Sequence numbers order the nodes as torch's do: a node recorded later runs first among the
// ready ones (thread-local counters, as torch's).
inline std::uint64_t next_sequence_nr() {
  thread_local std::uint64_t n = 0;
  return n++;
}

// One recorded operation. Derived nodes hold their edges, saved tensors and output metadata
// inline and expose them as spans.
struct graph_node {
  graph_node() = default;
  graph_node(const graph_node&) = delete;
  graph_node& operator=(const graph_node&) = delete;
  virtual ~graph_node() = default;

  /// The name of the operation that recorded this node, e.g. "mul".
  virtual const char* name() const = 0;
  /// Where the gradients of the forward inputs go, one edge per input (empty where none).
  edge_list next_functions() const {
    return {const_cast<graph_node*>(this)->next_edges(), number_operands()};
  }
  /// The number of forward outputs (the gradients this node receives).
  std::size_t num_outputs() const { return const_cast<graph_node*>(this)->outputs().size(); }
  /// Registers `fn(const mg::tensor_list& grad_inputs, const mg::tensor_list& grad_outputs) ->
  /// std::optional<mg::tensor_list>` (or void), called after this node computed the gradients of
  /// its inputs; a value replaces them (Note [Hook order], hooks.hpp).
  template <class F>
  mg::hook_handle register_hook(F&& fn);
  /// Registers `fn(const mg::tensor_list& grad_outputs) -> std::optional<mg::tensor_list>` (or
  /// void), called before this node runs; a value replaces the gradients it receives.
  template <class F>
  mg::hook_handle register_prehook(F&& fn);

  // The edges the node stores: one per operand but for C++ number operands, which have none
  // (Note [Number operands] in nodes.hpp); number_operands() has a bit set at each of those.
  virtual std::span<edge> next_edges() = 0;
  virtual std::uint32_t number_operands() const { return 0; }
  virtual std::span<tensor_meta> outputs() = 0;
  virtual std::span<saved_variable> saved() { return {}; }
  // grads: one per output (null: none arrived); out: one per edge, null on entry. Nodes
  // that want_undefined() are called even when no gradient arrived (custom Functions). A node
  // type defines it as a non-virtual `backward(grads, out)`, which new_graph_node's final_node
  // calls (Note [Backward through a pointer], saved.hpp).
  virtual void apply(std::span<impl_ptr> grads, std::span<impl_ptr> out) = 0;
  virtual bool wants_undefined() const { return false; }
  // The tensor hooks to run on the gradients this node receives (a grad accumulator: its leaf's).
  virtual hook_set* tensor_hook_set() { return hooks.get(); }
  virtual bool is_accumulator() const { return false; }
  // Moves what can own other nodes, beyond edges, saved tensors and hooks, to the drain
  // (Note [Iterative destruction]).
  virtual void surrender_extra() {}

  std::uint64_t sequence_nr = next_sequence_nr();
  std::shared_ptr<hook_set> hooks;  // created by the first hook registered on the node
  source_location site{};           // the forward call that recorded it (Note [Call sites])
};

}  // namespace mg::detail

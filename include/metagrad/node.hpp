// mg::autograd::node, one operation recorded by the runtime engine, and mg::autograd::edge,
// where the gradient of one of its forward inputs goes: the objects of the recorded graph that a
// program sees through tensor::grad_fn() (Note [Graph ownership] in runtime/graph.hpp says who
// owns what). Hooks are registered on a node through <metagrad/tensor.hpp>.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <metagrad/call_site.hpp>
#include <metagrad/core/storage.hpp>
#include <metagrad/core/tensor_impl.hpp>
#include <metagrad/types.hpp>

namespace mg {

namespace detail {
struct slice_range;  // core/shape_rules.hpp

// What a node knows of each of its forward outputs: the gradients it receives must match.
// 16 bytes (a node holds one per output): a shape of rank 0 or 1 is kept inline, a longer one
// in an array of its own.
class tensor_meta {
  std::int64_t word_ = 0;  // rank 1: the extent; longer: the address of the extents
  std::uint32_t rank_ = 0;

 public:
  mg::dtype dtype = mg::dtype::f32;
  mg::device device = mg::device::cpu;

  tensor_meta() = default;
  tensor_meta(const shape_t& s, mg::dtype d, mg::device dev) : dtype(d), device(dev) { assign(s); }
  tensor_meta(const tensor_meta& o) : dtype(o.dtype), device(o.device) { assign(o.dims()); }
  tensor_meta(tensor_meta&& o) noexcept { swap(o); }
  tensor_meta& operator=(tensor_meta o) noexcept {
    swap(o);
    return *this;
  }
  ~tensor_meta() {
    if (rank_ > 1) delete[] many();
  }

  std::span<const std::int64_t> dims() const { return {rank_ > 1 ? many() : &word_, rank_}; }
  shape_t shape() const {
    const auto d = dims();
    return {d.begin(), d.end()};
  }
  bool same_shape(std::span<const std::int64_t> s) const {
    const auto d = dims();
    return std::equal(d.begin(), d.end(), s.begin(), s.end());
  }

 private:
  template <class S>
  void assign(const S& s) {
    rank_ = static_cast<std::uint32_t>(s.size());
    if (rank_ > 1) {
      auto* p = new std::int64_t[rank_];
      std::copy(s.begin(), s.end(), p);
      word_ = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p));
    } else if (rank_ == 1) {
      word_ = s[0];
    }
  }
  std::int64_t* many() const {
    return reinterpret_cast<std::int64_t*>(static_cast<std::uintptr_t>(word_));
  }
  void swap(tensor_meta& o) noexcept {
    std::swap(dtype, o.dtype);
    std::swap(device, o.device);
    std::swap(rank_, o.rank_);
    std::swap(word_, o.word_);
  }
};
static_assert(sizeof(void*) != 8 || sizeof(tensor_meta) == 16);

class saved_variable;  // runtime/saved.hpp

// A node's state in the graph task that runs it (Note [Task state] in runtime/engine.hpp).
struct task_state {
  std::uint32_t deps = 0;
  std::uint32_t flags : 5 = 0;
  std::uint32_t buffer : 27 = 0;  // 1 + the index of the node's input buffer; 0: none
};

// Sequence numbers order the nodes as torch's do: a node recorded later runs first among the
// ready ones (thread-local counters, as torch's).
inline std::uint64_t next_sequence_nr() {
  thread_local std::uint64_t n = 0;
  return n++;
}
}  // namespace detail

namespace autograd {

/// Where the gradient of one forward input goes: input `input_nr` of the node `function` (the
/// node's forward output number input_nr). Empty when the input needs no gradient.
struct edge {
  std::shared_ptr<node> function;
  std::uint32_t input_nr = 0;

  explicit operator bool() const { return function != nullptr; }
  node* operator->() const { return function.get(); }
  node& operator*() const { return *function; }
  friend bool operator==(const edge& e, std::nullptr_t) { return e.function == nullptr; }
};

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

/// One operation recorded by the runtime engine: what `tensor::grad_fn()` returns and
/// `next_functions()` leads to, as torch's `torch.autograd.graph.Node`. Its public face is
/// `name()`, `next_functions()`, `num_outputs()`, `register_hook` and `register_prehook`; the
/// rest is the engine's (each op's node type derives from it and holds its edges, saved tensors
/// and output metadata inline, exposed as spans).
struct node {
  node() = default;
  node(const node&) = delete;
  node& operator=(const node&) = delete;
  virtual ~node() = default;

  /// The name of the operation that recorded this node, e.g. "mul".
  virtual const char* name() const = 0;
  /// Where the gradients of the forward inputs go, one edge per input (empty where none).
  edge_list next_functions() const {
    return {const_cast<node*>(this)->next_edges(), number_operands()};
  }
  /// The number of forward outputs (the gradients this node receives).
  std::size_t num_outputs() const { return const_cast<node*>(this)->outputs().size(); }
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
  virtual std::span<detail::tensor_meta> outputs() = 0;
  virtual std::span<detail::saved_variable> saved() { return {}; }
  // grads: one per output (null: none arrived); out: one per edge, null on entry. Nodes
  // that want_undefined() are called even when no gradient arrived (custom Functions). A node
  // type defines it as a non-virtual `backward(grads, out)`, which new_graph_node's final_node
  // calls (Note [Backward through a pointer], saved.hpp).
  virtual void apply(std::span<detail::impl_ptr> grads, std::span<detail::impl_ptr> out) = 0;
  virtual bool wants_undefined() const { return false; }
  // True when backward writes the gradient it receives into zeros of its one input's shape, at
  // the elements r of that shape (`input`; with drop, at index r.start of dimension r.dim, which
  // the gradient lacks): slice and select (Note [Gradients added where they land], engine.hpp).
  // With a null input it only says whether the node is of that kind.
  virtual bool embeds_gradient(const detail::tensor_meta* input, detail::slice_range& r,
                               bool& drop) const {
    (void)input, (void)r, (void)drop;
    return false;
  }
  // The tensor hooks to run on the gradients this node receives (a grad accumulator: its leaf's).
  virtual detail::hook_set* tensor_hook_set() { return hooks.get(); }
  virtual bool is_accumulator() const { return false; }
  // Moves what can own other nodes, beyond edges, saved tensors and hooks, to the drain
  // (Note [Iterative destruction]).
  virtual void surrender_extra() {}

  std::uint64_t sequence_nr = detail::next_sequence_nr();
  std::shared_ptr<detail::hook_set> hooks;  // created by the first hook registered on the node
  detail::source_location site{};           // the forward call that recorded it (Note [Call sites])
  // The engine's: the graph task whose state `task` holds (Note [Task state])
  mutable std::uint64_t task_id = 0;
  mutable detail::task_state task{};
};

}  // namespace autograd

namespace detail {
using edge = autograd::edge;
using edge_list = autograd::edge_list;
}  // namespace detail

}  // namespace mg

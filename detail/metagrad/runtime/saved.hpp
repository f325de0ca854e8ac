// Tensors saved for backward (torch's SavedVariable), the saved-tensor hooks that may pack them,
// and the iterative destruction of nodes (Note [Iterative destruction], graph.hpp).
//
// Note [Saved tensors]: a node saves a tensor in one of these forms:
//   - a leaf that requires grad: the leaf itself (double backward accumulates into it);
//   - another input: an alias carrying the grad_fn the input had when it was saved (an in-place
//     write may give the input a new grad_fn later, and holding the input itself could then
//     close a reference cycle);
//   - an output of the node itself: an alias without grad_fn, re-attached to the node on unpack
//     (Note [Graph ownership]);
//   - a number operand: its value, inline;
//   - whatever the innermost saved-tensor pack hook returned, with the history kept beside it;
//   - for a backward that reads only the shape (saved::input_shapes): a tensor without elements
//     that describes it, kept after backward (as torch keeps sizes, not tensors).
// Inputs, outputs and shapes are kept as the fields of an alias (saved_variable::view, 64 bytes
// against a tensor_impl's 296: a chain of a million ops saves a million of them), made into a
// tensor on unpack. Two things make most of them smaller still:
//   - an input that is one of the owner's operands has its history in the owner's edge for it
//     (same grad_fn, same output number): the saved value records the edge's index instead;
//   - a 0-d input or output at offset 0 whose history is nowhere else needed (none, or the
//     edge's) is its storage alone ("bare"): no view is allocated.
// Unpacking checks the version counter (not with hooks, as torch) and fails once backward freed
// the saved tensors (a second backward without retain_graph).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <metagrad/error.hpp>
#include <metagrad/runtime/graph.hpp>

namespace mg::detail {

// backend/tensor_kernels.hpp (what unpack converts with; defined wherever unpack is compiled)
inline impl_ptr copy_kernel(const tensor_impl& x, dtype d, const shape_t& shape);
inline impl_ptr transfer_kernel(const tensor_impl& x, device dev);

// The node of input t's gradient (nodes.hpp).
template <int = 0>
edge gradient_edge(const impl_ptr& t);

// What a saved-tensor pack hook kept for one tensor.
struct packed_tensor {
  virtual ~packed_tensor() = default;
  virtual impl_ptr unpack() const = 0;
};

// A contiguous copy of t's elements, and a storage without elements of dtype d on device dev,
// shared (nodes.hpp).
impl_ptr copy_of(const tensor_impl& t);
std::shared_ptr<storage> empty_storage(mg::dtype d, mg::device dev);

// The thread's saved-tensor hooks: a stack of pack functions (innermost last), and the message of
// an active disable_saved_tensors_hooks_guard.
struct saved_hooks_state {
  std::vector<const std::function<std::shared_ptr<packed_tensor>(const impl_ptr&)>*> stack;
  const std::string* disabled = nullptr;
};
inline saved_hooks_state& saved_hooks() {
  thread_local saved_hooks_state s;
  return s;
}

// The state of an allow_mutation_on_saved_tensors_guard: the tensors saved under it, by storage.
struct mutation_table {
  struct cell {
    impl_ptr data;  // the saved elements (copied before the first write to them)
    bool copied = false;
  };
  std::unordered_map<const storage*, std::vector<std::weak_ptr<cell>>> saved;
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
};
inline mutation_table*& active_mutation_table() {
  thread_local mutation_table* t = nullptr;
  return t;
}

// Called by in-place ops before they write t's storage.
template <int = 0>
void before_in_place_write(const tensor_impl& t) {
  mutation_table* m = active_mutation_table();
  if (!m) return;
  const auto it = m->saved.find(t.store.get());
  if (it == m->saved.end()) return;
  for (const auto& w : it->second)
    if (const auto c = w.lock(); c && !c->copied) {
      c->data = copy_of(*c->data);
      c->copied = true;
    }
  m->saved.erase(it);
}

// The node whose apply is running on this thread (the engine sets it): an output saved by its
// own node is re-attached to it on unpack.
inline const std::shared_ptr<graph_node>*& running_node() {
  thread_local const std::shared_ptr<graph_node>* n = nullptr;
  return n;
}

// See Note [Iterative destruction].
struct drain_list {
  std::vector<std::shared_ptr<graph_node>> nodes;
  std::vector<std::shared_ptr<void>> others;
  bool active = false;
};
inline drain_list& drain() {
  thread_local drain_list d;
  return d;
}

class saved_variable {
 public:
  saved_variable() = default;

  // Where the owner's edge for an input is, when the input is one of its operands: the edge
  // holds the input's history, so the saved value need not (Note [Saved tensors]).
  struct operand_edge {
    // (a constructor, not member initialisers: clang does not take those in a default argument
    // of the enclosing class)
    constexpr operand_edge(const edge* at = nullptr, std::uint32_t i = 0) : e(at), index(i) {}
    const edge* e;
    std::uint32_t index;  // in owner->next_edges()
  };

  // Saves t for the backward of `owner` (named `op` in messages); `is_output`: t is an output of
  // owner. check_version false: backward reads only the shape (saved::input_shapes).
  template <int I = 0>  // Note [Lazy members] in runtime/lazy.hpp
  void save(const impl_ptr& t, bool is_output, bool check_version, const char* op,
            operand_edge from = {}) {
    MG_DETAIL_LAZY_ENGINE(I);
    if (!t) return;
    if (t->is_inference)
      fail(op, ": an inference tensor (created under mg::inference_mode_guard; shape ",
           shape_string(t->shape),
           ") cannot be saved for backward; make a normal tensor of it with clone() outside "
           "inference mode, or run the whole computation in inference mode");
    check_version_ = check_version;
    output_nr_ = t->output_nr;
    if (!check_version) {
      // only the shape is read (saved::input_shapes): a tensor without elements that describes t
      auto v = make_pooled<view>();
      v->store = empty_storage(t->dtype(), t->device());
      v->set_dims(t->shape, t->strides);
      payload_ = std::move(v);
      kind_ = kind::shape;
      return;
    }
    auto& hooks = saved_hooks();
    if (!hooks.stack.empty()) {
      auto e = std::make_shared<packed_entry>();
      e->is_output = is_output;
      e->shape = t->shape;
      e->dtype = t->dtype();
      e->device = t->device();
      if (!is_output) e->history = t->grad_fn ? t->grad_fn : gradient_edge(t).function;
      const std::uint64_t version = t->store->version;
      e->packed = (*hooks.stack.back())(is_output ? alias_of(*t) : t);
      if (t->store->version != version)
        fail(op, ": A saved tensor pack hook is modifying its input in place (a tensor of shape ",
             shape_string(t->shape), " went from version ", version, " to ", t->store->version,
             "); the tensor is the one the graph keeps, so a pack hook must not write to it: "
             "return a modified copy (clone() it first) instead");
      payload_ = std::move(e);
      kind_ = kind::packed;
      return;
    }
    word_ = t->store->version;
    if (t->wrapped_number && !t->requires_grad && t->store->device == mg::device::cpu) {
      // a C++ number operand: its value, in double (f32 and i64 numbers round-trip through it)
      double v = 0;
      dispatch(t->dtype(), [&]<class T>(std::type_identity<T>) {
        v = static_cast<double>(*t->template data<T>());
      });
      word_ = std::bit_cast<std::uint64_t>(v);
      number_dtype_ = t->dtype();
      number_device_ = t->device().type();
      kind_ = kind::number;
    } else if (t->requires_grad && !t->grad_fn && !is_output) {
      payload_ = t;
      kind_ = kind::leaf;
    } else {
      kind_ = is_output ? kind::output : kind::input;
      const bool history = !is_output && t->grad_fn;
      edge_history_ =
          history && from.e && from.e->function == t->grad_fn && from.e->input_nr == t->output_nr;
      if (edge_history_) output_nr_ = from.index;
      if (t->shape.empty() && t->offset == 0 && (!history || edge_history_) && !t->wrapped_number &&
          (is_output || t->store->detaches == 0)) {
        payload_ = t->store;
        bare_ = true;
        return;
      }
      auto v = make_pooled<view>();
      v->store = t->store;
      v->set_dims(t->shape, t->strides);
      v->offset = t->offset;
      if (history && !edge_history_) v->grad_fn = t->grad_fn;
      v->wrapped_number = !is_output && t->wrapped_number;
      v->detaches = t->store->detaches;
      payload_ = std::move(v);
    }
  }

  // The saved tensor (null if nothing was saved), its grad_fn re-attached.
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  impl_ptr unpack(const graph_node* owner, const char* op) const;

  // Where the saved elements are, checked as unpack checks them, for a kernel that only reads
  // them (Note [Zero-d kernels]) and so needs no tensor; store is null when unpack must make one
  // (nothing saved, a number, a packed tensor).
  struct elements {
    const storage* store = nullptr;
    std::size_t rank = 0;
    std::int64_t offset = 0;
  };
  template <int = 0>
  elements peek(const char* op) const;

  // A shape-only save of an op that keeps state torch saves as a tensor (index_select's
  // indices): freed with the graph like saved tensors, so a second backward is refused.
  void free_with_graph() { shape_freed_ = true; }
  void release() {
    if (kind_ == kind::shape) {  // no elements to free
      freed_ = shape_freed_;
      return;
    }
    if (kind_ != kind::empty) freed_ = true;
    payload_.reset();
  }
  bool defined() const { return kind_ != kind::empty; }
  void surrender(drain_list& d) {
    if (payload_) d.others.push_back(std::move(payload_));
  }

 private:
  friend struct graph_dot_access;  // reads it for the graph picture (<metagrad/graph_dot.hpp>)
  enum class kind : std::uint8_t { empty, leaf, input, output, number, packed, shape };
  // What an input, an output or a shape is saved as (Note [Saved tensors]): the fields of an
  // alias, made into a tensor on unpack; 64 bytes (a tensor of rank 0 or 1 needs no other
  // allocation, another's shape and strides share one).
  struct view {
    std::shared_ptr<storage> store;
    std::shared_ptr<graph_node> grad_fn;  // an input's when saved
    std::int64_t offset = 0;
    std::uint32_t detaches = 0;  // the storage's count of in-place detaches when saved
    std::uint16_t rank = 0;
    bool wrapped_number = false;

    view() = default;
    view(const view&) = delete;
    view& operator=(const view&) = delete;
    ~view() {
      if (rank > 1) delete[] dims_.many;
    }
    void set_dims(const shape_t& shape, const shape_t& strides) {
      rank = static_cast<std::uint16_t>(shape.size());
      std::int64_t* d = dims_.few;  // rank 1: the extent and the stride inline
      if (rank > 1) d = dims_.many = new std::int64_t[2 * shape.size()];
      std::copy(shape.begin(), shape.end(), d);
      std::copy(strides.begin(), strides.end(), d + rank);
    }
    std::span<const std::int64_t> shape() const { return {dims(), rank}; }
    std::span<const std::int64_t> strides() const { return {dims() + rank, rank}; }

   private:
    union {
      std::int64_t* many;  // rank over 1: the shape, then the strides
      std::int64_t few[2];
    } dims_{};
    const std::int64_t* dims() const { return rank > 1 ? dims_.many : dims_.few; }
  };
  static_assert(sizeof(void*) != 8 || sizeof(view) == 64);
  struct packed_entry {
    std::shared_ptr<packed_tensor> packed;
    std::shared_ptr<graph_node> history;  // grad_fn (the accumulator, for a leaf) when saved
    // What was saved: the unpack hook's result must have its shape, and is converted to its
    // dtype and device (torch computes in the types unpack returns, which gives these values).
    shape_t shape;
    mg::dtype dtype = mg::dtype::f32;
    mg::device device = mg::device::cpu;
    bool is_output = false;
  };

  template <int = 0>
  void check_not_freed(const char* op) const;
  template <int = 0>
  void check_unchanged(const storage& st, std::span<const std::int64_t> shape,
                       const char* op) const;
  template <int = 0>
  void check_not_detached(const char* op) const;
  template <int = 0>
  [[noreturn]] void fail_detached(const char* op, std::span<const std::int64_t> shape) const;

  // The bit-fields read through these in the template members: g++ 12 gives an enum bit-field
  // the type of its storage in a template ("no match for operator==").
  kind kind_of() const { return kind_; }
  bool bare() const { return bare_; }
  bool edge_history() const { return edge_history_; }
  mg::dtype number_dtype_of() const { return number_dtype_; }
  mg::device number_device_of() const { return mg::device{number_device_}; }

  // 32 bytes: the flags share two bytes (a node holds one per saved value)
  // a tensor_impl (leaf), a view, a storage (bare), a packed_entry, or null
  std::shared_ptr<void> payload_;
  std::uint64_t word_ = 0;  // the version when saved, or the bits of a saved number
  // the output number of an input or output; with edge_history_, the owner's edge to read it from
  std::uint32_t output_nr_ = 0;
  kind kind_ : 3 = kind::empty;
  mg::dtype number_dtype_ : 2 = mg::dtype::f64;
  mg::device_type number_device_ : 1 = mg::device_type::cpu;  // numbers are saved from cpu only
  bool check_version_ : 1 = true;
  bool freed_ : 1 = false;
  bool shape_freed_ : 1 = false;
  bool bare_ : 1 = false;          // a 0-d input or output at offset 0: its storage is the payload
  bool edge_history_ : 1 = false;  // an input's grad_fn is its owner's edge output_nr_
};

// A 0-d tensor holding v (kernels of tensor_kernels.hpp; declared here to keep saved.hpp below
// them).
impl_ptr number_tensor(double v, mg::dtype d, mg::device dev);

template <int>
void saved_variable::check_not_freed(const char* op) const {
  if (freed_)
    fail(
        "Trying to backward through the graph a second time (or to use saved tensors after "
        "they were freed): the saved tensors of ",
        op,
        " were freed when backward ran; pass .retain_graph = true to the first backward (or "
        "mg::autograd::grad) if you need to backward through the graph again");
}

template <int>
void saved_variable::check_unchanged(const storage& st, std::span<const std::int64_t> shape,
                                     const char* op) const {
  if (check_version_ && st.version != word_)
    fail(
        "one of the tensors needed for gradient computation has been modified by an in-place "
        "operation: a tensor of shape ",
        shape_string(shape), " saved by ", op, " is at version ", st.version, "; expected version ",
        word_, "; make a copy before modifying it in place, or modify it out of place");
}

// Note [Detached saved inputs]: an input is saved with the grad_fn it had, which detach_()
// cannot take back; torch reads the input's history when it unpacks and so refuses an input
// detached in place since. detach_() of a tensor with history counts on its storage
// (storage::detaches), and unpacking an input saved with history checks the count.
template <int>
void saved_variable::check_not_detached(const char* op) const {
  if (kind_of() != kind::input) return;
  if (bare()) {  // saved with history only through the edge, and with no detaches
    const auto& st = *static_cast<const storage*>(payload_.get());
    if (edge_history() && st.detaches != 0) fail_detached(op, shape_t{});
    return;
  }
  const view& v = *static_cast<const view*>(payload_.get());
  if ((v.grad_fn || edge_history()) && v.store->detaches != v.detaches)
    fail_detached(op, v.shape());
}

template <int>
void saved_variable::fail_detached(const char* op, std::span<const std::int64_t> shape) const {
  fail(op,
       ": Trying to use a saved tensor that has been detached in place (detach_()) since it was "
       "saved (shape ",
       shape_string(shape),
       "); use the out-of-place detach() instead, which leaves the saved tensor's history "
       "alone");
}

template <int>
saved_variable::elements saved_variable::peek(const char* op) const {
  check_not_freed(op);
  if (kind_of() == kind::leaf) {
    const auto& t = *static_cast<const tensor_impl*>(payload_.get());
    check_unchanged(*t.store, t.shape, op);
    return {t.store.get(), t.shape.size(), t.offset};
  }
  if (kind_of() != kind::input && kind_of() != kind::output) return {};
  if (bare()) {
    const auto& st = *static_cast<const storage*>(payload_.get());
    check_unchanged(st, {}, op);
    check_not_detached(op);
    return {&st, 0, 0};
  }
  const view& v = *static_cast<const view*>(payload_.get());
  check_unchanged(*v.store, v.shape(), op);
  check_not_detached(op);
  return {v.store.get(), v.rank, v.offset};
}

template <int>
impl_ptr saved_variable::unpack(const graph_node* owner, const char* op) const {
  check_not_freed(op);
  const auto self = [&]() -> std::shared_ptr<graph_node> {
    const auto* r = running_node();
    return r && r->get() == owner ? *r : nullptr;
  };
  switch (kind_of()) {
    case kind::empty:
      return nullptr;
    case kind::number:
      return number_tensor(std::bit_cast<double>(word_), number_dtype_of(), number_device_of());
    case kind::packed: {
      const auto& e = *std::static_pointer_cast<packed_entry>(payload_);
      const impl_ptr u = e.packed->unpack();
      if (!u)
        fail(op,
             ": a saved-tensor unpack hook returned an undefined tensor; it must return the "
             "tensor pack received (or one equal to it)");
      if (u->shape != e.shape)
        fail(op, ": a saved-tensor unpack hook returned a tensor of shape ", shape_string(u->shape),
             " for a saved tensor of shape ", shape_string(e.shape),
             "; it must return the tensor pack received (or one equal to it)");
      impl_ptr c = u->dtype() == e.dtype ? u : copy_kernel(*u, e.dtype, u->shape);
      if (c->device() != e.device) c = transfer_kernel(*c, e.device);
      auto t = alias_of(*c);
      t->grad_fn = e.is_output ? self() : e.history;
      t->output_nr = output_nr_;
      return t;
    }
    default:
      break;
  }
  if (kind_of() == kind::leaf) {
    auto data = std::static_pointer_cast<tensor_impl>(payload_);
    check_unchanged(*data->store, data->shape, op);
    return data;
  }
  auto t = make_pooled<tensor_impl>();
  t->is_inference = false;  // an inference tensor is never saved
  if (bare()) {
    t->store = std::static_pointer_cast<storage>(payload_);
    check_unchanged(*t->store, {}, op);
    check_not_detached(op);
  } else {
    const view& v = *static_cast<const view*>(payload_.get());
    check_unchanged(*v.store, v.shape(), op);
    check_not_detached(op);
    t->store = v.store;
    t->shape.assign(v.shape().begin(), v.shape().end());
    t->strides.assign(v.strides().begin(), v.strides().end());
    t->offset = v.offset;
    t->wrapped_number = v.wrapped_number;
    t->grad_fn = v.grad_fn;
  }
  if (kind_of() == kind::shape) return t;
  t->output_nr = output_nr_;
  if (kind_of() == kind::output) {
    t->grad_fn = self();
  } else if (edge_history()) {
    if (!owner) fail(op, ": internal error: a saved input's history is its node's edge");
    const edge& e = const_cast<graph_node*>(owner)->next_edges()[output_nr_];
    t->grad_fn = e.function;
    t->output_nr = e.input_nr;
  }
  return t;
}

// Breaks a cycle of a node held only by hooks that captured its output (hooks.hpp).
void release_node_self_capture(const std::shared_ptr<graph_node>& n);

// Moves what n owns onto the drain, then drains it unless a drain is already running. See Note
// [Iterative destruction].
template <int = 0>
void surrender_node(graph_node& n) {
  drain_list& d = drain();
  for (edge& e : n.next_edges())
    if (e.function) d.nodes.push_back(std::move(e.function));
  for (saved_variable& s : n.saved()) s.surrender(d);
  if (n.hooks) d.others.push_back(std::move(n.hooks));
  n.surrender_extra();
  if (d.active) return;
  d.active = true;
  while (!d.nodes.empty() || !d.others.empty()) {
    if (!d.others.empty()) {
      std::shared_ptr<void> p = std::move(d.others.back());
      d.others.pop_back();
    } else {
      std::shared_ptr<graph_node> p = std::move(d.nodes.back());
      d.nodes.pop_back();
      release_node_self_capture(p);
    }  // p is released here; if it was the last reference, its destructor adds to the lists
  }
  d.active = false;
}

// Every node is made by new_graph_node, so that its destructor surrenders first, and so that its
// backward is reached through a pointer (Note [Backward through a pointer]).
//
// Note [Backward through a pointer]: a node type's backward is its non-virtual member
// `backward(grads, out)`; the one virtual apply is final_node<T>'s, which calls it through a
// pointer per node type that only new_graph_node<T> sets. GCC keeps every virtual function of a
// vtable it has seen alive for devirtualization, with all it calls; a backward reached that way
// (an op node's holds the kernels of every dtype) cost every file that includes the runtime
// engine's headers its optimization, whether the file records that node or not. Named only by
// new_graph_node, it is compiled where a node of its type is made. The pointer is per type, not per
// node: a node is no larger. (docs/performance.md, "Cheap headers".)
template <class T>
struct final_node final : T {
  using T::T;
  using backward_fn = void (*)(final_node&, std::span<impl_ptr>, std::span<impl_ptr>);
  static inline backward_fn backward_of_type = nullptr;
  static void run_backward(final_node& n, std::span<impl_ptr> grads, std::span<impl_ptr> out) {
    n.T::backward(grads, out);
  }
  void apply(std::span<impl_ptr> grads, std::span<impl_ptr> out) override {
    backward_of_type(*this, grads, out);
  }
  ~final_node() override { surrender_node(*this); }
};

template <class T, class... A>
std::shared_ptr<T> new_graph_node(A&&... a) {
  static const bool set = (final_node<T>::backward_of_type = &final_node<T>::run_backward, true);
  (void)set;
  return make_pooled<final_node<T>>(std::forward<A>(a)...);
}

}  // namespace mg::detail

// The recorded graph of the runtime engine, at the level of implementation objects: tensor_impl
// (what an mg::tensor handle points to), node (one recorded operation), saved_variable, and the
// thread-local grad mode.
//
// Note [Graph ownership]: ownership points from outputs to inputs only. A tensor owns its
// grad_fn; a node owns the nodes of its inputs (next) and the tensors it saved. A node never
// owns its own output: an output saved by its own grad_fn is kept as an alias without grad_fn
// and re-attached on unpack (torch's SavedVariable). A leaf owns its grad accumulator weakly.
// So the graph has no reference cycles, and dropping the last tensor frees it.
//
// Note [Iterative destruction]: freeing the head of a chain of a million nodes must not recurse a
// million times. ~node moves every graph reference it owns (next, and the grad_fn of saved
// tensors it alone owns) onto a local stack and drains it, taking apart each node it holds the
// last reference to before letting it go; so each destructor nests at most one level.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <metagrad/detail/storage.hpp>
#include <metagrad/error.hpp>

namespace mg::detail {

struct graph_node;

struct tensor_impl {
  std::shared_ptr<storage> store;
  shape_t shape, strides;      // strides in elements
  std::int64_t offset = 0;     // in elements
  bool requires_grad = false;  // set on leaves; a tensor with a grad_fn requires grad
  bool is_view = false;        // made by a view op (slice, select, reshape...): shares a base
  std::shared_ptr<tensor_impl> base;  // views: the tensor whose storage they view (not a view)
  std::uint64_t view_version = 0;     // views: the version their grad_fn reflects
  std::shared_ptr<graph_node> grad_fn;
  std::weak_ptr<graph_node> grad_accumulator;  // leaves: See Note [Graph ownership]
  std::shared_ptr<tensor_impl> grad;

  mg::dtype dtype() const { return store->dtype; }
  mg::device device() const { return store->device; }
  std::int64_t numel() const { return numel_of(shape); }
  bool is_contiguous() const {
    std::int64_t acc = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
      if (shape[i] != 1 && strides[i] != acc) return false;
      acc *= shape[i];
    }
    return true;
  }
  template <class T>
  T* data() const {
    return static_cast<T*>(store->data) + offset;
  }
};

using impl_ptr = std::shared_ptr<tensor_impl>;

// A new impl viewing the same elements, with no autograd information.
inline impl_ptr alias_of(const tensor_impl& x) {
  auto t = std::make_shared<tensor_impl>();
  t->store = x.store;
  t->shape = x.shape;
  t->strides = x.strides;
  t->offset = x.offset;
  return t;
}

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

// A tensor kept for backward. See Note [Graph ownership] and Note [Version counter].
class saved_variable {
 public:
  saved_variable() = default;
  saved_variable(const impl_ptr& t, bool is_output, const std::shared_ptr<graph_node>& owner,
                 bool check_version = true) {
    if (!t) return;
    version_ = t->store->version;
    check_version_ = check_version;
    if (is_output) {
      data_ = alias_of(*t);
      self_ = owner;
      is_output_ = true;
    } else if (t->requires_grad && !t->grad_fn) {
      data_ = t;  // a leaf that requires grad: double backward accumulates into it
    } else {
      // the history at the time of saving (torch's SavedVariable): an in-place write may give
      // t a new grad_fn later, and holding t itself could then close a reference cycle
      data_ = alias_of(*t);
      data_->grad_fn = t->grad_fn;
    }
  }

  // The saved tensor, with its grad_fn re-attached for an output.
  impl_ptr unpack(const char* node_name) const {
    if (freed_)
      fail(
          "Trying to backward through the graph a second time (or to use saved tensors after "
          "they were freed): the saved tensors of ",
          node_name,
          " were freed when backward ran; pass .retain_graph = true to the first backward (or "
          "mg::autograd::grad) if you need to backward through the graph again");
    if (!data_) return nullptr;
    if (check_version_ && data_->store->version != version_)
      fail(
          "one of the tensors needed for gradient computation has been modified by an in-place "
          "operation: a tensor of shape ",
          shape_string(data_->shape), " saved by ", node_name, " is at version ",
          data_->store->version, "; expected version ", version_,
          "; make a copy before modifying it in place, or modify it out of place");
    if (!is_output_) return data_;
    auto t = alias_of(*data_);
    t->grad_fn = self_.lock();
    return t;
  }

  void release() {
    if (data_ || is_output_) freed_ = true;
    data_.reset();
  }

  impl_ptr& data() { return data_; }

 private:
  impl_ptr data_;
  std::weak_ptr<graph_node> self_;
  std::uint64_t version_ = 0;
  bool is_output_ = false;
  bool check_version_ = true;  // false: only the shape is read (saved::input_shapes)
  bool freed_ = false;
};

// One recorded operation with one output. next[i] is the node that receives the gradient of
// input i (null when input i needs none).
struct graph_node {
  std::vector<std::shared_ptr<graph_node>> next;
  std::vector<saved_variable> saved;
  std::vector<std::weak_ptr<tensor_impl>> retained;  // non-leaf outputs that retain_grad()
  impl_ptr leaf;  // set on grad accumulators only: the leaf they accumulate into

  graph_node() = default;
  graph_node(const graph_node&) = delete;
  graph_node& operator=(const graph_node&) = delete;
  virtual ~graph_node();

  /// The name of the operation that recorded this node, e.g. "mul".
  virtual const char* name() const = 0;
  /// The nodes that receive this node's input gradients (null where none is needed).
  const std::vector<std::shared_ptr<graph_node>>& next_functions() const { return next; }

  // Gradients with respect to the inputs, one per entry of next, from the output's gradient.
  virtual std::vector<impl_ptr> apply(impl_ptr grad) = 0;

  void release_saved() {
    for (auto& s : saved) s.release();
  }
};

// Moves the graph references n owns onto out. See Note [Iterative destruction].
inline void surrender(graph_node& n, std::vector<std::shared_ptr<graph_node>>& out) {
  auto take_impl = [&out](impl_ptr& t) {
    if (!t || t.use_count() != 1) return;
    if (t->grad_fn) out.push_back(std::move(t->grad_fn));
    if (t->grad && t->grad.use_count() == 1 && t->grad->grad_fn)
      out.push_back(std::move(t->grad->grad_fn));
  };
  for (auto& e : n.next)
    if (e) out.push_back(std::move(e));
  for (auto& s : n.saved) take_impl(s.data());
  take_impl(n.leaf);
}

inline graph_node::~graph_node() {
  std::vector<std::shared_ptr<graph_node>> stack;
  surrender(*this, stack);
  while (!stack.empty()) {
    std::shared_ptr<graph_node> p = std::move(stack.back());
    stack.pop_back();
    if (p.use_count() == 1) surrender(*p, stack);
  }  // p is released here; if it was the last reference, its (now empty) destructor runs
}

}  // namespace mg::detail

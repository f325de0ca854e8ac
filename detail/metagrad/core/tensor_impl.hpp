// tensor_impl: what an mg::tensor handle points to (storage, shape, strides, and the autograd
// fields the runtime engine keeps on it), and the thread-local inference mode its constructor
// reads. The kernels of the backends work on it; the recorded graph (runtime/graph.hpp) links
// it to its nodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <metagrad/core/object_pool.hpp>
#include <metagrad/core/storage.hpp>

namespace mg {
class hook_handle;
namespace autograd {
struct node;  // <metagrad/node.hpp>
}
}  // namespace mg

namespace mg::detail {

using graph_node = autograd::node;
struct hook_set;  // runtime/hooks.hpp

// Inference mode (thread-local, as torch's): grad mode is off and the tensors created are
// inference tensors, which cannot be saved for backward.
inline bool& inference_mode() {
  thread_local bool enabled = false;
  return enabled;
}

// Which output of a multi-output view op (unbind, split, chunk) a view is, or descends from
// (op 0: none). Note [Multi-output views] in <metagrad/ops/split.hpp>.
struct view_origin {
  std::uint32_t op : 2 = 0;
  std::uint32_t output : 30 = 0;
};

struct tensor_impl {
  std::shared_ptr<storage> store;
  shape_t shape, strides;      // strides in elements
  std::int64_t offset = 0;     // in elements
  bool requires_grad = false;  // set on leaves; a tensor with a grad_fn requires grad
  bool is_view = false;        // made by a view op (slice, select, reshape...): shares a base
  bool is_inference = inference_mode();
  bool wrapped_number = false;        // a 0-d tensor made from a C++ number operand
  bool own_tangent_only = false;      // a view that never reads its base's tangent (forward_ad.hpp)
  std::uint32_t output_nr = 0;        // which output of grad_fn this tensor is
  std::uint32_t hook_self_refs = 0;   // See Note [Hooks that capture their tensor]
  view_origin origin{};               // views: made by unbind, split or chunk (or a view of one)
  std::shared_ptr<tensor_impl> base;  // views: the tensor whose storage they view (not a view)
  std::uint64_t view_version = 0;     // views: the version their grad_fn reflects
  std::shared_ptr<graph_node> grad_fn;
  std::weak_ptr<graph_node> grad_accumulator;  // leaves: See Note [Graph ownership]
  std::shared_ptr<tensor_impl> grad;
  std::shared_ptr<hook_set> hooks;       // leaves: their tensor hooks (run by the grad accumulator)
  std::shared_ptr<tensor_impl> tangent;  // forward-mode AD, while a dual level is open

  mg::dtype dtype() const { return store->dtype; }
  mg::device device() const { return store->device; }
  std::int64_t numel() const { return numel_of(shape); }
  // Expanded: a dimension of stride 0 and size over 1, so several elements share one location
  // (it cannot be written in place, nor perturbed element by element).
  bool is_expanded() const {
    for (std::size_t i = 0; i < shape.size(); ++i)
      if (strides[i] == 0 && shape[i] > 1) return true;
    return false;
  }
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
  auto t = make_pooled<tensor_impl>();
  t->store = x.store;
  t->shape = x.shape;
  t->strides = x.strides;
  t->offset = x.offset;
  t->is_inference = t->is_inference || x.is_inference;
  return t;
}

}  // namespace mg::detail

// The recorded graph of the runtime engine: its ownership rules, and the thread-local grad mode.
// Its objects are tensor_impl (core/tensor_impl.hpp: what an mg::tensor handle points to) and
// mg::autograd::node and edge (<metagrad/node.hpp>: one recorded operation, and where a gradient
// goes); detail::graph_node names the node type inside the engine.
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
#include <metagrad/node.hpp>

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

}  // namespace mg::detail

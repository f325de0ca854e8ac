// torch.autograd for mg::tensor: gradients of outputs with respect to chosen inputs, and grad
// mode. (`tensor::backward`, which accumulates into `.grad()`, is in <metagrad/tensor.hpp>.)
#pragma once

#include <metagrad/detail/autograd_engine.hpp>
#include <metagrad/detail/graph.hpp>
#include <metagrad/tensor.hpp>

namespace mg {

/// Is grad mode on in this thread (operations are recorded)? On by default.
inline bool is_grad_enabled() { return detail::grad_mode(); }

/// Turns recording off in this thread for its lifetime (RAII), like `torch.no_grad()`:
/// ```cpp
/// { mg::no_grad_guard ng; w = w - 0.1 * w.grad(); }   // not recorded
/// ```
class no_grad_guard {
 public:
  no_grad_guard() = default;
  no_grad_guard(const no_grad_guard&) = delete;
  no_grad_guard& operator=(const no_grad_guard&) = delete;

 private:
  detail::grad_mode_guard guard_{false};
};

/// Sets grad mode on or off in this thread for its lifetime: `mg::enable_grad_guard on(true);`.
class enable_grad_guard {
 public:
  explicit enable_grad_guard(bool enabled = true) : guard_(enabled) {}

 private:
  detail::grad_mode_guard guard_;
};

namespace autograd {

/// Options of `mg::autograd::grad`. `retain_graph` defaults to `create_graph`.
struct grad_options {
  std::optional<bool> retain_graph{};
  bool create_graph = false;
  bool allow_unused = false;
};

/// The gradients of `outputs` (weighted by `grad_outputs`; may be empty for one-element
/// outputs) with respect to `inputs`, returned rather than accumulated into `.grad()`. With
/// `.create_graph = true` the result is itself recorded, so it can be differentiated again:
/// ```cpp
/// auto [dx] = mg::autograd::grad({y}, {x}, {}, {.create_graph = true});    // a tensor_list
/// auto d2x  = mg::autograd::grad({dx}, {x})[0];
/// ```
/// An input the outputs do not depend on is an error unless `.allow_unused = true`, which gives
/// an undefined tensor in its slot.
inline tensor_list grad(const tensor_list& outputs, const tensor_list& inputs,
                        const tensor_list& grad_outputs = {}, const grad_options& options = {}) {
  detail::backward_call c{"autograd::grad"};
  c.create_graph = options.create_graph;
  c.keep_graph = options.retain_graph.value_or(options.create_graph);
  c.accumulate = false;
  c.allow_unused = options.allow_unused;
  const auto r = detail::run_backward(outputs, grad_outputs, inputs, c);
  tensor_list out;
  out.reserve(r.size());
  for (const auto& g : r) out.emplace_back(g);
  return out;
}

/// Accumulates the gradients of `outputs` into the `.grad()` of the leaves (or of `.inputs`),
/// like `tensor::backward` for several outputs at once.
inline void backward(const tensor_list& outputs, const tensor_list& grad_outputs = {},
                     const backward_options& options = {}) {
  detail::backward_call c{"backward"};
  c.create_graph = options.create_graph;
  c.keep_graph = options.retain_graph.value_or(options.create_graph);
  detail::run_backward(outputs, grad_outputs, options.inputs, c);
}

}  // namespace autograd
}  // namespace mg

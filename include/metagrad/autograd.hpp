// torch.autograd for mg::tensor: gradients of outputs with respect to chosen inputs, the grad
// modes, multi-tensor gradient hooks and anomaly detection. (`tensor::backward`, which
// accumulates into `.grad()`, is in <metagrad/tensor.hpp>; saved-tensor hooks are in
// <metagrad/saved_tensors.hpp>.)
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <metagrad/runtime/anomaly.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/runtime/engine.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/hooks.hpp>
#include <metagrad/tensor.hpp>

namespace mg {

/// Is grad mode on in this thread (operations are recorded)? On by default.
inline bool is_grad_enabled() { return detail::grad_mode(); }
/// Sets this thread's grad mode (for a scope, prefer no_grad_guard or enable_grad_guard).
inline void set_grad_enabled(bool enabled) { detail::grad_mode() = enabled; }

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

/// Inference mode in this thread for its lifetime (RAII), like `torch.inference_mode()`: nothing
/// is recorded, and the tensors created are inference tensors (`t.is_inference()`), which
/// cannot be saved for backward nor modified in place outside inference mode.
class inference_mode_guard {
 public:
  explicit inference_mode_guard(bool enabled = true)
      : grad_(enabled ? false : detail::grad_mode()), previous_(detail::inference_mode()) {
    detail::inference_mode() = enabled;
  }
  inference_mode_guard(const inference_mode_guard&) = delete;
  inference_mode_guard& operator=(const inference_mode_guard&) = delete;
  ~inference_mode_guard() { detail::inference_mode() = previous_; }

 private:
  detail::grad_mode_guard grad_;
  bool previous_;
};

/// Is inference mode on in this thread?
inline bool is_inference_mode_enabled() { return detail::inference_mode(); }

namespace autograd {

/// Options of `mg::autograd::grad`. `retain_graph` defaults to `create_graph`; `allow_unused`
/// defaults to `materialize_grads`, which gives zeros (requiring grad, as torch's) instead of
/// undefined tensors for unused inputs.
struct grad_options {
  std::optional<bool> retain_graph{};
  bool create_graph = false;
  std::optional<bool> allow_unused{};
  bool materialize_grads = false;
};

/// The gradients of `outputs` (weighted by `grad_outputs`; may be empty for one-element
/// outputs) with respect to `inputs`, returned rather than accumulated into `.grad()`. With
/// `.create_graph = true` the result is itself recorded, so it can be differentiated again:
/// ```cpp
/// auto [dx] = mg::autograd::grad({y}, {x}, {}, {.create_graph = true});    // a tensor_list
/// auto d2x  = mg::autograd::grad({dx}, {x})[0];
/// ```
/// An input the outputs do not depend on is an error unless `.allow_unused = true`, which gives
/// an undefined tensor in its slot, or `.materialize_grads = true`, which gives zeros.
template <int I = 0>  // a template in name only (Note [Engine ops])
tensor_list grad(const tensor_list& outputs, const tensor_list& inputs,
                 const tensor_list& grad_outputs = {}, const grad_options& options = {}) {
  if (options.materialize_grads && options.allow_unused == false)
    detail::fail(
        "autograd::grad: .materialize_grads = true gives zeros for unused inputs, which "
        ".allow_unused = false forbids; leave allow_unused unset (or true)");
  detail::backward_call c{"autograd::grad"};
  c.ops = detail::engine_ops_of<I>();
  c.create_graph = options.create_graph;
  c.keep_graph = options.retain_graph.value_or(options.create_graph);
  c.accumulate = false;
  c.allow_unused = options.allow_unused.value_or(options.materialize_grads);
  const auto r = detail::run_backward(outputs, grad_outputs, inputs, c);
  tensor_list out;
  out.reserve(r.size());
  for (std::size_t i = 0; i < r.size(); ++i)
    if (r[i] || !options.materialize_grads)
      out.emplace_back(r[i]);
    else
      out.push_back(zeros_like(inputs[i]).requires_grad_());
  return out;
}

/// Accumulates the gradients of `outputs` into the `.grad()` of the leaves (or of `.inputs`),
/// like `tensor::backward` for several outputs at once.
template <int I = 0>  // a template in name only (Note [Engine ops])
void backward(const tensor_list& outputs, const tensor_list& grad_outputs = {},
              const backward_options& options = {}) {
  detail::backward_call c{"backward"};
  c.ops = detail::engine_ops_of<I>();
  c.create_graph = options.create_graph;
  c.keep_graph = options.retain_graph.value_or(options.create_graph);
  detail::run_backward(outputs, grad_outputs, options.inputs, c);
}

/// Records an in-place change of t's elements that metagrad did not see (a write through raw
/// memory), so that backward reports the saved tensors it invalidates.
template <int I = 0>  // a template in name only (Note [View refresh])
void increment_version(const tensor& t) {
  if (!t.defined()) detail::fail("increment_version: the tensor is undefined");
  detail::bump_version<I>(*t.impl());
}

/// When a multi-grad hook runs (torch's `mode="all"` and `mode="any"`).
enum class multi_grad_mode {
  all,  // once all the gradients a backward computes are ready: fn(const mg::tensor_list&)
  any,  // at the first gradient a backward computes: fn(const mg::tensor& grad)
};

/// Calls `fn(const mg::tensor_list& grads)` once per backward, after the gradients of all of
/// `tensors` that this backward computes are computed (grads[i] of a tensor it does not reach is
/// undefined); with `multi_grad_mode::any`, calls `fn(const mg::tensor& grad)` once per backward
/// with the first of them computed:
/// ```cpp
/// auto h = mg::autograd::register_multi_grad_hook({a, b}, [](const mg::tensor_list& g) {...});
/// auto k = mg::autograd::register_multi_grad_hook({a, b}, [](const mg::tensor& g) {...},
///                                                 mg::autograd::multi_grad_mode::any);
/// ```
template <class F>
hook_handle register_multi_grad_hook(const tensor_list& tensors, F fn) {
  static_assert(std::is_invocable_v<F&, const tensor_list&>,
                "metagrad: a multi-grad hook is callable as fn(const mg::tensor_list& grads)");
  struct state {
    explicit state(F f) : fn(std::move(f)) {}
    F fn;
    std::vector<std::weak_ptr<detail::tensor_impl>> leaves;  // leaves: their accumulator
    std::vector<std::weak_ptr<detail::graph_node>> nodes;    // others: their grad_fn
    std::mutex m;
    struct pending {
      std::size_t count = 0, expected = 0;
      tensor_list grads;
    };
    std::unordered_map<std::uint64_t, pending> tasks;
  };
  auto s = std::make_shared<state>(std::move(fn));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const tensor& t = tensors[i];
    if (!t.defined() || !t.requires_grad())
      detail::fail("register_multi_grad_hook: tensor ", i,
                   " does not require grad; every tensor must require grad");
    s->leaves.emplace_back(t.is_leaf() ? t.impl() : nullptr);
    s->nodes.emplace_back(t.is_leaf() ? nullptr : t.grad_fn());
  }
  const auto node_of = [](const state& st, std::size_t j) -> const detail::graph_node* {
    if (const auto l = st.leaves[j].lock()) return l->grad_accumulator.lock().get();
    return st.nodes[j].lock().get();
  };
  hook_handle all;  // the state lives as long as any of its hooks
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    auto h = [s, i, node_of](const tensor& g) {
      const detail::graph_task* task = detail::current_task();
      if (!task) return tensor{};
      tensor_list ready;
      {
        std::lock_guard lock(s->m);
        auto& p = s->tasks[task->id];
        if (p.count == 0) {
          p.grads.assign(s->leaves.size(), tensor{});
          for (std::size_t j = 0; j < s->leaves.size(); ++j)
            if (const auto* n = node_of(*s, j); n && detail::will_execute(*task, n)) ++p.expected;
        }
        p.grads[i] = g;
        if (++p.count < p.expected) return tensor{};
        ready = std::move(p.grads);
        s->tasks.erase(task->id);
      }
      s->fn(ready);
      return tensor{};
    };
    detail::hook_access::join(all,
                              detail::add_tensor_hook(
                                  tensors[i].impl(), [&] { return detail::make_tensor_hook(h); },
                                  "register_multi_grad_hook", /*sees_undefined=*/true));
  }
  return all;
}

template <class F>
hook_handle register_multi_grad_hook(const tensor_list& tensors, F fn, multi_grad_mode mode) {
  constexpr bool all_form = std::is_invocable_v<F&, const tensor_list&>;
  constexpr bool any_form = std::is_invocable_v<F&, const tensor&>;
  static_assert(all_form || any_form,
                "metagrad: a multi-grad hook is callable as fn(const mg::tensor_list& grads) "
                "(mode all) or fn(const mg::tensor& grad) (mode any)");
  if (mode == multi_grad_mode::all) {
    if constexpr (all_form) {
      return register_multi_grad_hook(tensors, std::move(fn));
    } else {
      detail::fail(
          "register_multi_grad_hook: mode all calls the hook with every gradient: it is "
          "callable as fn(const mg::tensor_list& grads); use multi_grad_mode::any for "
          "fn(const mg::tensor& grad)");
    }
  }
  if constexpr (any_form) {
    struct state {
      explicit state(F f) : fn(std::move(f)) {}
      F fn;
      std::mutex m;
      std::set<std::uint64_t> ran;  // the backward calls (graph tasks) it ran in
    };
    auto s = std::make_shared<state>(std::move(fn));
    hook_handle all;
    for (const tensor& t : tensors) {
      if (!t.defined() || !t.requires_grad()) continue;  // as torch: only tensors with gradients
      auto h = [s](const tensor& g) {
        const detail::graph_task* task = detail::current_task();
        if (!task) return tensor{};
        {
          std::lock_guard lock(s->m);
          if (!s->ran.insert(task->id).second) return tensor{};
          // ids grow: a task 2^16 calls old is over
          while (*s->ran.begin() + (1u << 16) < task->id) s->ran.erase(s->ran.begin());
        }
        s->fn(g);
        return tensor{};
      };
      detail::hook_access::join(all, t.register_hook(std::move(h)));
    }
    return all;
  } else {
    detail::fail(
        "register_multi_grad_hook: mode any calls the hook with one gradient: it is "
        "callable as fn(const mg::tensor& grad)");
  }
}

/// Turns anomaly detection on or off (for all threads, as torch's): with it on, a node whose
/// backward produces NaN or infinity throws mg::error naming the node and the forward call that
/// recorded it, and any error in backward names that forward call (Note [Anomaly detection]).
/// `check_nan = false` keeps the forward traces and skips the NaN check. It slows backward down:
/// use it to debug.
inline void set_detect_anomaly(bool on, bool check_nan = true) {
  detail::anomaly_check_nan().store(check_nan);
  detail::anomaly_mode().store(on);
}
inline bool is_anomaly_enabled() { return detail::anomaly_mode().load(); }
/// Does anomaly detection check gradients for NaN (when it is on)?
inline bool is_anomaly_check_nan_enabled() { return detail::anomaly_check_nan().load(); }

/// Anomaly detection on for its lifetime (RAII): `mg::autograd::detect_anomaly_guard g;`, or
/// `detect_anomaly_guard g(true, /*check_nan=*/false);`.
class detect_anomaly_guard {
 public:
  explicit detect_anomaly_guard(bool on = true, bool check_nan = true)
      : previous_(is_anomaly_enabled()), previous_check_nan_(is_anomaly_check_nan_enabled()) {
    set_detect_anomaly(on, check_nan);
  }
  detect_anomaly_guard(const detect_anomaly_guard&) = delete;
  detect_anomaly_guard& operator=(const detect_anomaly_guard&) = delete;
  ~detect_anomaly_guard() { set_detect_anomaly(previous_, previous_check_nan_); }

 private:
  bool previous_;
  bool previous_check_nan_;
};

#if !MG_HEADER_ONLY  // compiled in the library (Note [Compiled core] in core/config.hpp)
extern template tensor_list grad<0>(const tensor_list&, const tensor_list&, const tensor_list&,
                                    const grad_options&);
extern template void backward<0>(const tensor_list&, const tensor_list&, const backward_options&);
extern template void increment_version<0>(const tensor&);
#endif

}  // namespace autograd
}  // namespace mg

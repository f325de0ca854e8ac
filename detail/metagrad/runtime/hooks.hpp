// The hooks of the runtime graph: tensor hooks (on a leaf, or on the node that computes a
// non-leaf), retain_grad, node pre-hooks and post-hooks; the hook_handle that removes them.
//
// Note [Hook order]: for each node the engine runs, as torch does (engine.hpp, call step):
//   1. the tensor hooks of each output whose gradient is defined, in registration order, each
//      seeing the previous one's result; then retain_grad (it sees the hooked gradient);
//   2. the gradient is captured (mg::autograd::grad) or accumulated into a non-leaf input's
//      .grad (backward with .inputs); a node that only had to be reached stops here;
//   3. the node's pre-hooks on its incoming gradients;
//   4. the node itself;
//   5. the node's post-hooks on (gradients it computed, gradients it received).
// A leaf's tensor hooks run before its gradient is accumulated into .grad. A hook that returns a
// value replaces the gradient; its shape, dtype and device must be those of the gradient.
//
// Note [Hooks that capture their tensor]: `y.register_hook([y](...) {...})` closes a cycle: y
// owns its grad_fn (or, for a leaf, its hooks), which owns the hook, which owns y. When the hook
// is registered its captured references to y are counted (tensor_impl::hook_self_refs). When the
// last other reference goes (an mg::tensor handle, or the graph releasing the node), the
// self-capturing hooks are destroyed, which frees y. Other cycles through hooks (a hook capturing
// a view of its own tensor, or a tensor downstream of it) are the caller's to break, by remove().
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/saved.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg::detail {

inline std::uint64_t next_hook_id() {
  static std::atomic<std::uint64_t> n{1};
  return n.fetch_add(1, std::memory_order_relaxed);
}

using tensor_hook_fn = std::function<tensor(const tensor&)>;
using pre_hook_fn = std::function<std::optional<tensor_list>(const tensor_list&)>;
using post_hook_fn =
    std::function<std::optional<tensor_list>(const tensor_list&, const tensor_list&)>;
using post_accumulate_fn = std::function<void(const tensor&)>;

struct hook_set {
  struct tensor_hook {
    std::uint64_t id;
    std::uint32_t output_nr;
    tensor_hook_fn fn;
    std::weak_ptr<tensor_impl> owner;  // the tensor it was registered on
    std::uint32_t self_refs;  // references to owner the hook holds (Note [Hooks that capture...])
    bool sees_undefined = false;  // also called when no gradient arrives (multi-grad hooks)
  };
  struct retain {
    std::uint32_t output_nr;
    std::weak_ptr<tensor_impl> tensor;
  };
  std::vector<tensor_hook> tensor_hooks;
  std::vector<retain> retains;
  std::vector<std::pair<std::uint64_t, pre_hook_fn>> pre_hooks;
  std::vector<std::pair<std::uint64_t, post_hook_fn>> post_hooks;
  std::vector<std::pair<std::uint64_t, post_accumulate_fn>> post_accumulate;  // leaves only
  std::weak_ptr<graph_node> parent;  // anomaly mode: the node whose backward recorded this one

  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  bool remove(std::uint64_t id) {
    const auto by_id = [id](const auto& h) { return h.first == id; };
    auto t = std::find_if(tensor_hooks.begin(), tensor_hooks.end(),
                          [id](const tensor_hook& h) { return h.id == id; });
    if (t != tensor_hooks.end()) {
      tensor_hook dead = std::move(*t);
      tensor_hooks.erase(t);
      if (dead.self_refs)
        if (const auto o = dead.owner.lock()) o->hook_self_refs -= dead.self_refs;
      return true;  // dead (and what it captured) goes here
    }
    if (auto p = std::find_if(pre_hooks.begin(), pre_hooks.end(), by_id); p != pre_hooks.end()) {
      pre_hooks.erase(p);
      return true;
    }
    if (auto p = std::find_if(post_hooks.begin(), post_hooks.end(), by_id); p != post_hooks.end()) {
      post_hooks.erase(p);
      return true;
    }
    if (auto p = std::find_if(post_accumulate.begin(), post_accumulate.end(), by_id);
        p != post_accumulate.end()) {
      post_accumulate.erase(p);
      return true;
    }
    return false;
  }
  bool has_tensor_hooks(std::uint32_t output_nr) const {
    for (const auto& h : tensor_hooks)
      if (h.output_nr == output_nr) return true;
    for (const auto& r : retains)
      if (r.output_nr == output_nr) return true;
    return false;
  }
};

template <int = 0>
hook_set& hooks_of(std::shared_ptr<hook_set>& h) {
  if (!h) h = std::make_shared<hook_set>();
  return *h;
}

// Destroys the hooks of t that capture t when nothing else holds t or its grad_fn, besides
// `held` references to t and `held_fn` to its grad_fn of the caller. See Note [Hooks that
// capture their tensor].
inline void release_self_capture(const impl_ptr& t, long held, long held_fn) {
  if (!t || !t->hook_self_refs) return;
  if (t.use_count() != held + static_cast<long>(t->hook_self_refs)) return;
  if (t->grad_fn && t->grad_fn.use_count() != 1 + held_fn) return;
  hook_set* s = t->grad_fn ? t->grad_fn->hooks.get() : t->hooks.get();
  if (!s) return;
  std::vector<hook_set::tensor_hook> dead;
  auto& hs = s->tensor_hooks;
  for (auto it = hs.begin(); it != hs.end();) {
    if (it->owner.lock() == t && it->self_refs) {
      dead.push_back(std::move(*it));
      it = hs.erase(it);
    } else {
      ++it;
    }
  }
  t->hook_self_refs = 0;
}  // dead is destroyed here, and with it the references that kept t alive

// The post-accumulate-grad hooks of a leaf, after its .grad was accumulated (a copy of the list:
// a hook may register or remove hooks).
template <int = 0>
void run_post_accumulate_hooks(const impl_ptr& leaf) {
  const auto hooks = leaf->hooks->post_accumulate;
  const tensor t(leaf);
  for (const auto& [id, fn] : hooks) fn(t);
}

// The drain calls this for a node it is about to release (Note [Iterative destruction]).
inline void release_node_self_capture(const std::shared_ptr<graph_node>& n) {
  if (!n->hooks || n.use_count() != 2) return;
  for (const auto& h : n->hooks->tensor_hooks)
    if (h.self_refs && h.owner.use_count() == static_cast<long>(h.self_refs)) {
      const impl_ptr owner = h.owner.lock();
      if (owner->grad_fn == n) release_self_capture(owner, 1, 1);
      return;
    }
}

// Makes hook handles (a friend of mg::hook_handle).
struct hook_access {
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  static hook_handle make(const std::shared_ptr<hook_set>& s, std::uint64_t id) {
    hook_handle h;
    h.hooks_.emplace_back(s, id);
    return h;
  }
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  static void join(hook_handle& into, const hook_handle& h) {
    into.hooks_.insert(into.hooks_.end(), h.hooks_.begin(), h.hooks_.end());
  }
};

template <class F>
tensor_hook_fn make_tensor_hook(const F& fn) {
  static_assert(std::is_invocable_v<const F&, const tensor&>,
                "metagrad: a tensor hook is callable as fn(const mg::tensor& grad)");
  using R = std::invoke_result_t<const F&, const tensor&>;
  if constexpr (std::is_void_v<R>) {
    return [fn](const tensor& g) {
      fn(g);
      return tensor{};
    };
  } else {
    static_assert(std::is_convertible_v<R, tensor>,
                  "metagrad: a tensor hook returns an mg::tensor (undefined to keep the gradient) "
                  "or nothing");
    return [fn](const tensor& g) -> tensor { return fn(g); };
  }
}

// Registers a tensor hook on t (a leaf: its own hook set; else its grad_fn's, for its output
// number), counting the references to t the hook holds (Note [Hooks that capture...]).
template <int = 0>
hook_handle add_tensor_hook(const impl_ptr& t, const std::function<tensor_hook_fn()>& make,
                            const char* api, bool sees_undefined = false) {
  refresh_view(*t);  // first: a view of a base written in place since gets the base's history
  if (!requires_grad(*t))
    fail(api, ": cannot register a hook on a tensor that does not require grad (shape ",
         shape_string(t->shape), "); call requires_grad_() on the leaf first");
  const long before = t.use_count();
  tensor_hook_fn fn = make();
  const long refs = std::max(0L, t.use_count() - before);
  std::shared_ptr<hook_set>& owner = t->grad_fn ? t->grad_fn->hooks : t->hooks;
  hook_set& hs = hooks_of(owner);
  const std::uint64_t id = next_hook_id();
  hs.tensor_hooks.push_back({id, t->grad_fn ? t->output_nr : 0u, std::move(fn), t,
                             static_cast<std::uint32_t>(refs), sees_undefined});
  t->hook_self_refs += static_cast<std::uint32_t>(refs);
  return hook_access::make(owner, id);
}

template <class R>
std::optional<tensor_list> as_hook_result(R&& r) {
  if constexpr (std::is_convertible_v<R, std::optional<tensor_list>>) {
    return std::optional<tensor_list>(std::forward<R>(r));
  } else {
    static_assert(std::is_convertible_v<R, std::optional<tensor_list>>,
                  "metagrad: a node hook returns std::optional<mg::tensor_list> (std::nullopt to "
                  "keep the gradients), an mg::tensor_list, or nothing");
    return std::nullopt;
  }
}

}  // namespace mg::detail

namespace mg {

template <int>
void hook_handle::remove() {
  for (auto& [set, id] : hooks_)
    if (const auto s = set.lock()) s->remove(id);
  hooks_.clear();
}

template <class F>
hook_handle tensor::register_post_accumulate_grad_hook(F&& fn) const {
  static_assert(std::is_invocable_v<const std::decay_t<F>&, const tensor&>,
                "metagrad: a post-accumulate-grad hook is callable as fn(const mg::tensor& leaf)");
  const auto& t = checked("register_post_accumulate_grad_hook");
  if (t.grad_fn)
    detail::fail("register_post_accumulate_grad_hook: the tensor (shape ",
                 detail::shape_string(t.shape), ") is not a leaf (computed by ", t.grad_fn->name(),
                 "); its gradient is never accumulated: use register_hook, or retain_grad()");
  if (!t.requires_grad)
    detail::fail("register_post_accumulate_grad_hook: the tensor (shape ",
                 detail::shape_string(t.shape),
                 ") does not require grad; call requires_grad_() on it first");
  detail::post_accumulate_fn f = [fn = std::decay_t<F>(std::forward<F>(fn))](const tensor& leaf) {
    fn(leaf);
  };
  const std::uint64_t id = detail::next_hook_id();
  auto& owner = const_cast<detail::tensor_impl&>(t).hooks;
  detail::hooks_of(owner).post_accumulate.emplace_back(id, std::move(f));
  return detail::hook_access::make(owner, id);
}

template <class F>
hook_handle tensor::register_hook(F&& fn) const {
  const auto& t = checked("register_hook");
  (void)t;
  const std::decay_t<F>& f = fn;
  return detail::add_tensor_hook(
      impl_, [&] { return detail::make_tensor_hook(f); }, "register_hook");
}

}  // namespace mg

namespace mg {

template <class F>
hook_handle autograd::node::register_hook(F&& fn) {
  using namespace detail;
  static_assert(std::is_invocable_v<const std::decay_t<F>&, const tensor_list&, const tensor_list&>,
                "metagrad: a node hook is callable as fn(const mg::tensor_list& grad_inputs, const "
                "mg::tensor_list& grad_outputs)");
  post_hook_fn f = [fn = std::decay_t<F>(std::forward<F>(fn))](const tensor_list& gi,
                                                               const tensor_list& go) {
    if constexpr (std::is_void_v<std::invoke_result_t<decltype(fn)&, const tensor_list&,
                                                      const tensor_list&>>) {
      fn(gi, go);
      return std::optional<tensor_list>{};
    } else {
      return as_hook_result(fn(gi, go));
    }
  };
  const std::uint64_t id = next_hook_id();
  hooks_of(hooks).post_hooks.emplace_back(id, std::move(f));
  return hook_access::make(hooks, id);
}

template <class F>
hook_handle autograd::node::register_prehook(F&& fn) {
  using namespace detail;
  static_assert(std::is_invocable_v<const std::decay_t<F>&, const tensor_list&>,
                "metagrad: a node pre-hook is callable as fn(const mg::tensor_list& grad_outputs)");
  pre_hook_fn f = [fn = std::decay_t<F>(std::forward<F>(fn))](const tensor_list& go) {
    if constexpr (std::is_void_v<std::invoke_result_t<decltype(fn)&, const tensor_list&>>) {
      fn(go);
      return std::optional<tensor_list>{};
    } else {
      return as_hook_result(fn(go));
    }
  };
  const std::uint64_t id = next_hook_id();
  hooks_of(hooks).pre_hooks.emplace_back(id, std::move(f));
  return hook_access::make(hooks, id);
}

}  // namespace mg

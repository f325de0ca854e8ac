// Saved-tensor hooks (torch.autograd.graph's saved_tensors_hooks and friends): what happens to
// the tensors the graph keeps for backward. All guards are RAII and act on the current thread.
//
// - `saved_tensors_hooks_guard g(pack, unpack);` every tensor saved for backward while g lives
//   (by built-in ops, mg::Function's save_for_backward, fused nodes) goes through
//   `pack(const mg::tensor&) -> P` (any copyable P); backward gets it back from
//   `unpack(const P&) -> mg::tensor`. The innermost guard wins. Tensors saved with hooks are not
//   version-checked (as in torch: the hooks own what was saved).
// - `save_on_cpu_guard g;` tensors on device cuda are saved as host copies and moved back in
//   backward; others are saved as they are.
// - `disable_saved_tensors_hooks_guard g("message");` entering a hooks guard under it throws
//   mg::error with the message, and so does entering it while a hooks guard is active.
// - A pack hook must not modify its input in place (the tensor the graph keeps): that is an
//   mg::error at the op that saves it.
// - `allow_mutation_on_saved_tensors_guard g;` an in-place write to a saved tensor under g first
//   copies the saved value, so backward sees the original. Backward must run inside g; g does
//   not nest.
//
// The pack hook of a tensor saved by the node that computed it (an op saving its own output)
// receives it without its grad_fn: the node would otherwise own itself through the hook.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <metagrad/autograd.hpp>
#include <metagrad/error.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/runtime/saved.hpp>
#include <metagrad/tensor.hpp>

namespace mg::autograd {

/// Registers pack/unpack hooks for the tensors saved for backward while it lives:
/// ```cpp
/// mg::autograd::saved_tensors_hooks_guard g(
///     [](const mg::tensor& t) { return t.to(mg::device::cpu); },   // pack: any value
///     [](const mg::tensor& p) { return p; });                      // unpack: a tensor
/// ```
class saved_tensors_hooks_guard {
 public:
  template <class Pack, class Unpack>
  saved_tensors_hooks_guard(Pack pack, Unpack unpack) {
    static_assert(std::is_invocable_v<Pack&, const tensor&>,
                  "metagrad: a pack hook is callable as pack(const mg::tensor&)");
    using P = std::decay_t<std::invoke_result_t<Pack&, const tensor&>>;
    static_assert(std::is_invocable_r_v<tensor, const Unpack&, const P&>,
                  "metagrad: an unpack hook takes what pack returned and returns an mg::tensor");
    auto& s = detail::saved_hooks();
    if (s.disabled) detail::fail(*s.disabled);
    struct holder final : detail::packed_tensor {
      P value;
      std::shared_ptr<const Unpack> fn;
      holder(P v, std::shared_ptr<const Unpack> u) : value(std::move(v)), fn(std::move(u)) {}
      detail::impl_ptr unpack() const override { return tensor((*fn)(value)).impl(); }
    };
    auto u = std::make_shared<const Unpack>(std::move(unpack));
    pack_ = [p = std::move(pack),
             u](const detail::impl_ptr& t) -> std::shared_ptr<detail::packed_tensor> {
      return std::make_shared<holder>(p(tensor(t)), u);
    };
    s.stack.push_back(&pack_);
  }
  saved_tensors_hooks_guard(const saved_tensors_hooks_guard&) = delete;
  saved_tensors_hooks_guard& operator=(const saved_tensors_hooks_guard&) = delete;
  ~saved_tensors_hooks_guard() {
    auto& st = detail::saved_hooks().stack;
    if (!st.empty() && st.back() == &pack_) st.pop_back();
  }

 private:
  std::function<std::shared_ptr<detail::packed_tensor>(const detail::impl_ptr&)> pack_;
};

/// Saves tensors on device cuda as host copies while it lives; backward moves them back.
class save_on_cpu_guard {
 public:
  template <int I = 0>  // a template in name only (Note [Lazy members])
  save_on_cpu_guard()
      : guard_(
            [](const tensor& t) {
              no_grad_guard ng;
              return std::pair{t.device(), t.device() == device::cpu
                                               ? t
                                               : detail::lazy<I>(t).detach().to(device::cpu)};
            },
            [](const std::pair<device, tensor>& p) {
              no_grad_guard ng;
              return detail::lazy<I>(p.second).to(p.first);
            }) {}

 private:
  saved_tensors_hooks_guard guard_;
};

/// Makes entering a saved_tensors_hooks_guard (or save_on_cpu_guard) an error with `message`
/// while it lives. Entering it while such a guard is active is the same error.
class disable_saved_tensors_hooks_guard {
 public:
  explicit disable_saved_tensors_hooks_guard(std::string message)
      : message_(std::move(message)), previous_(detail::saved_hooks().disabled) {
    // hooks already active would go on packing under it: refused, as torch refuses it
    if (!detail::saved_hooks().stack.empty()) detail::fail(message_);
    detail::saved_hooks().disabled = &message_;
  }
  disable_saved_tensors_hooks_guard(const disable_saved_tensors_hooks_guard&) = delete;
  disable_saved_tensors_hooks_guard& operator=(const disable_saved_tensors_hooks_guard&) = delete;
  ~disable_saved_tensors_hooks_guard() { detail::saved_hooks().disabled = previous_; }

 private:
  std::string message_;
  const std::string* previous_;
};

}  // namespace mg::autograd

namespace mg::autograd {

/// Lets tensors saved for backward be modified in place while it lives: the first write to a
/// saved tensor copies it first, so backward sees the value forward used.
class allow_mutation_on_saved_tensors_guard {
 public:
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  allow_mutation_on_saved_tensors_guard()
      : nesting_check_(),
        guard_(
            [this](const tensor& t) {
              auto c = std::make_shared<detail::mutation_table::cell>();
              c->data = detail::alias_of(*t.impl());
              table_.saved[t.impl()->store.get()].push_back(c);
              return std::pair{c, std::weak_ptr<bool>(table_.alive)};
            },
            [](const std::pair<std::shared_ptr<detail::mutation_table::cell>, std::weak_ptr<bool>>&
                   p) {
              if (p.second.expired())
                detail::fail(
                    "allow_mutation_on_saved_tensors_guard: backward runs "
                    "after the guard under which the graph was recorded "
                    "ended; run backward while the guard lives");
              return tensor(p.first->data);
            }) {
    detail::active_mutation_table() = &table_;
  }
  allow_mutation_on_saved_tensors_guard(const allow_mutation_on_saved_tensors_guard&) = delete;
  allow_mutation_on_saved_tensors_guard& operator=(const allow_mutation_on_saved_tensors_guard&) =
      delete;
  ~allow_mutation_on_saved_tensors_guard() { detail::active_mutation_table() = nullptr; }

 private:
  struct nesting {
    nesting() {
      if (detail::active_mutation_table())
        detail::fail(
            "allow_mutation_on_saved_tensors_guard: the guards cannot be nested; one guard "
            "covers everything under it");
    }
  } nesting_check_;
  detail::mutation_table table_;
  saved_tensors_hooks_guard guard_;
};

}  // namespace mg::autograd

// mg::context: what an mg::Function's forward (or setup_context) hands to its backward and jvp,
// torch's FunctionCtx. Tensors are saved with save_for_backward (version-checked, saved-tensor
// hooks apply); non-tensor state is a typed member of mg::context_with<State>, not a map.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>
#include <vector>

#include <metagrad/error.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/runtime/saved.hpp>
#include <metagrad/tensor.hpp>

namespace mg {

namespace detail {
struct function_access;

// Tensors and lists of tensors, flattened in order (undefined tensors are kept: torch's None).
template <int = 0>
void append_tensors(tensor_list& out, const tensor& t) {
  out.push_back(t);
}
template <int = 0>
void append_tensors(tensor_list& out, const tensor_list& ts) {
  out.insert(out.end(), ts.begin(), ts.end());
}
template <class T>
concept tensor_or_list = std::same_as<std::remove_cvref_t<T>, tensor> ||
    std::same_as<std::remove_cvref_t<T>, tensor_list>;
}  // namespace detail

/// The context of an `mg::Function` (see <metagrad/function.hpp>): forward (or setup_context)
/// saves what backward and jvp need and declares facts about its outputs.
/// ```cpp
/// static mg::tensor forward(mg::context& ctx, const mg::tensor& x) {
///   auto r = mg::exp(x);
///   ctx.save_for_backward(r);
///   return r;
/// }
/// ```
class context {
 public:
  context() = default;
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  /// Keeps tensors (or lists of them; an undefined tensor is allowed) for backward. Their
  /// versions are checked when backward reads them; saved-tensor hooks apply. A second call
  /// replaces the first.
  template <detail::tensor_or_list... T>
  void save_for_backward(const T&... t) {
    to_save_.clear();
    (detail::append_tensors(to_save_, t), ...);
  }

  /// The tensors given to save_for_backward, for structured bindings:
  /// `auto [x, y] = ctx.saved_tensors<2>();`. Throws if N differs from the number saved, if
  /// they were freed (a second backward without retain_graph) or modified in place since.
  template <std::size_t N>
  std::array<tensor, N> saved_tensors() const {
    const tensor_list all = saved_tensors();
    if (all.size() != N)
      detail::fail(name_, ": saved_tensors<", N, ">() but save_for_backward saved ", all.size(),
                   " tensor(s); ask for as many as were saved");
    std::array<tensor, N> r;
    for (std::size_t i = 0; i < N; ++i) r[i] = all[i];
    return r;
  }
  /// All the saved tensors, in the order given to save_for_backward.
  template <class = void>  // Note [Lazy members] in runtime/lazy.hpp (not int: saved_tensors<N>)
  tensor_list saved_tensors() const {
    if (!saved_) return to_save_;
    tensor_list r;
    r.reserve(saved_->size());
    for (const auto& s : *saved_) r.emplace_back(s.unpack(node_, name_));
    return r;
  }

  /// Keeps tensors for jvp (forward-mode AD), read back with saved_for_forward<N>().
  template <detail::tensor_or_list... T>
  void save_for_forward(const T&... t) {
    for_forward_.clear();
    (detail::append_tensors(for_forward_, t), ...);
  }
  /// The tensors given to save_for_forward: `auto [x, y] = ctx.saved_for_forward<2>();`.
  template <std::size_t N>
  std::array<tensor, N> saved_for_forward() const {
    if (for_forward_.size() != N)
      detail::fail(name_, ": saved_for_forward<", N, ">() but save_for_forward saved ",
                   for_forward_.size(),
                   " tensor(s); ask for as many as were saved (jvp may read "
                   "them only during the forward call)");
    std::array<tensor, N> r;
    for (std::size_t i = 0; i < N; ++i) r[i] = for_forward_[i];
    return r;
  }

  /// Does differentiable input i (tensors counted in input order, lists flattened) need a
  /// gradient? Backward may return an undefined tensor for it if not.
  bool needs_input_grad(std::size_t i) const { return i < needs_.size() && needs_[i]; }

  /// Declares inputs that forward modified in place (returned as outputs): their history is
  /// rewritten to go through this function and their version counter is bumped.
  template <detail::tensor_or_list... T>
  void mark_dirty(const T&... t) {
    (detail::append_tensors(dirty_, t), ...);
  }

  /// Declares outputs not differentiable (indices, masks): they do not require grad, and
  /// backward receives zeros (or undefined, see set_materialize_grads) for them.
  template <detail::tensor_or_list... T>
  void mark_non_differentiable(const T&... t) {
    (detail::append_tensors(non_differentiable_, t), ...);
  }

  /// With false, backward receives undefined tensors for outputs that got no gradient, instead
  /// of zeros (the default, true).
  void set_materialize_grads(bool value) { materialize_ = value; }

 private:
  friend struct detail::function_access;

  const char* name_ = "Function";
  const detail::graph_node* node_ = nullptr;
  const std::vector<detail::saved_variable>* saved_ = nullptr;  // set once recorded
  std::vector<bool> needs_;
  tensor_list to_save_, for_forward_, dirty_, non_differentiable_;
  bool materialize_ = true;
};

/// A context with typed non-tensor state for a Function that declares `struct state {...};`:
/// forward writes `ctx.state.z = z;`, backward reads it.
/// ```cpp
/// struct scale_by {
///   struct state { double k = 1; };
///   static mg::tensor forward(mg::context_with<state>& ctx, const mg::tensor& x, double k) {
///     ctx.state.k = k;
///     return x * k;
///   }
///   static mg::tensor_list backward(mg::context_with<state>& ctx, const mg::tensor_list& g) {
///     return {g[0] * ctx.state.k};
///   }
/// };
/// ```
template <class State>
class context_with : public context {
 public:
  State state{};
};

}  // namespace mg

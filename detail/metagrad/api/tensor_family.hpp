// The tensor family's evaluator: mg::grad(f) and mg::value_and_grad(f) called with mg::tensor
// arguments run f on the runtime engine (the same generic callable the static engine takes) and
// return tensor gradients. The family's other hook, apply_in (an op applied to tensors records a
// node), is the runtime engine's entry point: declared in <metagrad/tensor_class.hpp>, defined in
// runtime/apply.hpp and compiled into the library.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/autograd.hpp>
#include <metagrad/error.hpp>
#include <metagrad/static/evaluator.hpp>
#include <metagrad/tensor.hpp>

namespace mg::detail {

template <>
struct evaluator_family_of<tensor> {
  using type = tensor_family;
};

// Note [Nested transforms]: mg::grad(f) on tensors runs f on fresh leaves, so the gradient is
// that of f alone. At the top level (no argument requires grad, no transform running in this
// thread) the leaves are detached copies and the results plain tensors. Inside another
// transform, or with an argument that requires grad (the leaf of an outer transform, or a
// tensor with history), the gradient must stay differentiable with respect to that outer
// variable: a wanted argument that requires grad enters f as an identity view of itself (its
// gradient is captured at the view, whose node links back to the argument), the other
// arguments enter unchanged, and the gradient is computed with create_graph. So
// mg::grad<0>(mg::grad<0>(f)) is the second derivative, as on the static engine. Numbers pass
// through unchanged; a number asked for (grad<I>) becomes a 0-d f64 tensor and its gradient
// comes back as a double.
inline int& transform_depth() {
  thread_local int depth = 0;
  return depth;
}

template <>
struct evaluator<tensor_family> {
  template <std::size_t... I, class F, class... A>
  static auto value_and_grad(const F& f, const A&... args) {
    enable_grad_guard on(true);
    constexpr std::array<bool, sizeof...(A)> wanted = [] {
      std::array<bool, sizeof...(A)> w{};
      ((w[I] = true), ...);
      return w;
    }();
    const bool nested = transform_depth() > 0 || (has_history(args) || ...);
    auto leaves = [&]<std::size_t... k>(std::index_sequence<k...>) {
      return std::tuple{leaf<wanted[k]>(args, nested)...};
    }
    (std::index_sequence_for<A...>{});
    const tensor y = [&] {
      ++transform_depth();
      struct leave {
        ~leave() { --transform_depth(); }
      } scope;
      return std::apply(f, leaves);
    }();
    if (!y.defined())
      fail("grad: the function returned an undefined tensor; return a one-element tensor ",
           "computed from the arguments");
    if (y.numel() != 1)
      fail("grad: the function must return a one-element tensor but returned shape ",
           shape_string(y.shape()),
           "; reduce it, e.g. with mg::sum, or use mg::autograd::grad with grad_outputs (or "
           "mg::autograd::functional::jacobian for all its derivatives)");
    // a function that does not depend on the arguments has zero gradients
    const tensor_list gs = y.requires_grad()
                               ? autograd::grad({y}, {std::get<I>(leaves)...}, {},
                                                {.create_graph = nested, .allow_unused = true})
                               : tensor_list(sizeof...(I));
    std::size_t j = 0;
    auto out = [&](const auto& a, const tensor& l) {
      const tensor& g = gs[j++];
      tensor r = g.defined() ? g : zeros_like(l);
      if (!nested) r = r.detach();
      if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(a)>>) {
        return static_cast<std::remove_cvref_t<decltype(a)>>(r.item<double>());
      } else {
        return r;
      }
    };
    return std::pair{
        nested ? y : y.detach(),
        std::tuple{out(std::get<I>(std::forward_as_tuple(args...)), std::get<I>(leaves))...}};
  }

  // Does a hessian<I> (grad<I> of grad<I>) make sense here? The inner gradient has the shape
  // of argument I, and the outer grad needs one element.
  template <std::size_t I, class... A>
  static void check_hessian(const A&... args) {
    const auto& a = std::get<I>(std::forward_as_tuple(args...));
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(a)>, tensor>) {
      if (a.defined() && a.numel() != 1)
        fail("hessian<", I, ">: argument ", I, " has shape ", shape_string(a.shape()), " (",
             a.numel(), " elements), so grad<", I,
             ">(f) is not one element and grad<I> cannot differentiate it again (mg::hessian<I> "
             "is grad<I>(grad<I>(f)), for one-element arguments); for the Hessian matrix of a "
             "function of a tensor use mg::autograd::functional::hessian(f, x)");
    }
  }

 private:
  template <class A>
  static bool has_history(const A& a) {
    if constexpr (std::is_same_v<A, tensor>) {
      return a.requires_grad();
    } else {
      return false;
    }
  }

  template <bool Wanted, class A>
  static auto leaf(const A& a, bool nested) {
    if constexpr (std::is_same_v<A, tensor>) {
      if constexpr (Wanted) {
        if (nested && a.requires_grad()) return mg::view(a, a.shape());
        return a.detach().requires_grad_(true);
      } else {
        return nested ? a : a.detach();
      }
    } else if constexpr (Wanted) {
      return tensor(static_cast<double>(a), mg::f64).requires_grad_(true);
    } else {
      return a;
    }
  }
};

}  // namespace mg::detail

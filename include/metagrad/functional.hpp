// mg::autograd::functional: torch.autograd.functional on mg::tensor. Each transform takes a
// function f of one tensor (or of an mg::tensor_list, for several inputs) that returns a tensor
// (or a tensor_list), and differentiates f alone at x: the inputs enter f cut from their
// history, and the results are plain tensors unless `.create_graph = true`, which keeps them
// differentiable with respect to x (Note [Functional inputs] in api/functional.hpp).
//
// | transform | result |
// |---|---|
// | `vjp(f, x, v)` | `{f(x), v^T J}`, in x's structure |
// | `jvp(f, x, v)` | `{f(x), J v}`, in f(x)'s structure |
// | `hvp(f, x, v)`, `vhp(f, x, v)` | `{f(x), H v}` for f with one output element |
// | `jacobian(f, x)` | J, of shape f(x).shape ++ x.shape |
// | `hessian(f, x)` | H, of shape x.shape ++ x.shape, for f with one output element |
#pragma once

#include <metagrad/api/functional.hpp>
#include <metagrad/autograd.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/tensor.hpp>

namespace mg::autograd::functional {

/// Options of every functional transform. `create_graph`: the results are recorded, so they
/// can be differentiated again with respect to the caller's inputs (without it they are plain
/// tensors that do not require grad). `strict`: an output or a result that does not depend on
/// an input is an error instead of zeros.
/// ```cpp
/// auto h = mg::autograd::functional::hessian(f, x, {.create_graph = true});
/// ```
struct options {
  bool create_graph = false;
  bool strict = false;
};

/// What `vjp`, `jvp`, `hvp` and `vhp` return: f's output and the product, read with structured
/// bindings:
/// ```cpp
/// auto [y, g] = mg::autograd::functional::vjp(f, x, v);
/// ```
template <class Output, class Result>
using output_and_result = detail::functional_impl::output_and_result<Output, Result>;

/// The vector-Jacobian product v^T J of f at x, with f's output: `{f(x), v^T J}` (the result in
/// x's structure). v has f(x)'s structure and shapes; it may be omitted (`{}`) when f returns
/// one tensor of one element:
/// ```cpp
/// namespace fn = mg::autograd::functional;
/// auto [y, g] = fn::vjp([](const mg::tensor& x) { return mg::sin(x) * x; }, x, v);
/// auto [s, d] = fn::vjp([](const mg::tensor& x) { return mg::sum(x * x); }, x);  // 2 x
/// auto [z, e] = fn::vjp(f, x, v, {.create_graph = true});   // e is differentiable in x
/// ```
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto vjp(const F& f, const X& x, const detail::functional_impl::output_t<F, X>& v = {},
         const options& o = {}) {
  if constexpr (detail::functional_impl::diagnose<F, X>())
    return detail::functional_impl::vjp(f, x, v, {"vjp", o.create_graph, o.strict});
}
/// vjp with `create_graph` given as a bool: `vjp(f, x, v, true)`.
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto vjp(const F& f, const X& x, const detail::functional_impl::output_t<F, X>& v,
         bool create_graph) {
  return vjp(f, x, v, options{.create_graph = create_graph});
}

/// The Jacobian-vector product J v of f at x, with f's output: `{f(x), J v}` (the result in
/// f(x)'s structure). v has x's structure and shapes; it may be omitted (`{}`) when x is one
/// tensor of one element. Computed by two backward passes (Note [Functional jvp]):
/// ```cpp
/// auto [y, t] = mg::autograd::functional::jvp([](const mg::tensor& x) { return x * x; }, x, v);
/// ```
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto jvp(const F& f, const X& x, const X& v = {}, const options& o = {}) {
  if constexpr (detail::functional_impl::diagnose<F, X>())
    return detail::functional_impl::jvp<F, X, detail::functional_impl::output_t<F, X>>(
        f, x, v, {"jvp", o.create_graph, o.strict});
}
/// jvp with `create_graph` given as a bool: `jvp(f, x, v, true)`.
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto jvp(const F& f, const X& x, const X& v, bool create_graph) {
  return jvp(f, x, v, options{.create_graph = create_graph});
}

/// The Hessian-vector product H v of a function f with one output element, with f's output:
/// `{f(x), H v}` (the result in x's structure). v has x's structure; it may be omitted (`{}`)
/// when x is one tensor of one element. Computed as v^T H, equal to H v for the symmetric
/// Hessian of a twice differentiable f:
/// ```cpp
/// auto cube = [](const mg::tensor& x) { return mg::sum(x * x * x); };
/// auto [y, hv] = mg::autograd::functional::hvp(cube, x, v);   // 6 x v
/// ```
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto hvp(const F& f, const X& x, const X& v = {}, const options& o = {}) {
  if constexpr (detail::functional_impl::diagnose_scalar<F, X>())
    return detail::functional_impl::hvp(f, x, v, {"hvp", o.create_graph, o.strict});
}
/// hvp with `create_graph` given as a bool: `hvp(f, x, v, true)`.
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto hvp(const F& f, const X& x, const X& v, bool create_graph) {
  return hvp(f, x, v, options{.create_graph = create_graph});
}

/// The vector-Hessian product v^T H, with f's output (torch's vhp; the same as hvp for a
/// symmetric Hessian): `auto [y, vh] = mg::autograd::functional::vhp(f, x, v);`.
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto vhp(const F& f, const X& x, const X& v = {}, const options& o = {}) {
  if constexpr (detail::functional_impl::diagnose_scalar<F, X>())
    return detail::functional_impl::hvp(f, x, v, {"vhp", o.create_graph, o.strict});
}
/// vhp with `create_graph` given as a bool: `vhp(f, x, v, true)`.
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto vhp(const F& f, const X& x, const X& v, bool create_graph) {
  return vhp(f, x, v, options{.create_graph = create_graph});
}

/// The Jacobian of f at x: for one input and one output a tensor of shape
/// `f(x).shape ++ x.shape` (entry [i..., j...] is d f(x)[i...] / d x[j...]); a tensor_list
/// when one side is a list (one Jacobian per input, or per output), and a
/// `std::vector<mg::tensor_list>` indexed [output][input] when both are. One backward per
/// output element:
/// ```cpp
/// mg::tensor a{{1.0, 2.0}, {3.0, 4.0}};
/// auto j = mg::autograd::functional::jacobian([&](const mg::tensor& x) {
///   return mg::matmul(a, x); }, mg::tensor({5.0, 6.0}, mg::f64));   // j equals a
/// ```
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto jacobian(const F& f, const X& x, const options& o = {}) {
  if constexpr (detail::functional_impl::diagnose<F, X>())
    return detail::functional_impl::jacobian<F, X, detail::functional_impl::output_t<F, X>>(
        f, x, {"jacobian", o.create_graph, o.strict});
}
/// jacobian with `create_graph` given as a bool: `jacobian(f, x, true)`.
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto jacobian(const F& f, const X& x, bool create_graph) {
  return jacobian(f, x, options{.create_graph = create_graph});
}

/// The Hessian of a function f with one output element at x: a tensor of shape
/// `x.shape ++ x.shape` for one input; for a list of inputs a `std::vector<mg::tensor_list>`
/// whose block [i][j] has shape `x[i].shape ++ x[j].shape`:
/// ```cpp
/// auto h = mg::autograd::functional::hessian(
///     [](const mg::tensor& x) { return mg::sum(x * x * x); }, x);   // diagonal 6 x
/// ```
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto hessian(const F& f, const X& x, const options& o = {}) {
  if constexpr (detail::functional_impl::diagnose_scalar<F, X>())
    return detail::functional_impl::hessian(f, x, {"hessian", o.create_graph, o.strict});
}
/// hessian with `create_graph` given as a bool: `hessian(f, x, true)`.
template <class F, class X = tensor_list>
requires detail::functional_impl::Inputs<X>
auto hessian(const F& f, const X& x, bool create_graph) {
  return hessian(f, x, options{.create_graph = create_graph});
}

}  // namespace mg::autograd::functional

// torch.autograd.gradcheck and gradgradcheck for mg::tensor: compare the gradients the engine
// computes (the analytical Jacobian) with central finite differences (the numerical Jacobian).
//
// gradcheck(fn, inputs, options), fn taking a `const mg::tensor_list&` and returning an
// mg::tensor or an mg::tensor_list (outputs of any shape, 0-d included):
// - Only the inputs that require grad are differentiated; at least one must (otherwise
//   mg::error). They should be float64 (mg::f64): a float32 input is checked too, after a
//   one-line warning on std::cerr, as torch warns. The others are passed through.
// - Numerical Jacobian: each element j of each differentiated input is set to x_j + eps and to
//   x_j - eps in the input itself, fn is evaluated, and (f(x + eps) - f(x - eps)) / (2 eps) is
//   taken for every element of every output; the element is then restored exactly (also when fn
//   throws). The writes are raw: nothing is recorded and the version counter does not move, so
//   fn may read an input through a capture, and a tensor passed twice moves in both places
//   (Note [Perturbing in place] in api/gradcheck.hpp). An input with a stride 0 (an expanded
//   tensor, whose elements overlap) is refused: pass input.contiguous().
// - Analytical Jacobian: for every element of every output that requires grad,
//   `mg::autograd::grad` with a one-hot grad_output gives one row (an unused input: zeros).
//   It is computed twice on the same graph; the two must agree within `.nondet_tol` (0: exactly;
//   a deterministic, reentrant backward), as torch checks.
// - Every entry must satisfy |analytical - numerical| <= atol + rtol * |numerical|. An output
//   that does not require grad has an analytical Jacobian of zero, so its numerical Jacobian must
//   be zero to that tolerance.
// - `.check_forward_ad = true`: the Jacobian is also computed by forward-mode AD, one input
//   element at a time (a one-hot tangent, <metagrad/forward_ad.hpp>), and compared the same way.
// - `.check_undefined_grad = true` (the default, as torch): backward is run with the outputs'
//   gradients undefined, all at once and then one at a time; every input gradient must come back
//   undefined or zero, and backward must not fail. With check_forward_ad, an input with a zero
//   tangent and one without a tangent must give the same output tangents (Note [Undefined output
//   gradients]).
// - The first failure throws mg::error naming the output, the input, the element (flat index
//   and multi-index), both values and the tolerances; with `.raise_exception = false` it returns
//   false instead. Misuse (a non-floating input that requires grad, an input with a stride 0, no
//   input requiring grad, fn returning an undefined tensor or changing its output shapes) always
//   throws.
//
// gradgradcheck(fn, inputs, options) checks second derivatives: it draws one random grad_output
// v_k per output of fn that requires grad (uniform in [-1, 1], the shape and dtype of the output)
// and runs gradcheck on g(inputs..., v...) = autograd::grad(outputs, differentiated inputs, v,
// {.create_graph = true}), the v's requiring grad too (as torch does); an unused input's
// gradient is zeros that do not require grad. The v's come from a local std::mt19937_64 with a
// fixed seed: the same on every call (for a given standard library), and the generator of
// mg::randn / mg::manual_seed is left untouched. It takes the same options except
// check_forward_ad (torch's check_fwd_over_rev), which it refuses: tangents do not flow through
// backward passes.
//
// The cost is 2 evaluations of fn per differentiated input element plus 2 backward passes per
// output element (and with the options, one forward evaluation per input element and a few
// backward passes): meant for small tensors in tests.
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <metagrad/api/gradcheck.hpp>
#include <metagrad/autograd.hpp>
#include <metagrad/error.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

namespace mg::autograd {

/// Checks the gradients of `fn` at `inputs` against central finite differences, as
/// torch.autograd.gradcheck: every input that requires grad (float64; float32 with a warning) is
/// differentiated, in place, every entry of every output's Jacobian is compared. Returns true, or
/// on the first mismatch throws mg::error naming the output, input, element and both values (with
/// `.raise_exception = false`: returns false). Options: `gradcheck_options` (eps, atol, rtol,
/// raise_exception, nondet_tol, check_undefined_grad, check_forward_ad).
/// ```cpp
/// auto x = mg::randn({3, 2}, {.dtype = mg::f64, .requires_grad = true});
/// auto w = mg::randn({2}, {.dtype = mg::f64, .requires_grad = true});
/// bool ok = mg::autograd::gradcheck(
///     [](const mg::tensor_list& in) { return mg::sin(in[0]) * in[1]; }, {x, w});
/// ```
template <class F>
bool gradcheck(F&& fn, const tensor_list& inputs, const gradcheck_options& options = {}) {
  namespace gc = detail::gradcheck_impl;
  const auto diff = gc::differentiated(inputs, "gradcheck");
  auto f = [&](const tensor_list& args) { return gc::call(fn, args, "gradcheck"); };
  return gc::report(gc::check("gradcheck", "Jacobian mismatch", f, inputs, diff, options, {}),
                    options);
}

/// Checks second derivatives, as torch.autograd.gradgradcheck: gradcheck of the function
/// (inputs..., v...) -> autograd::grad(outputs of fn, inputs requiring grad, v, .create_graph),
/// with fixed pseudo-random grad_outputs v (uniform in [-1, 1], like the output, one per output of
/// fn that requires grad, themselves requiring grad). In messages, inputs past those of fn are the
/// v's and output d is the gradient with respect to the d-th differentiated input. Takes the
/// options of gradcheck but `.check_forward_ad` (forward-over-reverse), an mg::error.
/// ```cpp
/// auto x = mg::randn({4}, {.dtype = mg::f64, .requires_grad = true});
/// bool ok = mg::autograd::gradgradcheck(
///     [](const mg::tensor_list& in) { return in[0] * in[0] * in[0]; }, {x});
/// ```
template <class F>
bool gradgradcheck(F&& fn, const tensor_list& inputs, const gradcheck_options& options = {}) {
  namespace gc = detail::gradcheck_impl;
  constexpr const char* api = "gradgradcheck";
  if (options.check_forward_ad)
    detail::fail(api,
                 ": .check_forward_ad (torch's check_fwd_over_rev) needs tangents to flow "
                 "through backward passes, which forward-mode AD does not do here; leave it "
                 "false (gradcheck's .check_forward_ad checks first derivatives)");
  const auto diff = gc::differentiated(inputs, api);
  enable_grad_guard grad_on(true);

  // one v per output that requires grad
  tensor_list vs;
  std::vector<std::size_t> diff_out;
  {
    const tensor_list outs = gc::call(fn, inputs, api);
    std::mt19937_64 gen(0x6772616467726164ULL);  // fixed: the same v's on every call
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    for (std::size_t k = 0; k < outs.size(); ++k) {
      if (!outs[k].requires_grad()) continue;
      const auto& s = outs[k].shape();
      auto a = xt::xarray<double>::from_shape(std::vector<std::size_t>(s.begin(), s.end()));
      for (auto& v : a) v = uniform(gen);
      const tensor t(a);
      vs.push_back(detail::lazy<detail::lazy_v<F>>(t)
                       .to(outs[k].dtype())
                       .to(outs[k].device())
                       .requires_grad_());
      diff_out.push_back(k);
    }
    if (vs.empty())
      detail::fail(api, ": none of the ", outs.size(),
                   " output(s) of fn requires grad, so there are no first derivatives to "
                   "differentiate again; make an output depend on an input that requires grad");
  }

  const std::size_t n = inputs.size();
  auto g = [&](const tensor_list& args) {
    const tensor_list in(args.begin(), args.begin() + std::ptrdiff_t(n));
    const tensor_list v(args.begin() + std::ptrdiff_t(n), args.end());
    const tensor_list outs = gc::call(fn, in, api);
    tensor_list diff_outs, diff_in;
    for (std::size_t k : diff_out) {
      if (k >= outs.size() || !outs[k].requires_grad())
        detail::fail(api, ": output ", k,
                     " of fn required grad at first but not for other input values; fn must "
                     "return the same outputs whatever the input values");
      diff_outs.push_back(outs[k]);
    }
    for (std::size_t i : diff) diff_in.push_back(in[i]);
    tensor_list gs = autograd::grad<detail::lazy_v<F>>(
        diff_outs, diff_in, v, {.create_graph = true, .allow_unused = true});
    for (std::size_t d = 0; d < gs.size(); ++d)
      if (!gs[d].defined()) gs[d] = zeros_like(diff_in[d]);
    return gs;
  };

  tensor_list all = inputs;
  all.insert(all.end(), vs.begin(), vs.end());
  std::vector<std::size_t> all_diff = diff;
  for (std::size_t k = 0; k < vs.size(); ++k) all_diff.push_back(n + k);
  gc::names name;
  name.input = [&](std::size_t i) {
    if (i < n) return "input " + std::to_string(i);
    return "input " + std::to_string(i) + " (the random grad_output of output " +
           std::to_string(diff_out[i - n]) + " of fn)";
  };
  name.output = [&](std::size_t d) {
    return "output " + std::to_string(d) + " (the gradient with respect to input " +
           std::to_string(diff[d]) + ")";
  };
  return gc::report(gc::check(api, "second-derivative mismatch (the Jacobian of the gradients)", g,
                              all, all_diff, options, name),
                    options);
}

}  // namespace mg::autograd

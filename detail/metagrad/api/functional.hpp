// The machinery of mg::autograd::functional (<metagrad/functional.hpp>): how the inputs enter f,
// how f's outputs and v are checked, and the gradient calls every transform is made of.
//
// Note [Functional inputs]: a transform differentiates f alone, so every input enters f as a
// fresh leaf (x.detach() that requires grad), cut from the caller's history. Under create_graph
// the result must stay differentiable with respect to the caller's x, so an x that requires
// grad enters as an identity view of itself instead: a non-leaf at which the engine captures
// the gradient (Note [Targets] in engine.hpp) and whose own node links back to x. v is prepared
// the same way, without requiring grad when it did not.
//
// Note [Functional jvp]: J v comes from reverse mode by the double-backward trick. With u a
// zero tensor that requires grad, g(u) = J^T u is computed with create_graph; g is linear in u,
// so the gradient of g with respect to u along v is J v, whatever u's value (zero keeps NaN
// away). Every op's backward is linear in its incoming gradient, so the recorded graph of g
// holds u only linearly and J v carries no trace of u: under create_graph it is a function of
// x (and v) alone, and differentiating it again gives the next derivative of f.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include <metagrad/autograd.hpp>
#include <metagrad/error.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/tensor.hpp>

namespace mg::detail::functional_impl {

// What vjp, jvp, hvp and vhp return (public as mg::autograd::functional::output_and_result).
template <class Output, class Result>
struct output_and_result {
  Output output;
  Result result;
};

// Which transform runs and how; every message starts with `functional::<name>`.
struct site {
  const char* name;
  bool create_graph;
  bool strict;
};

template <int = 0>
tensor_list as_list(const tensor& t) {
  return {t};
}
template <int = 0>
const tensor_list& as_list(const tensor_list& ts) {
  return ts;
}

// Note [Functional inputs]. `need_graph`: the prepared tensor requires grad (inputs) or keeps
// whatever it had (v). The helpers that apply ops are templates in name only, called from the
// transforms with a dependent argument (Note [Lazy members]).
template <int I = 0>
tensor_list prepare(const tensor_list& xs, const site& s, bool need_graph, const char* what) {
  tensor_list out;
  out.reserve(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const tensor& x = xs[i];
    if (!x.defined())
      fail("functional::", s.name, ": ", what, " ", i,
           " is an undefined tensor; pass a tensor (or omit the whole argument where allowed)");
    if (!is_floating(x.dtype()))
      fail("functional::", s.name, ": ", what, " ", i, " (shape ", shape_string(x.shape()),
           ") has dtype ", dtype_name(x.dtype()),
           "; only floating-point tensors are differentiated: convert it with .to(mg::f64)");
    if (s.create_graph && x.requires_grad()) {
      out.push_back(mg::view(lazy<I>(x), x.shape()));
    } else {
      tensor d = x.detach();
      if (need_graph) d.requires_grad_(true);
      out.push_back(std::move(d));
    }
  }
  return out;
}

// Note [Strict mode]: strict turns every way an input can fail to matter into an error, at the
// step where torch.autograd.functional finds it, with its sentences: an output of f that does not
// require grad; a gradient that comes back undefined (the output requires grad but its graph
// does not reach the input, e.g. through a leaf made inside f); under create_graph, a result that
// does not require grad (f is linear in the input, so the result cannot be differentiated
// again); for second derivatives, a gradient that does not depend on the inputs.
template <class... Ts>
[[noreturn]] void strict_fail(const site& s, const Ts&... finding) {
  fail("functional::", s.name, ": ", finding...);
}

inline constexpr const char* strict_zeros = " or pass .strict = false to get zeros";

// f's outputs as a list; undefined outputs are an error, and so is one that does not require
// grad in strict mode.
template <int = 0>
tensor_list outputs_of(tensor_list ys, const site& s) {
  for (std::size_t i = 0; i < ys.size(); ++i) {
    if (!ys[i].defined())
      fail("functional::", s.name, ": f returned an undefined tensor (output ", i,
           "); return tensors computed from f's input");
    if (s.strict && !ys[i].requires_grad())
      strict_fail(s, "Output ", i,
                  " of the user-provided function does not require gradients (its shape is ",
                  shape_string(ys[i].shape()),
                  "). In strict mode the outputs must be computed "
                  "from the inputs with differentiable ops; compute it without detach() or "
                  "no_grad_guard,",
                  strict_zeros);
  }
  return ys;
}

// v must match `like` (f's outputs for vjp, the inputs for jvp and hvp) tensor for tensor.
template <int = 0>
void check_v(const tensor_list& v, const tensor_list& like, const site& s, const char* what) {
  if (v.size() != like.size())
    fail("functional::", s.name, ": v has ", v.size(), " tensors but there are ", like.size(), " ",
         what, "s; pass one v per ", what);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i].shape() != like[i].shape())
      fail("functional::", s.name, ": v ", i, " has shape ", shape_string(v[i].shape()), " but ",
           what, " ", i, " has shape ", shape_string(like[i].shape()), "; pass v in the ", what,
           "'s shape");
    if (v[i].device() != like[i].device())
      fail("functional::", s.name, ": v ", i, " is on device ", device_name(v[i].device()), " but ",
           what, " ", i, " is on device ", device_name(like[i].device()), "; move it with .to(",
           device_spelling(like[i].device()), ")");
  }
}

// The gradients of `ys` (weighted by `gs`, one per y; empty for one-element ys) with respect to
// `xs`: outputs that do not require grad are left out (they contribute nothing), and an input
// nothing reaches gets an undefined tensor.
template <int I>
tensor_list gradients(const tensor_list& ys, const tensor_list& xs, const tensor_list& gs,
                      bool create_graph, bool retain_graph) {
  tensor_list outs, weights;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    if (!ys[i].defined() || !ys[i].requires_grad()) continue;
    outs.push_back(ys[i]);
    if (!gs.empty()) weights.push_back(gs[i]);
  }
  if (outs.empty()) return tensor_list(xs.size());
  return mg::autograd::grad<I>(outs, xs, weights,
                               {.retain_graph = retain_graph || create_graph,
                                .create_graph = create_graph,
                                .allow_unused = true});
}

// Which gradient call a result comes from (for the messages of strict mode): the backward from
// f's outputs (vjp), the second backward of the double-backward trick (jvp), the backward of
// f's gradient (hvp, vhp).
enum class stage { back, back_trick, double_back };

// An undefined gradient i: zeros of like[i], or in strict mode an error; in strict mode with
// create_graph, a result that does not require grad is an error too (Note [Strict mode]).
template <int = 0>
tensor_list fill_zeros(tensor_list gs, const tensor_list& like, const site& s, stage st) {
  for (std::size_t i = 0; i < gs.size(); ++i) {
    if (!gs[i].defined()) {
      if (s.strict && st == stage::back)
        strict_fail(s, "The output of the user-provided function is independent of input ", i,
                    ". This is not allowed in strict mode; make f's outputs depend on input ", i,
                    " through differentiable ops,", strict_zeros);
      if (s.strict && st == stage::back_trick)
        strict_fail(s, "The gradient with respect to the input is independent of entry ", i,
                    " in the grad_outputs when using the double backward trick to compute "
                    "forward mode gradients (output ",
                    i, " of f reaches no input). This is not allowed in strict mode; make output ",
                    i, " depend on the inputs through differentiable ops,", strict_zeros);
      if (s.strict)
        strict_fail(s, "The jacobian of the user-provided function is independent of input ", i,
                    " (the Hessian has no entry for it). This is not allowed in strict mode; "
                    "make f's gradient depend on input ",
                    i, ",", strict_zeros);
      gs[i] = zeros_like(like[i]);
    } else if (s.strict && s.create_graph && !gs[i].requires_grad()) {
      strict_fail(s, "The ", st == stage::double_back ? "hessian" : "jacobian",
                  " of the user-provided function is independent of input ", i,
                  ". This is not allowed in strict mode when create_graph=True: the result "
                  "does not depend on the inputs, so it cannot be differentiated again (",
                  st == stage::double_back ? "f's gradient" : "f", " is linear in input ", i,
                  "); pass .strict = false, or .create_graph = false");
    }
  }
  return gs;
}

// Whose first derivatives are differentiated again: jvp's J^T u, or f's gradient for hvp and vhp,
// or for hessian (which, as torch's, reports an undefined gradient as a constant one).
enum class first { jvp, hvp, hessian };

// In strict mode, the first derivatives that jvp, hvp, vhp and hessian differentiate again must
// exist and depend on the inputs (Note [Strict mode]).
template <int = 0>
void check_first_derivatives(const tensor_list& gs, const site& s, first of) {
  if (!s.strict) return;
  const bool second = of != first::jvp;
  for (std::size_t i = 0; i < gs.size(); ++i) {
    if (!gs[i].defined() && of != first::hessian)
      strict_fail(s, "The output of the user-provided function is independent of input ", i,
                  ". This is not allowed in strict mode; make f depend on input ", i,
                  " through differentiable ops,", strict_zeros);
    if (gs[i].defined() && gs[i].requires_grad()) continue;
    if (second)
      strict_fail(s,
                  "While computing the hessian, found that the jacobian of the user-provided "
                  "function with respect to input ",
                  i,
                  " is independent of the input. This is not allowed in strict mode; f must be "
                  "twice differentiable with a gradient that depends on the inputs (a linear f "
                  "has a zero Hessian),",
                  strict_zeros);
    strict_fail(s, "The gradient with respect to input ", i,
                " is independent of the inputs of the user-provided function. This is not "
                "allowed in strict mode; make f depend on input ",
                i, " through differentiable ops,", strict_zeros);
  }
}

// Without create_graph the results are plain tensors (torch's _grad_postprocess).
inline tensor_list finish(tensor_list ts, const site& s) {
  if (!s.create_graph)
    for (auto& t : ts)
      if (t.defined()) t = t.detach();
  return ts;
}

template <int = 0>
shape_t concat(const shape_t& a, const shape_t& b) {
  shape_t r = a;
  r.insert(r.end(), b.begin(), b.end());
  return r;
}

// A tensor like y that is 1 at flat index e and 0 elsewhere.
template <int I>
tensor one_hot(const tensor& y, std::int64_t e) {
  const auto& sh = y.shape();
  xt::xarray<double> h = xt::zeros<double>(std::vector<std::size_t>(sh.begin(), sh.end()));
  h.flat(static_cast<std::size_t>(e)) = 1.0;
  const tensor t(h);
  return lazy<I>(t).to(y.dtype()).to(y.device());
}

// The Jacobian of one tensor y with respect to each of xs, of shapes y.shape ++ x.shape: one
// backward per element of y, along a one-hot gradient, the graph kept between them. `what`
// names y in messages ("Output 0 of the user-provided function"); `derivative` names what the
// Jacobian is ("jacobian", or "hessian" when y is f's gradient).
template <int I>
tensor_list jacobian_of(const tensor& y, const tensor_list& xs, const site& s,
                        const std::string& what, const char* derivative) {
  const std::int64_t n = y.numel();
  std::vector<tensor_list> rows(xs.size());
  for (std::int64_t e = 0; e < n; ++e) {
    const tensor_list g = gradients<I>({y}, xs, {one_hot<I>(y, e)}, s.create_graph, true);
    for (std::size_t k = 0; k < xs.size(); ++k) {
      if (s.strict && !g[k].defined())
        strict_fail(s, what, " is independent of input ", k,
                    ". This is not allowed in strict mode; make it depend on input ", k,
                    " through differentiable ops,", strict_zeros);
      if (s.strict && s.create_graph && !g[k].requires_grad())
        strict_fail(s, "The ", derivative,
                    " of the user-provided function is independent of input ", k, " (", what,
                    " is linear in it). This is not allowed in strict mode when create_graph=True: "
                    "the result cannot be differentiated again; pass .strict = false, or "
                    ".create_graph = false");
      rows[k].push_back(g[k].defined() ? g[k] : zeros_like(xs[k]));
    }
  }
  tensor_list out;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const shape_t shape = concat(y.shape(), xs[k].shape());
    out.push_back(n == 0 ? zeros(shape, {.dtype = xs[k].dtype(), .device = xs[k].device()})
                         : mg::reshape(mg::stack<I>(rows[k], 0), shape));
  }
  return out;
}

template <class X>
concept Inputs = std::same_as<X, tensor> || std::same_as<X, tensor_list>;

// The type f returns for inputs X (X itself when f cannot take X: diagnose() reports that).
template <class F, class X>
struct output_of {
  using type = X;
};
template <class F, class X>
requires std::is_invocable_v<const F&, const X&>
struct output_of<F, X> {
  using type = std::remove_cvref_t<std::invoke_result_t<const F&, const X&>>;
};
template <class F, class X>
using output_t = typename output_of<F, X>::type;

// The entry points' diagnostics: one sentence each; true when the call can go on.
template <class F, class X>
constexpr bool diagnose() {
  static_assert(std::is_invocable_v<const F&, const X&>,
                "metagrad: functional: f must be callable with the input (an mg::tensor, or an "
                "mg::tensor_list for a list of inputs)");
  static_assert(Inputs<output_t<F, X>>,
                "metagrad: functional: f must return an mg::tensor or an mg::tensor_list");
  return std::is_invocable_v<const F&, const X&> && Inputs<output_t<F, X>>;
}
template <class F, class X>
constexpr bool diagnose_scalar() {
  static_assert(!diagnose<F, X>() || std::same_as<output_t<F, X>, tensor>,
                "metagrad: functional::hessian, hvp and vhp differentiate a scalar function: f "
                "must return one mg::tensor (with one element)");
  return diagnose<F, X>() && std::same_as<output_t<F, X>, tensor>;
}

template <class X, class F>
tensor_list call(const F& f, const tensor_list& xs, const site& s) {
  if constexpr (std::same_as<X, tensor>) {
    return outputs_of(as_list(f(xs[0])), s);
  } else {
    return outputs_of(as_list(f(xs)), s);
  }
}

template <class T>
T as(tensor_list ts) {
  if constexpr (std::same_as<T, tensor>) {
    return std::move(ts[0]);
  } else {
    return ts;
  }
}

// An omitted v: a default-constructed tensor, or an empty list.
inline bool omitted(const tensor& v) { return !v.defined(); }
inline bool omitted(const tensor_list& v) { return v.empty(); }

// Omitting v means "1" for one tensor of one element; else it must be given.
inline void check_omitted_v(const tensor_list& like, const site& s, const char* what) {
  if (like.size() != 1 || like[0].numel() != 1)
    fail("functional::", s.name, ": v can be omitted only when the ", what,
         " is one tensor of one element, but there ",
         like.size() == 1 ? "is one of shape " + shape_string(like[0].shape())
                          : "are " + std::to_string(like.size()),
         "; pass v");
}

// v checked against the tensors it weighs (`what`: their name in messages), or nothing when it
// was omitted, which only one-element tensors allow (`omitted_what`).
template <class X>
tensor_list prepare_v(const X& v, const tensor_list& against, const site& s, const char* what,
                      const char* omitted_what) {
  if (omitted(v)) {
    check_omitted_v(against, s, omitted_what);
    return {};
  }
  tensor_list vs = prepare(as_list(v), s, false, "v");
  check_v(vs, against, s, what);
  return vs;
}

// vjp: v^T J, by one backward from f's outputs weighted by v.
template <class F, class X, class Y>
output_and_result<Y, X> vjp(const F& f, const X& x, const Y& v, const site& s) {
  enable_grad_guard on(true);  // also under no_grad_guard: f is differentiated
  const tensor_list xs = prepare(as_list(x), s, true, "input");
  const tensor_list ys = call<X>(f, xs, s);
  const tensor_list vs = prepare_v(v, ys, s, "output", "output of f");
  tensor_list r = gradients<lazy_v<X>>(ys, xs, vs, s.create_graph, s.create_graph);
  r = fill_zeros(std::move(r), xs, s, stage::back);
  return {as<Y>(finish(ys, s)), as<X>(finish(std::move(r), s))};
}

// jvp: J v by the double-backward trick (Note [Functional jvp]).
template <class F, class X, class Y>
output_and_result<Y, Y> jvp(const F& f, const X& x, const X& v, const site& s) {
  enable_grad_guard on(true);  // also under no_grad_guard: f is differentiated
  const tensor_list xs = prepare(as_list(x), s, true, "input");
  const tensor_list vs = prepare_v(v, xs, s, "input", "input");
  const tensor_list ys = call<X>(f, xs, s);
  // u: one zero tensor per output that depends on the inputs (the others have J = 0)
  tensor_list us, live;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    if (!ys[i].requires_grad()) continue;
    us.push_back(zeros_like(ys[i]).requires_grad_(true));
    live.push_back(ys[i]);
    where.push_back(i);
  }
  tensor_list r(ys.size());
  if (!us.empty()) {
    const tensor_list jtu = gradients<lazy_v<X>>(live, xs, us, true, true);  // J^T u, linear in u
    check_first_derivatives(jtu, s, first::jvp);
    const tensor_list jv = gradients<lazy_v<X>>(jtu, us, vs, s.create_graph, s.create_graph);
    for (std::size_t j = 0; j < where.size(); ++j) r[where[j]] = jv[j];
  }
  r = fill_zeros(std::move(r), ys, s, stage::back_trick);
  return {as<Y>(finish(ys, s)), as<Y>(finish(std::move(r), s))};
}

// f's one output, which must have one element (hessian, hvp, vhp).
inline const tensor& scalar_output(const tensor_list& ys, const site& s) {
  if (ys[0].numel() != 1)
    fail("functional::", s.name, ": f must return a one-element tensor but returned shape ",
         shape_string(ys[0].shape()),
         "; reduce it (e.g. with mg::sum), or use functional::jacobian or vjp for a function "
         "with several outputs");
  return ys[0];
}

// hvp and vhp: v^T H, by a backward of the gradient (kept with create_graph) along v. H of a
// twice differentiable f is symmetric, so this is also H v.
template <class F, class X>
output_and_result<tensor, X> hvp(const F& f, const X& x, const X& v, const site& s) {
  enable_grad_guard on(true);  // also under no_grad_guard: f is differentiated
  const tensor_list xs = prepare(as_list(x), s, true, "input");
  const tensor_list vs = prepare_v(v, xs, s, "input", "input");
  const tensor_list ys = call<X>(f, xs, s);
  const tensor& y = scalar_output(ys, s);
  tensor_list g = gradients<lazy_v<X>>({y}, xs, {}, true, true);
  check_first_derivatives(g, s, first::hvp);
  tensor_list r = gradients<lazy_v<X>>(g, xs, vs, s.create_graph, s.create_graph);
  r = fill_zeros(std::move(r), xs, s, stage::double_back);
  return {as<tensor>(finish(ys, s)), as<X>(finish(std::move(r), s))};
}

// The Jacobian of every output with respect to every input: tensor for one of each, a list
// when one side is a list, a list of lists [output][input] when both are.
template <class F, class X, class Y>
auto jacobian(const F& f, const X& x, const site& s) {
  enable_grad_guard on(true);  // also under no_grad_guard: f is differentiated
  const tensor_list xs = prepare(as_list(x), s, true, "input");
  const tensor_list ys = call<X>(f, xs, s);
  std::vector<tensor_list> j;
  for (std::size_t i = 0; i < ys.size(); ++i)
    j.push_back(finish(
        jacobian_of<lazy_v<X>>(ys[i], xs, s,
                               "Output " + std::to_string(i) + " of the user-provided function",
                               "jacobian"),
        s));
  if constexpr (std::same_as<Y, tensor>) {
    return as<X>(std::move(j[0]));
  } else if constexpr (std::same_as<X, tensor>) {
    tensor_list per_output;
    for (auto& row : j) per_output.push_back(std::move(row[0]));
    return per_output;
  } else {
    return j;
  }
}

// The Hessian: the Jacobian of the gradient (kept with create_graph). Blocks [i][j] of shape
// x_i.shape ++ x_j.shape; one tensor for one input.
template <class F, class X>
auto hessian(const F& f, const X& x, const site& s) {
  enable_grad_guard on(true);  // also under no_grad_guard: f is differentiated
  const tensor_list xs = prepare(as_list(x), s, true, "input");
  const tensor_list ys = call<X>(f, xs, s);
  const tensor& y = scalar_output(ys, s);
  const tensor_list g = gradients<lazy_v<X>>({y}, xs, {}, true, true);
  check_first_derivatives(g, s, first::hessian);
  std::vector<tensor_list> h;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::string what = "The gradient of f with respect to input " + std::to_string(i);
    tensor_list row;
    if (g[i].defined()) {
      row = jacobian_of<lazy_v<X>>(g[i], xs, s, what, "hessian");
    } else {
      for (const auto& xj : xs)
        row.push_back(zeros(concat(xs[i].shape(), xj.shape()),
                            {.dtype = xs[i].dtype(), .device = xs[i].device()}));
    }
    h.push_back(finish(std::move(row), s));
  }
  if constexpr (std::same_as<X, tensor>) {
    return std::move(h[0][0]);
  } else {
    return h;
  }
}

}  // namespace mg::detail::functional_impl

// The machinery of mg::autograd::gradcheck and gradgradcheck (<metagrad/gradcheck.hpp>): their
// options, how the inputs are checked and perturbed, the three Jacobians (numerical, by backward,
// by forward-mode AD), and the checks with undefined gradients.
//
// Note [Perturbing in place]: as torch.autograd.gradcheck, the numerical Jacobian perturbs the
// inputs' own elements, so a function that reads an input through a capture sees the
// perturbation too (and a tensor passed twice moves in both places). The writes are raw, through
// the backend of the input's device: nothing is recorded and the version counter does not move
// (torch writes through `.data`), so the graph of the analytical Jacobian stays valid. Every
// element gets its saved bytes back after its two evaluations, also when fn throws. An input with
// a zero stride (an expanded tensor) would move several elements at once: it is refused.
//
// Note [Undefined output gradients]: as torch's check, backward is run with the gradients of
// fn's outputs made undefined (all at once, then one output at a time when there are several)
// through undefined_grad_fn, an identity whose backward returns nothing. The engine skips a
// built-in node that receives only undefined gradients; an mg::Function receives zeros (or,
// after set_materialize_grads(false), undefined tensors it must handle). Every gradient that
// comes back must be undefined or zero. With forward-mode AD, an input with a zero tangent and
// one without a tangent must give the outputs the same tangents.
#pragma once

#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/autograd.hpp>
#include <metagrad/backend/registry.hpp>
#include <metagrad/context.hpp>
#include <metagrad/error.hpp>
#include <metagrad/forward_ad.hpp>
#include <metagrad/function.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

namespace mg::autograd {

/// Options of `gradcheck` and `gradgradcheck`; an aggregate, used with designated initialisers:
/// `mg::autograd::gradcheck(f, {x}, {.atol = 1e-7, .raise_exception = false})`.
struct gradcheck_options {
  double eps = 1e-6;                 // the central-difference step
  double atol = 1e-5;                // an entry passes if |analytical - numerical| <=
  double rtol = 1e-3;                //   atol + rtol * |numerical|
  bool raise_exception = true;       // false: a failed check returns false instead of throwing
  double nondet_tol = 0.0;           // two backward passes on one graph may differ by this much
  bool check_undefined_grad = true;  // backward (and jvp) must handle undefined output gradients
  bool check_forward_ad = false;     // also compare the Jacobian by forward-mode AD (gradcheck)
};

}  // namespace mg::autograd

namespace mg::detail::gradcheck_impl {

// fn's result as a list of outputs.
template <class F>
tensor_list call(F& fn, const tensor_list& args, const char* api) {
  static_assert(std::is_invocable_v<F&, const tensor_list&>,
                "metagrad: gradcheck: fn must be callable with a const mg::tensor_list&");
  using R = std::remove_cvref_t<std::invoke_result_t<F&, const tensor_list&>>;
  tensor_list outs;
  if constexpr (std::same_as<R, tensor>) {
    outs.push_back(std::invoke(fn, args));
  } else if constexpr (std::same_as<R, tensor_list>) {
    outs = std::invoke(fn, args);
  } else {
    static_assert(std::same_as<R, tensor>,
                  "metagrad: gradcheck: fn must return mg::tensor or mg::tensor_list");
  }
  if (outs.empty()) fail(api, ": fn returned no output; return at least one tensor");
  for (std::size_t k = 0; k < outs.size(); ++k)
    if (!outs[k].defined())
      fail(api, ": output ", k, " of fn is an undefined tensor; return defined tensors only");
  return outs;
}

// The helpers that apply ops are templates in name only, which check() calls with L, a value that
// depends on its F (Note [Lazy members] in runtime/lazy.hpp).
template <int I>
std::vector<double> values(const tensor& t) {
  const auto a = lazy<I>(t).template to_xtensor<double>();
  return std::vector<double>(a.data(), a.data() + a.size());
}

// Like detail::message, without the "metagrad: " prefix: a part of a message.
template <class... Ts>
std::string text(const Ts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return std::move(os).str();
}

inline std::string number(double v) {
  std::ostringstream os;
  os << std::setprecision(12) << v;
  return std::move(os).str();
}

// "element 4 (index [1, 1])" of a tensor of `shape`.
inline std::string element(std::int64_t flat, const shape_t& shape) {
  std::vector<std::int64_t> idx(shape.size());
  std::int64_t rest = flat;
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? rest % shape[d] : 0;
    rest = shape[d] ? rest / shape[d] : 0;
  }
  std::ostringstream os;
  os << "element " << flat << " (index [";
  for (std::size_t d = 0; d < idx.size(); ++d) os << (d ? ", " : "") << idx[d];
  os << "])";
  return std::move(os).str();
}

// One element of a tensor's storage, read and written raw (Note [Perturbing in place]).
struct raw_element {
  void* at;
  dtype type;
  const backend* b;

  using bytes = std::array<std::byte, 8>;
  bytes save() const {
    bytes r{};
    b->to_host(r.data(), at, element_size(type));
    return r;
  }
  void restore(const bytes& r) const { b->from_host(at, r.data(), element_size(type)); }
  double read() const {
    if (type == mg::f32) {
      float v;
      b->to_host(&v, at, sizeof v);
      return v;
    }
    double v;
    b->to_host(&v, at, sizeof v);
    return v;
  }
  void write(double v) const {  // rounded to the element's dtype
    if (type == mg::f32) {
      const auto f = static_cast<float>(v);
      b->from_host(at, &f, sizeof f);
    } else {
      b->from_host(at, &v, sizeof v);
    }
  }
};

// The elements of t in row-major order of its shape, wherever its strides put them.
inline std::vector<raw_element> elements_of(const tensor& t) {
  const tensor_impl& ti = *t.impl();
  const backend* b = &backend_of(ti.device(), "gradcheck");
  const auto size = static_cast<std::int64_t>(element_size(ti.dtype()));
  std::vector<raw_element> r;
  r.reserve(std::size_t(ti.numel()));
  for (std::int64_t j = 0; j < ti.numel(); ++j) {
    std::int64_t rest = j, off = ti.offset;
    for (std::size_t d = ti.shape.size(); d-- > 0;) {
      off += (rest % ti.shape[d]) * ti.strides[d];
      rest /= ti.shape[d];
    }
    r.push_back({static_cast<char*>(ti.store->data) + off * size, ti.dtype(), b});
  }
  return r;
}

// Gives an element its saved bytes back when the scope ends, by return or by exception.
struct restore_element {
  const raw_element& e;
  raw_element::bytes saved = e.save();
  ~restore_element() { e.restore(saved); }
};

// The indices of the inputs to differentiate, after checking them (torch's _check_inputs): a
// floating dtype (float32 is checked, with a warning), no overlapping elements.
template <int = 0>
std::vector<std::size_t> differentiated(const tensor_list& inputs, const char* api) {
  std::vector<std::size_t> diff;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    if (!is_floating(x.dtype()))
      fail(api, ": input ", i, " requires grad but has dtype ", dtype_name(x.dtype()), " (shape ",
           shape_string(x.shape()),
           "); finite differences need floating point: convert it with .to(mg::f64)");
    if (x.impl()->is_expanded())
      fail(api, ": input ", i, " (shape ", shape_string(x.shape()), ", strides ",
           shape_string(x.strides()), ") has a dimension with stride 0: its elements overlap ",
           "in memory, and ", api,
           " perturbs the inputs in place, so it only supports inputs that do not overlap "
           "to compute the numerical gradients correctly; pass input.contiguous() (or "
           ".clone()) instead");
    diff.push_back(i);
  }
  if (diff.empty())
    fail(api, ": none of the ", inputs.size(),
         " input(s) requires grad, so there is nothing to check; create the inputs to "
         "differentiate with .requires_grad = true (or call requires_grad_())");
  for (std::size_t i : diff)
    if (inputs[i].dtype() != mg::f64)
      std::cerr << "metagrad: " << api << ": input " << i
                << " is float32; the check is imprecise in single precision (finite differences "
                   "lose digits), prefer float64\n";
  return diff;
}

// What a check calls its inputs and outputs in messages ("input 2 (the grad_output of ...)").
struct names {
  std::function<std::string(std::size_t)> input = [](std::size_t i) {
    return "input " + std::to_string(i);
  };
  std::function<std::string(std::size_t)> output = [](std::size_t k) {
    return "output " + std::to_string(k);
  };
};

// jac[k][d][j * numel(out k) + m]: d output k element m / d differentiated input d element j.
using jacobian = std::vector<std::vector<std::vector<double>>>;

inline jacobian zero_jacobian(const tensor_list& outs, const tensor_list& diff_in) {
  jacobian jac(outs.size());
  for (std::size_t k = 0; k < outs.size(); ++k)
    for (const auto& x : diff_in) jac[k].emplace_back(std::size_t(x.numel() * outs[k].numel()));
  return jac;
}

// A tensor like t (its dtype and device, contiguous) that is 1 at flat index j, 0 elsewhere.
inline tensor one_hot(const tensor& t, std::int64_t j) {
  const tensor h = zeros(t.shape(), {.dtype = t.dtype(), .device = t.device()});
  elements_of(h)[std::size_t(j)].write(1.0);
  return h;
}

// Stores the values of gradient (or tangent) g, of the shape of `like`, into column or row e.
inline void store(std::vector<double>& dst, const std::vector<double>& g, std::size_t stride,
                  std::size_t e) {
  for (std::size_t j = 0; j < g.size(); ++j) dst[j * stride + e] = g[j];
}

// The Jacobian by backward: one autograd::grad per output element, along a one-hot grad_output.
template <int I>
jacobian analytical(const char* api, const tensor_list& outs, const tensor_list& diff_in,
                    const std::vector<std::size_t>& diff) {
  jacobian jac = zero_jacobian(outs, diff_in);
  for (std::size_t k = 0; k < outs.size(); ++k) {
    const tensor& out = outs[k];
    if (!out.requires_grad()) continue;
    for (std::int64_t m = 0; m < out.numel(); ++m) {
      const tensor_list g = autograd::grad<I>({out}, diff_in, {one_hot(out, m)},
                                              {.retain_graph = true, .allow_unused = true});
      for (std::size_t d = 0; d < diff_in.size(); ++d) {
        if (!g[d].defined()) continue;  // unused: zeros
        if (g[d].numel() != diff_in[d].numel())
          fail(api, ": the gradient of output ", k, " with respect to input ", diff[d],
               " has shape ", shape_string(g[d].shape()), " but the input has shape ",
               shape_string(diff_in[d].shape()), "; a backward returns the input's shape");
        store(jac[k][d], values<I>(g[d]), std::size_t(out.numel()), std::size_t(m));
      }
    }
  }
  return jac;
}

// fn's outputs, as values, for the inputs as they are now; they must keep their count and shapes.
template <int I, class F>
std::vector<std::vector<double>> evaluate(F& fn, const tensor_list& args, const tensor_list& outs,
                                          const char* api) {
  const tensor_list r = call(fn, args, api);
  if (r.size() != outs.size())
    fail(api, ": fn returned ", r.size(), " output(s) for perturbed inputs but ", outs.size(),
         " at first; fn must return the same outputs whatever the input values");
  std::vector<std::vector<double>> v;
  for (std::size_t k = 0; k < r.size(); ++k) {
    if (r[k].shape() != outs[k].shape())
      fail(api, ": output ", k, " of fn has shape ", shape_string(r[k].shape()),
           " for perturbed inputs but ", shape_string(outs[k].shape()),
           " at first; its shape must not depend on the input values");
    v.push_back(values<I>(r[k]));
  }
  return v;
}

// The Jacobian by central differences, perturbing the inputs in place (Note [Perturbing in
// place]): (f(x + eps) - f(x - eps)) / (2 eps) for every element of every output.
template <int I, class F>
jacobian numerical(F& fn, const tensor_list& inputs, const std::vector<std::size_t>& diff,
                   const tensor_list& outs, double eps, const char* api) {
  tensor_list diff_in;
  for (std::size_t i : diff) diff_in.push_back(inputs[i]);
  jacobian num = zero_jacobian(outs, diff_in);
  for (std::size_t d = 0; d < diff.size(); ++d) {
    const auto elements = elements_of(inputs[diff[d]]);
    for (std::size_t j = 0; j < elements.size(); ++j) {
      const raw_element& e = elements[j];
      const restore_element restore{e};
      const double x0 = e.read();
      e.write(x0 + eps);
      const auto plus = evaluate<I>(fn, inputs, outs, api);
      e.write(x0 - eps);
      const auto minus = evaluate<I>(fn, inputs, outs, api);
      e.restore(restore.saved);
      for (std::size_t k = 0; k < outs.size(); ++k)
        for (std::size_t m = 0; m < plus[k].size(); ++m)
          num[k][d][j * plus[k].size() + m] = (plus[k][m] - minus[k][m]) / (2 * eps);
    }
  }
  return num;
}

// The inputs with each differentiated input d replaced by a dual tensor of tangent tangents[d]
// (by its primal alone where tangents[d] is undefined). An input passed twice is one dual whose
// tangent is the sum of its slots' tangents, as its elements move in both slots.
template <int I>
tensor_list with_tangents(const tensor_list& inputs, const std::vector<std::size_t>& diff,
                          const tensor_list& tangents) {
  std::vector<std::size_t> owner(diff.size());
  tensor_list sum(diff.size());
  for (std::size_t d = 0; d < diff.size(); ++d) {
    owner[d] = d;
    for (std::size_t e = 0; e < d && owner[d] == d; ++e)
      if (inputs[diff[e]].impl() == inputs[diff[d]].impl()) owner[d] = owner[e];
    tensor& s = sum[owner[d]];
    if (tangents[d].defined()) s = s.defined() ? lazy<I>(s) + tangents[d] : tangents[d];
  }
  tensor_list args = inputs;
  for (std::size_t d = 0; d < diff.size(); ++d) {
    const std::size_t i = diff[d];
    if (owner[d] != d) {
      args[i] = args[diff[owner[d]]];
    } else {
      const tensor primal = inputs[i].detach();
      args[i] = sum[d].defined() ? forward_ad::make_dual<I>(primal, sum[d]) : primal;
    }
  }
  return args;
}

// The tangents of fn's outputs (undefined where an output has none).
template <int I, class F>
tensor_list tangents_of(F& fn, const tensor_list& args, const char* api) {
  tensor_list t;
  for (const tensor& y : call(fn, args, api)) t.push_back(forward_ad::unpack_dual<I>(y).tangent);
  return t;
}

// The Jacobian by forward-mode AD, column by column: the differentiated input d gets the tangent
// one-hot at element j, the others zero tangents (torch's _get_analytical_jacobian_forward_ad).
template <int I, class F>
jacobian forward_mode(F& fn, const tensor_list& inputs, const std::vector<std::size_t>& diff,
                      const tensor_list& outs, const char* api) {
  forward_ad::dual_level level;
  tensor_list diff_in, zero;
  for (std::size_t i : diff) {
    diff_in.push_back(inputs[i]);
    zero.push_back(zeros_like(inputs[i].detach()));
  }
  jacobian jac = zero_jacobian(outs, diff_in);
  for (std::size_t d = 0; d < diff.size(); ++d)
    for (std::int64_t j = 0; j < diff_in[d].numel(); ++j) {
      tensor_list tangents = zero;
      tangents[d] = one_hot(diff_in[d], j);
      const tensor_list t = tangents_of<I>(fn, with_tangents<I>(inputs, diff, tangents), api);
      for (std::size_t k = 0; k < outs.size() && k < t.size(); ++k) {
        if (!t[k].defined()) continue;  // no tangent: zeros
        if (t[k].numel() != outs[k].numel())
          fail(api, ": the tangent of output ", k, " has shape ", shape_string(t[k].shape()),
               " but the output has shape ", shape_string(outs[k].shape()),
               "; a jvp returns the output's shape");
        const auto v = values<I>(t[k]);
        for (std::size_t m = 0; m < v.size(); ++m) jac[k][d][std::size_t(j) * v.size() + m] = v[m];
      }
    }
  return jac;
}

// The first entry where `got` (by backward, or by forward-mode AD) and the numerical Jacobian
// differ beyond the tolerances, as a message; empty if none.
template <int = 0>
std::string compare(const char* api, const std::string& what, bool by_forward_mode,
                    const jacobian& got, const jacobian& num, const tensor_list& inputs,
                    const std::vector<std::size_t>& diff, const tensor_list& outs,
                    const autograd::gradcheck_options& o, const names& name) {
  const char* how = by_forward_mode ? "forward-mode" : "analytical";
  for (std::size_t k = 0; k < outs.size(); ++k)
    for (std::size_t d = 0; d < diff.size(); ++d) {
      const auto nout = std::size_t(outs[k].numel());
      for (std::size_t e = 0; e < got[k][d].size(); ++e) {
        const double a = got[k][d][e], n = num[k][d][e];
        if (std::fabs(a - n) <= o.atol + o.rtol * std::fabs(n)) continue;  // NaN fails
        const std::string where =
            text(name.output(k), " with respect to ", name.input(diff[d]), " at input ",
                 element(std::int64_t(e / nout), inputs[diff[d]].shape()), " and output ",
                 element(std::int64_t(e % nout), outs[k].shape()));
        const std::string values =
            text("numerical ", number(n), " vs ", how, " ", number(a), " (|difference| ",
                 number(std::fabs(a - n)), " > atol + rtol * |numerical| with atol ", o.atol,
                 ", rtol ", o.rtol, ", eps ", o.eps, ")");
        if (!outs[k].requires_grad())
          return message(api, ": ", name.output(k), " does not require grad, so its ", how,
                         " Jacobian is zero, but its numerical Jacobian is not: ", where, ": ",
                         values,
                         "; compute it without detach() or no_grad_guard if it depends on the "
                         "inputs");
        return message(api, ": ", what, " for ", where, ": ", values, "; the ",
                       by_forward_mode ? "jvp" : "backward",
                       " of an operation fn uses is wrong for this entry (or fn is not "
                       "differentiable there, or needs another .eps, .atol or .rtol)");
      }
    }
  return {};
}

// Two backward passes on one graph must agree within nondet_tol (torch's reentrant check).
template <int = 0>
std::string reentrant(const char* api, const jacobian& ana, const jacobian& again,
                      const tensor_list& inputs, const std::vector<std::size_t>& diff,
                      const tensor_list& outs, double nondet_tol, const names& name) {
  for (std::size_t k = 0; k < outs.size(); ++k)
    for (std::size_t d = 0; d < diff.size(); ++d)
      for (std::size_t e = 0; e < ana[k][d].size(); ++e) {
        const double a = ana[k][d][e], b = again[k][d][e];
        if (a == b || (std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= nondet_tol) continue;
        const auto nout = std::size_t(outs[k].numel());
        return message(
            api, ": backward is not reentrant: computing the gradient of ", name.output(k),
            " with respect to ", name.input(diff[d]), " twice on the same graph gave ", number(a),
            " then ", number(b), " at input ",
            element(std::int64_t(e / nout), inputs[diff[d]].shape()), " and output ",
            element(std::int64_t(e % nout), outs[k].shape()),
            ", more than the tolerance for non-determinism, nondet_tol = ", number(nondet_tol),
            "; a backward must be deterministic and must not depend on state that a "
            "previous backward changed (or pass a .nondet_tol that allows it)");
      }
  return {};
}

// torch's UndefinedGrad: the identity, whose backward hands undefined gradients on. (A template
// in name only: Note [Lazy members].)
template <int I>
struct undefined_grad_fn {
  static constexpr const char* name = "gradcheck_undefined_grad";
  static tensor forward(mg::context&, const tensor& x) { return lazy<I>(x).clone(); }
  static tensor_list backward(mg::context&, const tensor_list&) { return {tensor{}}; }
};

// Note [Undefined output gradients], backward: returns the failure message, empty if none.
template <int I, class F>
std::string undefined_backward(F& fn, const tensor_list& inputs, const tensor_list& diff_in,
                               const char* api) {
  const std::size_t n = [&] {
    std::size_t c = 0;
    for (const tensor& y : call(fn, inputs, api)) c += y.requires_grad();
    return c;
  }();
  // undefined: -1 all of them, else the one at that index (among those requiring grad)
  for (std::ptrdiff_t undefined = -1; undefined < std::ptrdiff_t(n > 1 ? n : 0); ++undefined) {
    tensor_list outs, zero;
    for (const tensor& y : call(fn, inputs, api)) {
      if (!y.requires_grad()) continue;
      const bool cut = undefined < 0 || std::size_t(undefined) == outs.size();
      outs.push_back(cut ? mg::apply<undefined_grad_fn<I>>(y) : y);
      zero.push_back(zeros_like(y.detach()));
    }
    if (outs.empty()) return {};
    const std::string which =
        undefined < 0 ? std::string("all output gradients")
                      : text("the gradient of output ", undefined, " (among those requiring grad)");
    tensor_list g;
    try {
      g = autograd::grad<I>(outs, diff_in, zero, {.allow_unused = true});
    } catch (const error& e) {
      return message(api, ": backward failed with ", which,
                     " undefined: expected every backward to handle undefined output gradients "
                     "(as zeros); a custom backward that calls set_materialize_grads(false) must "
                     "check g[k].defined(). The error was: ",
                     e.what());
    }
    for (std::size_t d = 0; d < g.size(); ++d) {
      if (!g[d].defined()) continue;
      for (double v : values<I>(g[d]))
        if (v != 0)
          return message(api, ": with ", which,
                         " undefined, the gradient with respect to differentiated input ", d,
                         " is not zero (", number(v),
                         "): expected every input gradient to be undefined or zero when the "
                         "output gradients are undefined or zero; a backward must be linear in "
                         "its incoming gradients (add no constant), or pass "
                         ".check_undefined_grad = false");
    }
  }
  return {};
}

// Note [Undefined output gradients], forward mode: returns the failure message, empty if none.
template <int I, class F>
std::string undefined_forward(F& fn, const tensor_list& inputs,
                              const std::vector<std::size_t>& diff, const char* api) {
  forward_ad::dual_level level;
  std::mt19937_64 gen(0x7461616e67656e74ULL);  // fixed: the same tangents on every call
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  tensor_list tangents;
  for (std::size_t i : diff) {
    tensor u = zeros(inputs[i].shape(), {.dtype = inputs[i].dtype(), .device = inputs[i].device()});
    for (const raw_element& e : elements_of(u)) e.write(uniform(gen));
    tangents.push_back(u);
  }
  for (std::size_t d = 0; d < diff.size(); ++d) {
    tensor_list zero_tangent = tangents, no_tangent = tangents;
    zero_tangent[d] = zeros_like(tangents[d]);
    no_tangent[d] = tensor{};
    const tensor_list t1 = tangents_of<I>(fn, with_tangents<I>(inputs, diff, zero_tangent), api);
    const tensor_list t2 = tangents_of<I>(fn, with_tangents<I>(inputs, diff, no_tangent), api);
    for (std::size_t k = 0; k < t1.size() && k < t2.size(); ++k) {
      if (!t1[k].defined() || !t2[k].defined()) continue;
      const auto a = values<I>(t1[k]), b = values<I>(t2[k]);
      for (std::size_t m = 0; m < a.size() && m < b.size(); ++m)
        if (!(std::fabs(a[m] - b[m]) <= 1e-8 + 1e-5 * std::fabs(b[m])))
          return message(api, ": the tangent of output ", k, " at ",
                         element(std::int64_t(m), t1[k].shape()), " is ", number(a[m]),
                         " when input ", diff[d], " has a zero tangent but ", number(b[m]),
                         " when it has none: a jvp must treat an undefined tangent as zero (or "
                         "pass .check_undefined_grad = false)");
    }
  }
  return {};
}

// The check shared by gradcheck and gradgradcheck; fn: tensor_list(const tensor_list&). Returns
// an empty string on success, else the failure message.
template <class F>
std::string check(const char* api, const char* what, F& fn, const tensor_list& inputs,
                  const std::vector<std::size_t>& diff, const autograd::gradcheck_options& o,
                  const names& name) {
  constexpr int L = lazy_v<F>;
  enable_grad_guard grad_on(true);
  tensor_list diff_in;
  for (std::size_t i : diff) diff_in.push_back(inputs[i]);

  const tensor_list outs = call(fn, inputs, api);
  const jacobian ana = analytical<L>(api, outs, diff_in, diff);
  const jacobian again = analytical<L>(api, outs, diff_in, diff);
  std::string failure = reentrant(api, ana, again, inputs, diff, outs, o.nondet_tol, name);
  if (!failure.empty()) return failure;
  const jacobian num = numerical<L>(fn, inputs, diff, outs, o.eps, api);
  failure = compare(api, what, false, ana, num, inputs, diff, outs, o, name);
  if (!failure.empty()) return failure;
  if (o.check_forward_ad) {
    const jacobian fw = forward_mode<L>(fn, inputs, diff, outs, api);
    failure = compare(api, text("forward-mode ", what), true, fw, num, inputs, diff, outs, o, name);
    if (!failure.empty()) return failure;
    if (o.check_undefined_grad) failure = undefined_forward<L>(fn, inputs, diff, api);
    if (!failure.empty()) return failure;
  }
  if (o.check_undefined_grad) return undefined_backward<L>(fn, inputs, diff_in, api);
  return {};
}

inline bool report(const std::string& failure, const autograd::gradcheck_options& o) {
  if (failure.empty()) return true;
  if (o.raise_exception) throw error(failure);
  return false;
}

}  // namespace mg::detail::gradcheck_impl

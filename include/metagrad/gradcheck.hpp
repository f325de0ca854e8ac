// torch.autograd.gradcheck and gradgradcheck for mg::tensor: compare the gradients the engine
// computes (the analytical Jacobian) with central finite differences (the numerical Jacobian).
//
// gradcheck(fn, inputs, options), fn taking a `const mg::tensor_list&` and returning an
// mg::tensor or an mg::tensor_list (outputs of any shape, 0-d included):
// - Only the inputs that require grad are differentiated; each must be float64 (mg::f64), and
//   at least one input must require grad (otherwise mg::error). The others are passed through.
// - Numerical Jacobian: each element j of each differentiated input is set to x_j + eps and to
//   x_j - eps in a float64 copy of the input (a leaf that requires grad, written through a
//   detached view under no_grad_guard), fn is evaluated, and (f(x + eps) - f(x - eps)) / (2 eps)
//   is taken for every element of every output; the element is then restored. The inputs
//   themselves are never written (a tensor passed twice shares one copy, so both move).
// - Analytical Jacobian: for every element of every output that requires grad,
//   `mg::autograd::grad` with a one-hot grad_output gives one row (an unused input: zeros).
//   It is computed twice on the same graph; the two must be equal exactly (a deterministic,
//   reentrant backward), as torch checks.
// - Every entry must satisfy |analytical - numerical| <= atol + rtol * |numerical|. An output
//   that does not require grad has an analytical Jacobian of zero, so its numerical Jacobian must
//   be zero to that tolerance.
// - The first failure throws mg::error naming the output, the input, the element (flat index
//   and multi-index), both values and the tolerances; with `.raise_exception = false` it returns
//   false instead. Misuse (a non-f64 input that requires grad, no input requiring grad, fn
//   returning an undefined tensor or changing its output shapes) always throws.
//
// gradgradcheck(fn, inputs, options) checks second derivatives: it draws one random grad_output
// v_k per output of fn that requires grad (float64, uniform in [-1, 1], the shape of the output)
// and runs gradcheck on g(inputs..., v...) = autograd::grad(outputs, differentiated inputs, v,
// {.create_graph = true}), the v's requiring grad too (as torch does); an unused input's
// gradient is zeros that do not require grad. The v's come from a local std::mt19937_64 with a
// fixed seed: the same on every call (for a given standard library), and the generator of
// mg::randn / mg::manual_seed is left untouched.
//
// The cost is 2 evaluations of fn per differentiated input element plus 2 backward passes per
// output element: meant for small tensors in tests.
#pragma once

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/autograd.hpp>
#include <metagrad/error.hpp>
#include <metagrad/tensor.hpp>

namespace mg::autograd {

/// Options of `gradcheck` and `gradgradcheck`; an aggregate, used with designated initialisers:
/// `mg::autograd::gradcheck(f, {x}, {.atol = 1e-7, .raise_exception = false})`.
struct gradcheck_options {
  double eps = 1e-6;            // the central-difference step
  double atol = 1e-5;           // an entry passes if |analytical - numerical| <=
  double rtol = 1e-3;           //   atol + rtol * |numerical|
  bool raise_exception = true;  // false: a failed check returns false instead of throwing
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
// depends on its F (Note [Lazy members] in <metagrad/tensor_class.hpp>).
template <int I>
std::vector<double> values(const tensor& t) {
  const auto a = lazy<I>(t).template to_xtensor<double>();
  return std::vector<double>(a.data(), a.data() + a.size());
}

// Writes one element of a flat view (1-D, sharing storage with the tensor it views).
template <int I>
void set_element(const tensor& flat, std::int64_t j, double v) {
  no_grad_guard ng;
  lazy<I>(flat).select(0, j).fill_(v);
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

// The indices of the inputs to differentiate, after checking them.
template <int = 0>
std::vector<std::size_t> differentiated(const tensor_list& inputs, const char* api) {
  std::vector<std::size_t> diff;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    if (inputs[i].dtype() != mg::f64)
      fail(api, ": input ", i, " requires grad but has dtype ", dtype_name(inputs[i].dtype()),
           " (shape ", shape_string(inputs[i].shape()),
           "); finite differences need float64: convert it with .to(mg::f64)");
    diff.push_back(i);
  }
  if (diff.empty())
    fail(api, ": none of the ", inputs.size(),
         " input(s) requires grad, so there is nothing to check; create the inputs to "
         "differentiate with .requires_grad = true (or call requires_grad_())");
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

template <int I>
jacobian analytical(const char* api, const tensor_list& outs, const tensor_list& diff_in,
                    const std::vector<std::size_t>& diff) {
  jacobian jac(outs.size());
  for (std::size_t k = 0; k < outs.size(); ++k) {
    const tensor& out = outs[k];
    const std::int64_t nout = out.numel();
    for (const auto& x : diff_in) jac[k].emplace_back(std::size_t(x.numel() * nout), 0.0);
    if (!out.requires_grad()) continue;
    for (std::int64_t m = 0; m < nout; ++m) {
      tensor one_hot = zeros_like(out);
      set_element<I>(lazy<I>(one_hot).reshape({-1}), m, 1.0);
      const tensor_list g = autograd::grad<I>({out}, diff_in, {one_hot},
                                              {.retain_graph = true, .allow_unused = true});
      for (std::size_t d = 0; d < diff_in.size(); ++d) {
        if (!g[d].defined()) continue;  // unused: zeros
        if (g[d].numel() != diff_in[d].numel())
          fail(api, ": the gradient of output ", k, " with respect to input ", diff[d],
               " has shape ", shape_string(g[d].shape()), " but the input has shape ",
               shape_string(diff_in[d].shape()), "; a backward returns the input's shape");
        const auto v = values<I>(g[d]);
        for (std::size_t j = 0; j < v.size(); ++j) jac[k][d][j * std::size_t(nout) + m] = v[j];
      }
    }
  }
  return jac;
}

inline bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The check shared by gradcheck and gradgradcheck; fn: tensor_list(const tensor_list&).
// Returns an empty string on success, else the failure message.
template <class F>
std::string check(const char* api, const char* what, F& fn, const tensor_list& inputs,
                  const std::vector<std::size_t>& diff, const autograd::gradcheck_options& o,
                  const names& name) {
  constexpr int L = lazy_v<F>;
  enable_grad_guard grad_on(true);
  tensor_list diff_in;
  for (std::size_t i : diff) diff_in.push_back(inputs[i]);

  // the analytical Jacobian, twice on the same graph
  const tensor_list outs = call(fn, inputs, api);
  const jacobian ana = analytical<L>(api, outs, diff_in, diff);
  const jacobian again = analytical<L>(api, outs, diff_in, diff);
  for (std::size_t k = 0; k < outs.size(); ++k)
    for (std::size_t d = 0; d < diff.size(); ++d)
      for (std::size_t e = 0; e < ana[k][d].size(); ++e)
        if (!same(ana[k][d][e], again[k][d][e])) {
          const auto nout = std::size_t(outs[k].numel());
          return message(api, ": backward is not reentrant: computing the gradient of ",
                         name.output(k), " with respect to ", name.input(diff[d]),
                         " twice on the same graph gave ", number(ana[k][d][e]), " then ",
                         number(again[k][d][e]), " at input ",
                         element(std::int64_t(e / nout), inputs[diff[d]].shape()), " and output ",
                         element(std::int64_t(e % nout), outs[k].shape()),
                         "; a backward must be deterministic and must not depend on state that "
                         "a previous backward changed");
        }

  // the numerical Jacobian, on float64 copies of the differentiated inputs
  // (an input passed twice gets one copy, so perturbing it moves both, as in torch)
  tensor_list args = inputs;
  for (std::size_t d = 0; d < diff.size(); ++d) {
    const std::size_t i = diff[d];
    const tensor copy(lazy<L>(inputs[i]).template to_xtensor<double>());
    args[i] = lazy<L>(copy).to(inputs[i].device()).requires_grad_();
    for (std::size_t e = 0; e < d; ++e)
      if (inputs[diff[e]].impl() == inputs[i].impl()) args[i] = args[diff[e]];
  }
  auto evaluate = [&] {
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
      v.push_back(values<L>(r[k]));
    }
    return v;
  };
  jacobian num(outs.size());
  for (std::size_t k = 0; k < outs.size(); ++k)
    for (const auto& x : diff_in) num[k].emplace_back(std::size_t(x.numel() * outs[k].numel()));
  for (std::size_t d = 0; d < diff.size(); ++d) {
    const tensor flat = lazy<L>(args[diff[d]]).detach().reshape({-1});
    const auto x0 = values<L>(flat);
    for (std::size_t j = 0; j < x0.size(); ++j) {
      set_element<L>(flat, std::int64_t(j), x0[j] + o.eps);
      const auto plus = evaluate();
      set_element<L>(flat, std::int64_t(j), x0[j] - o.eps);
      const auto minus = evaluate();
      set_element<L>(flat, std::int64_t(j), x0[j]);
      for (std::size_t k = 0; k < outs.size(); ++k)
        for (std::size_t m = 0; m < plus[k].size(); ++m)
          num[k][d][j * plus[k].size() + m] = (plus[k][m] - minus[k][m]) / (2 * o.eps);
    }
  }

  // entry by entry
  for (std::size_t k = 0; k < outs.size(); ++k)
    for (std::size_t d = 0; d < diff.size(); ++d) {
      const auto nout = std::size_t(outs[k].numel());
      for (std::size_t e = 0; e < ana[k][d].size(); ++e) {
        const double a = ana[k][d][e], n = num[k][d][e];
        if (std::fabs(a - n) <= o.atol + o.rtol * std::fabs(n)) continue;  // NaN fails
        const std::string where =
            text(name.output(k), " with respect to ", name.input(diff[d]), " at input ",
                 element(std::int64_t(e / nout), inputs[diff[d]].shape()), " and output ",
                 element(std::int64_t(e % nout), outs[k].shape()));
        const std::string values =
            text("numerical ", number(n), " vs analytical ", number(a), " (|difference| ",
                 number(std::fabs(a - n)), " > atol + rtol * |numerical| with atol ", o.atol,
                 ", rtol ", o.rtol, ", eps ", o.eps, ")");
        if (!outs[k].requires_grad())
          return message(api, ": ", name.output(k),
                         " does not require grad, so its analytical Jacobian is zero, but its "
                         "numerical Jacobian is not: ",
                         where, ": ", values,
                         "; compute it without detach() or no_grad_guard if it depends on the "
                         "inputs");
        return message(api, ": ", what, " for ", where, ": ", values,
                       "; the backward of an operation fn uses is wrong for this entry (or fn "
                       "is not differentiable there, or needs another .eps, .atol or .rtol)");
      }
    }
  return {};
}

inline bool report(const std::string& failure, const autograd::gradcheck_options& o) {
  if (failure.empty()) return true;
  if (o.raise_exception) throw error(failure);
  return false;
}

}  // namespace mg::detail::gradcheck_impl

namespace mg::autograd {

/// Checks the gradients of `fn` at `inputs` against central finite differences, as
/// torch.autograd.gradcheck: every input that requires grad (float64) is differentiated, every
/// entry of every output's Jacobian is compared. Returns true, or on the first mismatch throws
/// mg::error naming the output, input, element and both values (with `.raise_exception =
/// false`: returns false).
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
/// with fixed pseudo-random grad_outputs v (float64, uniform in [-1, 1], one per output of fn
/// that requires grad, themselves requiring grad). In messages, inputs past those of fn are the
/// v's and output d is the gradient with respect to the d-th differentiated input.
/// ```cpp
/// auto x = mg::randn({4}, {.dtype = mg::f64, .requires_grad = true});
/// bool ok = mg::autograd::gradgradcheck(
///     [](const mg::tensor_list& in) { return in[0] * in[0] * in[0]; }, {x});
/// ```
template <class F>
bool gradgradcheck(F&& fn, const tensor_list& inputs, const gradcheck_options& options = {}) {
  namespace gc = detail::gradcheck_impl;
  constexpr const char* api = "gradgradcheck";
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
      vs.push_back(detail::lazy<detail::lazy_v<F>>(t).to(outs[k].device()).requires_grad_());
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

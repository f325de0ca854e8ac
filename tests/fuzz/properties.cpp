// The invariants (properties.hpp).
#include "fuzz/properties.hpp"

#include <cmath>
#include <random>
#include <sstream>

#include <metagrad/autograd.hpp>
#include <metagrad/forward_ad.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

#include "fuzz/run.hpp"

namespace mg_fuzz {
namespace {

constexpr double fd_step = 1e-6;

using grads_t = std::vector<std::vector<double>>;

grads_t as_values(const program& p, const std::vector<mg::tensor>& g) {
  grads_t r;
  std::size_t k = 0;
  for (const auto& in : p.inputs) {
    if (!in.requires_grad) continue;
    const mg::tensor& t = g.at(k++);
    r.push_back(t.defined() ? values_of(t) : std::vector<double>(in.data.size(), 0.0));
  }
  return r;
}

double largest_of(const grads_t& g) {
  double s = 0;
  for (const auto& v : g)
    for (double e : v) s = std::max(s, std::abs(e));
  return s;
}

// Elementwise |a - b| <= rtol * |b| + atol * (1 + max|b|); a description of the first miss.
std::optional<std::string> compare(const grads_t& a, const grads_t& b, double rtol, double atol,
                                   const std::string& what) {
  const double scale = 1 + largest_of(b);
  for (std::size_t i = 0; i < b.size(); ++i)
    for (std::size_t e = 0; e < b[i].size(); ++e) {
      const double x = a.at(i).at(e), y = b[i][e];
      if (!(std::abs(x - y) <= rtol * std::abs(y) + atol * scale)) {
        std::ostringstream s;
        s.precision(10);
        s << what << ": gradient " << i << " element " << e << " is " << x << ", expected " << y;
        return s.str();
      }
    }
  return {};
}

std::vector<std::vector<double>> directions(const program& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<std::vector<double>> d;
  for (const auto& in : p.inputs) {
    std::vector<double> v;
    for (std::size_t e = 0; e < in.data.size(); ++e) v.push_back(in.requires_grad ? u(rng) : 0.0);
    d.push_back(v);
  }
  return d;
}

std::vector<std::vector<double>> shifted(const program& p,
                                         const std::vector<std::vector<double>>& u, double h) {
  std::vector<std::vector<double>> d;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    auto v = p.inputs[i].data;
    for (std::size_t e = 0; e < v.size(); ++e) v[e] += h * u[i][e];
    d.push_back(v);
  }
  return d;
}

// <g, u> over the inputs that require grad
double inner(const program& p, const grads_t& g, const std::vector<std::vector<double>>& u) {
  double s = 0;
  std::size_t k = 0;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    if (!p.inputs[i].requires_grad) continue;
    for (std::size_t e = 0; e < u[i].size(); ++e) s += g[k][e] * u[i][e];
    ++k;
  }
  return s;
}
double inner_abs(const program& p, const grads_t& g, const std::vector<std::vector<double>>& u) {
  double s = 0;
  std::size_t k = 0;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    if (!p.inputs[i].requires_grad) continue;
    for (std::size_t e = 0; e < u[i].size(); ++e) s += std::abs(g[k][e] * u[i][e]);
    ++k;
  }
  return s;
}

// The program with other input values (float64, recorded), its gradients.
grads_t grads_at(const program& p, const std::vector<std::vector<double>>& data) {
  program q = p;
  for (std::size_t i = 0; i < q.inputs.size(); ++i) q.inputs[i].data = data[i];
  const run_result r = run(q, variant{});
  if (r.error) throw mg::error(*r.error);
  return as_values(q, r.grads);
}

std::string with_error(const std::string& what, const run_result& r) {
  return what + " raised an error: " + *r.error;
}

// First order against central differences along random directions.
std::optional<std::string> check_first_order(const program& p, const grads_t& g) {
  for (unsigned k = 0; k < 3; ++k) {
    const auto u = directions(p, 100 + k);
    // central differences at steps h and h/2, combined (Richardson): the error is O(h^4); a
    // function that oscillates fast (cos of 10 / x at small x) gets a second try at h / 4
    const auto central = [&](double step) {
      return (loss_at(p, shifted(p, u, step)) - loss_at(p, shifted(p, u, -step))) / (2 * step);
    };
    const auto richardson = [&](double h) { return (4 * central(h / 2) - central(h)) / 3; };
    const double an0 = inner(p, g, u), tol0 = 1e-5 * (1 + inner_abs(p, g, u));
    double fd = richardson(10 * fd_step);
    if (!(std::abs(fd - an0) <= tol0)) fd = richardson(2.5 * fd_step);
    const double an = inner(p, g, u);
    const double tol = 1e-5 * (1 + inner_abs(p, g, u));
    if (!(std::abs(fd - an) <= tol)) {
      std::ostringstream s;
      s.precision(12);
      s << "first order: the gradient along a random direction is " << an
        << ", a central difference gives " << fd;
      return s.str();
    }
  }
  return {};
}

// Hessian-vector product through create_graph against a central difference of the gradient.
std::optional<std::string> check_second_order(const program& p, const grads_t& g) {
  const auto u = directions(p, 200);
  grads_t hv;
  {
    const auto inputs = make_inputs(p, variant{});
    const mg::tensor loss = forward(p, inputs, variant{});
    mg::tensor_list wrt;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (p.inputs[i].requires_grad) wrt.push_back(inputs[i]);
    const auto gs =
        mg::autograd::grad({loss}, wrt, {}, {.create_graph = true, .allow_unused = true});
    // the first-order gradients again, from autograd::grad
    if (auto e = compare(as_values(p, std::vector<mg::tensor>(gs.begin(), gs.end())), g, 1e-12,
                         1e-13, "autograd::grad against backward"))
      return e;
    mg::tensor s;
    std::size_t k = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!p.inputs[i].requires_grad) continue;
      const mg::tensor& gi = gs[k++];
      if (!gi.defined() || !gi.requires_grad()) continue;
      auto a = xt::xarray<double>::from_shape(
          std::vector<std::size_t>(gi.shape().begin(), gi.shape().end()));
      std::copy(u[i].begin(), u[i].end(), a.begin());
      const mg::tensor term = mg::sum(gi * mg::tensor(a));
      s = s.defined() ? s + term : term;
    }
    std::vector<mg::tensor> h(wrt.size());
    if (s.defined()) {
      const auto hs = mg::autograd::grad({s}, wrt, {}, {.allow_unused = true});
      h.assign(hs.begin(), hs.end());
    }
    hv = as_values(p, h);
  }
  const grads_t plus = grads_at(p, shifted(p, u, fd_step)),
                minus = grads_at(p, shifted(p, u, -fd_step));
  grads_t fd = plus;
  for (std::size_t i = 0; i < fd.size(); ++i)
    for (std::size_t e = 0; e < fd[i].size(); ++e)
      fd[i][e] = (plus[i][e] - minus[i][e]) / (2 * fd_step);
  return compare(hv, fd, 1e-4, 1e-5, "second order (Hessian-vector product through create_graph)");
}

// The loss's tangent under forward AD against <g, u>.
std::optional<std::string> check_forward_ad(const program& p, const grads_t& g) {
  const auto u = directions(p, 300);
  double tangent = 0;
  try {
    mg::forward_ad::dual_level level;
    auto inputs = make_inputs(p, variant{});
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!p.inputs[i].requires_grad) continue;
      auto a = xt::xarray<double>::from_shape(
          std::vector<std::size_t>(p.inputs[i].shape.begin(), p.inputs[i].shape.end()));
      std::copy(u[i].begin(), u[i].end(), a.begin());
      inputs[i] = mg::forward_ad::make_dual(inputs[i], mg::tensor(a));
    }
    const mg::tensor loss = forward(p, inputs, variant{});
    const auto t = mg::forward_ad::unpack_dual(loss).tangent;
    tangent = t.defined() ? t.item<double>() : 0.0;
  } catch (const mg::error& e) {
    return std::string("forward AD raised an error: ") + e.what();
  }
  const double an = inner(p, g, u);
  if (!(std::abs(tangent - an) <= 1e-9 * (1 + inner_abs(p, g, u)))) {
    std::ostringstream s;
    s.precision(15);
    s << "forward AD: the loss's tangent <v, J u> is " << tangent
      << ", reverse mode's <J^T v, u> is " << an;
    return s.str();
  }
  return {};
}

bool uses(const program& p, std::initializer_list<op> ops) {
  for (const auto& i : p.code)
    for (op o : ops)
      if (i.o == o) return true;
  return false;
}

}  // namespace

std::optional<std::string> check(const program& p, const check_options& o) {
  const run_result plain = run(p, variant{});
  if (p.expected_error) {
    if (!plain.error)
      return "version counter: backward succeeded, but torch's rule says it fails (" +
             *p.expected_error + ")";
    if (plain.error->find("modified by an in-place operation") == std::string::npos)
      return "version counter: expected the in-place error (" + *p.expected_error +
             "), got: " + *plain.error;
    // under allow_mutation_on_saved_tensors_guard it runs and gives the right gradients
    variant am;
    am.allow_mutation = true;
    const run_result r = run(p, am);
    if (r.error) return with_error("under allow_mutation_on_saved_tensors_guard the program", r);
    if (auto e = check_first_order(p, as_values(p, r.grads)))
      return "under allow_mutation_on_saved_tensors_guard, " + *e;
    return {};
  }
  if (plain.error && p.version_error_allowed &&
      plain.error->find("modified by an in-place operation") != std::string::npos)
    return {};  // as torch's; the gradients of the other way were checked
  if (plain.error) {
    if (plain.error->find("modified by an in-place operation") != std::string::npos)
      return "version counter: backward failed where torch's rule says it succeeds: " +
             *plain.error;
    return with_error("the plain float64 run", plain);
  }
  const grads_t g = as_values(p, plain.grads);
  try {
    if (auto e = check_first_order(p, g)) return e;

    // retain_graph: a second backward adds the same gradients again
    {
      const auto inputs = make_inputs(p, variant{});
      const mg::tensor loss = forward(p, inputs, variant{});
      loss.backward(mg::tensor{}, mg::backward_options{.retain_graph = true});
      loss.backward();
      std::vector<mg::tensor> gs;
      for (std::size_t i = 0; i < inputs.size(); ++i)
        if (p.inputs[i].requires_grad) gs.push_back(inputs[i].grad());
      grads_t twice = g;
      for (auto& v : twice)
        for (auto& e : v) e *= 2;
      if (auto e = compare(as_values(p, gs), twice, 1e-12, 1e-14,
                           "retain_graph: two backwards against twice the gradient"))
        return e;
    }

    // variants that must not change the gradients
    struct named {
      const char* name;
      variant v;
      double tol;
    };
    std::vector<named> variants;
    variants.push_back({"identity tensor hooks on every value", {.identity_hooks = true}, 0});
    variants.push_back({"identity saved-tensor pack/unpack hooks", {.saved_hooks = true}, 0});
    variants.push_back(
        {"no_grad and inference_mode regions between the instructions", {.side_regions = true}, 0});
    variants.push_back({"backward on another thread", {.other_thread = true}, 0});
    variants.push_back({"independent instructions reordered", {.reorder = true}, 1e-12});
    if (fuse_available())
      variants.push_back({"elementwise instructions as mg::fuse nodes (the static engine)",
                          {.fuse = true},
                          1e-11});
    if (o.device && device_available() && !uses(p, {op::matmul, op::dot, op::outer})) {
      variants.push_back({"device cuda (the Thrust backend)", {.device = mg::device::cuda}, 1e-11});
      variants.push_back({"device cuda with save_on_cpu_guard",
                          {.device = mg::device::cuda, .save_on_cpu = true},
                          1e-11});
    }
    for (const auto& [name, v, tol] : variants) {
      const run_result r = run(p, v);
      if (r.error) return with_error(std::string(name) + ":", r);
      if (auto e = compare(as_values(p, r.grads), g, tol, tol, name)) return e;
    }

    // the inputs' own dtypes (float32 where they say so) against float64
    bool any_f32 = false;
    for (const auto& in : p.inputs) any_f32 = any_f32 || in.dtype == mg::f32;
    if (any_f32) {
      variant v;
      v.f64 = false;
      const run_result r = run(p, v);
      if (r.error) return with_error("the run in the inputs' dtypes", r);
      if (auto e = compare(as_values(p, r.grads), g, 2e-2, 2e-3, "float32 against float64"))
        return e;
      if (o.device && device_available() && !uses(p, {op::matmul, op::dot, op::outer})) {
        v.device = mg::device::cuda;
        const run_result rd = run(p, v);
        if (rd.error) return with_error("the run in the inputs' dtypes on device cuda", rd);
        if (auto e = compare(as_values(p, rd.grads), as_values(p, r.grads), 1e-3, 1e-4,
                             "float32 on device cuda against float32 on the cpu"))
          return e;
      }
    }

    if (auto e = check_forward_ad(p, g)) return e;
    if (o.second_order)
      if (auto e = check_second_order(p, g)) return e;
  } catch (const mg::error& e) {
    return std::string("an error: ") + e.what();
  }
  return {};
}

void coverage::add(const program& p) {
  std::vector<std::string> producer(p.value_count());
  const auto defined = p.defined_values();
  for (std::size_t i = 0; i < p.code.size(); ++i) {
    const auto& ins = p.code[i];
    ++ops[name_of(ins.o)];
    ++docs[doc_name_of(ins.o)];
    if (ins.o == op::where) ++docs[std::string(name_of(ins.cmp)) + "(a, b)"];
    if ((ins.o == op::max || ins.o == op::min) && ins.flag) ++docs["max(x, dim, keepdim)"];
    if (ins.o == op::argmax && ins.flag) ++docs["argmax(x, dim, keepdim)"];
    for (int a : ins.in)
      if (!producer[a].empty()) ++pairs[producer[a] + " -> " + name_of(ins.o)];
    if (defined[i] >= 0)
      producer[defined[i]] = name_of(ins.o);
    else
      producer[ins.in[0]] = name_of(ins.o);
  }
  for (const auto& in : p.inputs) ++dtypes[in.dtype == mg::f32 ? "f32" : "f64"];
  if (p.expected_error) ++variants["version-counter error expected"];
}

std::string coverage::report() const {
  std::ostringstream s;
  s << "ops reached: " << ops.size() << " of " << op_count << "\n";
  for (const auto& [k, v] : ops) s << "  " << k << ": " << v << "\n";
  s << "dtypes of inputs:";
  for (const auto& [k, v] : dtypes) s << " " << k << " " << v;
  s << "\nop pairs reached (a result of the first is an operand of the second): " << pairs.size()
    << " of " << op_count * op_count << "\n";
  for (const auto& [k, v] : variants) s << k << ": " << v << "\n";
  return s.str();
}

}  // namespace mg_fuzz

// docs/runtime.md, "Functional API": the snippet below is cut from this file, which CI compiles
// and runs (docs_snippet_functional checks that the doc has it verbatim; the test checks the
// closed forms printed at the end).
#include <cmath>
#include <cstdio>

#include <metagrad/metagrad.hpp>

int main() {
  // example-begin functional
  namespace fn = mg::autograd::functional;
  auto f = [](const mg::tensor& x) { return mg::sin(x) * x; };         // [3] -> [3]
  auto loss = [](const mg::tensor& x) { return mg::sum(x * x * x); };  // [3] -> one element
  const mg::tensor x({0.5, 1.0, 2.0}, mg::f64), v({1.0, 0.0, -1.0}, mg::f64);

  auto [y, vjp] = fn::vjp(f, x, v);     // {f(x), v^T J}
  auto [y2, jvp] = fn::jvp(f, x, v);    // {f(x), J v}
  auto [l, hvp] = fn::hvp(loss, x, v);  // {loss(x), H v}: 6 x v
  mg::tensor j = fn::jacobian(f, x);    // [3, 3]: diag(sin x + x cos x)
  mg::tensor h = fn::hessian(loss, x);  // [3, 3]: diag(6 x)

  // create_graph: the results stay differentiable in the caller's x
  mg::tensor w = mg::tensor({0.5, 1.0, 2.0}, mg::f64).requires_grad_();
  mg::tensor hw = fn::hessian(loss, w, {.create_graph = true});
  mg::tensor d3 = mg::autograd::grad({mg::sum(hw)}, {w})[0];  // third derivative: 6, 6, 6

  // mg::grad and mg::hessian nest on tensors as on numbers
  auto g = [](auto t) { return sin(t) * exp(t); };
  mg::tensor d2 = mg::hessian<0>(g)(mg::tensor(0.4, mg::f64));  // 2 e^x cos x
  // example-end functional

  const auto close = [](const mg::tensor& t, const mg::tensor& e) {
    return mg::max(mg::abs(t - e)).item<double>() < 1e-12;
  };
  const mg::tensor d = mg::sin(x) + x * mg::cos(x);
  const bool ok = close(vjp, d * v) && close(jvp, d * v) && close(hvp, 6.0 * x * v) &&
                  close(j.reshape({9}).slice(0, 0, 9, 4), d) &&
                  close(h.reshape({9}).slice(0, 0, 9, 4), 6.0 * x) &&
                  close(d3, mg::full({3}, 6.0, {.dtype = mg::f64})) &&
                  std::fabs(d2.item<double>() - 2 * std::exp(0.4) * std::cos(0.4)) < 1e-12 &&
                  close(y, y2) && std::fabs(l.item<double>() - 9.125) < 1e-12;
  std::printf("functional example: %s\n", ok ? "closed forms ok" : "WRONG");
  return ok ? 0 : 1;
}

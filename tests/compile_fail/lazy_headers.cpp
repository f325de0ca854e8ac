// Cheap headers (docs/performance.md): a file that includes the umbrella header and calls nothing
// instantiates no op and none of the runtime engine (Note [Lazy members], Note [Engine ops], Note
// [View refresh]). Every build defines MG_DETAIL_CHECK_LAZY, under which instantiating an op, or
// one of the engine functions that carry MG_DETAIL_LAZY_ENGINE (the backward engine, the
// profiler's report, to_dot, saving a tensor for backward), is a compile error. The _ok twin,
// which calls nothing, must build; with MG_COMPILE_FAIL the file applies an op (1) or reads a
// profile (2) and must fail with the check's sentence, so each check is known to fire. These run
// in header-only mode. With the compiled library (3), applying ops, running backward and
// printing instantiate none of them in this file: it builds under the same check, and runs.
#include <cmath>
#include <iostream>

#include <metagrad/metagrad.hpp>

int main() {
#if MG_COMPILE_FAIL == 1
  const mg::tensor x(1.0, mg::f64);
  return (x + x).item<double>() == 2.0 ? 0 : 1;
#elif MG_COMPILE_FAIL == 3
  const mg::tensor x = mg::tensor({1.0, 2.0}, mg::f64).requires_grad_();
  const mg::tensor y = (mg::sin(x) * x + 2).sum();
  y.backward();
  std::cout << x.grad() << '\n';
  // d/dx (x sin x) = sin x + x cos x
  const double g0 = x.grad()[0].item<double>(), g1 = x.grad()[1].item<double>();
  const double e0 = std::sin(1.0) + std::cos(1.0), e1 = std::sin(2.0) + 2 * std::cos(2.0);
  return std::abs(g0 - e0) < 1e-6 && std::abs(g1 - e1) < 1e-6 ? 0 : 1;
#elif MG_COMPILE_FAIL == 2
  const mg::autograd::profiler::profile p;
  return p.key_averages().rows().empty() ? 0 : 1;
#else
  return 0;
#endif
}

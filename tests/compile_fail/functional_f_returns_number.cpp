// Compile-fail pair: a function given to mg::autograd::functional that returns something other
// than a tensor or a tensor_list is rejected in one sentence (detail::functional_impl::diagnose).
// The well-formed twin must build and run.
#include <metagrad/functional.hpp>
#include <metagrad/tensor_xtensor.hpp>

int main() {
  const mg::tensor x({1.0, 2.0}, mg::f64);
#ifdef MG_COMPILE_FAIL
  auto f = [](const mg::tensor& t) { return mg::sum(t * t).item<double>(); };
#else
  auto f = [](const mg::tensor& t) { return mg::sum(t * t); };
#endif
  auto [y, g] = mg::autograd::functional::vjp(f, x);
  return mg::tensor(g).to_xtensor<double>()(1) == 4.0 ? 0 : 1;
}

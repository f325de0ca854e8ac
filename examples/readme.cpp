// The example in README.md, compiled and run by CI (examples/CMakeLists.txt).
// example-begin readme
#include <cstdio>

#include <metagrad/static.hpp>  // the static engine
#include <metagrad/tensor.hpp>  // mg::tensor (or <metagrad/metagrad.hpp> for everything)

int main() {
  // Written once, generic: runs on numbers, xtensor arrays and mg::tensor.
  auto f = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };

  // Static engine: the gradient is generated at compile time (no tape, no allocation).
  auto [dx, dy] = mg::grad(f)(2.0, 3.0);
  double d2 = mg::hessian<0>(f)(2.0, 3.0);  // grad of grad
  std::printf("static:  df/dx = %.6f  df/dy = %.6f  d2f/dx2 = %.6f\n", dx, dy, d2);

  // Runtime engine: a recorded graph, as in torch.autograd.
  // (Floating literals give f32, as in libtorch; f64 here, as the static engine computes.)
  mg::tensor x = mg::tensor(2.0, mg::f64).requires_grad_();
  mg::tensor y = mg::tensor(3.0, mg::f64).requires_grad_();
  mg::tensor z = f(x, y);
  z.backward();
  std::printf("runtime: df/dx = %.6f  df/dy = %.6f\n", x.grad().item<double>(),
              y.grad().item<double>());
}
// example-end readme

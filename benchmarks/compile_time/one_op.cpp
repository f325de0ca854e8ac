// Compile-time stress: one mg::tensor op in a file that includes <metagrad/tensor.hpp>, as the
// smallest program of the runtime engine. run.sh compiles it with the library (the default) and
// in header-only mode, and runs it: sin of a leaf, backward, and the gradient cos x checked.
#include <cmath>
#include <cstdio>

#include <metagrad/tensor.hpp>

int main() {
  mg::tensor x = mg::full({2}, 1.0, {.dtype = mg::f64, .requires_grad = true});
  mg::sin(x).sum().backward();
  const double g = x.grad()[1].item<double>();
  const bool ok = std::abs(g - std::cos(1.0)) < 1e-6;
  std::printf("d/dx sin(x) at 1: %.9f (cos 1 = %.9f): %s\n", g, std::cos(1.0), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

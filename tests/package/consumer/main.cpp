// A program a user of an installed metagrad writes: both engines, one derivative each. The
// packaging tests (tests/package) build it through each route a user installs metagrad by, run
// it, and check its line of output.
#include <cstdio>

#include <metagrad/metagrad.hpp>

int main() {
  // d/dx x^3 at 2 is 12, generated at compile time and recorded at run time.
  auto cube = [](auto x) { return x * x * x; };
  const double by_static = mg::grad(cube)(2.0);
  mg::tensor x = mg::tensor(2.0).requires_grad_();
  cube(x).backward();
  const double by_runtime = x.grad().item<double>();
  std::printf("metagrad %s: static %.3f runtime %.3f\n", METAGRAD_VERSION_STRING, by_static,
              by_runtime);
  return by_static == 12.0 && by_runtime == 12.0 ? 0 : 1;
}

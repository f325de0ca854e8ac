// The static engine's gradient of a scalar function, compiled as a user's Release build compiles
// it, for check.cmake: the forward and reverse sweeps must inline into this one function (no
// call but to libm), so that sin in one and cos in the other fuse into one sincos.
#include <metagrad/static.hpp>

struct probe_result {
  double v, dx, dy;
};

probe_result probe_gradient(double x, double y) {
  const auto f = [](auto a, auto b) { return pow(sin(a) * b + exp(a * b), 2) / (1 + a * a); };
  const auto [v, g] = mg::value_and_grad(f)(x, y);
  return {v, std::get<0>(g), std::get<1>(g)};
}

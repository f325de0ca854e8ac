// Compile-time stress: the unrolled recurrence t <- sin(t) * x + t, MG_STEPS steps (3 DAG
// nodes per step), differentiated by the static engine. Its tree has 2^MG_STEPS occurrences of
// the first step; its DAG has 3 MG_STEPS + 1 nodes. run.sh compiles it and reports the time and
// peak memory of the compiler; running it checks the gradient against central differences.
#include <cmath>
#include <cstdio>
#include <utility>

#include <metagrad/static.hpp>

#ifndef MG_STEPS
#define MG_STEPS 16
#endif

template <int K>
auto unrolled(const auto& t, const auto& x) {
  return mg::repeat<K>([&](const auto& s) { return sin(s) * x + s; }, t);
}

int main() {
  const auto f = [](auto t0, auto x) { return unrolled<MG_STEPS>(t0, x); };
  const auto [dt, dx] = mg::grad(f)(0.3, 0.1);
  const double h = 1e-6;
  const double nt = (f(0.3 + h, 0.1) - f(0.3 - h, 0.1)) / (2 * h);
  const double nx = (f(0.3, 0.1 + h) - f(0.3, 0.1 - h)) / (2 * h);
  const bool ok = std::abs(dt - nt) <= 1e-6 * (1 + std::abs(nt)) &&
                  std::abs(dx - nx) <= 1e-6 * (1 + std::abs(nx));
  std::printf("steps %d: d/dt0 %.12g (numerical %.12g), d/dx %.12g (numerical %.12g): %s\n",
              MG_STEPS, dt, nt, dx, nx, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

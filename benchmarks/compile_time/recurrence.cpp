// Compile-time stress: the unrolled recurrence t <- sin(t) * x + t, MG_STEPS steps (3 DAG
// nodes per step), differentiated by the static engine. Its tree has 2^MG_STEPS occurrences of
// the first step; its DAG has 3 MG_STEPS + 1 nodes. run.sh compiles it and reports the time and
// peak memory of the compiler; running it checks the gradient against central differences.
// Variants (Note [Scan] in static/scan.hpp):
//   -DMG_LITERAL       the step t <- t + 0.5 sin(t) x holds a literal: mg::repeat makes the
//                      loop one node
//   -DMG_LOOP_NODE     mg::unroll::never: one node without a literal
//   -DMG_SECOND_ORDER  also d2/dt0^2 (mg::hessian<0>) against a central difference of the
//                      gradient
#include <cmath>
#include <cstdio>
#include <utility>

#include <metagrad/static.hpp>

#ifndef MG_STEPS
#define MG_STEPS 16
#endif

#if defined(MG_LOOP_NODE)
constexpr mg::unroll policy = mg::unroll::never;
#else
constexpr mg::unroll policy = mg::unroll::automatic;
#endif

template <int K>
auto unrolled(const auto& t, const auto& x) {
#if defined(MG_LITERAL)
  return mg::repeat<K, policy>([&](const auto& s) { return s + 0.5 * sin(s) * x; }, t);
#else
  return mg::repeat<K, policy>([&](const auto& s) { return sin(s) * x + s; }, t);
#endif
}

bool near(double a, double b, double tol) { return std::abs(a - b) <= tol * (1 + std::abs(b)); }

// x small enough for long loops that t drifts without reaching the fixed point pi, where every
// derivative vanishes
constexpr double x0 = MG_STEPS > 100 ? 0.002 : 0.1;

int main() {
  const auto f = [](auto t0, auto x) { return unrolled<MG_STEPS>(t0, x); };
  const auto [dt, dx] = mg::grad(f)(0.3, x0);
  const double h = 1e-6;
  const double nt = (f(0.3 + h, x0) - f(0.3 - h, x0)) / (2 * h);
  const double nx = (f(0.3, x0 + h) - f(0.3, x0 - h)) / (2 * h);
  bool ok = near(dt, nt, 1e-6) && near(dx, nx, 1e-6);
  std::printf("steps %d: d/dt0 %.12g (numerical %.12g), d/dx %.12g (numerical %.12g)", MG_STEPS, dt,
              nt, dx, nx);
#if defined(MG_SECOND_ORDER)
  const double d2 = mg::hessian<0>(f)(0.3, x0);
  const auto g = mg::grad<0>(f);
  const double n2 = (g(0.3 + 1e-5, x0) - g(0.3 - 1e-5, x0)) / 2e-5;
  ok = ok && near(d2, n2, 1e-5);
  std::printf(", d2/dt0^2 %.10g (numerical %.10g)", d2, n2);
#endif
  std::printf(": %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

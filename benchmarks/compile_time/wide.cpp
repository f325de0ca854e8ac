// Compile-time stress: a 100-node expression as one writes a long formula by hand: 20 terms
// c_k * g_k(x, y, z), each with its own constant, summed. Its tree is its DAG (nothing is
// reused), so it measures the cost per planned slot. run.sh compiles it and reports the time and
// peak memory of the compiler; running it checks the gradient against central differences.
#include <cmath>
#include <cstdio>

#include <metagrad/static.hpp>

int main() {
  const auto f = [](auto x, auto y, auto z) {
    using mg::cos, mg::exp, mg::log, mg::sin, mg::sqrt, mg::tanh;
    return 0.5 * sin(x * y) + 1.5 * cos(y - z) + 2.0 * exp(-x * x) + 0.25 * log(1.0 + y * y) +
           3.0 * tanh(x + z) + 0.125 * sqrt(2.0 + sin(z)) + 1.25 * (x * y * z) +
           0.75 * exp(sin(x) * cos(y)) + 0.2 * (x / (1.0 + z * z)) + 1.1 * tanh(y * z - x) +
           0.3 * sin(exp(-z * z)) + 0.6 * (y * y * y) + 0.9 * cos(x * z) +
           0.15 * log(3.0 + cos(x * y)) + 0.45 * (sin(y) / (2.0 + cos(z))) +
           0.05 * exp(x - y) + 0.65 * tanh(sin(x) + cos(z)) + 0.35 * sqrt(1.0 + x * x + y * y) +
           0.55 * (z * exp(-y * y)) + 0.95 * sin(x + y + z);
  };
  const auto [gx, gy, gz] = mg::grad(f)(0.3, -0.4, 0.8);
  const double h = 1e-6, p[] = {0.3, -0.4, 0.8};
  const double g[] = {gx, gy, gz};
  bool ok = true;
  for (int i = 0; i < 3; ++i) {
    double a[3] = {p[0], p[1], p[2]}, b[3] = {p[0], p[1], p[2]};
    a[i] += h;
    b[i] -= h;
    const double n = (f(a[0], a[1], a[2]) - f(b[0], b[1], b[2])) / (2 * h);
    ok = ok && std::abs(g[i] - n) <= 1e-6 * (1 + std::abs(n));
    std::printf("d/d%c %.12g (numerical %.12g)\n", "xyz"[i], g[i], n);
  }
  std::printf("wide: %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

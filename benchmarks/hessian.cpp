// The Hessian of the Rosenbrock function in 100 dimensions,
//   f(x) = sum_i 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2,
// written with mg::slice over an xt::xtensor<double, 1>, and a Newton solve to convergence with it.
//
//   metagrad H       mg::hessian(f)(x): one reverse sweep on dual arrays whose tangents carry
//                    all 100 directions at once (Note [Blocks of directions])
//   hand H           the tridiagonal Hessian from its closed form
//   metagrad Newton  x <- x - H^-1 g from x_0 = (0.8, ..., 0.8) until |g| < 1e-10 (11 steps), H and
//                    g by metagrad, the step by Gaussian elimination with partial pivoting
//
// benchmarks/hessian_torch.py times torch.autograd.functional.hessian(f, x, vectorize=True) and
// the same Newton solve (torch.linalg.solve) for the ratio. `bench_hessian --compare` prints the
// largest difference between metagrad's Hessian and the closed form, and the Newton iterations.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <xtensor/xtensor.hpp>

#include <metagrad/metagrad.hpp>

namespace {

constexpr std::size_t n = 100;
using vec = xt::xtensor<double, 1>;

const auto rosenbrock = [](const auto& x) {
  const auto head = mg::slice(x, 0, 0, n - 1);
  const auto tail = mg::slice(x, 0, 1, n);
  return mg::sum(100.0 * mg::square(tail - mg::square(head)) + mg::square(1.0 - head));
};

vec start() {
  vec x = xt::zeros<double>({n});
  x.fill(0.8);
  return x;
}

xt::xtensor<double, 2> hand_hessian(const vec& x) {
  xt::xtensor<double, 2> H = xt::zeros<double>({n, n});
  for (std::size_t i = 0; i + 1 < n; ++i) {
    H(i, i) += 1200 * x(i) * x(i) - 400 * x(i + 1) + 2;
    H(i + 1, i + 1) += 200;
    H(i, i + 1) += -400 * x(i);
    H(i + 1, i) += -400 * x(i);
  }
  return H;
}

// Solves H d = g in place (g becomes d) by Gaussian elimination with partial pivoting.
void solve(xt::xtensor<double, 2> H, vec& g) {
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::abs(H(r, c)) > std::abs(H(p, c))) p = r;
    if (p != c) {
      for (std::size_t k = 0; k < n; ++k) std::swap(H(c, k), H(p, k));
      std::swap(g(c), g(p));
    }
    for (std::size_t r = c + 1; r < n; ++r) {
      const double m = H(r, c) / H(c, c);
      if (m == 0) continue;
      for (std::size_t k = c; k < n; ++k) H(r, k) -= m * H(c, k);
      g(r) -= m * g(c);
    }
  }
  for (std::size_t c = n; c-- > 0;) {
    for (std::size_t k = c + 1; k < n; ++k) g(c) -= H(c, k) * g(k);
    g(c) /= H(c, c);
  }
}

// Newton's method from start(): the number of steps to |g| < 1e-10 (at most 100).
int newton(vec& x) {
  x = start();
  for (int it = 0; it < 100; ++it) {
    vec g = mg::grad(rosenbrock)(x);
    if (std::sqrt(xt::sum(g * g)()) < 1e-10) return it;
    const xt::xtensor<double, 2> H = mg::hessian(rosenbrock)(x);
    solve(H, g);
    x -= g;
  }
  return 100;
}

void BM_metagrad_hessian(benchmark::State& state) {
  const vec x = start();
  for (auto _ : state) {
    auto H = mg::hessian(rosenbrock)(x);
    benchmark::DoNotOptimize(H.data());
  }
}
void BM_hand_hessian(benchmark::State& state) {
  const vec x = start();
  for (auto _ : state) {
    auto H = hand_hessian(x);
    benchmark::DoNotOptimize(H.data());
  }
}
void BM_metagrad_newton(benchmark::State& state) {
  vec x;
  for (auto _ : state) {
    benchmark::DoNotOptimize(newton(x));
  }
}
BENCHMARK(BM_metagrad_hessian)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_hand_hessian)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_metagrad_newton)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--compare") {
    const vec x = start();
    const xt::xtensor<double, 2> H = mg::hessian(rosenbrock)(x);
    const xt::xtensor<double, 2> Hh = hand_hessian(x);
    double worst = 0;
    for (std::size_t i = 0; i < H.size(); ++i)
      worst = std::max(worst, std::abs(H.flat(i) - Hh.flat(i)) / (1 + std::abs(Hh.flat(i))));
    vec xs;
    const int steps = newton(xs);
    std::printf("Hessian: largest relative difference %.3g; Newton: %d steps, x[0] = %.15f\n",
                worst, steps, xs(0));
    return worst < 1e-12 && steps < 100 ? 0 : 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}

// Static mg::grad of f(x,y) = ((sin(x)*y + exp(x*y))^2) / (1 + x*x) against the gradient a
// careful person writes by hand. Both compute the value and both partials.
#include <cmath>

#include <benchmark/benchmark.h>

#include <metagrad/static.hpp>

namespace {

struct result {
  double v, dx, dy;
};

// example-begin bench-scalar-f
constexpr auto f = [](auto x, auto y) { return pow(sin(x) * y + exp(x * y), 2) / (1 + x * x); };
// example-end bench-scalar-f

[[gnu::noinline]] result metagrad_grad(double x, double y) {
  auto [v, g] = mg::value_and_grad(f)(x, y);
  return {v, std::get<0>(g), std::get<1>(g)};
}

[[gnu::noinline]] result hand_written(double x, double y) {
  const double s = std::sin(x), c = std::cos(x), e = std::exp(x * y);
  const double t = s * y + e, d = 1 + x * x;
  const double v = t * t / d;
  // dt/dx = c*y + e*y, dt/dy = s + e*x; df = 2 t dt / d - v * dd / d with dd/dx = 2x
  const double two_t_over_d = 2 * t / d;
  return {v, two_t_over_d * (c * y + e * y) - v * (2 * x) / d, two_t_over_d * (s + e * x)};
}

template <result (*G)(double, double)>
void run(benchmark::State& state) {
  double x = 0.3, y = 0.7, acc = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(x);
    const result r = G(x, y);
    acc += r.v + r.dx + r.dy;
    x += 1e-9;
  }
  benchmark::DoNotOptimize(acc);
}

void BM_scalar_hand_written(benchmark::State& s) { run<hand_written>(s); }
void BM_scalar_metagrad(benchmark::State& s) { run<metagrad_grad>(s); }
BENCHMARK(BM_scalar_hand_written);
BENCHMARK(BM_scalar_metagrad);

}  // namespace

// `bench_static_scalar --check N` runs each version N times without Google Benchmark, for
// instruction counts under callgrind (see docs/performance.md).
int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "--check") {
    const long n = std::atol(argv[2]);
    const bool hand = std::string_view(argv[3]) == "hand";
    double acc = 0, x = 0.3;
    for (long i = 0; i < n; ++i, x += 1e-9) {
      const result r = hand ? hand_written(x, 0.7) : metagrad_grad(x, 0.7);
      acc += r.v + r.dx + r.dy;
    }
    std::printf("%.17g\n", acc);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}

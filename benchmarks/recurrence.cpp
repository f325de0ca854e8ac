// Fixed-length loops (Note [Scan] in static/scan.hpp): the gradient of x after N explicit Euler
// steps of the damped oscillator x'' = -k x - c x' (step 0.05, from x = 1, v = 0) w.r.t. (k, c).
//
//   scan       mg::repeat<N> with the literal 0.05 in the step: one loop node, whose backward
//              runs the forward again keeping the states, then the step's vjp N times
//   unrolled   the same steps with the step size passed as an argument: no constant in the
//              step, so repeat unrolls it and the planner shares the steps (16 steps only)
//   hand       a forward loop keeping the states and a reverse loop, written by hand
//
// On arrays (1000 doubles), t <- t + 0.5 sin(t) x for 16 steps, the gradient of sum(t) w.r.t.
// (t0, x):
//   array_scan      the loop node: each step runs the array evaluator (no fusion across steps)
//   array_unrolled  the step size 0.5 passed as an argument: the step holds no constant, so
//                   the 16 steps are unrolled and fused into one loop
//   array_hand      a forward loop keeping the 16 states per element and a reverse loop
//
// `bench_recurrence --compare` prints the largest difference between metagrad's gradients and
// the hand-written ones.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>

#include <metagrad/xtensor.hpp>

namespace {

template <std::size_t N>
auto scan_loss() {
  return [](auto k, auto c) {
    auto euler = [&](const auto& s) {
      const auto& [x, v] = s;
      return std::pair{x + 0.05 * v, v - 0.05 * (k * x + c * v)};
    };
    return mg::repeat<N>(euler, std::pair{1.0, 0.0}).first;
  };
}

template <std::size_t N>
auto unrolled_loss() {
  return [](auto k, auto c, auto h, auto x0, auto v0) {
    auto euler = [&](const auto& s) {
      const auto& [x, v] = s;
      return std::pair{x + h * v, v - h * (k * x + c * v)};
    };
    return mg::repeat<N>(euler, std::pair{x0, v0}).first;
  };
}

std::pair<double, double> hand_grad(double k, double c, std::size_t n) {
  const double h = 0.05;
  std::vector<double> xs(n), vs(n);
  double x = 1, v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    xs[i] = x;
    vs[i] = v;
    const double nx = x + h * v;
    v = v - h * (k * x + c * v);
    x = nx;
  }
  double ax = 1, av = 0, dk = 0, dc = 0;
  for (std::size_t i = n; i-- > 0;) {
    dk -= h * xs[i] * av;
    dc -= h * vs[i] * av;
    const double nax = ax - h * k * av;
    av = h * ax + (1 - h * c) * av;
    ax = nax;
  }
  return {dk, dc};
}

template <std::size_t N>
void BM_scan(benchmark::State& s) {
  const auto f = mg::grad(scan_loss<N>());
  double k = 3.0;
  for (auto _ : s) {
    benchmark::DoNotOptimize(k);
    benchmark::DoNotOptimize(f(k, 0.4));
  }
}
void BM_unrolled16(benchmark::State& s) {
  const auto f = mg::grad<0, 1>(unrolled_loss<16>());
  double k = 3.0;
  for (auto _ : s) {
    benchmark::DoNotOptimize(k);
    benchmark::DoNotOptimize(f(k, 0.4, 0.05, 1.0, 0.0));
  }
}
template <std::size_t N>
void BM_hand(benchmark::State& s) {
  double k = 3.0;
  for (auto _ : s) {
    benchmark::DoNotOptimize(k);
    benchmark::DoNotOptimize(hand_grad(k, 0.4, N));
  }
}
constexpr std::size_t array_n = 1000, array_steps = 16;
using vec = xt::xtensor<double, 1>;

auto array_loss() {
  return [](auto t0, auto x) {
    return mg::sum(
        mg::repeat<array_steps>([&](const auto& t) { return t + 0.5 * sin(t) * x; }, t0));
  };
}
auto array_loss_unrolled() {
  return [](auto t0, auto x, auto c) {
    return mg::sum(mg::repeat<array_steps>([&](const auto& t) { return t + c * sin(t) * x; }, t0));
  };
}

struct array_data {
  vec t0, x;
  array_data() {
    xt::random::seed(5);
    t0 = xt::random::rand<double>({array_n});
    x = xt::random::rand<double>({array_n}) * 0.2;
  }
};
const array_data& arrays() {
  static const array_data d;
  return d;
}

std::pair<vec, vec> array_hand_grad(const vec& t0, const vec& x) {
  vec dt = vec::from_shape({array_n}), dx = vec::from_shape({array_n});
  double ts[array_steps];
  for (std::size_t i = 0; i < array_n; ++i) {
    double t = t0(i);
    const double xi = x(i);
    for (std::size_t k = 0; k < array_steps; ++k) {
      ts[k] = t;
      t = t + 0.5 * std::sin(t) * xi;
    }
    double a = 1, ax = 0;
    for (std::size_t k = array_steps; k-- > 0;) {
      ax += a * 0.5 * std::sin(ts[k]);
      a *= 1 + 0.5 * std::cos(ts[k]) * xi;
    }
    dt(i) = a;
    dx(i) = ax;
  }
  return {dt, dx};
}

void BM_array(benchmark::State& s) {
  const auto f = mg::grad(array_loss());
  for (auto _ : s) benchmark::DoNotOptimize(f(arrays().t0, arrays().x));
}
void BM_array_unrolled(benchmark::State& s) {
  const auto f = mg::grad<0, 1>(array_loss_unrolled());
  for (auto _ : s) benchmark::DoNotOptimize(f(arrays().t0, arrays().x, 0.5));
}
void BM_array_hand(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(array_hand_grad(arrays().t0, arrays().x));
}

BENCHMARK(BM_scan<16>);
BENCHMARK(BM_unrolled16);
BENCHMARK(BM_hand<16>);
BENCHMARK(BM_scan<256>);
BENCHMARK(BM_hand<256>);
BENCHMARK(BM_array)->Name("array_scan");
BENCHMARK(BM_array_unrolled)->Name("array_unrolled");
BENCHMARK(BM_array_hand)->Name("array_hand");

int compare() {
  double worst = 0;
  auto check = [&](std::pair<double, double> hand, auto dk, auto dc) {
    worst = std::max({worst, std::abs(hand.first - dk), std::abs(hand.second - dc)});
  };
  const auto [sk, sc] = mg::grad(scan_loss<16>())(3.0, 0.4);
  check(hand_grad(3.0, 0.4, 16), sk, sc);
  const auto [uk, uc] = mg::grad<0, 1>(unrolled_loss<16>())(3.0, 0.4, 0.05, 1.0, 0.0);
  check(hand_grad(3.0, 0.4, 16), uk, uc);
  const auto [lk, lc] = mg::grad(scan_loss<256>())(3.0, 0.4);
  check(hand_grad(3.0, 0.4, 256), lk, lc);
  const auto [ht, hx] = array_hand_grad(arrays().t0, arrays().x);
  const auto& d = arrays();
  for (const auto& [gt, gx] :
       {mg::grad(array_loss())(d.t0, d.x), mg::grad<0, 1>(array_loss_unrolled())(d.t0, d.x, 0.5)})
    for (std::size_t i = 0; i < array_n; ++i)
      worst = std::max({worst, std::abs(gt(i) - ht(i)), std::abs(gx(i) - hx(i))});
  std::printf("largest difference from the hand-written gradients: %.3g\n", worst);
  return worst < 1e-12 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--compare") return compare();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

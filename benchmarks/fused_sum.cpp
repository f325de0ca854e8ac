// sum((sin(x)*x + exp(-x*x))^2) over 1e6 floats, forward and backward (value and gradient):
// the static engine on xtensor (one fused SIMD loop) against a hand-written xsimd loop.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>

#include <metagrad/metagrad.hpp>

namespace {

constexpr std::size_t n = 1'000'000;

xt::xtensor<float, 1> input() {
  xt::random::seed(42);
  return xt::random::randn<float>({n});
}

// example-begin bench-fused-f
constexpr auto loss = [](auto x) {
  auto t = sin(x) * x + exp(-x * x);
  return sum(t * t);
};
// example-end bench-fused-f

std::pair<float, xt::xtensor<float, 1>> metagrad_static(const xt::xtensor<float, 1>& x) {
  return mg::value_and_grad(loss)(x);
}

// What one writes by hand: one pass, t and dt/dx in registers, gradient stored once into a
// new array (as value_and_grad returns one). Trig is xsimd's, or (InlineTrig) the inline sine
// and cosine metagrad's packs use (Note [Inline trigonometry]): the second isolates the cost of
// the engine itself.
template <bool InlineTrig>
std::pair<float, xt::xtensor<float, 1>> hand_written(const xt::xtensor<float, 1>& x) {
  using B = xsimd::batch<float>;
  xt::xtensor<float, 1> g = xt::xtensor<float, 1>::from_shape({x.size()});
  B acc(0.0f);
  std::size_t i = 0;
  const std::size_t m = x.size();
  for (; i + B::size <= m; i += B::size) {
    const B v = B::load_unaligned(x.data() + i);
    const B s = InlineTrig ? mg::detail::inline_trig<true>(v) : xsimd::sin(v);
    const B c = InlineTrig ? mg::detail::inline_trig<false>(v) : xsimd::cos(v);
    const B e = xsimd::exp(-v * v);
    const B t = s * v + e;
    acc += t * t;
    // d/dx t^2 = 2 t (cos(x) x + sin(x) - 2 x exp(-x^2))
    (B(2.0f) * t * (c * v + s - B(2.0f) * v * e)).store_unaligned(g.data() + i);
  }
  float tail = 0;
  for (; i < m; ++i) {
    const float v = x(i), s = std::sin(v), c = std::cos(v), e = std::exp(-v * v);
    const float t = s * v + e;
    tail += t * t;
    g(i) = 2 * t * (c * v + s - 2 * v * e);
  }
  return {xsimd::hadd(acc) + tail, std::move(g)};
}

template <auto F>
void BM_fused(benchmark::State& state) {
  const auto x = input();
  for (auto _ : state) {
    auto [v, g] = F(x);
    benchmark::DoNotOptimize(v);
    benchmark::DoNotOptimize(g.data());
  }
}
void BM_fused_hand_written(benchmark::State& state) { BM_fused<hand_written<false>>(state); }
void BM_fused_hand_written_inline_trig(benchmark::State& state) {
  BM_fused<hand_written<true>>(state);
}
void BM_fused_metagrad_static(benchmark::State& state) { BM_fused<metagrad_static>(state); }

// On mg::tensor: backward from the loss, and read the value and the gradient.
template <class F>
void run_on_tensors(benchmark::State& state, const F& f) {
  const mg::tensor x0(input());
  for (auto _ : state) {
    mg::tensor x = x0.detach().requires_grad_();
    mg::tensor l = f(x);
    l.backward();
    benchmark::DoNotOptimize(l.item<float>());
    benchmark::DoNotOptimize(x.grad().numel());
  }
}
// The runtime engine: one recorded node per op, each a pass over memory; backward likewise.
void BM_fused_metagrad_runtime(benchmark::State& state) { run_on_tensors(state, loss); }
// The bridge: the same loss recorded as one node by mg::fuse.
void BM_fused_metagrad_fuse(benchmark::State& state) { run_on_tensors(state, mg::fuse(loss)); }

BENCHMARK(BM_fused_hand_written)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_fused_hand_written_inline_trig)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_fused_metagrad_runtime)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_fused_metagrad_fuse)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_fused_metagrad_static)->Unit(benchmark::kMillisecond);

}  // namespace

// `bench_fused_sum --check N hand|hand_inline_trig|static` runs one version N times without Google
// Benchmark, for instruction counts under callgrind (see docs/performance.md).
int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "--check") {
    const long reps = std::atol(argv[2]);
    const std::string_view which = argv[3];  // hand, hand_inline_trig or static
    const auto x = input();
    double acc = 0;
    for (long r = 0; r < reps; ++r) {
      auto [v, g] = which == "hand"               ? hand_written<false>(x)
                    : which == "hand_inline_trig" ? hand_written<true>(x)
                                                  : metagrad_static(x);
      acc += v + g(n / 2);
    }
    std::printf("%.9g\n", acc);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}

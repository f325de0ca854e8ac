// The general path of the static engine on xtensor: one dense layer's loss
// sum(tanh(matmul(x, w) + b) * 0.5), gradients with respect to w and b. With regions (Note
// [Regions]) that is one gemm and one loop forward, one loop, the reduction of b's gradient
// and one gemm backward. The baseline is the same computation written by hand against the
// same BLAS (transposes through BLAS flags, no copies) and xsimd's tanh.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>

#include <metagrad/metagrad.hpp>

namespace {

constexpr std::size_t m = 256, k = 128, n = 64;
using matrix = xt::xtensor<float, 2>;
using vector = xt::xtensor<float, 1>;

struct inputs {
  matrix x, w;
  vector b;
};
inputs make_inputs() {
  xt::random::seed(3);
  return {xt::random::randn<float>({m, k}), xt::random::randn<float>({k, n}) * 0.1f,
          xt::random::randn<float>({n})};
}

constexpr auto layer_loss = [](auto x, auto w, auto b) {
  return sum(tanh(matmul(x, w) + b) * 0.5);
};

struct result {
  float value;
  matrix dw;
  vector db;
};

result metagrad_static(const inputs& in) {
  auto [v, g] = mg::value_and_grad<1, 2>(layer_loss)(in.x, in.w, in.b);
  auto [dw, db] = std::move(g);
  return {v, std::move(dw), std::move(db)};
}

result hand_written(const inputs& in) {
  matrix z = matrix::from_shape({m, n}), dz = matrix::from_shape({m, n});
  // z = x w (row-major through column-major BLAS: z^T = w^T x^T)
  mg::detail::gemm("N", "N", n, m, k, in.w.data(), n, in.x.data(), k, z.data(), n);
  // one SIMD loop (xsimd's tanh, as metagrad's packs): value, dz, and db as column sums
  using B = xsimd::batch<float>;
  static_assert(n % B::size == 0);
  B acc(0.0f);
  vector db = xt::zeros<float>({n});
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; j += B::size) {
      const B t = xsimd::tanh(B::load_unaligned(&z(i, j)) + B::load_unaligned(&in.b(j)));
      acc += t;
      const B d = B(0.5f) * (B(1.0f) - t * t);
      d.store_unaligned(&dz(i, j));
      (B::load_unaligned(&db(j)) + d).store_unaligned(&db(j));
    }
  const float value = 0.5f * xsimd::hadd(acc);
  // dw = x^T dz: dw^T = dz^T x
  matrix dw = matrix::from_shape({k, n});
  mg::detail::gemm("N", "T", n, k, m, dz.data(), n, in.x.data(), k, dw.data(), n);
  return {value, std::move(dw), std::move(db)};
}

template <auto F>
void BM_region(benchmark::State& state) {
  const inputs in = make_inputs();
  for (auto _ : state) {
    result r = F(in);
    benchmark::DoNotOptimize(r.value);
    benchmark::DoNotOptimize(r.dw.data());
  }
}
void BM_region_hand_written(benchmark::State& state) { BM_region<hand_written>(state); }
void BM_region_metagrad_static(benchmark::State& state) { BM_region<metagrad_static>(state); }

BENCHMARK(BM_region_hand_written)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_region_metagrad_static)->Unit(benchmark::kMicrosecond);

}  // namespace

// The two must agree before their times mean anything.
int main(int argc, char** argv) {
  const inputs in = make_inputs();
  const result a = hand_written(in), b = metagrad_static(in);
  const double dv = std::fabs(a.value - b.value) / std::fabs(a.value);
  const double dw = xt::amax(xt::abs(a.dw - b.dw))(), db = xt::amax(xt::abs(a.db - b.db))();
  if (dv > 1e-4 || dw > 1e-3 || db > 1e-3) {
    std::fprintf(stderr, "metagrad and the hand-written layer disagree: %g %g %g\n", dv, dw, db);
    return 1;
  }
  if (argc == 4 && std::string(argv[1]) == "--check") {  // N runs of one version, for callgrind
    const long reps = std::atol(argv[2]);
    const bool hand = std::string(argv[3]) == "hand";
    double acc = 0;
    for (long r = 0; r < reps; ++r) acc += (hand ? hand_written(in) : metagrad_static(in)).value;
    std::printf("%.9g\n", acc);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}

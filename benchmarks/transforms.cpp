// Second order on arrays (Note [Dual arrays]): the Hessian-vector product and the Hessian of
// f(x) = sum(tanh(W x)), W 64 x 64, double, against the same computed by hand on the same BLAS.
//
//   metagrad HVP   mg::jvp(mg::grad(f), x, v): grad's reverse sweep on dual arrays
//   hand HVP       z = W x, u = W v, t = tanh z, r = -2 t (1 - t^2) u, H v = W^T r: three
//                  gemv and one loop
//   metagrad grad  mg::grad(f)(x), for the ratio of a Hessian-vector product to a gradient
//   metagrad H     mg::hessian(f)(x): one HVP per element (64)
//   hand H         W^T diag(-2 t (1 - t^2)) W: one gemv, one loop, one gemm
//
// `bench_transforms --compare` prints the largest difference between each metagrad result and
// the hand-written one.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <benchmark/benchmark.h>
#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>

#include <metagrad/metagrad.hpp>

namespace {

constexpr std::size_t n = 64;
using vec = xt::xtensor<double, 1>;
using mat = xt::xtensor<double, 2>;

struct problem {
  mat W;
  vec x, v;
  problem() {
    xt::random::seed(3);
    W = xt::random::randn<double>({n, n}) * (1.0 / 8);
    x = xt::random::randn<double>({n});
    v = xt::random::randn<double>({n});
  }
};
const problem& data() {
  static const problem p;
  return p;
}

auto loss() {
  return [&W = data().W](auto x) { return mg::sum(mg::tanh(mg::matmul(W, x))); };
}

// y = W x (or W^T x); the row-major W is the column-major W^T to BLAS
void gemv(const mat& W, const double* x, double* y, bool trans) {
  mg::detail::gemv(trans ? 'N' : 'T', int(n), int(n), W.data(), int(n), x, 1, y);
}

vec hand_hvp(const mat& W, const vec& x, const vec& v) {
  vec z = vec::from_shape({n}), u = vec::from_shape({n}), r = vec::from_shape({n}),
      hv = vec::from_shape({n});
  gemv(W, x.data(), z.data(), false);
  gemv(W, v.data(), u.data(), false);
  for (std::size_t i = 0; i < n; ++i) {
    const double t = std::tanh(z(i));
    r(i) = -2 * t * (1 - t * t) * u(i);
  }
  gemv(W, r.data(), hv.data(), true);
  return hv;
}

mat hand_hessian(const mat& W, const vec& x) {
  vec z = vec::from_shape({n});
  gemv(W, x.data(), z.data(), false);
  mat DW = mat::from_shape({n, n}), H = mat::from_shape({n, n});
  for (std::size_t i = 0; i < n; ++i) {
    const double t = std::tanh(z(i)), d = -2 * t * (1 - t * t);
    for (std::size_t j = 0; j < n; ++j) DW(i, j) = d * W(i, j);
  }
  // W^T (D W): to column-major BLAS W^T is W's data and D W is the transpose of DW's data
  mg::detail::gemm("N", "T", int(n), int(n), int(n), W.data(), int(n), DW.data(), int(n), H.data(),
                   int(n));
  return H;
}

void BM_hvp_metagrad(benchmark::State& s) {
  const auto f = loss();
  for (auto _ : s) {
    auto hv = mg::jvp(mg::grad(f), std::tuple{data().x}, std::tuple{data().v}).second;
    benchmark::DoNotOptimize(hv.data());
  }
}
void BM_hvp_hand(benchmark::State& s) {
  for (auto _ : s) {
    auto hv = hand_hvp(data().W, data().x, data().v);
    benchmark::DoNotOptimize(hv.data());
  }
}
void BM_grad_metagrad(benchmark::State& s) {
  const auto f = loss();
  for (auto _ : s) {
    auto g = mg::grad(f)(data().x);
    benchmark::DoNotOptimize(g.data());
  }
}
void BM_hessian_metagrad(benchmark::State& s) {
  const auto f = loss();
  for (auto _ : s) {
    auto H = mg::hessian(f)(data().x);
    benchmark::DoNotOptimize(H.data());
  }
}
void BM_hessian_hand(benchmark::State& s) {
  for (auto _ : s) {
    auto H = hand_hessian(data().W, data().x);
    benchmark::DoNotOptimize(H.data());
  }
}
BENCHMARK(BM_hvp_metagrad);
BENCHMARK(BM_hvp_hand);
BENCHMARK(BM_grad_metagrad);
BENCHMARK(BM_hessian_metagrad);
BENCHMARK(BM_hessian_hand);

template <class A, class B>
double max_diff(const A& a, const B& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a.data()[i] - b.data()[i]));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--compare") {
    const auto f = loss();
    const auto hv = mg::jvp(mg::grad(f), std::tuple{data().x}, std::tuple{data().v}).second;
    const xt::xarray<double> H = mg::hessian(f)(data().x);
    std::printf("HVP: largest difference %.3g\n",
                max_diff(hv, hand_hvp(data().W, data().x, data().v)));
    std::printf("Hessian: largest difference %.3g\n",
                max_diff(H, hand_hessian(data().W, data().x)));
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}

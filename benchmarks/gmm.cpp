// The Gaussian mixture model objective of the ADBench suite (Srajer, Kukelova and Fitzgibbon,
// "A benchmark of selected algorithmic differentiation tools on some problems in computer vision
// and machine learning", 2018), and its gradient with respect to the parameters: k components
// in d dimensions, each a weight alpha_k, a mean mu_k and the inverse covariance's Cholesky factor
// Q_k (its diagonal as logarithms, then its strictly lower part column by column: the k rows of
// icf), the log-likelihood of n points plus a Wishart prior (gamma = 1, m = 0, as ADBench's
// inputs):
//
//   f = const + sum_i logsumexp_k(alpha_k + sum(log diag Q_k) - |Q_k (x_i - mu_k)|^2 / 2)
//       - n logsumexp(alpha) + gamma^2 / 2 sum_k |Q_k|_F^2 - m sum_k sum(log diag Q_k)
//
//   hand      the objective and its gradient by hand, a loop over points and components
//   static    mg::value_and_grad of the objective written once on arrays, the points captured:
//             the k factors as one batch (index_select and a mask), the centred points as a
//             k x n x d array, a batched matmul, logsumexp over the components
//   runtime   the same function on mg::tensor, one backward
//
//   bench_gmm                  Google Benchmark: every version, d x k = 2 x 5, 10 x 25, 64 x 100
//   bench_gmm --compare        the largest differences: each version against hand, and hand
//                              against central differences
//   bench_gmm --check V D K N  version V (hand, static or runtime), d = D, k = K, N times, for
//                              callgrind
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <xtensor/xtensor.hpp>

#include <metagrad/metagrad.hpp>

namespace {

using vec = xt::xtensor<double, 1>;
using mat = xt::xtensor<double, 2>;
constexpr std::size_t n = 1000;
constexpr double gamma_ = 1.0, m_ = 0.0;

struct instance {
  std::size_t d, k;
  vec alphas;
  mat means, icf, x;
  // where entry (r, c) of a factor's strictly lower part is in a row of icf's off-diagonal part
  // (0 elsewhere), and the mask of that part
  std::vector<std::int64_t> tri_index;
  mat mask;
};

instance make_instance(std::size_t d, std::size_t k) {
  std::mt19937_64 gen(20181127 + d * 1000 + k);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const auto fill = [&](std::size_t rows, std::size_t cols, double scale) {
    mat a = mat::from_shape({rows, cols});
    for (auto& v : a) v = scale * u(gen);
    return a;
  };
  instance in{d,
              k,
              vec::from_shape({k}),
              fill(k, d, 1.0),
              fill(k, d + d * (d - 1) / 2, 0.3),
              fill(n, d, 1.0),
              {},
              mat::from_shape({d, d})};
  for (auto& v : in.alphas) v = u(gen);
  in.mask.fill(0);
  in.tri_index.assign(d * d, 0);
  std::int64_t at = 0;
  for (std::size_t c = 0; c < d; ++c)
    for (std::size_t r = c + 1; r < d; ++r) {
      in.tri_index[r * d + c] = at++;
      in.mask(r, c) = 1;
    }
  return in;
}
const instance& data(std::size_t d, std::size_t k) {
  static std::vector<std::pair<std::pair<std::size_t, std::size_t>, instance>> made;
  for (auto& [key, in] : made)
    if (key == std::pair{d, k}) return in;
  made.emplace_back(std::pair{d, k}, make_instance(d, k));
  return made.back().second;
}

// The terms that depend on no parameter: the normal densities' and the Wishart prior's constants.
double constant_terms(std::size_t d, std::size_t k) {
  const double dd = double(d), nn = dd + m_ + 1;
  double multigammaln = dd * (dd - 1) / 4 * std::log(std::numbers::pi);
  for (std::size_t j = 1; j <= d; ++j)
    multigammaln += std::lgamma(0.5 * nn + (1.0 - double(j)) / 2);
  const double wishart_c = nn * dd * (std::log(gamma_) - 0.5 * std::log(2.0)) - multigammaln;
  return -double(n) * dd * 0.5 * std::log(2 * std::numbers::pi) - double(k) * wishart_c;
}

// ---- by hand --------------------------------------------------------------------------------

struct hand_out {
  double value;
  vec dalphas;
  mat dmeans, dicf;
};

[[gnu::noinline]] void hand(const instance& in, hand_out& out, std::vector<double>& work) {
  const std::size_t d = in.d, k = in.k, t = d * (d - 1) / 2, w = d + t;
  out.dalphas.fill(0);
  out.dmeans.fill(0);
  out.dicf.fill(0);
  // per component: exp of the diagonal, sum of the log diagonal
  work.resize(k * d + k + k + 2 * k * d + d);
  double* qd = work.data();
  double* sum_qs = qd + k * d;
  double* main = sum_qs + k;
  double* xc = main + k;    // k x d
  double* y = xc + k * d;   // k x d
  double* dxc = y + k * d;  // d
  for (std::size_t j = 0; j < k; ++j) {
    sum_qs[j] = 0;
    for (std::size_t r = 0; r < d; ++r) {
      qd[j * d + r] = std::exp(in.icf(j, r));
      sum_qs[j] += in.icf(j, r);
    }
  }
  double slse = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double* xi = &in.x(i, 0);
    double mx = -INFINITY;
    for (std::size_t j = 0; j < k; ++j) {
      const double* icf = &in.icf(j, 0);
      double* c = xc + j * d;
      double* yj = y + j * d;
      for (std::size_t r = 0; r < d; ++r)
        c[r] = xi[r] - in.means(j, r), yj[r] = qd[j * d + r] * c[r];
      // the strictly lower part, column by column
      std::size_t at = d;
      for (std::size_t col = 0; col < d; ++col)
        for (std::size_t r = col + 1; r < d; ++r) yj[r] += icf[at++] * c[col];
      double sq = 0;
      for (std::size_t r = 0; r < d; ++r) sq += yj[r] * yj[r];
      main[j] = in.alphas(j) + sum_qs[j] - 0.5 * sq;
      mx = std::max(mx, main[j]);
    }
    double se = 0;
    for (std::size_t j = 0; j < k; ++j) se += std::exp(main[j] - mx);
    const double lse = std::log(se) + mx;
    slse += lse;
    for (std::size_t j = 0; j < k; ++j) {
      const double p = std::exp(main[j] - lse);  // d lse / d main_j
      const double* icf = &in.icf(j, 0);
      double* dicf = &out.dicf(j, 0);
      const double* c = xc + j * d;
      const double* yj = y + j * d;
      out.dalphas(j) += p;
      // d main_j / d y = -y, scaled by p; y = diag(qd) c + L c
      for (std::size_t r = 0; r < d; ++r) {
        const double dy = -p * yj[r];
        dicf[r] += p + dy * c[r] * qd[j * d + r];  // through sum_qs, and through exp
        dxc[r] = qd[j * d + r] * dy;
      }
      std::size_t at = d;
      for (std::size_t col = 0; col < d; ++col)
        for (std::size_t r = col + 1; r < d; ++r, ++at) {
          const double dy = -p * yj[r];
          dicf[at] += dy * c[col];
          dxc[col] += icf[at] * dy;
        }
      for (std::size_t r = 0; r < d; ++r) out.dmeans(j, r) -= dxc[r];
    }
  }
  // - n logsumexp(alphas), and the prior
  double amx = -INFINITY;
  for (std::size_t j = 0; j < k; ++j) amx = std::max(amx, in.alphas(j));
  double ase = 0;
  for (std::size_t j = 0; j < k; ++j) ase += std::exp(in.alphas(j) - amx);
  const double alse = std::log(ase) + amx;
  double prior = 0;
  for (std::size_t j = 0; j < k; ++j) {
    out.dalphas(j) -= double(n) * std::exp(in.alphas(j) - alse);
    for (std::size_t r = 0; r < d; ++r) {
      const double q = qd[j * d + r];
      prior += 0.5 * gamma_ * gamma_ * q * q - m_ * in.icf(j, r);
      out.dicf(j, r) += gamma_ * gamma_ * q * q - m_;
    }
    for (std::size_t a = d; a < w; ++a) {
      prior += 0.5 * gamma_ * gamma_ * in.icf(j, a) * in.icf(j, a);
      out.dicf(j, a) += gamma_ * gamma_ * in.icf(j, a);
    }
  }
  out.value = constant_terms(d, k) + slse - double(n) * alse + prior;
}

struct hand_runner {
  const instance& in;
  hand_out out;
  std::vector<double> work;
  hand_runner(std::size_t d, std::size_t k)
      : in(data(d, k)),
        out{0, vec::from_shape({k}), mat::from_shape({k, d}), mat::from_shape(in.icf.shape())} {}
  double run() {
    hand(in, out, work);
    return out.value;
  }
};

// ---- with metagrad ----------------------------------------------------------------------------

// The objective written once, generic: x (n x d) and mask (d x d) are data; the factors' strictly
// lower parts are gathered from icf's rows by tri_index into a k x d x d batch.
template <class Alphas, class Means, class Icf, class X, class Mask>
auto gmm_objective(const Alphas& alphas, const Means& means, const Icf& icf, const X& x,
                   const Mask& mask, const instance& in) {
  const auto d = std::int64_t(in.d), k = std::int64_t(in.k), t = d * (d - 1) / 2;
  const auto diag = mg::slice(icf, 1, 0, d);
  const auto off = mg::slice(icf, 1, d, d + t);
  const auto sum_qs = mg::sum(diag, 1);
  const auto qdiag = mg::exp(diag);
  const auto lower = mg::reshape(mg::index_select(off, 1, in.tri_index), {k, d, d}) * mask;
  const auto centred = mg::reshape(x, {1, std::int64_t(n), d}) - mg::reshape(means, {k, 1, d});
  const auto y =
      centred * mg::reshape(qdiag, {k, 1, d}) + mg::matmul(centred, mg::transpose(lower, 1, 2));
  const auto main = mg::reshape(alphas + sum_qs, {k, 1}) - 0.5 * mg::sum(mg::square(y), 2);
  const auto prior =
      0.5 * gamma_ * gamma_ * (mg::sum(mg::square(qdiag)) + mg::sum(mg::square(off))) -
      m_ * mg::sum(sum_qs);
  return mg::sum(mg::logsumexp(main, 0)) - double(n) * mg::logsumexp(alphas) + prior +
         constant_terms(in.d, in.k);
}

struct result {
  double value;
  vec dalphas;
  mat dmeans, dicf;
};

struct static_runner {
  const instance& in;
  static_runner(std::size_t d, std::size_t k) : in(data(d, k)) {}
  result run() const {
    const auto [value, g] = mg::value_and_grad([&](const auto& a, const auto& mu, const auto& q) {
      return gmm_objective(a, mu, q, in.x, in.mask, in);
    })(in.alphas, in.means, in.icf);
    return {double(value), std::get<0>(g), std::get<1>(g), std::get<2>(g)};
  }
};

struct runtime_runner {
  const instance& in;
  mg::tensor x, mask;
  runtime_runner(std::size_t d, std::size_t k)
      : in(data(d, k)), x(mg::tensor(in.x)), mask(mg::tensor(in.mask)) {}
  result run() const {
    const mg::tensor a = mg::tensor(in.alphas).requires_grad_();
    const mg::tensor mu = mg::tensor(in.means).requires_grad_();
    const mg::tensor q = mg::tensor(in.icf).requires_grad_();
    const mg::tensor f = gmm_objective(a, mu, q, x, mask, in);
    f.backward();
    return {f.item<double>(), a.grad().to_xtensor<double>(), mu.grad().to_xtensor<double>(),
            q.grad().to_xtensor<double>()};
  }
};

template <class A, class B>
double largest_difference(const A& a, const B& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a.data()[i] - b.data()[i]));
  return d;
}

// Each version against hand, and hand against central differences of its own value.
int compare() {
  for (const auto [d, k] : {std::pair<std::size_t, std::size_t>{2, 5}, {10, 25}}) {
    hand_runner h(d, k);
    h.run();
    const auto report = [&](const char* name, const result& r) {
      std::printf(
          "d %zu k %zu %s: value %.17g (hand %.17g), gradient - hand: alphas %.3g, means %.3g, "
          "icf %.3g\n",
          d, k, name, r.value, h.out.value, largest_difference(r.dalphas, h.out.dalphas),
          largest_difference(r.dmeans, h.out.dmeans), largest_difference(r.dicf, h.out.dicf));
    };
    report("static", static_runner(d, k).run());
    report("runtime", runtime_runner(d, k).run());
    double worst = 0, scale = 0;
    instance& in = const_cast<instance&>(data(d, k));
    const auto check = [&](auto& param, const auto& grad, std::size_t stride) {
      for (std::size_t j = 0; j < param.size(); j += stride) {
        const double v = param.data()[j], step = 1e-5;
        hand_runner p(d, k);
        param.data()[j] = v + step;
        const double up = p.run();
        param.data()[j] = v - step;
        const double down = p.run();
        param.data()[j] = v;
        worst = std::max(worst, std::abs((up - down) / (2 * step) - grad.data()[j]));
        scale = std::max(scale, std::abs(grad.data()[j]));
      }
    };
    check(in.alphas, h.out.dalphas, 1);
    check(in.means, h.out.dmeans, 3);
    check(in.icf, h.out.dicf, 5);
    std::printf("d %zu k %zu hand - central differences: %.3g (largest entry %.3g)\n", d, k, worst,
                scale);
  }
  return 0;
}

void bench_hand(benchmark::State& state) {
  hand_runner h(std::size_t(state.range(0)), std::size_t(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(h.run());
}
void bench_static(benchmark::State& state) {
  static_runner s(std::size_t(state.range(0)), std::size_t(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(s.run());
}
void bench_runtime(benchmark::State& state) {
  runtime_runner r(std::size_t(state.range(0)), std::size_t(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(r.run());
}
#define MG_GMM_SIZES ->Args({2, 5})->Args({10, 25})->Args({64, 100})->Unit(benchmark::kMillisecond)
BENCHMARK(bench_hand)->Name("gmm/hand") MG_GMM_SIZES;
BENCHMARK(bench_static)->Name("gmm/static") MG_GMM_SIZES;
BENCHMARK(bench_runtime)->Name("gmm/runtime") MG_GMM_SIZES;

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--compare") return compare();
  if (argc > 5 && std::string(argv[1]) == "--check") {
    const std::string v = argv[2];
    const auto d = std::size_t(std::atoi(argv[3])), k = std::size_t(std::atoi(argv[4]));
    const int times = std::atoi(argv[5]);
    double acc = 0;
    hand_runner h(d, k);
    static_runner s(d, k);
    runtime_runner r(d, k);
    for (int i = 0; i < times; ++i)
      acc += v == "hand" ? h.run() : v == "static" ? s.run().value : r.run().value;
    std::printf("%.17g\n", acc);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}

// The LSTM objective of the ADBench suite (Srajer, Kukelova and Fitzgibbon, "A benchmark of
// selected algorithmic differentiation tools on some problems in computer vision and machine
// learning", 2018), and its gradient with respect to the parameters: l layers of an LSTM cell
// whose gates are elementwise (a weight per element, not a matrix), over a sequence of c rows of b
// values, each step predicting the next row; the loss is minus the mean log-softmax of the
// prediction, weighted by the next row. ADBench's sizes: l = 2 or 4, c = 1024, b = 14.
//
//   hand      the objective and its gradient by hand (backpropagation through time, below)
//   static    mg::value_and_grad of the objective written once: mg::repeat<c - 1>(step, state,
//             targets) with the step reading its target row as its second parameter (as
//             jax.lax.scan takes xs), the parameters two xtensor arrays read by mg::select and
//             mg::slice
//   runtime   the same step on mg::tensor, in a plain loop, one backward
//
//   bench_lstm                  Google Benchmark: every version
//   bench_lstm --compare        the largest differences: each version against hand, and hand
//                               against central differences
//   bench_lstm --check V N      version V (hand, static or runtime) N times, for callgrind
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <metagrad/metagrad.hpp>

#include "lstm_objective.hpp"

namespace {

using lstm::b;
using lstm::c;
using lstm::instance;
using lstm::l;
using mat = lstm::mat;

const instance& data() {
  static const instance in = lstm::make_instance(20181127);
  return in;
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// ---- by hand --------------------------------------------------------------------------------

// The objective and its gradient (d main, d extra). The forward pass keeps, for every step and
// layer, the cell's input, previous hidden and cell values, gates and tanh(cell); the reverse pass
// runs the steps backwards carrying each layer's d hidden and d cell to the step before.
struct hand_out {
  double loss;
  mat dmain, dextra;
};
struct layer_record {
  double u[b], h[b], cp[b], f[b], i[b], o[b], g[b], tc[b];
};

[[gnu::noinline]] void hand(const instance& in, hand_out& out,
                            std::vector<std::array<layer_record, l>>& rec,
                            std::vector<std::array<double, b>>& soft) {
  const double* W = in.main.data();
  const double* E = in.extra.data();
  double h[l][b], cs[l][b];
  for (std::size_t k = 0; k < l; ++k)
    for (std::size_t j = 0; j < b; ++j)
      h[k][j] = in.state(2 * k, j), cs[k][j] = in.state(2 * k + 1, j);
  double total = 0;
  for (std::size_t t = 0; t + 1 < c; ++t) {
    const double* x = &in.sequence(t, 0);
    const double* y = &in.sequence(t + 1, 0);
    double u[b];
    for (std::size_t j = 0; j < b; ++j) u[j] = x[j] * E[j];
    for (std::size_t k = 0; k < l; ++k) {
      layer_record& r = rec[t][k];
      const double* w = W + 8 * b * k;
      const double* bias = w + 4 * b;
      for (std::size_t j = 0; j < b; ++j) {
        r.u[j] = u[j], r.h[j] = h[k][j], r.cp[j] = cs[k][j];
        r.f[j] = sigmoid(u[j] * w[j] + bias[j]);
        r.i[j] = sigmoid(h[k][j] * w[b + j] + bias[b + j]);
        r.o[j] = sigmoid(u[j] * w[2 * b + j] + bias[2 * b + j]);
        r.g[j] = std::tanh(h[k][j] * w[3 * b + j] + bias[3 * b + j]);
        cs[k][j] = cs[k][j] * r.f[j] + r.i[j] * r.g[j];
        r.tc[j] = std::tanh(cs[k][j]);
        h[k][j] = r.o[j] * r.tc[j];
        u[j] = h[k][j];
      }
    }
    double ypred[b], mx = -INFINITY, se = 0;
    for (std::size_t j = 0; j < b; ++j)
      ypred[j] = u[j] * E[b + j] + E[2 * b + j], mx = std::max(mx, ypred[j]);
    for (std::size_t j = 0; j < b; ++j) se += std::exp(ypred[j] - mx);
    const double lse = std::log(se) + mx;
    for (std::size_t j = 0; j < b; ++j) {
      total += y[j] * (ypred[j] - lse);
      soft[t][j] = std::exp(ypred[j] - lse);
    }
  }
  const double count = double((c - 1) * b);
  out.loss = -total / count;

  out.dmain.fill(0);
  out.dextra.fill(0);
  double* dW = out.dmain.data();
  double* dE = out.dextra.data();
  double dh[l][b] = {}, dc[l][b] = {};  // from the step after
  for (std::size_t t = c - 1; t-- > 0;) {
    const double* x = &in.sequence(t, 0);
    const double* y = &in.sequence(t + 1, 0);
    double ysum = 0;
    for (std::size_t j = 0; j < b; ++j) ysum += y[j];
    // d loss / d ypred = -(y - softmax * sum(y)) / count; ypred = h_top * E[1] + E[2]
    double du[b];  // d loss / d (the top layer's hidden value), then down the layers
    const layer_record& top = rec[t][l - 1];
    for (std::size_t j = 0; j < b; ++j) {
      const double dy = -(y[j] - soft[t][j] * ysum) / count;
      dE[b + j] += dy * top.o[j] * top.tc[j];
      dE[2 * b + j] += dy;
      du[j] = dy * E[b + j];
    }
    for (std::size_t k = l; k-- > 0;) {
      const layer_record& r = rec[t][k];
      const double* w = W + 8 * b * k;
      double* dw = dW + 8 * b * k;
      double* db = dw + 4 * b;
      for (std::size_t j = 0; j < b; ++j) {
        const double dhj = du[j] + dh[k][j];
        const double dcj = dc[k][j] + dhj * r.o[j] * (1 - r.tc[j] * r.tc[j]);
        const double daf = dcj * r.cp[j] * r.f[j] * (1 - r.f[j]);
        const double dai = dcj * r.g[j] * r.i[j] * (1 - r.i[j]);
        const double dao = dhj * r.tc[j] * r.o[j] * (1 - r.o[j]);
        const double dag = dcj * r.i[j] * (1 - r.g[j] * r.g[j]);
        dw[j] += daf * r.u[j], db[j] += daf;
        dw[b + j] += dai * r.h[j], db[b + j] += dai;
        dw[2 * b + j] += dao * r.u[j], db[2 * b + j] += dao;
        dw[3 * b + j] += dag * r.h[j], db[3 * b + j] += dag;
        dc[k][j] = dcj * r.f[j];
        dh[k][j] = dai * w[b + j] + dag * w[3 * b + j];
        du[j] = daf * w[j] + dao * w[2 * b + j];
      }
    }
    for (std::size_t j = 0; j < b; ++j) dE[j] += du[j] * x[j];
  }
}

struct hand_runner {
  hand_out out{0, mat::from_shape({2 * l, 4 * b}), mat::from_shape({3, b})};
  std::vector<std::array<layer_record, l>> rec = std::vector<std::array<layer_record, l>>(c);
  std::vector<std::array<double, b>> soft = std::vector<std::array<double, b>>(c);
  double run() {
    hand(data(), out, rec, soft);
    return out.loss;
  }
};

// ---- with metagrad: the objective is lstm_objective.hpp's ---------------------------------

using vec = xt::xtensor<double, 1>;

struct static_runner {
  std::vector<vec> state_rows;
  mat targets;
  vec first;
  static_runner() {
    const instance& in = data();
    for (std::size_t k = 0; k < 2 * l; ++k) state_rows.push_back(xt::row(in.state, k));
    targets = xt::view(in.sequence, xt::range(1, c), xt::all());
    first = xt::row(in.sequence, 0);
  }
  std::pair<double, std::pair<mat, mat>> run() const {
    const auto init = lstm::initial_state(state_rows, first, 0.0);
    const auto [loss, g] = mg::value_and_grad([&](const auto& main, const auto& extra) {
      return lstm::objective(main, extra, init, targets);
    })(data().main, data().extra);
    return {double(loss), {std::get<0>(g), std::get<1>(g)}};
  }
};

struct runtime_runner {
  std::vector<mg::tensor> state_rows, targets;
  mg::tensor first;
  runtime_runner() {
    const instance& in = data();
    for (std::size_t k = 0; k < 2 * l; ++k)
      state_rows.push_back(mg::tensor(vec(xt::row(in.state, k))));
    for (std::size_t t = 1; t < c; ++t) targets.push_back(mg::tensor(vec(xt::row(in.sequence, t))));
    first = mg::tensor(vec(xt::row(in.sequence, 0)));
  }
  std::pair<double, std::pair<mat, mat>> run() const {
    const mg::tensor main = mg::tensor(data().main).requires_grad_();
    const mg::tensor extra = mg::tensor(data().extra).requires_grad_();
    const auto init = lstm::initial_state(state_rows, first, mg::zeros({}, {.dtype = mg::f64}));
    const mg::tensor loss = lstm::objective(main, extra, init, targets);
    loss.backward();
    return {loss.item<double>(),
            {main.grad().to_xtensor<double>(), extra.grad().to_xtensor<double>()}};
  }
};

double largest_difference(const mat& a, const mat& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a.data()[i] - b.data()[i]));
  return d;
}

// Each version against hand, and hand against central differences of its own loss in a few
// parameters.
int compare() {
  hand_runner h;
  h.run();
  const auto report = [&](const char* name, const auto& r) {
    std::printf("%s: loss %.17g (hand %.17g), gradient - hand: main %.3g, extra %.3g\n", name,
                r.first, h.out.loss, largest_difference(r.second.first, h.out.dmain),
                largest_difference(r.second.second, h.out.dextra));
  };
  report("static", static_runner{}.run());
  report("runtime", runtime_runner{}.run());
  // central differences of the hand-written loss
  double worst = 0, scale = 0;
  instance& in = const_cast<instance&>(data());
  // every `stride`-th entry of one parameter array against its hand-written gradient
  const auto check = [&](mat& param, const mat& grad, std::size_t stride) {
    for (std::size_t k = 0; k < param.size(); k += stride) {
      const double v = param.data()[k], step = 1e-6;
      hand_runner p;
      param.data()[k] = v + step;
      const double up = p.run();
      param.data()[k] = v - step;
      const double down = p.run();
      param.data()[k] = v;
      worst = std::max(worst, std::abs((up - down) / (2 * step) - grad.data()[k]));
      scale = std::max(scale, std::abs(grad.data()[k]));
    }
  };
  check(in.main, h.out.dmain, 7);
  check(in.extra, h.out.dextra, 3);
  std::printf("hand - central differences: %.3g (largest entry %.3g)\n", worst, scale);
  return 0;
}

void bench_hand(benchmark::State& state) {
  hand_runner h;
  for (auto _ : state) benchmark::DoNotOptimize(h.run());
}
void bench_static(benchmark::State& state) {
  static_runner s;
  for (auto _ : state) benchmark::DoNotOptimize(s.run());
}
void bench_runtime(benchmark::State& state) {
  runtime_runner r;
  for (auto _ : state) benchmark::DoNotOptimize(r.run());
}
BENCHMARK(bench_hand)->Name("lstm/hand")->Unit(benchmark::kMillisecond);
BENCHMARK(bench_static)->Name("lstm/static")->Unit(benchmark::kMillisecond);
BENCHMARK(bench_runtime)->Name("lstm/runtime")->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--compare") return compare();
  if (argc > 3 && std::string(argv[1]) == "--check") {
    const std::string v = argv[2];
    const int n = std::atoi(argv[3]);
    double acc = 0;
    hand_runner h;
    static_runner s;
    runtime_runner r;
    for (int i = 0; i < n; ++i)
      acc += v == "hand" ? h.run() : v == "static" ? s.run().first : r.run().first;
    std::printf("%.17g\n", acc);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}

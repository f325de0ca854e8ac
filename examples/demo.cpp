// The demo README.md runs: fit a small fixed-architecture model (a one-hidden-layer tanh
// network for y = sin(3x)) twice, with the same loss function, first with the static engine on
// xtensor arrays, then with the runtime engine on mg::tensor, and print the loss falling and
// the time each took.
#include <chrono>
#include <cmath>
#include <cstdio>

#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>

#include <metagrad/metagrad.hpp>

namespace {

// example-begin demo-loss
// Written once; runs on xtensor arrays (static engine) and on mg::tensor (runtime engine).
constexpr auto loss = [](auto x, auto y, auto w1, auto b1, auto w2) {
  auto hidden = tanh(matmul(x, w1) + b1);
  auto err = matmul(hidden, w2) - y;
  return sum(err * err) * (1.0 / 64);
};
// example-end demo-loss

constexpr int steps = 1500, report_every = 300;
constexpr double lr = 0.1;

using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

}  // namespace

int main() {
  xt::random::seed(7);
  const xt::xarray<double> x = xt::reshape_view(xt::linspace<double>(-1, 1, 64), {64, 1});
  const xt::xarray<double> y = xt::sin(3.0 * x);
  const xt::xarray<double> w1_0 = xt::random::randn<double>({1, 16});
  const xt::xarray<double> b1_0 = xt::zeros<double>({16});
  const xt::xarray<double> w2_0 = 0.1 * xt::random::randn<double>({16, 1});

  std::printf("static engine (mg::value_and_grad on xtensor):\n");
  auto t0 = clock_type::now();
  {
    xt::xarray<double> w1 = w1_0, b1 = b1_0, w2 = w2_0;
    for (int step = 0; step <= steps; ++step) {
      auto [l, g] = mg::value_and_grad<2, 3, 4>(loss)(x, y, w1, b1, w2);
      if (step % report_every == 0) std::printf("  step %4d  loss %.6f\n", step, l);
      w1 -= lr * std::get<0>(g);
      b1 -= lr * std::get<1>(g);
      w2 -= lr * std::get<2>(g);
    }
  }
  const double static_ms = ms_since(t0);

  std::printf("runtime engine (mg::tensor, recorded graph):\n");
  t0 = clock_type::now();
  {
    mg::tensor tx(x), ty(y);
    mg::tensor w1 = mg::tensor(w1_0).requires_grad_(), b1 = mg::tensor(b1_0).requires_grad_(),
               w2 = mg::tensor(w2_0).requires_grad_();
    for (int step = 0; step <= steps; ++step) {
      mg::tensor l = loss(tx, ty, w1, b1, w2);
      l.backward();
      if (step % report_every == 0) std::printf("  step %4d  loss %.6f\n", step, l.item<double>());
      mg::no_grad_guard no_grad;
      for (mg::tensor* p : {&w1, &b1, &w2}) {
        *p = (*p - lr * p->grad()).requires_grad_();
      }
    }
  }
  const double runtime_ms = ms_since(t0);
  std::printf("time for %d steps: static %.1f ms, runtime %.1f ms\n", steps, static_ms, runtime_ms);
}

// docs/static.md "A training step": a fixed-architecture MLP (784 -> 128 -> 10, tanh, softmax
// cross-entropy) trained by the static engine on xt::xtensor_fixed arrays. CI compiles and runs
// it (examples/CMakeLists.txt): it checks gradient elements of both layers against central
// differences and that ten SGD steps lower the loss, and exits with 1 if not.
// benchmarks/mlp_step.cpp times the same step against a hand-written one.
#include <cmath>
#include <cstdio>
#include <memory>
#include <tuple>

#include <xtensor/xfixed.hpp>
#include <xtensor/xrandom.hpp>

#include <metagrad/metagrad.hpp>

namespace {
constexpr std::size_t batch = 64, n_in = 784, n_hid = 128, n_out = 10;

// example-begin mlp-step
// The mean softmax cross-entropy of a two-layer MLP against one-hot labels y, written once for
// the static engine: matmul is BLAS, each elementwise run (tanh(. + b1), . + b2) is one loop,
// logsumexp reduces along the classes.
constexpr auto mlp_loss = [](auto x, auto y, auto w1, auto b1, auto w2, auto b2) {
  const auto h = tanh(matmul(x, w1) + b1);
  const auto logits = matmul(h, w2) + b2;
  return (sum(logsumexp(logits, 1)) - sum(y * logits)) / double(batch);
};

struct mlp {
  xt::xtensor_fixed<double, xt::xshape<n_in, n_hid>> w1;
  xt::xtensor_fixed<double, xt::xshape<n_hid>> b1;
  xt::xtensor_fixed<double, xt::xshape<n_hid, n_out>> w2;
  xt::xtensor_fixed<double, xt::xshape<n_out>> b2;
};

// One SGD step: the loss and the gradients of the parameters (arguments 2 to 5; the data x and
// the labels y get none computed), each in its parameter's own fixed-size type.
template <class X, class Y>
double train_step(mlp& m, const X& x, const Y& y, double rate) {
  const auto [loss, g] = mg::value_and_grad<2, 3, 4, 5>(mlp_loss)(x, y, m.w1, m.b1, m.w2, m.b2);
  const auto& [dw1, db1, dw2, db2] = g;
  m.w1 -= rate * dw1;
  m.b1 -= rate * db1;
  m.w2 -= rate * dw2;
  m.b2 -= rate * db2;
  return loss;
}
// example-end mlp-step
}  // namespace

int main() {
  int failures = 0;
  xt::random::seed(11);
  auto m = std::make_unique<mlp>();
  m->w1 = xt::random::randn<double>({n_in, n_hid}) * 0.05;
  m->b1 = xt::random::randn<double>({n_hid}) * 0.1;
  m->w2 = xt::random::randn<double>({n_hid, n_out}) * 0.1;
  m->b2 = xt::random::randn<double>({n_out}) * 0.1;
  auto x = std::make_unique<xt::xtensor_fixed<double, xt::xshape<batch, n_in>>>();
  *x = xt::random::rand<double>({batch, n_in});
  xt::xtensor_fixed<double, xt::xshape<batch, n_out>> y;
  y.fill(0.0);
  for (std::size_t i = 0; i < batch; ++i) y(i, (i * 7) % n_out) = 1.0;

  // gradient elements against central differences of the loss
  const auto [loss0, g] =
      mg::value_and_grad<2, 3, 4, 5>(mlp_loss)(*x, y, m->w1, m->b1, m->w2, m->b2);
  const auto loss_at = [&](const mlp& p) {
    return mg::value_and_grad<5>(mlp_loss)(*x, y, p.w1, p.b1, p.w2, p.b2).first;
  };
  const auto check = [&](const char* what, double& param, double analytic) {
    const double h = 1e-6, keep = param;
    param = keep + h;
    const double up = loss_at(*m);
    param = keep - h;
    const double down = loss_at(*m);
    param = keep;
    const double fd = (up - down) / (2 * h);
    const bool ok = std::abs(analytic - fd) <= 1e-6 * (1e-3 + std::abs(fd));
    std::printf("%-10s %+.9e (central difference %+.9e) %s\n", what, analytic, fd,
                ok ? "ok" : "WRONG");
    failures += ok ? 0 : 1;
  };
  check("dw1[3,5]", m->w1(3, 5), std::get<0>(g)(3, 5));
  check("db1[17]", m->b1(17), std::get<1>(g)(17));
  check("dw2[40,2]", m->w2(40, 2), std::get<2>(g)(40, 2));
  check("db2[7]", m->b2(7), std::get<3>(g)(7));

  // ten steps lower the loss
  double loss = loss0;
  for (int step = 0; step < 10; ++step) loss = train_step(*m, *x, y, 0.05);
  const double after = loss_at(*m);
  const bool lower = after < loss0 - 0.1;
  std::printf("loss %.6f -> %.6f after 10 steps %s\n", loss0, after, lower ? "ok" : "WRONG");
  failures += lower ? 0 : 1;
  (void)loss;
  return failures == 0 ? 0 : 1;
}

// Compile-time stress: an MLP (2 -> 32 -> 32 -> 3, tanh, softmax cross-entropy) trained with
// mg::tensor by SGD on three Gaussian blobs, as a user of the runtime engine writes it, with the
// umbrella header. run.sh compiles it and reports the time and peak memory of the compiler;
// running it checks one gradient element against a central difference and that training lowers
// the loss and fits the blobs.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <metagrad/metagrad.hpp>

namespace {
struct mlp {
  mg::tensor w1, b1, w2, b2, w3, b3;
  std::vector<mg::tensor> parameters() const { return {w1, b1, w2, b2, w3, b3}; }
  mg::tensor operator()(const mg::tensor& x) const {
    const mg::tensor h1 = mg::tanh(mg::matmul(x, w1) + b1);
    const mg::tensor h2 = mg::tanh(mg::matmul(h1, w2) + b2);
    return mg::matmul(h2, w3) + b3;
  }
};

mg::tensor parameter(mg::shape_t shape, double scale) {
  return (mg::randn(shape, {.dtype = mg::f64}) * scale).requires_grad_();
}
}  // namespace

int main() {
  mg::manual_seed(7);
  const std::int64_t n = 96, classes = 3;
  // three blobs around the corners of a triangle; targets are the blob indices
  mg::tensor x = mg::randn({n, 2}, {.dtype = mg::f64}) * 0.3;
  mg::tensor centres = mg::zeros({n, 2}, {.dtype = mg::f64});
  mg::tensor targets = mg::zeros({n}, {.dtype = mg::i64});
  for (std::int64_t i = 0; i < n; ++i) {
    const double c = static_cast<double>(i % classes);
    centres[i][0].fill_(std::cos(2.0944 * c));
    centres[i][1].fill_(std::sin(2.0944 * c));
    targets[i].fill_(c);
  }
  x = x + centres;

  mlp m{parameter({2, 32}, 0.5), parameter({32}, 0.1),          parameter({32, 32}, 0.2),
        parameter({32}, 0.1),    parameter({32, classes}, 0.2), parameter({classes}, 0.1)};
  const auto loss_of = [&] { return mg::cross_entropy(m(x), targets); };

  // one gradient element against a central difference
  loss_of().backward();
  const double analytic = m.w2.grad()[3][5].item<double>();
  double numeric = 0;
  {
    mg::no_grad_guard ng;
    const double h = 1e-6, w = m.w2[3][5].item<double>();
    m.w2[3][5].fill_(w + h);
    const double up = loss_of().item<double>();
    m.w2[3][5].fill_(w - h);
    const double down = loss_of().item<double>();
    m.w2[3][5].fill_(w);
    numeric = (up - down) / (2 * h);
  }
  bool ok = std::abs(analytic - numeric) <= 1e-6 * (1 + std::abs(numeric));

  const double first = loss_of().item<double>();
  for (int step = 0; step < 200; ++step) {
    for (auto& p : m.parameters()) p.grad().defined() ? (void)p.set_grad({}) : (void)0;
    const mg::tensor loss = loss_of();
    loss.backward();
    mg::no_grad_guard ng;
    for (auto& p : m.parameters()) p.sub_(p.grad() * 0.5);
  }
  const double last = loss_of().item<double>();
  ok = ok && last < 0.5 * first;
  std::printf("dL/dw2[3][5] %.9g (central difference %.9g), loss %.4f -> %.4f: %s\n", analytic,
              numeric, first, last, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

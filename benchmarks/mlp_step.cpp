// A training step of a fixed-architecture MLP: batch 64, 784 -> 128 -> 10,
// tanh, softmax cross-entropy with one-hot labels, float, xt::xtensor_fixed shapes; the loss,
// the gradients of both layers' weights and biases, and one SGD update.
//
//   metagrad   the loss written once (examples/mlp_step.cpp), mg::value_and_grad<2, 3, 4, 5>:
//              the static engine's general path (regions, gemm, no gradient for the data)
//   hand       the same step written by hand against the same BLAS: five gemms (transposes as
//              BLAS flags), one SIMD tanh loop, one softmax loop per row, the bias gradients as
//              column sums
//
// `bench_mlp_step --compare` prints both losses and a few gradient elements; `--check N NAME`
// runs one version N times for callgrind (NAME: metagrad or hand).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>
#include <xtensor/xfixed.hpp>
#include <xtensor/xrandom.hpp>

#include <metagrad/metagrad.hpp>

namespace {

constexpr std::size_t batch = 64, n_in = 784, n_hid = 128, n_out = 10;
using input = xt::xtensor_fixed<float, xt::xshape<batch, n_in>>;
using labels = xt::xtensor_fixed<float, xt::xshape<batch, n_out>>;  // one-hot rows
using weights1 = xt::xtensor_fixed<float, xt::xshape<n_in, n_hid>>;
using bias1 = xt::xtensor_fixed<float, xt::xshape<n_hid>>;
using weights2 = xt::xtensor_fixed<float, xt::xshape<n_hid, n_out>>;
using bias2 = xt::xtensor_fixed<float, xt::xshape<n_out>>;
constexpr float learning_rate = 0.1f;

// the mean softmax cross-entropy of the MLP's logits against one-hot labels
constexpr auto mlp_loss = [](auto x, auto y, auto w1, auto b1, auto w2, auto b2) {
  const auto h = tanh(matmul(x, w1) + b1);
  const auto logits = matmul(h, w2) + b2;
  return (sum(logsumexp(logits, 1)) - sum(y * logits)) / double(batch);
};

struct model {
  weights1 w1;
  bias1 b1;
  weights2 w2;
  bias2 b2;
};
struct data {
  input x;
  labels y;
};

std::unique_ptr<data> make_data() {
  auto d = std::make_unique<data>();
  xt::random::seed(5);
  d->x = xt::random::rand<float>({batch, n_in}, 0.0f, 1.0f);
  d->y.fill(0.0f);
  for (std::size_t i = 0; i < batch; ++i) d->y(i, (i * 7) % n_out) = 1.0f;
  return d;
}
std::unique_ptr<model> make_model() {
  auto m = std::make_unique<model>();
  xt::random::seed(6);
  m->w1 = xt::random::randn<float>({n_in, n_hid}) * 0.05f;
  m->b1 = xt::random::randn<float>({n_hid}) * 0.1f;
  m->w2 = xt::random::randn<float>({n_hid, n_out}) * 0.1f;
  m->b2 = xt::random::randn<float>({n_out}) * 0.1f;
  return m;
}

// p -= learning_rate * g
template <class P, class G>
void sgd(P& p, const G& g) {
  float* w = p.data();
  const float* d = g.data();
  for (std::size_t i = 0; i < p.size(); ++i) w[i] -= learning_rate * d[i];
}

struct step_result {
  float loss;
  float probe;  // a few gradient elements, for --compare
};

step_result metagrad_step(model& m, const data& d) {
  const auto [loss, g] = mg::value_and_grad<2, 3, 4, 5>(mlp_loss)(d.x, d.y, m.w1, m.b1, m.w2, m.b2);
  const auto& [dw1, db1, dw2, db2] = g;
  const float probe = dw1(100, 7) + db1(3) + dw2(5, 2) + db2(1);
  sgd(m.w1, dw1);
  sgd(m.b1, db1);
  sgd(m.w2, dw2);
  sgd(m.b2, db2);
  return {static_cast<float>(loss), probe};
}

// Row-major C = A B through column-major BLAS: C^T = B^T A^T (Note [Row-major gemm]).
step_result hand_step(model& m, const data& d) {
  using B = xsimd::batch<float>;
  auto pre = std::make_unique_for_overwrite<xt::xtensor_fixed<float, xt::xshape<batch, n_hid>>>();
  auto dpre = std::make_unique_for_overwrite<xt::xtensor_fixed<float, xt::xshape<batch, n_hid>>>();
  xt::xtensor_fixed<float, xt::xshape<batch, n_out>> logits, dlogits;
  // pre = x w1; h = tanh(pre + b1), in place
  mg::detail::gemm("N", "N", n_hid, batch, n_in, m.w1.data(), n_hid, d.x.data(), n_in, pre->data(),
                   n_hid);
  float* h = pre->data();
  for (std::size_t i = 0; i < batch; ++i)
    for (std::size_t j = 0; j < n_hid; j += B::size) {
      const B v = B::load_unaligned(h + i * n_hid + j) + B::load_unaligned(m.b1.data() + j);
      xsimd::tanh(v).store_unaligned(h + i * n_hid + j);
    }
  // logits = h w2 + b2; per row: log-sum-exp, the loss, d loss / d logits = (softmax - y) / n
  mg::detail::gemm("N", "N", n_out, batch, n_hid, m.w2.data(), n_out, h, n_hid, logits.data(),
                   n_out);
  double loss = 0;
  for (std::size_t i = 0; i < batch; ++i) {
    float* z = logits.data() + i * n_out;
    float mx = -INFINITY;
    for (std::size_t j = 0; j < n_out; ++j) {
      z[j] += m.b2(j);
      mx = std::max(mx, z[j]);
    }
    float s = 0;
    for (std::size_t j = 0; j < n_out; ++j) s += std::exp(z[j] - mx);
    const float lse = mx + std::log(s);
    for (std::size_t j = 0; j < n_out; ++j) {
      loss += (lse - z[j]) * d.y(i, j);
      dlogits(i, j) = (std::exp(z[j] - lse) - d.y(i, j)) / float(batch);
    }
  }
  // dw2 = h^T dlogits; db2 = column sums of dlogits; dh = dlogits w2^T
  weights2 dw2;
  mg::detail::gemm("N", "T", n_out, n_hid, batch, dlogits.data(), n_out, h, n_hid, dw2.data(),
                   n_out);
  bias2 db2;
  db2.fill(0.0f);
  for (std::size_t i = 0; i < batch; ++i)
    for (std::size_t j = 0; j < n_out; ++j) db2(j) += dlogits(i, j);
  mg::detail::gemm("T", "N", n_hid, batch, n_out, m.w2.data(), n_out, dlogits.data(), n_out,
                   dpre->data(), n_hid);
  // dpre = dh (1 - h^2); db1 = column sums of dpre; dw1 = x^T dpre
  bias1 db1;
  db1.fill(0.0f);
  for (std::size_t i = 0; i < batch; ++i)
    for (std::size_t j = 0; j < n_hid; ++j) {
      float& g = (*dpre)(i, j);
      const float t = h[i * n_hid + j];
      g *= 1 - t * t;
      db1(j) += g;
    }
  auto dw1 = std::make_unique_for_overwrite<weights1>();
  mg::detail::gemm("N", "T", n_hid, n_in, batch, dpre->data(), n_hid, d.x.data(), n_in, dw1->data(),
                   n_hid);
  const float probe = (*dw1)(100, 7) + db1(3) + dw2(5, 2) + db2(1);
  sgd(m.w1, *dw1);
  sgd(m.b1, db1);
  sgd(m.w2, dw2);
  sgd(m.b2, db2);
  return {static_cast<float>(loss / double(batch)), probe};
}

template <auto Step>
void BM_mlp_step(benchmark::State& state) {
  const auto d = make_data();
  auto m = make_model();
  for (auto _ : state) {
    const step_result r = Step(*m, *d);
    benchmark::DoNotOptimize(r.loss);
  }
}
void BM_mlp_step_hand(benchmark::State& state) { BM_mlp_step<hand_step>(state); }
void BM_mlp_step_metagrad(benchmark::State& state) { BM_mlp_step<metagrad_step>(state); }
BENCHMARK(BM_mlp_step_hand)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_mlp_step_metagrad)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--compare") {
    const auto d = make_data();
    auto m1 = make_model(), m2 = make_model();
    for (int s = 0; s < 3; ++s) {
      const step_result a = metagrad_step(*m1, *d), b = hand_step(*m2, *d);
      std::printf("step %d  loss metagrad %.7g hand %.7g  gradients metagrad %.7g hand %.7g\n", s,
                  a.loss, b.loss, a.probe, b.probe);
    }
    return 0;
  }
  if (argc == 4 && std::string(argv[1]) == "--check") {
    const long reps = std::atol(argv[2]);
    const bool hand = std::string(argv[3]) == "hand";
    const auto d = make_data();
    auto m = make_model();
    double acc = 0;
    for (long r = 0; r < reps; ++r) acc += (hand ? hand_step(*m, *d) : metagrad_step(*m, *d)).loss;
    std::printf("%.9g\n", acc);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}

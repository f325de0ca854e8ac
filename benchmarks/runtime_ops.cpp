// The runtime engine's ops on the CPU at the sizes people train with, one workload per
// benchmark, named as benchmarks/compare_torch.py names the same workload in torch (float32;
// `benchmarks/compare_torch.py` runs both in one run and prints the ratios):
//   - inplace/<op>/<n>: an in-place op on n elements (no grad);
//   - fwd/<op>/<n> and fwdbwd/<op>/<n>: an op on leaves of n elements, forward only, or forward,
//     sum and backward (the leaves' gradients reset with set_grad({}) after each);
//   - rows/<op>/<rows>x<cols>: along dim 1 of a [rows, cols] matrix, forward and backward;
//   - mlp_step: batch 64, 784 -> 128 -> 10, tanh, cross-entropy, SGD by sub_ and grad().zero_();
//     mlp_step_set_grad: the same, the gradients reset by set_grad({}) (torch: grad = None);
//   - chain/1000000: sum((sin(x)*x + exp(-x*x))^2), forward and backward.
// Every workload checks one value against what it must compute before it is timed.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <xtensor/xarray.hpp>
#include <xtensor/xbuilder.hpp>

#include <metagrad/autograd.hpp>
#include <metagrad/tensor.hpp>

namespace {

using mg::tensor;

tensor leaf(std::int64_t n, double v, bool grad) {
  return mg::full({n}, v, {.requires_grad = grad});
}

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "runtime_ops: %s computed a wrong value\n", what.c_str());
    std::exit(1);
  }
}

// A workload: prepare() once, then run() repeatedly (the timed part).
struct workload {
  std::string name;
  std::function<std::function<void()>()> prepare;
};

std::vector<workload> workloads() {
  std::vector<workload> w;
  for (std::int64_t n : {1'000, 100'000, 1'000'000}) {
    const std::string s = std::to_string(n);
    w.push_back({"inplace/mul_/" + s, [n] {
                   auto a = std::make_shared<tensor>(leaf(n, 1.5, false));
                   return [a] { a->mul_(1.0); };
                 }});
    w.push_back({"inplace/add_/" + s, [n] {
                   auto a = std::make_shared<tensor>(leaf(n, 1.5, false));
                   auto b = std::make_shared<tensor>(leaf(n, 0.0, false));
                   return [a, b] { a->add_(*b); };
                 }});
    w.push_back({"inplace/zero_/" + s, [n] {
                   auto a = std::make_shared<tensor>(leaf(n, 1.5, false));
                   return [a] { a->zero_(); };
                 }});
    w.push_back({"inplace/sgd_/" + s, [n] {
                   auto p = std::make_shared<tensor>(leaf(n, 1.5, false));
                   auto q = std::make_shared<tensor>(leaf(n, 0.0, false));
                   return [p, q] { p->sub_(*q * 0.01); };
                 }});
    w.push_back({"fwd/add/" + s, [n] {
                   auto a = std::make_shared<tensor>(leaf(n, 1.5, false));
                   auto b = std::make_shared<tensor>(leaf(n, 0.5, false));
                   check(((*a + *b).sum().item<double>() == 2.0 * static_cast<double>(n)), "add");
                   return [a, b] { benchmark::DoNotOptimize(*a + *b); };
                 }});
    w.push_back({"fwd/exp/" + s, [n] {
                   auto a = std::make_shared<tensor>(leaf(n, 0.5, false));
                   return [a] { benchmark::DoNotOptimize(mg::exp(*a)); };
                 }});
    w.push_back({"fwdbwd/mul/" + s, [n] {
                   auto a = std::make_shared<tensor>(leaf(n, 1.5, true));
                   auto b = std::make_shared<tensor>(leaf(n, 0.5, true));
                   return [a, b] {
                     (*a * *b).sum().backward();
                     a->set_grad({});
                     b->set_grad({});
                   };
                 }});
    w.push_back({"fwdbwd/tanh/" + s, [n] {
                   auto a = std::make_shared<tensor>(leaf(n, 0.5, true));
                   return [a] {
                     mg::tanh(*a).sum().backward();
                     a->set_grad({});
                   };
                 }});
    w.push_back({"fwd/sum/" + s, [n] {
                   auto a = std::make_shared<tensor>(leaf(n, 0.5, false));
                   return [a] { benchmark::DoNotOptimize(a->sum()); };
                 }});
  }
  w.push_back(
      {"rows/softmax_logsumexp/1024x1024", [] {
         mg::manual_seed(0);
         auto x = std::make_shared<tensor>(mg::randn({1024, 1024}, {.requires_grad = true}));
         return [x] {
           const tensor y = mg::mean(mg::logsumexp(*x, 1)) + mg::sum(mg::softmax(*x, 1) * *x);
           y.backward();
           x->set_grad({});
         };
       }});
  w.push_back(
      {"rows/sum_dim/1024x1024", [] {
         auto x = std::make_shared<tensor>(mg::full({1024, 1024}, 0.5, {.requires_grad = true}));
         return [x] {
           mg::sum(*x, 1, false).sum().backward();
           x->set_grad({});
         };
       }});
  // selection along rows: max with its indices, topk, argmax
  const auto ramp = [] {  // row r: r, r + 1/1024, ... (distinct values)
    const xt::xarray<float> v = xt::arange<float>(0.f, 1024.f * 1024.f) / 1024.f;
    return mg::reshape(mg::tensor(v), {1024, 1024});
  };
  w.push_back({"rows/max_dim/1024x1024", [ramp] {
                 auto x = std::make_shared<tensor>(ramp().requires_grad_());
                 check(mg::max(*x, 1).indices.sum().item<double>() == 1023.0 * 1024, "max");
                 return [x] {
                   mg::max(*x, 1).values.sum().backward();
                   x->set_grad({});
                 };
               }});
  w.push_back({"rows/topk8/1024x1024", [ramp] {
                 auto x = std::make_shared<tensor>(ramp().requires_grad_());
                 check(mg::topk(*x, 8, 1).indices.sum().item<double>() == 1019.5 * 8 * 1024,
                       "topk");
                 return [x] {
                   mg::topk(*x, 8, 1).values.sum().backward();
                   x->set_grad({});
                 };
               }});
  w.push_back({"rows/argmax/1024x1024", [ramp] {
                 auto x = std::make_shared<tensor>(ramp());
                 check(mg::argmax(*x, 1).sum().item<double>() == 1023.0 * 1024, "argmax");
                 return [x] { benchmark::DoNotOptimize(mg::argmax(*x, 1)); };
               }});
  for (const bool none : {false, true}) {  // gradients reset by grad().zero_() or set_grad({})
    w.push_back(
        {none ? "mlp_step_set_grad/64x784x128x10" : "mlp_step/64x784x128x10", [none] {
           mg::manual_seed(1);
           auto w1 = std::make_shared<tensor>(mg::randn({784, 128}, {.requires_grad = true}));
           auto w2 = std::make_shared<tensor>(mg::randn({128, 10}, {.requires_grad = true}));
           auto x = std::make_shared<tensor>(mg::randn({64, 784}));
           std::vector<std::int64_t> targets(64);
           for (std::size_t i = 0; i < targets.size(); ++i)
             targets[i] = static_cast<std::int64_t>(i % 10);
           {
             mg::no_grad_guard off;
             w1->mul_(0.05);
             w2->mul_(0.1);
           }
           return [w1, w2, x, targets, none] {
             const tensor h = mg::tanh(mg::matmul(*x, *w1));
             const tensor loss = mg::cross_entropy(mg::matmul(h, *w2), targets);
             loss.backward();
             mg::no_grad_guard off;
             w1->sub_(w1->grad() * 0.01);
             w2->sub_(w2->grad() * 0.01);
             for (tensor* p : {w1.get(), w2.get()}) {
               if (none) {
                 p->set_grad({});
               } else {
                 p->grad().zero_();
               }
             }
           };
         }});
  }
  w.push_back({"chain/1000000", [] {
                 auto x =
                     std::make_shared<tensor>(mg::full({1'000'000}, 0.5, {.requires_grad = true}));
                 return [x] {
                   const tensor s = mg::sin(*x) * *x + mg::exp(-(*x * *x));
                   (s * s).sum().backward();
                   x->set_grad({});
                 };
               }});
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  for (const workload& w : workloads()) {
    auto prepare = w.prepare;
    benchmark::RegisterBenchmark(w.name.c_str(), [prepare](benchmark::State& state) {
      const auto run = prepare();
      for (auto _ : state) run();
    })->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}

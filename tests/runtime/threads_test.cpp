// Backward from several threads (the ThreadSanitizer leg runs this file): independent graphs, and
// graphs that share leaves (their accumulations into .grad are serialised, as torch's).
#include <cmath>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/autograd.hpp>
#include <metagrad/tensor.hpp>

using mg::tensor;

TEST(Threads, IndependentGraphsBackwardConcurrently) {
  constexpr int threads = 4, steps = 200;
  std::vector<double> grads(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([t, &grads] {
      tensor x = mg::full({8}, 0.1 * (t + 1), {.dtype = mg::f64, .requires_grad = true});
      for (int s = 0; s < steps; ++s) {
        tensor y = (mg::sin(x) * x).sum();
        if (s % 2) {
          y.backward();
        } else {
          auto g = mg::autograd::grad({y}, {x}, {}, {.create_graph = true})[0];
          (void)mg::autograd::grad({g.sum()}, {x});
        }
      }
      grads[t] = x.grad().sum().item<double>();
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) {
    const double v = 0.1 * (t + 1);
    EXPECT_NEAR(grads[t], 8 * (steps / 2) * (std::cos(v) * v + std::sin(v)), 1e-9);
  }
}

TEST(Threads, SharedLeafAccumulatesEveryThreadsGradient) {
  tensor w = mg::full({4}, 2.0, {.dtype = mg::f64, .requires_grad = true});
  constexpr int threads = 4, steps = 100;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&w] {
      for (int s = 0; s < steps; ++s) (w * w).sum().backward();
    });
  for (auto& th : pool) th.join();
  EXPECT_DOUBLE_EQ(w.grad().sum().item<double>(), 4 * 4.0 * threads * steps);
}

// Backward from several threads through one graph (retained): the nodes are shared, and each
// task keeps its own state for them (Note [Task state]).
TEST(Threads, ConcurrentBackwardThroughOneSharedGraph) {
  tensor w = mg::full({4}, 0.5, {.dtype = mg::f64, .requires_grad = true});
  const tensor h = mg::sin(w) * w;
  const tensor loss = (h * h).sum();
  constexpr int threads = 4, steps = 50;
  std::vector<double> sums(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int s = 0; s < steps; ++s)
        sums[t] +=
            mg::autograd::grad({loss}, {w}, {}, {.retain_graph = true})[0].sum().item<double>();
    });
  for (auto& th : pool) th.join();
  const double v = 0.5, hv = std::sin(v) * v;
  for (int t = 0; t < threads; ++t)
    EXPECT_NEAR(sums[t], steps * 4 * 2 * hv * (std::cos(v) * v + std::sin(v)), 1e-9);
}

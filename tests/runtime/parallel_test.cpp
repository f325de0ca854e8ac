// Intra-op parallelism (Note [Intra-op parallelism] in backend/parallel.hpp): mg::set_num_threads
// and mg::get_num_threads, results bit-identical on 1, 2, 3 and 4 threads for kernels above the
// grain (elementwise forward and backward, broadcasts, views, copies, fills, and every reduction
// form), sums still accurate against a closed form, and kernels called from several threads at
// once while the pool is busy.
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>
#include <xtensor/xbuilder.hpp>
#include "support/harness_runtime.hpp"

using mg::tensor;

namespace {

// Restores the thread count a test changed.
struct threads_scope {
  int saved = mg::get_num_threads();
  ~threads_scope() { mg::set_num_threads(saved); }
};

// Everything one workload computes, as host arrays, on n threads.
std::vector<xt::xarray<double>> workload(int n) {
  mg::set_num_threads(n);
  mg::manual_seed(3);
  std::vector<xt::xarray<double>> out;
  const auto keep = [&](const tensor& t) { out.push_back(t.to_xtensor<double>()); };
  for (const mg::dtype d : {mg::f32, mg::f64}) {
    // 300 x 700 = 210000 elements: above 2 * parallel_grain, so every kernel splits
    const tensor x = mg::randn({300, 700}, {.dtype = d}).requires_grad_();
    const tensor b = mg::randn({700}, {.dtype = d});
    const tensor y = mg::sin(x) * b + mg::exp(-x * x);  // broadcast operand
    keep(y);
    keep(mg::sum(y));           // into one output: fixed blocks
    keep(mg::sum(y, 0));        // along the outer dim: split along the kept dim
    keep(mg::sum(y, 1, true));  // along rows
    keep(mg::sum(y.t()));       // a transposed view
    keep(mg::mean(mg::square(y.t()), 1));
    keep(mg::max(y));
    keep(mg::amin(y, 0));
    keep(mg::prod(mg::cos(y) * 0.001 + 1.0));
    keep(mg::logsumexp(y, 1));
    keep(mg::softmax(y, 0));
    keep(mg::max(y, 1).indices.to(d));  // positions: rows by packs, in blocks of rows
    keep(mg::argmin(y, 0).to(d));
    keep(mg::topk(y, 3, 1).indices.to(d));
    const tensor g = mg::autograd::grad({mg::sum(y * y)}, {x})[0];  // fused backward kernels
    keep(g);
    tensor z = mg::zeros({300, 700}, {.dtype = d});
    z.copy_(y.t().t().detach());
    z.mul_(2.0).add_(b);  // direct in-place kernels
    keep(z);
    tensor f = mg::zeros({500000}, {.dtype = d});
    f.fill_(0.25);
    keep(f);
  }
  return out;
}

}  // namespace

TEST(Parallel, NumThreadsIsSetAndRead) {
  const threads_scope scope;
  EXPECT_GE(mg::get_num_threads(), 1);
  mg::set_num_threads(3);
  EXPECT_EQ(mg::get_num_threads(), 3);
  mg::set_num_threads(1);
  EXPECT_EQ(mg::get_num_threads(), 1);
  mg_test::expect_error([] { mg::set_num_threads(0); }, {"set_num_threads", "0", "at least 1"});
  EXPECT_EQ(mg::get_num_threads(), 1);
}

TEST(Parallel, ResultsAreIdenticalOnAnyNumberOfThreads) {
  const threads_scope scope;
  const auto one = workload(1);
  for (const int n : {2, 3, 4}) {
    const auto many = workload(n);
    ASSERT_EQ(many.size(), one.size());
    for (std::size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(one[i] == many[i]) << "result " << i << " on " << n << " threads";
  }
}

// Accuracy does not depend on the split: the sum of 1, 2, ..., n in float32 is exact in double
// accumulation up to the final rounding.
TEST(Parallel, SumsStayAccurate) {
  const threads_scope scope;
  for (const int n : {1, 4}) {
    mg::set_num_threads(n);
    const std::int64_t count = 3'000'001;
    const tensor x(xt::xarray<double>(xt::arange<double>(1.0, static_cast<double>(count) + 1.0)));
    const double exact = static_cast<double>(count) * static_cast<double>(count + 1) / 2;
    EXPECT_EQ(mg::sum(x).item<double>(), exact) << n << " threads";
    EXPECT_NEAR(mg::sum(x.to(mg::f32)).item<double>(), exact, exact * 1e-7) << n << " threads";
  }
}

// Kernels on several threads at once: one gets the pool, the others run whole on their own
// thread; every result is right.
TEST(Parallel, ConcurrentCallersGetTheirOwnResults) {
  const threads_scope scope;
  mg::set_num_threads(2);
  std::vector<double> sums(4);
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&sums, t] {
      const tensor x = mg::full({400000}, static_cast<double>(t + 1), {.dtype = mg::f64});
      sums[static_cast<std::size_t>(t)] = mg::sum(x * 2.0).item<double>();
    });
  for (auto& c : callers) c.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(sums[static_cast<std::size_t>(t)], 800000.0 * (t + 1));
}

// Fills of every size: zeros by memset, and -0.0 keeps its sign bit.
TEST(Parallel, FillsWriteEveryElement) {
  const threads_scope scope;
  for (const int n : {1, 2}) {
    mg::set_num_threads(n);
    for (const std::int64_t count : {1000, 200000}) {
      tensor t = mg::ones({count}, {.dtype = mg::f64});
      t.zero_();
      EXPECT_EQ(mg::sum(mg::abs(t)).item<double>(), 0.0);
      t.fill_(-0.0);
      const auto a = t.to_xtensor<double>();
      EXPECT_TRUE(std::signbit(a(0)) && std::signbit(a(count - 1))) << count;
      t.fill_(1.5);
      EXPECT_EQ(mg::sum(t).item<double>(), 1.5 * static_cast<double>(count));
    }
  }
}

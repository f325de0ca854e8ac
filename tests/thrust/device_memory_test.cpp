// Device memory, streams and graphs of the Thrust backend: the caching allocator's reuse and
// statistics, blocks kept per stream, work on a user's stream, events, a captured step
// replayed on new inputs, and devices by index. Compiled for the CPU's device
// systems in CI and by nvcc (included by thrust_test.cu) for a GPU.
#include <cmath>
#include <cstddef>
#include <string>

#include <gtest/gtest.h>
#include <thrust/device_vector.h>
#include <xtensor/xmanipulation.hpp>

#include <metagrad/cuda.hpp>
#include <metagrad/device.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

#include "support/harness_runtime.hpp"

using mg_test::expect_error;

namespace {

constexpr mg::device on_device = mg::device::cuda;

// One training-like step on the device: forward, backward into w's .grad, an update.
double step(mg::tensor& w, const mg::tensor& x) {
  const mg::tensor loss = mg::sum(mg::tanh(mg::matmul(x, w)) * mg::exp(-mg::sum(x, 1, true)));
  loss.backward();
  {
    mg::no_grad_guard ng;
    w.sub_(w.grad() * 0.1);
    w.grad().zero_();
  }
  return loss.item<double>();
}

}  // namespace

TEST(DeviceMemory, ReleasedBlocksServeTheNextAllocation) {
  mg::cuda::empty_cache();
  const std::size_t base = mg::cuda::memory_allocated();
  EXPECT_EQ(mg::cuda::memory_reserved(), base);  // nothing cached after empty_cache
  mg::cuda::reset_peak_memory_stats();
  EXPECT_EQ(mg::cuda::max_memory_allocated(), base);
  {
    const mg::tensor t = mg::zeros({1000}, {.dtype = mg::f32, .device = on_device});
    EXPECT_EQ(mg::cuda::memory_allocated(), base + 4096);  // 4000 bytes: the class of 4096
  }
  EXPECT_EQ(mg::cuda::memory_allocated(), base);
  EXPECT_EQ(mg::cuda::memory_reserved(), base + 4096);  // cached
  EXPECT_EQ(mg::cuda::max_memory_allocated(), base + 4096);
  {
    const mg::tensor t = mg::full({1000}, 2.0, {.dtype = mg::f32, .device = on_device});
    EXPECT_EQ(mg::cuda::memory_reserved(), base + 4096);  // the cached block, not a new one
    EXPECT_EQ(t.sum().item<double>(), 2000.0);
  }
  mg::cuda::empty_cache();
  EXPECT_EQ(mg::cuda::memory_reserved(), mg::cuda::memory_allocated());
}

TEST(DeviceMemory, ASteadyLoopReservesNothingNew) {
  mg::tensor w = mg::full({6, 3}, 0.1, {.dtype = mg::f64, .device = on_device}).requires_grad_();
  const mg::tensor x = mg::full({5, 6}, 0.2, {.dtype = mg::f64, .device = on_device});
  double loss = step(w, x);
  const std::size_t reserved = mg::cuda::memory_reserved(), held = mg::cuda::memory_allocated();
  for (int i = 0; i < 3; ++i) {
    const double next = step(w, x);
    EXPECT_LT(next, loss);  // the steps descend
    loss = next;
    EXPECT_EQ(mg::cuda::memory_reserved(), reserved) << "step " << i;
    EXPECT_EQ(mg::cuda::memory_allocated(), held) << "step " << i;
  }
}

TEST(DeviceStreams, WorkOnAUserStreamMatchesTheDefaultStream) {
  const mg::cuda::stream s = mg::cuda::stream::create();
  EXPECT_TRUE(mg::cuda::current_stream() == mg::cuda::stream{});
  EXPECT_FALSE(s == mg::cuda::stream{});
  mg::tensor w0 = mg::full({6, 3}, 0.1, {.dtype = mg::f64, .device = on_device}).requires_grad_();
  mg::tensor w1 = mg::full({6, 3}, 0.1, {.dtype = mg::f64, .device = on_device}).requires_grad_();
  const mg::tensor x = mg::full({5, 6}, 0.2, {.dtype = mg::f64, .device = on_device});
  const double on_default = step(w0, x);
  double on_s = 0;
  {
    mg::cuda::stream_guard guard(s);
    EXPECT_TRUE(mg::cuda::current_stream() == s);
    on_s = step(w1, x);
  }
  EXPECT_TRUE(mg::cuda::current_stream() == mg::cuda::stream{});  // the guard restored it
  s.synchronize();
  EXPECT_EQ(on_s, on_default);
  EXPECT_EQ(w1.to_xtensor<double>(), w0.to_xtensor<double>());
}

TEST(DeviceStreams, BlocksAreCachedPerStream) {
  const mg::cuda::stream s = mg::cuda::stream::create();
  mg::cuda::empty_cache();
  const std::size_t base = mg::cuda::memory_reserved();
  {
    mg::cuda::stream_guard guard(s);
    (void)mg::zeros({5000}, {.dtype = mg::f64, .device = on_device});  // 40000 bytes: class 40960
  }
  s.synchronize();
  EXPECT_EQ(mg::cuda::memory_reserved(), base + 40960);
  {  // the default stream may not take s's block: its work could still be reading it
    const mg::tensor t = mg::zeros({5000}, {.dtype = mg::f64, .device = on_device});
    EXPECT_EQ(mg::cuda::memory_reserved(), base + 2 * 40960);
  }
  {  // s takes its own block back
    mg::cuda::stream_guard guard(s);
    const mg::tensor t = mg::zeros({5000}, {.dtype = mg::f64, .device = on_device});
    EXPECT_EQ(mg::cuda::memory_reserved(), base + 2 * 40960);
  }
  s.synchronize();
  mg::cuda::empty_cache();
}

TEST(DeviceStreams, EventsTimeAndOrderWork) {
  mg::cuda::event start, end;
  mg_test::expect_error([&] { (void)start.elapsed_ms(end); },
                        {"event::elapsed_ms", "never recorded", "record()"});
  start.record();
  const mg::tensor y = mg::exp(mg::full({100000}, 0.5, {.device = on_device})).sum();
  end.record();
  EXPECT_GE(start.elapsed_ms(end), 0.0f);
  // work on s waits for the event recorded on the default stream
  const mg::cuda::stream s = mg::cuda::stream::create();
  end.block(s);
  {
    mg::cuda::stream_guard guard(s);
    EXPECT_NEAR(y.item<double>(), 100000 * std::exp(0.5), 1e-2);
  }
  mg::cuda::synchronize();
}

// Note [CUDA graphs]: a step with static inputs and outputs, captured after a warm-up, replayed on
// new contents of its input; its output against the closed form.
TEST(DeviceGraphs, AReplayComputesTheStepOnNewInputs) {
  const mg::tensor_options o{.dtype = mg::f64, .device = on_device};
  mg::tensor x = mg::full({4, 3}, 0.5, o), out = mg::zeros({3, 2}, o);
  const mg::tensor w = mg::full({3, 2}, 0.25, o).requires_grad_();
  const auto step = [&] {
    const mg::tensor loss = mg::sum(mg::tanh(mg::matmul(x, w)));
    const mg::tensor_list g = mg::autograd::grad({loss}, {w});
    mg::no_grad_guard no_grad;
    out.copy_(g[0]);
  };
  step();  // the warm-up
  mg::cuda::graph graph;
  graph.capture(step);
  EXPECT_TRUE(graph.captured());
  std::size_t held = 0;
  for (const double v : {0.1, -0.7, 1.3}) {
    x.fill_(v);  // the captured step reads x
    graph.replay();
    // d/dw sum(tanh(x w)) = x^T (1 - tanh^2(x w)); every x w is 3 * v * 0.25
    const double t = std::tanh(0.75 * v), want = 4 * v * (1 - t * t);
    const auto got = out.to_xtensor<double>();
    for (const double gv : got) EXPECT_NEAR(gv, want, 1e-14) << v;
    if (held == 0) held = mg::cuda::memory_allocated();
    EXPECT_EQ(mg::cuda::memory_allocated(), held);  // a replay allocates nothing that stays
  }
  expect_error([&] { graph.capture(step); }, {"graph::capture", "holds a capture already"});
  graph.reset();
  EXPECT_FALSE(graph.captured());
  expect_error([&] { graph.replay(); }, {"graph::replay", "nothing was captured", "capture("});
}

// ---- Devices by index (Note [Devices]): on the CPU's device systems, two simulated devices ----

namespace {
// The second device, or a skip where there is one (a machine with one GPU).
#define MG_NEED_TWO_DEVICES() \
  if (mg::cuda::device_count() < 2) GTEST_SKIP() << "one device: nothing to mix"

const mg::device second = mg::device::cuda(1);
}  // namespace

TEST(DeviceIndex, DevicesAreTypeAndIndex) {
  static_assert(mg::device::cuda(0) == mg::device::cuda);
  static_assert(mg::device::cuda(1) != mg::device::cuda);
  static_assert(mg::device{mg::device_type::cuda, 1} == mg::device::cuda(1));
  static_assert(mg::device::cuda(1).type() == mg::device_type::cuda);
  EXPECT_EQ(mg::detail::device_name(mg::device::cuda), "cuda");
  EXPECT_EQ(mg::detail::device_name(mg::device::cuda(1)), "cuda:1");
  EXPECT_EQ(mg::detail::device_spelling(mg::device::cuda(1)), "mg::device::cuda(1)");
  EXPECT_GE(mg::cuda::device_count(), 1);
}

TEST(DeviceIndex, ATrainingStepOnTheSecondDevice) {
  MG_NEED_TWO_DEVICES();
  {
    const mg::tensor batch = mg::full({5, 784}, 0.01);
    // example-begin devices
    mg::tensor w = mg::full({784, 10}, 0.01, {.device = mg::device::cuda(1)}).requires_grad_();
    mg::tensor x = batch.to(mg::device::cuda(1));
    mg::matmul(x, w).sum().backward();  // all of it on device 1
    // example-end devices
    EXPECT_EQ(w.grad().device(), mg::device::cuda(1));
    EXPECT_NEAR(w.grad().sum().item<double>(), 784 * 10 * 5 * 0.01, 1e-3);  // sum of x's columns
  }
  mg::tensor w0 = mg::full({6, 3}, 0.1, {.dtype = mg::f64, .device = on_device}).requires_grad_();
  mg::tensor w1 = mg::full({6, 3}, 0.1, {.dtype = mg::f64, .device = second}).requires_grad_();
  const mg::tensor x0 = mg::full({5, 6}, 0.2, {.dtype = mg::f64, .device = on_device});
  const mg::tensor x1 = x0.to(second);
  EXPECT_EQ(x1.device(), second);
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(step(w1, x1), step(w0, x0));
  EXPECT_EQ(w1.device(), second);
  EXPECT_EQ(w1.to(mg::device::cpu).to_xtensor<double>(), w0.to_xtensor<double>());
  // each step's first loss: sum(tanh(0.12)) exp(-1.2) over 15 elements, computed on the host
  mg::tensor w = mg::full({6, 3}, 0.1, {.dtype = mg::f64, .device = second}).requires_grad_();
  EXPECT_NEAR(step(w, x1), 15 * std::tanh(6 * 0.2 * 0.1) * std::exp(-1.2), 1e-14);
}

TEST(DeviceIndex, CopiesBetweenDevicesKeepTheValues) {
  MG_NEED_TWO_DEVICES();
  const mg::tensor a = mg::tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, mg::f64);
  const mg::tensor on1 = a.to(second);
  const mg::tensor back = a.to(on_device).t().to(second).to(on_device);  // a strided source
  EXPECT_EQ(on1.to_xtensor<double>(), a.to_xtensor<double>());
  EXPECT_EQ(back.device(), on_device);
  EXPECT_EQ(back.to_xtensor<double>(), xt::transpose(a.to_xtensor<double>()));
}

TEST(DeviceIndex, EachDeviceHasItsOwnMemory) {
  MG_NEED_TWO_DEVICES();
  mg::cuda::empty_cache(0);
  mg::cuda::empty_cache(1);
  const std::size_t base0 = mg::cuda::memory_allocated(0), base1 = mg::cuda::memory_allocated(1);
  {
    const mg::tensor t = mg::zeros({1000}, {.dtype = mg::f32, .device = second});
    EXPECT_EQ(mg::cuda::memory_allocated(1), base1 + 4096);
    EXPECT_EQ(mg::cuda::memory_allocated(0), base0);
  }
  EXPECT_EQ(mg::cuda::memory_reserved(1), base1 + 4096);  // cached on device 1
  mg::cuda::empty_cache(1);
  EXPECT_EQ(mg::cuda::memory_reserved(1), mg::cuda::memory_allocated(1));
}

TEST(DeviceIndex, TheGuardSelectsRawDeviceWork) {
  MG_NEED_TWO_DEVICES();
  const int before = mg::cuda::current_device();
  {
    mg::cuda::device_guard on_1(1);
    EXPECT_EQ(mg::cuda::current_device(), 1);
    const mg::cuda::stream s = mg::cuda::stream::create();
    EXPECT_EQ(s.device(), 1);
    mg::cuda::reset_peak_memory_stats();  // device 1's
    const std::size_t base = mg::cuda::memory_allocated();
    // the static transforms run on the current device, with its allocator's temporaries
    const thrust::device_vector<double> x(4096, 0.5);
    thrust::device_vector<double> g(4096);
    const double loss = mg::cuda::value_and_grad([](auto v) { return mg::sum(v * v); }).into(g)(x);
    EXPECT_DOUBLE_EQ(loss, 4096 * 0.25);
    EXPECT_DOUBLE_EQ(g[17], 1.0);
    EXPECT_GT(mg::cuda::max_memory_allocated(1), base);
  }
  EXPECT_EQ(mg::cuda::current_device(), before);
  {
    mg::cuda::device_guard on_1(second);
    const mg::cuda::stream s = mg::cuda::stream::create();
    mg::cuda::device_guard on_0(0);
    {
      mg::cuda::stream_guard on_s(s);  // its device becomes current
      EXPECT_EQ(mg::cuda::current_device(), 1);
    }
    EXPECT_EQ(mg::cuda::current_device(), 0);
  }
}

TEST(DeviceIndex, MisuseNamesTheDevices) {
  MG_NEED_TWO_DEVICES();
  const mg::tensor a = mg::ones({2, 3}, {.dtype = mg::f64, .device = on_device});
  const mg::tensor b = mg::ones({2, 3}, {.dtype = mg::f64, .device = second});
  expect_error([&] { (void)(a + b); },
               {"add", "different devices", "on cuda,", "on cuda:1", ".to(mg::device::cuda(1))"});
  const mg::tensor w = b.clone().requires_grad_();
  expect_error(
      [&] {
        (w * 2).backward(mg::ones({2, 3}, {.dtype = mg::f64, .device = on_device}));
      },
      {"cuda:1", "cuda", ".to(mg::device::cuda(1))"});
  const int n = mg::cuda::device_count();
  expect_error([&] { (void)mg::zeros({2}, {.device = mg::device::cuda(n)}); },
               {"cuda:" + std::to_string(n), "does not exist", "mg::cuda::device_count()"});
  expect_error([&] { (void)mg::zeros({2}, {.device = mg::device::cuda(-1)}); }, {"out of range"});
  expect_error([&] { (void)mg::zeros({2}, {.device = mg::device::cpu(1)}); },
               {"cpu:1 does not exist", "mg::device::cpu"});
  expect_error([&] { mg::cuda::device_guard g(n); }, {"device_guard", "does not exist"});
  EXPECT_EQ(mg::cuda::current_device(), 0);
}

// The CPU backend's caching allocator (Note [Host caching allocator] in backend/host_cache.hpp):
// size classes, blocks reused by the next tensor of their class, exact statistics, the cache
// emptied, a training loop that stops asking the system for memory, and many threads at once
// (the ThreadSanitizer leg runs this file). And the per-thread pool of the runtime engine's small
// objects (Note [Object pool] in core/object_pool.hpp).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/autograd.hpp>
#include <metagrad/cpu.hpp>
#include <metagrad/tensor.hpp>

using mg::tensor;
using mg::detail::block_class_of;
using mg::detail::block_class_size;

namespace {
const void* data_of(const tensor& t) { return t.impl()->store->data; }
}  // namespace

TEST(HostCache, SizeClassesHoldTheRequestAndWasteAtMostAFifth) {
  std::size_t previous = 0;
  for (std::size_t n = 1; n < (std::size_t{1} << 40); n += 1 + n / 7) {
    const std::size_t c = block_class_of(n), size = block_class_size(c);
    ASSERT_GE(size, n) << n;
    if (n <= 512) {
      EXPECT_LT(size - n, 64u) << n;
    } else {
      EXPECT_LE(5 * (size - n), size) << n;
    }
    EXPECT_EQ(size % 64, 0u) << n;
    EXPECT_GE(c, previous) << n;              // larger requests never take a smaller class
    EXPECT_EQ(block_class_of(size), c) << n;  // a class's own size is in that class
    previous = c;
  }
  EXPECT_EQ(block_class_size(block_class_of(4'000'000)), 4'194'304u);  // 2^21 * 2
  EXPECT_EQ(block_class_size(block_class_of(513)), 640u);              // 512 * 1.25
  EXPECT_LT(block_class_of(std::size_t{1} << 63), mg::detail::block_classes);
}

TEST(HostCache, AReleasedBlockServesTheNextTensorOfItsClass) {
  mg::cpu::empty_cache();
  const std::size_t before = mg::cpu::memory_allocated();
  const void* p = nullptr;
  {
    const tensor a = mg::zeros({1'000'000});  // 4,000,000 bytes: a block of 4,194,304
    p = data_of(a);
    EXPECT_EQ(mg::cpu::memory_allocated(), before + 4'194'304u);
    EXPECT_EQ(mg::cpu::memory_reserved(), mg::cpu::memory_allocated());
  }
  EXPECT_EQ(mg::cpu::memory_allocated(), before);
  EXPECT_EQ(mg::cpu::memory_reserved(), before + 4'194'304u);  // cached, not returned
  const tensor b = mg::ones({1'020'000});                      // another size of the same class
  EXPECT_EQ(data_of(b), p);
  EXPECT_EQ(b.sum().item<double>(), 1'020'000.0);  // and its elements are its own
  EXPECT_EQ(mg::cpu::memory_reserved(), before + 4'194'304u);
}

// Note [Elements in the storage]: up to 256 bytes, a tensor's elements live in its storage
// object's block, not in the host cache; from 257 bytes on, in a block of the cache.
TEST(HostCache, SmallTensorsHoldTheirElements) {
  const std::size_t before = mg::cpu::memory_allocated();
  {
    const tensor a = mg::full({32}, 1.5, {.dtype = mg::f64});  // 256 bytes
    const tensor c = mg::full({3}, 2.0);                       // 12 bytes
    EXPECT_EQ(mg::cpu::memory_allocated(), before);
    const char* at = static_cast<const char*>(data_of(a));
    const auto* s = a.impl()->store.get();
    EXPECT_TRUE(at > reinterpret_cast<const char*>(s) &&
                at < reinterpret_cast<const char*>(s) + 512);  // inside the storage's block
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(at) % 16, 0u);
    const tensor b = mg::full({33}, 0.5, {.dtype = mg::f64});  // 264 bytes
    EXPECT_GT(mg::cpu::memory_allocated(), before);
    EXPECT_EQ((a * 2.0 + a).sum().item<double>(), 144.0);
    EXPECT_EQ((b * c.sum()).sum().item<double>(), 99.0);
  }
  EXPECT_EQ(mg::cpu::memory_allocated(), before);
}

TEST(HostCache, PeakAndEmptyCache) {
  mg::cpu::empty_cache();
  const std::size_t before = mg::cpu::memory_allocated();
  mg::cpu::reset_peak_memory_stats();
  EXPECT_EQ(mg::cpu::max_memory_allocated(), before);
  {
    const tensor a = mg::zeros({100'000}, {.dtype = mg::f64});  // 800,000 bytes: 917,504
    const tensor b = mg::zeros({1000});                         // 4,000 bytes: 4,096
    EXPECT_EQ(mg::cpu::max_memory_allocated(), before + 917'504u + 4'096u);
  }
  EXPECT_EQ(mg::cpu::max_memory_allocated(), before + 917'504u + 4'096u);
  mg::cpu::reset_peak_memory_stats();
  EXPECT_EQ(mg::cpu::max_memory_allocated(), before);
  EXPECT_EQ(mg::cpu::memory_reserved(), before + 917'504u + 4'096u);
  mg::cpu::empty_cache();
  EXPECT_EQ(mg::cpu::memory_reserved(), before);
}

TEST(HostCache, ATrainingLoopStopsAskingForMemory) {
  tensor w = mg::randn({256, 128}, {.requires_grad = true});
  const tensor x = mg::randn({64, 256});
  std::vector<std::size_t> reserved;
  for (int step = 0; step < 6; ++step) {
    const tensor h = mg::tanh(mg::matmul(x, w));
    const tensor loss = (h * h).mean();
    loss.backward();
    {
      mg::no_grad_guard no_grad;
      w.sub_(w.grad() * 0.1);
      w.grad().zero_();
    }
    reserved.push_back(mg::cpu::memory_reserved());
  }
  // the first steps fill the cache; from then on every block is a reused one
  for (std::size_t s = 2; s < reserved.size(); ++s) EXPECT_EQ(reserved[s], reserved[1]) << s;
}

TEST(HostCache, ThreadsAllocateAndReleaseAtOnce) {
  const std::size_t before = mg::cpu::memory_allocated();
  constexpr int threads = 4, steps = 100;
  std::vector<double> sums(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([t, &sums] {
      double total = 0;
      for (int s = 0; s < steps; ++s) {
        const std::int64_t n = 100 + 37 * ((s + t) % 11);
        const tensor a = mg::full({n}, 1.0 + t, {.dtype = mg::f64});
        const tensor b = a * 2.0 + a;  // blocks taken and given back in every order
        total += b.sum().item<double>();
      }
      sums[t] = total;
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) {
    double expected = 0;
    for (int s = 0; s < steps; ++s) expected += 3.0 * (1.0 + t) * (100 + 37 * ((s + t) % 11));
    EXPECT_EQ(sums[t], expected) << t;
  }
  EXPECT_EQ(mg::cpu::memory_allocated(), before);
}

// A class holds what glibc's chunk for the object holds (n + 8 bytes rounded up to 16, at
// least 32), no more: pooling costs no memory.
TEST(ObjectPool, SizeClassesHoldWhatMallocWouldGive) {
  using mg::detail::pool_class_of;
  using mg::detail::pool_class_size;
  for (std::size_t n = 1; n <= 600; ++n) {
    const std::size_t c = pool_class_of(n);
    if (c >= mg::detail::pool_classes) {
      EXPECT_GT(n, 520u);
      continue;
    }
    const std::size_t chunk = std::max<std::size_t>(32, (n + 8 + 15) / 16 * 16);
    EXPECT_GE(pool_class_size(c), n) << n;
    EXPECT_EQ(pool_class_size(c), chunk - 8) << n;
  }
  EXPECT_EQ(pool_class_of(520), mg::detail::pool_classes - 1);
  EXPECT_EQ(pool_class_of(521), mg::detail::pool_classes);  // to operator new
}

TEST(ObjectPool, AFreedTensorsObjectsServeTheNextOnesAndEmptyCacheReturnsThem) {
  if (!mg::detail::pool_enabled) GTEST_SKIP() << "the pool is off under AddressSanitizer";
  const void* impl = nullptr;
  {
    const tensor a = mg::full({3}, 2.0, {.dtype = mg::f64});
    impl = a.impl().get();
  }
  const tensor b = mg::full({3}, 5.0, {.dtype = mg::f64});
  EXPECT_EQ(b.impl().get(), impl);
  EXPECT_EQ((b * b).sum().item<double>(), 75.0);
  mg::cpu::empty_cache();
  const auto* lists = mg::detail::thread_pool_lists();
  ASSERT_NE(lists, nullptr);
  for (std::size_t c = 0; c < mg::detail::pool_classes; ++c) {
    EXPECT_EQ(lists->count[c], 0u) << c;
    EXPECT_EQ(lists->head[c], nullptr) << c;
  }
}

// Graphs recorded on worker threads and freed on the main thread (their objects then serve the
// main thread's), and the reverse; every gradient checked against its closed form.
TEST(ObjectPool, ObjectsFreedOnAnotherThread) {
  constexpr int threads = 3, steps = 50;
  std::vector<std::vector<tensor>> made(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([t, &made] {
      for (int s = 0; s < steps; ++s) {
        const tensor x = mg::full({4}, 0.5 + s, {.dtype = mg::f64, .requires_grad = true});
        made[t].push_back((x * x * double(t + 1)).sum());  // graph kept alive
        made[t].push_back(x);
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t)
    for (int s = 0; s < steps; ++s) {
      made[t][2 * s].backward();  // backward on the main thread, then the graph is freed
      const double x = 0.5 + s;
      EXPECT_EQ(made[t][2 * s + 1].grad().sum().item<double>(), 4 * 2 * x * (t + 1));
    }
  made.clear();
  for (int s = 0; s < steps; ++s) {  // the main thread's new objects come from those blocks
    const tensor x = mg::full({5}, 1.5, {.dtype = mg::f64, .requires_grad = true});
    (mg::exp(x) * x).sum().backward();
    EXPECT_DOUBLE_EQ(x.grad().sum().item<double>(), 5 * std::exp(1.5) * 2.5);
  }
  std::vector<tensor> back;
  for (int s = 0; s < steps; ++s) back.push_back(mg::full({2}, double(s), {.dtype = mg::f64}));
  std::thread([v = std::move(back)]() mutable {
    double total = 0;
    for (const auto& b : v) total += b.sum().item<double>();
    EXPECT_EQ(total, 2.0 * steps * (steps - 1) / 2);
    v.clear();  // freed here: the worker's lists take them, and are returned when it ends
  }).join();
}

// The caching allocator behind tensors' storages, one per memory system: the host's
// (host_cache.hpp) and a device's (<metagrad/cuda/memory.hpp>).
//
// Note [Caching allocator]: a released block goes to a free list of its size class and the next
// allocation of that class takes it: in a steady state (a training loop, a backward pass run
// again) nothing reaches the system, whose allocation is slow on the host above the mmap threshold
// (page faults on first touch) and slower still on a GPU (cudaMalloc and cudaFree synchronise
// the device).
//   - Size classes: multiples of 64 bytes up to 512, then four per power of two (2^k times 1.25,
//     1.5, 1.75, 2), so a block wastes at most a fifth of its size.
//   - Streams: a block is cached under the key it was released with (a device's stream; the host
//     has one key, 0) and only an allocation with that key takes it. Work on one stream runs in
//     order, so a block freed after the kernels that read it were enqueued can serve the next
//     kernel of that stream at once, without waiting for the first ones to finish.
//   - One mutex guards the lists and the counters; a block freed on one thread serves the next
//     allocation of its class and key on any thread.
//   - Cached blocks stay until empty() returns them, or an allocation the system refuses empties
//     the cache and tries once more.
//   - Statistics count blocks at their class size: allocated (held by storages), its peak since
//     the start or the last reset, and reserved (allocated plus cached), as torch's CUDA allocator
//     reports them.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace mg::detail {

struct cache_stats {
  std::size_t allocated = 0;
  std::size_t max_allocated = 0;
  std::size_t reserved = 0;
};

// The size class of a block of n > 0 bytes, and the bytes a block of class c holds.
constexpr std::size_t block_class_of(std::size_t n) {
  if (n <= 512) return (n + 63) / 64 - 1;
  const int k = std::bit_width(n - 1) - 1;  // 2^k < n <= 2^(k+1)
  const std::size_t base = std::size_t{1} << k, step = base >> 2;
  const std::size_t j = (n - base + step - 1) / step;  // 1..4
  return 8 + static_cast<std::size_t>(k - 9) * 4 + (j - 1);
}
constexpr std::size_t block_class_size(std::size_t c) {
  if (c < 8) return (c + 1) * 64;
  const std::size_t k = 9 + (c - 8) / 4, j = (c - 8) % 4 + 1;
  return (std::size_t{1} << k) + j * (std::size_t{1} << (k - 2));
}
inline constexpr std::size_t block_classes = 8 + (64 - 9) * 4;

/// System: `static void* allocate(std::size_t)` (null when refused) and
/// `static void free(void*, std::size_t)`, given class sizes.
template <class System>
class block_cache {
 public:
  /// A block of at least nbytes > 0 bytes for work under `key`; null when the system refuses it
  /// even after the cache was emptied.
  void* allocate(std::size_t nbytes, std::uintptr_t key = 0) {
    const std::size_t c = block_class_of(nbytes), size = block_class_size(c);
    {
      const std::lock_guard lock(mutex_);
      if (auto* lists = lists_of(key)) {
        auto& list = (*lists)[c];
        if (!list.empty()) {
          void* p = list.back();
          list.pop_back();
          cached_ -= size;
          take(size);
          return p;
        }
      }
    }
    void* p = System::allocate(size);
    if (!p) {
      empty();
      p = System::allocate(size);
    }
    if (p) {
      const std::lock_guard lock(mutex_);
      take(size);
    }
    return p;
  }

  void release(void* p, std::size_t nbytes, std::uintptr_t key = 0) {
    const std::size_t c = block_class_of(nbytes), size = block_class_size(c);
    const std::lock_guard lock(mutex_);
    auto* lists = lists_of(key);
    if (!lists) lists = &keys_.emplace_back(key, free_lists{}).second;
    (*lists)[c].push_back(p);
    allocated_ -= size;
    cached_ += size;
  }

  void empty() {
    std::vector<std::pair<std::uintptr_t, free_lists>> blocks;
    {
      const std::lock_guard lock(mutex_);
      blocks.swap(keys_);
      cached_ = 0;
    }
    for (auto& [key, lists] : blocks)
      for (std::size_t c = 0; c < block_classes; ++c)
        for (void* p : lists[c]) System::free(p, block_class_size(c));
  }

  cache_stats statistics() {
    const std::lock_guard lock(mutex_);
    return {allocated_, peak_, allocated_ + cached_};
  }

  void reset_peak() {
    const std::lock_guard lock(mutex_);
    peak_ = allocated_;
  }

 private:
  using free_lists = std::array<std::vector<void*>, block_classes>;

  free_lists* lists_of(std::uintptr_t key) {  // few keys: one per stream in use
    for (auto& [k, lists] : keys_)
      if (k == key) return &lists;
    return nullptr;
  }
  void take(std::size_t size) {
    allocated_ += size;
    if (allocated_ > peak_) peak_ = allocated_;
  }

  std::mutex mutex_;
  std::vector<std::pair<std::uintptr_t, free_lists>> keys_;
  std::size_t allocated_ = 0, peak_ = 0, cached_ = 0;
};

}  // namespace mg::detail

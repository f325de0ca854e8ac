// The CPU backend's caching allocator: the memory behind every tensor of device cpu that does not
// fit inside its storage object.
//
// Note [Host caching allocator]: a result of mid or large size was a fresh allocation, and above
// glibc's mmap threshold every one was an mmap, page faults on first touch and an munmap when
// freed: an in-place op on 1e6 floats cost 7x torch's. Now a released block goes to a free list
// of its size class and the next allocation of that class takes it, already faulted in: in a
// steady state (a training loop, a backward pass run again) nothing reaches the system.
//   - Size classes: multiples of 64 bytes up to 512, then four per power of two (2^k times 1.25,
//     1.5, 1.75, 2), so a block wastes at most a fifth of its size. Blocks are 64-byte aligned.
//   - One mutex guards the lists and the counters; a block freed on one thread serves the next
//     allocation of its class on any thread.
//   - Cached blocks stay until mg::cpu::empty_cache() (<metagrad/cpu.hpp>) returns them, or an
//     allocation the system refuses empties the cache and tries once more.
//   - Statistics count blocks at their class size: allocated (held by storages), its peak since
//     the start or the last reset, and reserved (allocated plus cached), as torch's CUDA allocator
//     reports them.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

#include <metagrad/core/config.hpp>
#include <metagrad/error.hpp>

namespace mg::detail {

inline constexpr std::size_t host_alignment = 64;

struct host_cache_stats {
  std::size_t allocated = 0;
  std::size_t max_allocated = 0;
  std::size_t reserved = 0;
};

// The size class of a block of n > 0 bytes, and the bytes a block of class c holds.
constexpr std::size_t host_class_of(std::size_t n) {
  if (n <= 512) return (n + 63) / 64 - 1;
  const int k = std::bit_width(n - 1) - 1;  // 2^k < n <= 2^(k+1)
  const std::size_t base = std::size_t{1} << k, step = base >> 2;
  const std::size_t j = (n - base + step - 1) / step;  // 1..4
  return 8 + static_cast<std::size_t>(k - 9) * 4 + (j - 1);
}
constexpr std::size_t host_class_size(std::size_t c) {
  if (c < 8) return (c + 1) * 64;
  const std::size_t k = 9 + (c - 8) / 4, j = (c - 8) % 4 + 1;
  return (std::size_t{1} << k) + j * (std::size_t{1} << (k - 2));
}
inline constexpr std::size_t host_classes = 8 + (64 - 9) * 4;

MG_API void* host_allocate(std::size_t nbytes);
MG_API void host_release(void* p, std::size_t nbytes);
MG_API host_cache_stats host_statistics();
MG_API void host_empty_cache();
MG_API void host_reset_peak();

#if MG_EMIT_API
// The definitions: compiled into the library, or inline in header-only mode.
class host_cache {
 public:
  void* allocate(std::size_t nbytes) {
    const std::size_t c = host_class_of(nbytes), size = host_class_size(c);
    {
      const std::lock_guard lock(mutex_);
      auto& list = free_[c];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        cached_ -= size;
        take(size);
        return p;
      }
    }
    void* p = system_allocate(size);
    if (!p) {
      empty();
      p = system_allocate(size);
    }
    if (!p)
      fail("allocate: the system refused ", nbytes,
           " bytes of host memory; free tensors you no longer need (drop their handles) or use "
           "smaller batches");
    const std::lock_guard lock(mutex_);
    take(size);
    return p;
  }

  void release(void* p, std::size_t nbytes) {
    const std::size_t c = host_class_of(nbytes), size = host_class_size(c);
    const std::lock_guard lock(mutex_);
    free_[c].push_back(p);
    allocated_ -= size;
    cached_ += size;
  }

  void empty() {
    std::array<std::vector<void*>, host_classes> blocks;
    {
      const std::lock_guard lock(mutex_);
      blocks.swap(free_);
      cached_ = 0;
    }
    for (auto& list : blocks)
      for (void* p : list) ::operator delete (p, std::align_val_t{host_alignment});
  }

  host_cache_stats statistics() {
    const std::lock_guard lock(mutex_);
    return {allocated_, peak_, allocated_ + cached_};
  }

  void reset_peak() {
    const std::lock_guard lock(mutex_);
    peak_ = allocated_;
  }

 private:
  static void* system_allocate(std::size_t size) {
    return ::operator new (size, std::align_val_t{host_alignment}, std::nothrow);
  }
  void take(std::size_t size) {
    allocated_ += size;
    if (allocated_ > peak_) peak_ = allocated_;
  }

  std::mutex mutex_;
  std::array<std::vector<void*>, host_classes> free_;
  std::size_t allocated_ = 0, peak_ = 0, cached_ = 0;
};

// Never destroyed: a tensor with static storage duration may release its block after every
// static object of the program is gone.
inline host_cache& the_host_cache() {
  static host_cache* cache = new host_cache;
  return *cache;
}

MG_API void* host_allocate(std::size_t nbytes) { return the_host_cache().allocate(nbytes); }
MG_API void host_release(void* p, std::size_t nbytes) { the_host_cache().release(p, nbytes); }
MG_API host_cache_stats host_statistics() { return the_host_cache().statistics(); }
MG_API void host_empty_cache() { the_host_cache().empty(); }
MG_API void host_reset_peak() { the_host_cache().reset_peak(); }
#endif

}  // namespace mg::detail

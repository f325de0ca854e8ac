// The arrays the static engine materialises on xtensor (slot values, region outputs, gradients on
// the general path, results of mg:: ops applied to arrays): xt::xarray with a pooled allocator.
//
// Note [Pooled arrays]: one value+gradient of `sum(tanh(W x))` on the general path allocated 40
// arrays; xt::xarray's aligned allocator goes through posix_memalign, about 600 instructions per
// allocation and free in glibc, 50,000 of the 105,000 instructions per call. The pool keeps freed
// blocks per thread, in size classes of powers of two from 64 bytes, and hands them out again: an
// allocation in steady state is a pop from a list. Beyond 64 MiB cached per thread a freed block
// goes back to the heap. A block freed on another thread joins that thread's lists. Blocks above
// 8 MiB come from the tensors' caching allocator (Note [Host caching allocator] in
// backend/host_cache.hpp; mg::cpu::empty_cache() returns them): from the heap, each was an mmap
// faulted in page by page on every call, 1.1 million page faults in three evaluations of the
// Gaussian mixture objective with 100 components in 64 dimensions (half its time). Under
// AddressSanitizer the pool passes every request to the heap at its exact size, so that
// overflows and uses after free are still caught.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <new>

#include <xtensor/xarray.hpp>

#include <metagrad/backend/host_cache.hpp>
#include <metagrad/core/lent_results.hpp>
#include <metagrad/xt/extents.hpp>

#if defined(__SANITIZE_ADDRESS__)
#define MG_POOL_PASS_THROUGH 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MG_POOL_PASS_THROUGH 1
#endif
#endif

namespace mg::detail {

class block_pool {
 public:
  static constexpr std::size_t alignment = 64;  // a cache line; enough for any SIMD pack
  static_assert(host_alignment >= alignment);
  static constexpr std::size_t min_shift = 6, classes = 18;  // 64 B .. 8 MiB
  static constexpr std::size_t max_cached_bytes = std::size_t{64} << 20;

  // The common cases short enough to be inlined (a pop or a push on this thread's list); the rest
  // out of line.
  static void* allocate(std::size_t bytes) {
    // Note [Gradients written into the results] in core/lent_results.hpp
    if (void* p = take_lent(bytes)) return p;
#if !defined(MG_POOL_PASS_THROUGH)
    const std::size_t c = size_class(bytes);
    if (c < classes) {
      lists& l = local();
      if (void* p = l.head[c]) {
        l.head[c] = static_cast<free_block*>(p)->next;
        l.bytes -= class_bytes(c);
        return p;
      }
    }
#endif
    return allocate_new(bytes);
  }

  static void deallocate(void* p, std::size_t bytes) noexcept {
    if (is_lent(p)) return;  // a result's storage
#if !defined(MG_POOL_PASS_THROUGH)
    const std::size_t c = size_class(bytes);
    if (c < classes) {
      lists& l = local();
      if (l.live && l.bytes + class_bytes(c) <= max_cached_bytes) {
        auto* b = static_cast<free_block*>(p);
        b->next = l.head[c];
        l.head[c] = b;
        l.bytes += class_bytes(c);
        return;
      }
    }
#endif
    release(p, bytes);
  }

 private:
  struct free_block {
    free_block* next;
  };
  [[gnu::noinline]] static void* allocate_new(std::size_t bytes) {
#if defined(MG_POOL_PASS_THROUGH)  // the exact size, so that an overflow is caught
    return ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{alignment});
#else
    const std::size_t c = size_class(bytes);
    if (c < classes) return ::operator new (class_bytes(c), std::align_val_t{alignment});
    return host_allocate(bytes);
#endif
  }
  [[gnu::noinline]] static void release(void* p, [[maybe_unused]] std::size_t bytes) noexcept {
#if !defined(MG_POOL_PASS_THROUGH)
    if (size_class(bytes) >= classes) {
      host_release(p, bytes);
      return;
    }
#endif
    ::operator delete (p, std::align_val_t{alignment});
  }
  // Trivially destructible, so that it stays usable after the thread's destructors ran (an array
  // with static storage duration is freed after them): `live` then says to free directly.
  struct lists {
    std::array<free_block*, classes> head;
    std::size_t bytes;
    bool live;
  };
  // Frees the cached blocks when the thread ends.
  struct reaper {
    lists* l;
    ~reaper() {
      l->live = false;
      for (auto*& h : l->head)
        while (h) {
          free_block* next = h->next;
          ::operator delete (h, std::align_val_t{alignment});
          h = next;
        }
      l->bytes = 0;
    }
  };

  static lists& local() {
    thread_local lists l{{}, 0, true};
    thread_local reaper r{&l};
    (void)r;
    return l;
  }
  static constexpr std::size_t class_bytes(std::size_t c) {
    return std::size_t{1} << (c + min_shift);
  }
  // the smallest class holding `bytes`; classes or more: not pooled
  static constexpr std::size_t size_class(std::size_t bytes) {
    const std::size_t w = bytes <= class_bytes(0) ? min_shift : std::bit_width(bytes - 1);
    return std::min<std::size_t>(w - min_shift, classes);
  }
};

/// A standard allocator over block_pool. Stateless: any two compare equal.
template <class T>
struct pool_allocator {
  using value_type = T;
  pool_allocator() noexcept = default;
  template <class U>
  pool_allocator(const pool_allocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(block_pool::allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { block_pool::deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const pool_allocator<U>&) const noexcept {
    return true;
  }
};

/// The static engine's working array: See Note [Pooled arrays] and Note [Cheap extents].
template <class T>
using work_array = xt::xarray_container<xt::uvector<T, pool_allocator<T>>,
                                        xt::layout_type::row_major, extents<std::size_t, 4>>;

}  // namespace mg::detail

#undef MG_POOL_PASS_THROUGH

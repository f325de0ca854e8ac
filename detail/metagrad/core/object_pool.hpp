// The runtime engine's small objects (tensor_impl, storage, graph nodes, saved views): allocated
// through per-thread free lists.
//
// Note [Object pool]: an op of the runtime engine makes a few small objects (its result's
// tensor_impl and storage, its node, the views it saves), and a backward pass frees them all.
// Through malloc, the allocations and frees of a recorded graph of small tensors were a fifth of
// its instructions (an LSTM over 14-element rows; docs/performance.md), the frees of a whole graph
// at once defeating glibc's per-thread cache of 7 blocks per size. Here:
//   - make_pooled<T>(args...) is std::allocate_shared with pooled_allocator: the object and its
//     reference counts are one block, of a size class: 24, 40, 56, ... 520 bytes, what glibc's
//     chunks of 32, 48, 64, ... bytes hold, so that a pooled object takes the memory malloc
//     would give it (a graph's peak is unchanged); larger blocks go to operator new;
//   - a freed block goes to the free list of its class on the freeing thread (a block allocated on
//     one thread and freed on another serves the second), up to `pool_cap` blocks per class, so
//     that the next graph of the same size takes its objects from the lists;
//   - mg::cpu::empty_cache() returns the calling thread's lists to the system, and a thread's
//     lists are returned when it ends;
//   - under AddressSanitizer the lists are off, so that it sees every object's lifetime.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

#include <metagrad/core/config.hpp>

namespace mg::detail {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool pool_enabled = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool pool_enabled = false;
#else
inline constexpr bool pool_enabled = true;
#endif
#else
inline constexpr bool pool_enabled = true;
#endif

inline constexpr std::size_t pool_classes = 32;  // blocks of 24, 40, ..., 520 bytes
inline constexpr std::size_t pool_cap = std::size_t{1} << 16;

struct pool_lists {
  struct block {
    block* next;
  };
  block* head[pool_classes] = {};
  std::size_t count[pool_classes] = {};

  pool_lists() = default;
  pool_lists(const pool_lists&) = delete;
  pool_lists& operator=(const pool_lists&) = delete;
  void empty() noexcept {
    for (std::size_t c = 0; c < pool_classes; ++c) {
      while (block* b = head[c]) {
        head[c] = b->next;
        ::operator delete(b);
      }
      count[c] = 0;
    }
  }
  ~pool_lists();
};

// False once the thread's lists are destroyed: objects freed later (by other thread-local
// destructors) go straight to operator delete. Trivially destructible, so always readable.
inline thread_local bool pool_lists_gone = false;

inline pool_lists::~pool_lists() {
  empty();
  pool_lists_gone = true;
}

inline pool_lists* thread_pool_lists() noexcept {
  if (pool_lists_gone) return nullptr;
  thread_local pool_lists lists;
  return &lists;
}

// The bytes a block of class c holds, and the class of an object of n bytes.
constexpr std::size_t pool_class_size(std::size_t c) { return 16 * c + 24; }
constexpr std::size_t pool_class_of(std::size_t n) { return n <= 24 ? 0 : (n - 24 + 15) / 16; }

MG_INLINE void* pool_allocate(std::size_t n) {
  const std::size_t c = pool_class_of(n);
  if (pool_enabled && c < pool_classes) {
    if (pool_lists* l = thread_pool_lists(); l && l->head[c]) {
      pool_lists::block* b = l->head[c];
      l->head[c] = b->next;
      --l->count[c];
      return b;
    }
    return ::operator new(pool_class_size(c));
  }
  return ::operator new(n);
}

MG_INLINE void pool_release(void* p, std::size_t n) noexcept {
  const std::size_t c = pool_class_of(n);
  if (pool_enabled && c < pool_classes) {
    if (pool_lists* l = thread_pool_lists(); l && l->count[c] < pool_cap) {
      auto* b = static_cast<pool_lists::block*>(p);
      b->next = l->head[c];
      l->head[c] = b;
      ++l->count[c];
      return;
    }
  }
  ::operator delete(p);
}

// Returns the calling thread's cached blocks to the system.
inline void pool_empty() noexcept {
  if (pool_lists* l = thread_pool_lists()) l->empty();
}

template <class T>
struct pooled_allocator {
  using value_type = T;
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                "metagrad: a pooled object must not need more than the default alignment");
  pooled_allocator() = default;
  template <class U>
  constexpr pooled_allocator(const pooled_allocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { pool_release(p, n * sizeof(T)); }
  template <class U>
  friend constexpr bool operator==(const pooled_allocator&, const pooled_allocator<U>&) noexcept {
    return true;
  }
};

// std::make_shared<T>(args...), its block from the pool.
template <class T, class... A>
std::shared_ptr<T> make_pooled(A&&... a) {
  return std::allocate_shared<T>(pooled_allocator<T>{}, std::forward<A>(a)...);
}

}  // namespace mg::detail

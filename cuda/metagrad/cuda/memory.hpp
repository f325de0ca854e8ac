// The memory of device cuda: the caching allocator behind tensors' storages and Thrust's
// temporaries (Note [Caching allocator] in <metagrad/backend/block_cache.hpp>), and the execution
// policy every kernel of the Thrust backend runs under. The statistics are read through the
// backend's table by <metagrad/device.hpp> (mg::cuda::memory_allocated...), from any file.
//
// A block is cached under the stream that was current when it was allocated, and serves only
// that stream again: so a tensor made on one stream and read by work on another must outlive that
// work (synchronise the other stream, or an event recorded on it, before dropping the tensor).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <unordered_map>

#include <thrust/device_free.h>
#include <thrust/device_malloc.h>
#include <thrust/execution_policy.h>

#include <metagrad/backend/block_cache.hpp>
#include <metagrad/cuda/stream.hpp>
#include <metagrad/error.hpp>

#if MG_CUDA_DEVICE
#include <thrust/system/cuda/execution_policy.h>
#endif

namespace mg::cuda::detail {

struct device_system {
  static void* allocate(std::size_t size) {
#if MG_CUDA_DEVICE
    void* p = nullptr;
    if (cudaMalloc(&p, size) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return p;
#else
    try {
      return thrust::device_malloc<unsigned char>(size).get();
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
#endif
  }
  static void free(void* p, std::size_t) {
#if MG_CUDA_DEVICE
    (void)cudaFree(p);
#else
    thrust::device_free(thrust::device_pointer_cast(static_cast<unsigned char*>(p)));
#endif
  }
};

// One device's cache, and the stream each live block was allocated on. Never destroyed: a tensor
// with static storage duration may release its block after every static object is gone.
struct device_memory {
  mg::detail::block_cache<device_system> cache;
  std::mutex mutex;
  std::unordered_map<void*, std::uintptr_t> live;

  void* allocate(std::size_t nbytes, const char* what) {
    if (nbytes == 0) nbytes = 1;  // a temporary of no bytes: still a distinct block
    const std::uintptr_t key = current_stream_key();
    void* p = cache.allocate(nbytes, key);
    if (!p)
      mg::detail::fail(what, ": the device has no room for ", nbytes,
                       " bytes; free tensors you no longer need (drop their handles), call "
                       "mg::cuda::empty_cache(), or use smaller batches");
    const std::lock_guard lock(mutex);
    live.emplace(p, key);
    return p;
  }
  void release(void* p, std::size_t nbytes) {
    if (nbytes == 0) nbytes = 1;  // as allocated
    std::uintptr_t key = 0;
    {
      const std::lock_guard lock(mutex);
      const auto it = live.find(p);
      if (it != live.end()) {
        key = it->second;
        live.erase(it);
      }
    }
    cache.release(p, nbytes, key);
  }
};

// The memory of device d (Note [Devices] in stream.hpp), made on first use.
inline device_memory& memory_of(int d) {
  static std::array<std::atomic<device_memory*>, 256> all{};
  static std::mutex made;
  auto& slot = all[static_cast<std::size_t>(d) & 255];
  if (device_memory* m = slot.load(std::memory_order_acquire)) return *m;
  const std::lock_guard lock(made);
  if (!slot.load(std::memory_order_relaxed))
    slot.store(new device_memory, std::memory_order_release);
  return *slot.load(std::memory_order_relaxed);
}
/// The memory of the current device.
inline device_memory& memory() { return memory_of(current_device()); }

inline void* allocate(std::size_t nbytes) { return memory().allocate(nbytes, "allocate"); }
inline void release(void* p, std::size_t nbytes, int device) {
  memory_of(device).release(p, nbytes);
}

/// Thrust's temporary storage (the scratch of reduce_by_key, sort...) from the cache.
struct temporary_allocator {
  using value_type = char;
  char* allocate(std::ptrdiff_t n) {
    return static_cast<char*>(memory().allocate(static_cast<std::size_t>(n), "a temporary"));
  }
  void deallocate(char* p, std::size_t n) { memory().release(p, n); }  // on the same device
};

/// A device buffer of n elements of T from the cache, for the duration of one kernel's work.
template <class T>
class scratch {
 public:
  explicit scratch(std::size_t n)
      : n_(n), p_(n ? static_cast<T*>(memory().allocate(n * sizeof(T), "a temporary")) : nullptr) {}
  ~scratch() {
    if (p_) memory().release(p_, n_ * sizeof(T));
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  T* data() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  std::size_t n_;
  T* p_;
};

/// The policy of every Thrust call of the backend: on the current stream, without a host
/// synchronisation (Note [Asynchronous device work]), temporaries from the cache.
inline auto policy() {
#if MG_CUDA_DEVICE
  return thrust::cuda::par_nosync(temporary_allocator{}).on(current_stream().native_handle());
#else
  return thrust::device(temporary_allocator{});
#endif
}

inline mg::detail::cache_stats memory_stats(int device) {
  return memory_of(device).cache.statistics();
}
// Frees device memory: with the device current, as cudaFree wants it.
inline void empty_cache(int device) {
  const int was = current_device();
  select_device(device, "empty_cache");
  memory_of(device).cache.empty();
  select_device(was, "empty_cache");
}
inline void reset_peak(int device) { memory_of(device).cache.reset_peak(); }

}  // namespace mg::cuda::detail

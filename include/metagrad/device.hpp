// The devices of type cuda and their memory, from any file of the program, host-compiled ones
// included: read through the registered backend (<metagrad/cuda.hpp> in one translation unit, or
// the prebuilt metagrad::device), so no Thrust header is needed here.
//
// - Devices (Note [Devices] in <metagrad/cuda/stream.hpp>): `device_count()`, `current_device()`
//   and `device_guard`, which makes a device current for raw device work (the static transforms,
//   a user's kernels) while it lives. Tensors always name their own device
//   (`mg::device::cuda(1)`); the guard does not move them.
// - Memory: the statistics and the cache of the caching allocator of one device (Note [Caching
//   allocator] in backend/block_cache.hpp), the current one unless a device is named. Named as
//   those of mg::cpu (<metagrad/cpu.hpp>) and of torch's CUDA allocator; a block is counted at
//   its size class. Without a registered backend every figure is 0.
//
// ```cpp
// mg::cuda::reset_peak_memory_stats();
// train_one_epoch();
// std::cout << mg::cuda::max_memory_allocated() << " bytes of device memory at the peak\n";
// mg::cuda::empty_cache();  // give the cached blocks back to the device
// ```
#pragma once

#include <cstddef>

#include <metagrad/backend/block_cache.hpp>
#include <metagrad/backend/registry.hpp>
#include <metagrad/error.hpp>
#include <metagrad/types.hpp>

namespace mg::cuda {

namespace detail {
inline const mg::detail::backend* registered() {
  return mg::detail::registered_backend(device_type::cuda);
}
// The device `d` names (-1: the current one), checked; -1 without a backend.
inline int resolve(int d, const char* what) {
  const auto* b = registered();
  if (!b || !b->current_device) return -1;
  if (d < 0) return b->current_device();
  if (d >= b->device_count())
    mg::detail::fail(what, ": device cuda:", d, " does not exist (this program sees ",
                     b->device_count(), b->device_count() == 1 ? " device" : " devices", ")");
  return d;
}
inline mg::detail::cache_stats registered_stats(int d, const char* what) {
  const int i = resolve(d, what);
  return i >= 0 ? registered()->memory_stats(i) : mg::detail::cache_stats{};
}
}  // namespace detail

/// The number of devices of type cuda: the GPUs the CUDA runtime sees (two simulated ones where
/// the Thrust backend runs on the CPU); 0 without a registered backend.
inline int device_count() {
  const auto* b = detail::registered();
  return b && b->device_count ? b->device_count() : 0;
}
/// This thread's current device; 0 without a registered backend.
inline int current_device() {
  const int d = detail::resolve(-1, "current_device");
  return d < 0 ? 0 : d;
}

/// Makes a device current on this thread while it lives, and the previous one current again
/// after; an mg::error when the device does not exist.
/// ```cpp
/// { mg::cuda::device_guard on_1(1); loss = mg::cuda::value_and_grad(f)(x1, g1); }
/// ```
class device_guard {
 public:
  explicit device_guard(int index) : previous_(current_device()) { select(index); }
  explicit device_guard(device d) : device_guard(d.index()) {
    if (d.type() != device_type::cuda)
      mg::detail::fail("device_guard: ", mg::detail::device_name(d), " is not a cuda device");
  }
  ~device_guard() {
    if (const auto* b = detail::registered(); b && b->select_device) {
      try {
        b->select_device(previous_, "device_guard");
      } catch (...) {  // it existed when the guard was made
      }
    }
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  static void select(int index) {
    const auto* b = detail::registered();
    if (!b || !b->select_device)
      mg::detail::fail(
          "device_guard: device cuda needs the Thrust backend, and no translation "
          "unit of this program includes <metagrad/cuda.hpp> (or links "
          "metagrad::device)");
    b->select_device(index, "device_guard");
  }
  int previous_;
};

/// Bytes of memory of device `d` (default: the current one) that tensors' storages and
/// temporaries hold now.
inline std::size_t memory_allocated(int d = -1) {
  return detail::registered_stats(d, "memory_allocated").allocated;
}
/// The peak of memory_allocated(d) since the program started or reset_peak_memory_stats(d).
inline std::size_t max_memory_allocated(int d = -1) {
  return detail::registered_stats(d, "max_memory_allocated").max_allocated;
}
/// Bytes the allocator of device `d` holds: memory_allocated(d) plus the blocks cached for reuse.
inline std::size_t memory_reserved(int d = -1) {
  return detail::registered_stats(d, "memory_reserved").reserved;
}
/// Starts max_memory_allocated(d) again from memory_allocated(d).
inline void reset_peak_memory_stats(int d = -1) {
  if (const int i = detail::resolve(d, "reset_peak_memory_stats"); i >= 0)
    detail::registered()->reset_peak(i);
}
/// Returns every cached block of device `d` to it; tensors alive keep theirs.
inline void empty_cache(int d = -1) {
  if (const int i = detail::resolve(d, "empty_cache"); i >= 0) detail::registered()->empty_cache(i);
}

}  // namespace mg::cuda

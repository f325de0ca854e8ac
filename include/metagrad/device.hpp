// The device memory behind tensors of device cuda, from any file of the program: the statistics
// and the cache of the Thrust backend's caching allocator (Note [Caching allocator] in
// backend/block_cache.hpp), read through the registered backend, so a host-compiled file needs
// no Thrust header. Named as those of mg::cpu (<metagrad/cpu.hpp>) and of torch's CUDA allocator;
// a block is counted at its size class. Without a registered backend every figure is 0.
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
#include <metagrad/types.hpp>

namespace mg::cuda {

namespace detail {
inline const mg::detail::backend* registered() {
  return mg::detail::backends()[static_cast<std::size_t>(mg::device::cuda)];
}
inline mg::detail::cache_stats registered_stats() {
  const auto* b = registered();
  return b && b->memory_stats ? b->memory_stats() : mg::detail::cache_stats{};
}
}  // namespace detail

/// Bytes of device memory that tensors' storages and temporaries hold now.
inline std::size_t memory_allocated() { return detail::registered_stats().allocated; }
/// The peak of memory_allocated() since the program started or reset_peak_memory_stats().
inline std::size_t max_memory_allocated() { return detail::registered_stats().max_allocated; }
/// Bytes the allocator holds: memory_allocated() plus the blocks cached for reuse.
inline std::size_t memory_reserved() { return detail::registered_stats().reserved; }
/// Starts max_memory_allocated() again from memory_allocated().
inline void reset_peak_memory_stats() {
  if (const auto* b = detail::registered(); b && b->reset_peak) b->reset_peak();
}
/// Returns every cached block to the device; tensors alive keep theirs.
inline void empty_cache() {
  if (const auto* b = detail::registered(); b && b->empty_cache) b->empty_cache();
}

}  // namespace mg::cuda

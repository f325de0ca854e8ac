// The host memory behind tensors of device cpu: the statistics and the cache of the CPU backend's
// caching allocator (Note [Host caching allocator] in backend/host_cache.hpp), named as torch
// names those of its CUDA allocator. A block is counted at its size class (a multiple of 64 bytes
// up to 512, then within a fifth above the bytes asked for); a tensor of at most 16 bytes lives
// inside its storage object and is not counted.
//
// ```cpp
// mg::cpu::reset_peak_memory_stats();
// train_one_epoch();
// std::cout << mg::cpu::max_memory_allocated() << " bytes at the peak\n";
// mg::cpu::empty_cache();  // give the cached blocks back to the system
// ```
#pragma once

#include <cstddef>

#include <metagrad/backend/host_cache.hpp>

namespace mg::cpu {

/// Bytes of host memory that tensors' storages hold now.
inline std::size_t memory_allocated() { return detail::host_statistics().allocated; }
/// The peak of memory_allocated() since the program started or reset_peak_memory_stats().
inline std::size_t max_memory_allocated() { return detail::host_statistics().max_allocated; }
/// Bytes the allocator holds: memory_allocated() plus the blocks cached for reuse.
inline std::size_t memory_reserved() { return detail::host_statistics().reserved; }
/// Starts max_memory_allocated() again from memory_allocated().
inline void reset_peak_memory_stats() { detail::host_reset_peak(); }
/// Returns every cached block to the system; tensors alive keep theirs.
inline void empty_cache() { detail::host_empty_cache(); }

}  // namespace mg::cpu

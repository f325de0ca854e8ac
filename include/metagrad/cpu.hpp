// The CPU's threads (mg::get_num_threads, mg::set_num_threads), and the host memory behind
// tensors of device cpu: the statistics and the cache of the CPU backend's
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
#include <metagrad/backend/parallel.hpp>
#include <metagrad/core/object_pool.hpp>

namespace mg {

/// The number of threads a CPU kernel over many elements uses (Note [Intra-op parallelism] in
/// backend/parallel.hpp): by default the hardware's, or OMP_NUM_THREADS when set, as torch's.
/// Results do not depend on it: reductions are bit-identical on any number of threads.
inline int get_num_threads() { return detail::intra_op_threads(); }
/// Sets the number of threads CPU kernels (and OpenBLAS's matrix products) use; 1 runs every
/// kernel on the calling thread. n < 1 is an mg::error.
inline void set_num_threads(int n) { detail::set_intra_op_threads(n); }

}  // namespace mg

namespace mg::cpu {

/// Bytes of host memory that tensors' storages hold now.
inline std::size_t memory_allocated() { return detail::host_statistics().allocated; }
/// The peak of memory_allocated() since the program started or reset_peak_memory_stats().
inline std::size_t max_memory_allocated() { return detail::host_statistics().max_allocated; }
/// Bytes the allocator holds: memory_allocated() plus the blocks cached for reuse.
inline std::size_t memory_reserved() { return detail::host_statistics().reserved; }
/// Starts max_memory_allocated() again from memory_allocated().
inline void reset_peak_memory_stats() { detail::host_reset_peak(); }
/// Returns every cached block to the system (tensors alive keep theirs), and the calling thread's
/// cached tensor, storage and graph-node objects (Note [Object pool]).
inline void empty_cache() {
  detail::host_empty_cache();
  detail::pool_empty();
}

}  // namespace mg::cpu

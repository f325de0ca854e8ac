// The CPU backend's caching allocator: the memory behind every tensor of device cpu that does not
// fit inside its storage object.
//
// Note [Host caching allocator]: a result of mid or large size was a fresh allocation, and above
// glibc's mmap threshold every one was an mmap, page faults on first touch and an munmap when
// freed: an in-place op on 1e6 floats cost 7x torch's. Now blocks are cached (Note [Caching
// allocator] in block_cache.hpp) under one key, 64-byte aligned: blocks come back already
// faulted in. mg::cpu::empty_cache() (<metagrad/cpu.hpp>) returns the cached ones.
#pragma once

#include <cstddef>
#include <new>

#include <metagrad/backend/block_cache.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/error.hpp>

namespace mg::detail {

inline constexpr std::size_t host_alignment = 64;

using host_cache_stats = cache_stats;

MG_API void* host_allocate(std::size_t nbytes);
MG_API void host_release(void* p, std::size_t nbytes);
MG_API host_cache_stats host_statistics();
MG_API void host_empty_cache();
MG_API void host_reset_peak();

#if MG_EMIT_API
// The definitions: compiled into the library, or inline in header-only mode.
struct host_system {
  static void* allocate(std::size_t size) {
    return ::operator new (size, std::align_val_t{host_alignment}, std::nothrow);
  }
  static void free(void* p, std::size_t) {
    ::operator delete (p, std::align_val_t{host_alignment});
  }
};
using host_cache = block_cache<host_system>;

// Never destroyed: a tensor with static storage duration may release its block after every
// static object of the program is gone.
inline host_cache& the_host_cache() {
  static host_cache* cache = new host_cache;
  return *cache;
}

MG_API void* host_allocate(std::size_t nbytes) {
  if (void* p = the_host_cache().allocate(nbytes)) return p;
  fail("allocate: the system refused ", nbytes,
       " bytes of host memory; free tensors you no longer need (drop their handles) or use "
       "smaller batches");
}
MG_API void host_release(void* p, std::size_t nbytes) { the_host_cache().release(p, nbytes); }
MG_API host_cache_stats host_statistics() { return the_host_cache().statistics(); }
MG_API void host_empty_cache() { the_host_cache().empty(); }
MG_API void host_reset_peak() { the_host_cache().reset_peak(); }
#endif

}  // namespace mg::detail

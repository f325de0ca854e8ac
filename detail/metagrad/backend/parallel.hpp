// Intra-op parallelism of the CPU backend: a pool of worker threads that a kernel hands chunks of
// its index space to.
//
// Note [Intra-op parallelism]: a kernel over at least 2 * parallel_grain elements splits its
// index space along the outermost dimension into chunks of at least parallel_grain elements and
// runs them on mg::get_num_threads() threads: the caller and the pool's workers.
//   - One job at a time: a kernel called while another thread's job runs, or from inside a chunk,
//     runs on its own thread, whole (never waits for the pool).
//   - Determinism: elementwise kernels write disjoint elements, so their results do not depend on
//     the split. Reductions split along kept dimensions only, so each output element is still
//     accumulated by one thread in the order one thread would; a reduction to one element sums
//     fixed blocks of parallel_grain elements and adds the blocks' sums in order, on any number
//     of threads (Note [Accurate sums] in cpu.hpp). Results are bit-identical across thread
//     counts.
//   - The default thread count is the hardware's (std::thread::hardware_concurrency()), or
//     OMP_NUM_THREADS when it is set, as torch does; mg::set_num_threads changes it, for OpenBLAS
//     too.
//   - An exception thrown by a chunk is rethrown on the caller once every chunk has finished.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <metagrad/core/config.hpp>
#include <metagrad/error.hpp>

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace mg::detail {

/// The fewest elements a chunk of a parallel kernel holds (torch's grain size).
inline constexpr std::int64_t parallel_grain = 32768;

using chunk_fn = void (*)(const void* ctx, std::int64_t chunk);

MG_API int intra_op_threads();
MG_API void set_intra_op_threads(int n);
// Runs fn(ctx, c) for c in [0, chunks) on the pool and the calling thread.
MG_API void parallel_run(std::int64_t chunks, chunk_fn fn, const void* ctx);

/// f(c) for every chunk c in [0, chunks), in parallel where the pool is free.
template <class F>
void parallel_chunks(std::int64_t chunks, const F& f) {
  if (chunks == 1) {
    f(std::int64_t{0});
  } else if (chunks > 1) {
    parallel_run(
        chunks, [](const void* c, std::int64_t i) { (*static_cast<const F*>(c))(i); }, &f);
  }
}

#if MG_EMIT_API
// The definitions: compiled into the library, or inline in header-only mode.
class thread_pool {
 public:
  int threads() const { return threads_.load(std::memory_order_relaxed); }

  void set_threads(int n) {
    if (n < 1) fail("set_num_threads: ", n, " threads; give at least 1");
    const std::lock_guard busy(busy_);  // after a running job
    stop_workers();
    const std::lock_guard lock(mutex_);
    threads_ = n;
    if (openblas_set_num_threads) openblas_set_num_threads(n);
  }

  void run(std::int64_t chunks, chunk_fn fn, const void* ctx) {
    std::unique_lock busy(busy_, std::try_to_lock);
    if (!busy.owns_lock() || in_chunk_) {  // another job runs, or this is inside one
      for (std::int64_t c = 0; c < chunks; ++c) fn(ctx, c);
      return;
    }
    std::unique_lock lock(mutex_);
    start_workers();
    job_ = {fn, ctx, chunks};
    finished_.store(false, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    if (sleepers_ > 0) work_.notify_all();
    take_part(lock);
    if (!finished_.load(std::memory_order_relaxed)) {  // the workers' chunks: spin, then sleep
      lock.unlock();
      spin([&] { return finished_.load(std::memory_order_acquire); });
      lock.lock();
    }
    done_.wait(lock, [&] { return job_.done == job_.chunks && job_.active == 0; });
    const std::exception_ptr error = job_.error;
    job_ = {};
    lock.unlock();
    if (error) std::rethrow_exception(error);
  }

 private:
  struct job {
    chunk_fn fn = nullptr;
    const void* ctx = nullptr;
    std::int64_t chunks = 0, next = 0, done = 0;
    int active = 0;
    std::exception_ptr error{};
  };

  // Runs chunks of the current job until none is left; `lock` holds mutex_ except around a chunk.
  void take_part(std::unique_lock<std::mutex>& lock) {
    ++job_.active;
    while (job_.next < job_.chunks) {
      const std::int64_t c = job_.next++;
      const chunk_fn fn = job_.fn;
      const void* ctx = job_.ctx;
      lock.unlock();
      std::exception_ptr error;
      in_chunk_ = true;
      try {
        fn(ctx, c);
      } catch (...) {
        error = std::current_exception();
      }
      in_chunk_ = false;
      lock.lock();
      if (error && !job_.error) job_.error = error;
      ++job_.done;
    }
    if (--job_.active == 0 && job_.done == job_.chunks) {
      finished_.store(true, std::memory_order_release);
      done_.notify_all();
    }
  }

  // Note [Intra-op parallelism]: a sleeping thread takes tens of microseconds to wake, as long as
  // a kernel over 1e5 elements; so a worker spins about 50 microseconds for the next job, and the
  // caller for the last chunk, before either sleeps on its condition variable.
  template <class Ready>
  static void spin(const Ready& ready) {
    for (int i = 0; i < 2000 && !ready(); ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#else
      std::this_thread::yield();
#endif
    }
  }

  void worker() {
    std::uint64_t seen = generation_.load(std::memory_order_acquire);
    for (;;) {
      spin([&] { return generation_.load(std::memory_order_acquire) != seen; });
      std::unique_lock lock(mutex_);
      ++sleepers_;
      work_.wait(lock, [&] { return stop_ || (generation_.load() != seen && job_.fn); });
      --sleepers_;
      if (stop_) return;
      seen = generation_.load();
      take_part(lock);
    }
  }

  // with mutex_ held
  void start_workers() {
    while (static_cast<int>(workers_.size()) < threads() - 1)
      workers_.emplace_back([this] { worker(); });
  }
  void stop_workers() {
    std::vector<std::thread> workers;
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);  // ends the workers' spins
      workers.swap(workers_);
    }
    work_.notify_all();
    for (auto& w : workers) w.join();
    const std::lock_guard lock(mutex_);
    stop_ = false;
  }

  static int default_threads() {
    if (const char* env = std::getenv("OMP_NUM_THREADS")) {
      const int n = std::atoi(env);
      if (n > 0) return n;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }

  std::mutex busy_;   // held by the thread whose job runs
  std::mutex mutex_;  // guards everything below
  std::condition_variable work_, done_;
  std::vector<std::thread> workers_;
  job job_{};
  std::atomic<std::uint64_t> generation_{0};  // written under mutex_, read while spinning
  std::atomic<bool> finished_{false};         // the current job's last chunk is done
  int sleepers_ = 0;                          // workers waiting on work_
  std::atomic<int> threads_{default_threads()};
  bool stop_ = false;
  static inline thread_local bool in_chunk_ = false;
};

// Never destroyed, as the host cache: a kernel may run while static objects are destroyed. Its
// workers wait on a condition variable until the process ends.
inline thread_pool& the_thread_pool() {
  static thread_pool* pool = new thread_pool;
  return *pool;
}

MG_API int intra_op_threads() { return the_thread_pool().threads(); }
MG_API void set_intra_op_threads(int n) { the_thread_pool().set_threads(n); }
MG_API void parallel_run(std::int64_t chunks, chunk_fn fn, const void* ctx) {
  the_thread_pool().run(chunks, fn, ctx);
}
#endif

}  // namespace mg::detail

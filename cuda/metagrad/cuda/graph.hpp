// CUDA graphs: a step of device work captured once and replayed with one launch.
//
// Note [CUDA graphs]: on a GPU, graph::capture(f) runs f's host code on a stream of its own while
// CUDA records the kernels and copies it enqueues, without running them; replay() launches the
// recording on the current stream, so the host code (the engine building the graph, the
// allocator, the launches) is paid once. What that asks of the step, as in torch:
//   - Static inputs and outputs: a replay reads and writes the memory the capture saw. Put new
//     data into the tensors the step reads in place (x.copy_(batch)), and read its results from
//     tensors it writes in place, or from tensors made during the capture and kept alive.
//   - Nothing crosses to the host inside the step: no item(), no .to(mg::device::cpu), no
//     value_and_grad of the static transforms (CUDA refuses the copy; the capture fails with an
//     mg::error and the graph stays empty).
//   - Warm up first: run the step once before capturing, so that cuBLAS and the allocator have
//     their memory.
//   - Memory: blocks allocated while capturing come from a pool of the graph's own (a key of the
//     caching allocator that no stream has), so nothing else can take them while the graph may
//     replay. They stay cached after the graph goes, until mg::cuda::empty_cache().
// On the CPP and OMP device systems there is nothing to record: capture runs f once, and replay
// runs it again (host code included). A step written to the rules above computes the same
// results on either.
//
// ```cpp
// step();                                // warm-up
// mg::cuda::graph g;
// g.capture([&] { step(); });
// for (auto& batch : data) {
//   x.copy_(batch);                      // the captured step reads x
//   g.replay();
// }
// ```
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#include <metagrad/cuda/stream.hpp>
#include <metagrad/error.hpp>

namespace mg::cuda {

namespace detail {
inline std::uintptr_t next_pool_key() {
  static std::atomic<std::uintptr_t> next{0};
  return (++next << 1) | 1;  // odd: never a stream's key
}

// Makes allocations of this thread come from `pool` while alive.
class pool_guard {
 public:
  explicit pool_guard(std::uintptr_t pool) : previous_(capture_pool_slot()) {
    capture_pool_slot() = pool;
  }
  ~pool_guard() { capture_pool_slot() = previous_; }
  pool_guard(const pool_guard&) = delete;
  pool_guard& operator=(const pool_guard&) = delete;

 private:
  std::uintptr_t previous_;
};
}  // namespace detail

/// A captured step of device work (Note [CUDA graphs]).
class graph {
 public:
  graph() = default;
  ~graph() { reset(); }
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;

  /// Records the device work of f() (Note [CUDA graphs]: on a GPU f's kernels do not run now).
  template <class F>
  void capture(F&& f) {
    if (captured())
      mg::detail::fail("graph::capture: this graph holds a capture already; make another graph");
    pool_ = detail::next_pool_key();
    stream_ = stream::create();
#if MG_CUDA_DEVICE
    synchronize();  // the step's inputs are ready before the recording starts
    const cudaStream_t s = stream_.native_handle();
    {
      stream_guard on_s(stream_);
      detail::pool_guard from_pool(pool_);
      detail::check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "graph::capture");
      cudaGraph_t g = nullptr;
      try {
        std::forward<F>(f)();
      } catch (...) {
        (void)cudaStreamEndCapture(s, &g);
        if (g) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
        throw;
      }
      const cudaError_t ended = cudaStreamEndCapture(s, &g);
      if (ended != cudaSuccess) {
        if (g) (void)cudaGraphDestroy(g);
        detail::check(ended,
                      "graph::capture (the step may not read a device value on the host: no "
                      "item() or .to(mg::device::cpu) inside it)");
      }
      const cudaError_t made = cudaGraphInstantiate(&exec_, g, 0);
      (void)cudaGraphDestroy(g);
      detail::check(made, "graph::capture");
    }
#else
    step_ = std::function<void()>(std::forward<F>(f));
    run();
#endif
  }

  /// Runs the captured work on the current stream.
  void replay() {
    if (!captured())
      mg::detail::fail("graph::replay: nothing was captured; call capture(step) first");
#if MG_CUDA_DEVICE
    detail::check(cudaGraphLaunch(exec_, current_stream().native_handle()), "graph::replay");
#else
    run();
#endif
  }

  bool captured() const {
#if MG_CUDA_DEVICE
    return exec_ != nullptr;
#else
    return static_cast<bool>(step_);
#endif
  }

  /// Drops the capture; the graph can capture again.
  void reset() {
#if MG_CUDA_DEVICE
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
#else
    step_ = nullptr;
#endif
  }

 private:
#if MG_CUDA_DEVICE
  cudaGraphExec_t exec_ = nullptr;
#else
  void run() {
    stream_guard on_s(stream_);
    detail::pool_guard from_pool(pool_);
    step_();
  }
  std::function<void()> step_;
#endif
  std::uintptr_t pool_ = 0;
  stream stream_;
};

}  // namespace mg::cuda

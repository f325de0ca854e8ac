// Streams and events of device cuda: where the Thrust backend enqueues its work.
//
// Note [Asynchronous device work]: a kernel of the Thrust backend is enqueued on the calling
// thread's current stream (the default stream, or the one a stream_guard names) with
// thrust::cuda::par_nosync, and the host goes on at once. The host waits only where a value
// crosses to it: item(), .to(mg::device::cpu), to_xtensor, a check that needs device data, or
// synchronize(). Work on one stream runs in the order it was enqueued, which is what makes the
// caching allocator's reuse safe (Note [Caching allocator]). On the CPP and OMP device systems
// (Thrust on the CPU, as the tests run it) every call completes before it returns; streams and
// events keep their meaning there, so a program runs unchanged on either.
//
// ```cpp
// mg::cuda::stream s = mg::cuda::stream::create();
// {
//   mg::cuda::stream_guard on_s(s);  // work of this thread goes to s
//   loss = step(batch);
// }
// s.synchronize();
// ```
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <thrust/detail/config.h>

#include <metagrad/error.hpp>
#include <metagrad/types.hpp>

#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
#include <cuda_runtime_api.h>
/// 1 where the Thrust backend runs on a GPU, 0 on the CPP and OMP device systems.
#define MG_CUDA_DEVICE 1
#else
#define MG_CUDA_DEVICE 0
#endif

namespace mg::cuda {

#if MG_CUDA_DEVICE
using native_stream = cudaStream_t;
using native_event = cudaEvent_t;
#else
using native_stream = std::uintptr_t;  // a name: the work itself is synchronous
using native_event = std::chrono::steady_clock::time_point;
#endif

namespace detail {

#if MG_CUDA_DEVICE
/// An mg::error naming the call and the CUDA runtime's message, unless e is cudaSuccess.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear a sticky-free error so that later calls may succeed
    mg::detail::fail(what, ": CUDA error ", static_cast<int>(e), " (", cudaGetErrorString(e), ")");
  }
}
#endif

// ---- Note [Devices]
// ------------------------------------------------------------------------------- Tensors name
// their device (mg::device::cuda(1)); the runtime selects it before each call of the backend
// (backend.hpp), so a program mixes devices without selecting any itself. Each device has its own
// caching allocator and its own current stream per thread. Raw device work (the static transforms,
// a user's kernels) runs on the current device: cudaSetDevice's, or the one mg::cuda::device_guard
// (<metagrad/device.hpp>) names. On the CPP and OMP device systems there are two simulated devices,
// so that the multi-device paths run in tests without a GPU; their memory is host memory.

/// The number of devices: the GPUs the CUDA runtime sees, or the simulated ones.
inline int device_count() {
#if MG_CUDA_DEVICE
  static const int n = [] {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {
      (void)cudaGetLastError();
      c = 0;
    }
    return c;
  }();
  return n;
#else
  return 2;
#endif
}

#if !MG_CUDA_DEVICE
inline int& simulated_current_device() {
  thread_local int d = 0;
  return d;
}
#endif

/// The current device of this thread.
inline int current_device() {
#if MG_CUDA_DEVICE
  int d = 0;
  check(cudaGetDevice(&d), "current_device");
  return d;
#else
  return simulated_current_device();
#endif
}

/// Makes device `index` current on this thread, or an mg::error naming `what` when it does not
/// exist.
inline void select_device(int index, const char* what) {
  if (index < 0 || index >= device_count()) {
    if (index == mg::device::invalid_index)
      mg::detail::fail(what, ": the device index is out of range; a device index is in [0, ",
                       device_count(), ")");
    mg::detail::fail(what, ": device cuda:", index, " does not exist (this program sees ",
                     device_count(), device_count() == 1 ? " device" : " devices",
                     "); use mg::device::cuda(i) with i below mg::cuda::device_count()");
  }
#if MG_CUDA_DEVICE
  int d = -1;
  (void)cudaGetDevice(&d);
  if (d != index) check(cudaSetDevice(index), what);
#else
  simulated_current_device() = index;
#endif
}

struct stream_state {
  native_stream handle{};
  int device = -1;  // the device it was created on; -1: the default stream of whichever is current
  bool owned = false;
  ~stream_state() {
#if MG_CUDA_DEVICE
    if (owned) (void)cudaStreamDestroy(handle);
#endif
  }
};

}  // namespace detail

/// A queue of device work: a shared handle (copies name the same stream). A default-constructed
/// stream is the device's default stream.
class stream {
 public:
  stream() = default;

  /// A new stream, destroyed when its last copy goes (after its work completes). It does not
  /// synchronise with the default stream.
  /// A new stream on the current device.
  static stream create() {
    auto s = std::make_shared<detail::stream_state>();
    s->device = detail::current_device();
#if MG_CUDA_DEVICE
    detail::check(cudaStreamCreateWithFlags(&s->handle, cudaStreamNonBlocking), "stream::create");
#else
    static std::atomic<std::uintptr_t> next{0};
    s->handle = ++next;  // only a name
#endif
    s->owned = true;
    return stream(std::move(s));
  }

  /// A stream created elsewhere (by cudaStreamCreate, or another library) on the current
  /// device; not destroyed here.
  static stream wrap(native_stream handle) {
    auto s = std::make_shared<detail::stream_state>();
    s->handle = handle;
    s->device = detail::current_device();
    return stream(std::move(s));
  }

  native_stream native_handle() const { return state_ ? state_->handle : native_stream{}; }
  /// The device the stream belongs to; -1 for the default stream (that of the current device).
  int device() const { return state_ ? state_->device : -1; }

  /// Waits until every piece of work enqueued on this stream so far has completed.
  void synchronize() const {
#if MG_CUDA_DEVICE
    detail::check(cudaStreamSynchronize(native_handle()), "stream::synchronize");
#endif
  }

  friend bool operator==(const stream& a, const stream& b) {
    return a.native_handle() == b.native_handle();
  }

 private:
  explicit stream(std::shared_ptr<detail::stream_state> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::stream_state> state_;
};

namespace detail {
/// This thread's current stream on the current device.
inline stream& current_stream_slot() {
  thread_local std::vector<stream> current;  // by device
  const auto d = static_cast<std::size_t>(current_device());
  if (current.size() <= d) current.resize(d + 1);
  return current[d];
}
/// While a graph captures on this thread: the key of its private pool (Note [CUDA graphs] in
/// graph.hpp), odd so that it never equals a stream's; else 0.
inline std::uintptr_t& capture_pool_slot() {
  thread_local std::uintptr_t pool = 0;
  return pool;
}
/// The cache key of the current stream (Note [Caching allocator]), or of the capturing graph's
/// pool.
inline std::uintptr_t current_stream_key() {
  if (const std::uintptr_t pool = capture_pool_slot()) return pool;
  const native_stream s = current_stream_slot().native_handle();
#if MG_CUDA_DEVICE
  return reinterpret_cast<std::uintptr_t>(s);
#else
  return s;
#endif
}
}  // namespace detail

/// The stream on which this thread's device work is enqueued.
inline stream current_stream() { return detail::current_stream_slot(); }

/// Makes `s` the current stream of this thread, and its device the current device, until the
/// guard goes out of scope.
class stream_guard {
 public:
  explicit stream_guard(stream s) : device_(detail::current_device()) {
    if (s.device() >= 0) detail::select_device(s.device(), "stream_guard");
    previous_ = detail::current_stream_slot();
    detail::current_stream_slot() = std::move(s);
  }
  ~stream_guard() {
    detail::current_stream_slot() = std::move(previous_);
    try {
      detail::select_device(device_, "stream_guard");
    } catch (...) {  // the device existed when the guard was made
    }
  }
  stream_guard(const stream_guard&) = delete;
  stream_guard& operator=(const stream_guard&) = delete;

 private:
  int device_;
  stream previous_;
};

/// Waits until all work on the device has completed.
inline void synchronize() {
#if MG_CUDA_DEVICE
  detail::check(cudaDeviceSynchronize(), "synchronize");
#endif
}

/// A point in a stream's work, for timing and for ordering work between streams.
class event {
 public:
  event() {
#if MG_CUDA_DEVICE
    detail::check(cudaEventCreate(&e_), "event");
#endif
  }
  ~event() {
#if MG_CUDA_DEVICE
    (void)cudaEventDestroy(e_);
#endif
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;

  /// Marks the point after the work enqueued on `s` so far.
  void record(const stream& s = current_stream()) {
#if MG_CUDA_DEVICE
    detail::check(cudaEventRecord(e_, s.native_handle()), "event::record");
#else
    (void)s;
    e_ = std::chrono::steady_clock::now();
#endif
    recorded_ = true;
  }

  /// Waits until the recorded point is reached.
  void synchronize() const {
    require_recorded("event::synchronize");
#if MG_CUDA_DEVICE
    detail::check(cudaEventSynchronize(e_), "event::synchronize");
#endif
  }

  /// Makes the future work of `s` wait for the recorded point (without blocking the host).
  void block(const stream& s) const {
    require_recorded("event::block");
#if MG_CUDA_DEVICE
    detail::check(cudaStreamWaitEvent(s.native_handle(), e_, 0), "event::block");
#else
    (void)s;
#endif
  }

  /// Milliseconds from this event to `end`, both recorded; waits for `end`.
  float elapsed_ms(const event& end) const {
    require_recorded("event::elapsed_ms");
    end.require_recorded("event::elapsed_ms");
#if MG_CUDA_DEVICE
    end.synchronize();
    float ms = 0;
    detail::check(cudaEventElapsedTime(&ms, e_, end.e_), "event::elapsed_ms");
    return ms;
#else
    return std::chrono::duration<float, std::milli>(end.e_ - e_).count();
#endif
  }

 private:
  void require_recorded(const char* what) const {
    if (!recorded_)
      mg::detail::fail(what, ": the event was never recorded; call record() on it first");
  }
  native_event e_{};
  bool recorded_ = false;
};

}  // namespace mg::cuda

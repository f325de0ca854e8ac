// The recording side of the autograd profiler (<metagrad/profiler.hpp>): ranges opened around
// every forward op, every backward node and every user range, and the session they are recorded
// into.
//
// Note [Profiler cost]: with no profile and no emit_nvtx_guard alive, a range costs one relaxed
// load of `profiler_flags` and a null pointer left in the scope object; everything else (the
// session, the clock, names and shapes) lives behind that test, out of the hot path. The op's
// name is passed as a function (op_name<Op>) so that it is not computed either.
//
// Note [Profiler threads]: one profile records every thread. The session is shared
// (shared_ptr, taken under `current_mutex` when a range opens); finished ranges are appended
// under the session's mutex, and dropped once the profile stopped. Nesting (for self times and
// parents) is followed per thread: each thread keeps its innermost open range, and a range adds
// its duration to its enclosing range on the same thread and in the same session. Ranges are
// RAII scopes, so they close in reverse order on each thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/runtime/graph.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg::detail::prof {

// What a recorded range stands for (public as mg::autograd::profiler::event_kind).
enum class range_kind : std::uint8_t {
  op,        // a forward op on tensors (built-in, mg::apply, mg::fuse, in place)
  backward,  // a node run by the backward engine
  user,      // an mg::autograd::profiler::record_function range
};

// Backward nodes are recorded under torch's name for the engine's per-node step, followed by
// the node's name(): "autograd::engine::evaluate_function: mul".
inline constexpr std::string_view backward_prefix = "autograd::engine::evaluate_function: ";

// One finished range. Times in nanoseconds from the session's start.
struct record {
  std::string name;
  range_kind kind = range_kind::op;
  std::uint32_t thread = 0;
  std::uint64_t id = 0, parent = 0;  // parent: the enclosing range on the same thread, 0 if none
  std::int64_t start_ns = 0, end_ns = 0;
  std::int64_t child_ns = 0;  // time inside ranges nested directly in this one (same thread)
  std::vector<shape_t> shapes;
};

struct session {
  explicit session(bool shapes) : record_shapes(shapes) {}
  const bool record_shapes;
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::atomic<std::uint64_t> next_id{1};
  std::mutex m;
  bool recording = true;        // guarded by m
  std::vector<record> records;  // guarded by m
};

// NVTX entry points, installed by an emit_nvtx_guard compiled where the toolkit's nvtx3 exists
// (so this header does not depend on it).
struct nvtx_api {
  void (*push)(const char*);
  void (*pop)();
};

// See Note [Profiler cost]: bit 0 is set while a profile records; each live emit_nvtx_guard
// adds 2.
inline std::atomic<unsigned> profiler_flags{0};
inline std::atomic<const nvtx_api*> nvtx_entry{nullptr};
inline std::mutex current_mutex;
inline std::shared_ptr<session> current_session;  // guarded by current_mutex

inline std::int64_t ns_since(const session& s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              s.t0)
      .count();
}

// A small number per thread, in order of first use (the trace's tid).
inline std::uint32_t thread_index() {
  static std::atomic<std::uint32_t> next{0};
  thread_local const std::uint32_t id = next.fetch_add(1, std::memory_order_relaxed) + 1;
  return id;
}

struct open_range {
  std::shared_ptr<session> s;  // null: only an NVTX range
  const nvtx_api* nvtx = nullptr;
  open_range* enclosing = nullptr;
  record r;
};

// The innermost open range of this thread (Note [Profiler threads]).
inline open_range*& innermost() {
  thread_local open_range* r = nullptr;
  return r;
}

// The slow path of every range, in three steps: try_open (is anything listening?), fill in the name
// and shapes, start (the clock, the parent, the NVTX push).
template <int = 0>
std::unique_ptr<open_range> try_open(unsigned flags) {
  std::shared_ptr<session> s;
  if (flags & 1u) {
    std::lock_guard lock(current_mutex);
    s = current_session;
  }
  const nvtx_api* nv = flags > 1u ? nvtx_entry.load(std::memory_order_acquire) : nullptr;
  if (!s && !nv) return nullptr;
  auto o = std::make_unique<open_range>();
  o->s = std::move(s);
  o->nvtx = nv;
  return o;
}

inline bool wants_shapes(const open_range& o) { return o.s && o.s->record_shapes; }

inline open_range* start(std::unique_ptr<open_range> o, range_kind kind) {
  o->r.kind = kind;
  o->enclosing = innermost();
  if (o->s) {
    o->r.thread = thread_index();
    o->r.id = o->s->next_id.fetch_add(1, std::memory_order_relaxed);
    if (o->enclosing && o->enclosing->s == o->s) o->r.parent = o->enclosing->r.id;
  }
  if (o->nvtx) o->nvtx->push(o->r.name.c_str());
  innermost() = o.get();
  if (o->s) o->r.start_ns = ns_since(*o->s);
  return o.release();
}

template <int = 0>
[[gnu::cold, gnu::noinline]] void close(open_range* raw) noexcept {
  const std::unique_ptr<open_range> o(raw);
  const std::int64_t end = o->s ? ns_since(*o->s) : 0;
  innermost() = o->enclosing;
  if (o->nvtx) o->nvtx->pop();
  if (!o->s) return;
  o->r.end_ns = end;
  if (o->enclosing && o->enclosing->s == o->s) o->enclosing->r.child_ns += end - o->r.start_ns;
  std::lock_guard lock(o->s->m);
  if (!o->s->recording) return;
  try {
    o->s->records.push_back(std::move(o->r));
  } catch (...) {  // out of memory: the range is lost, the program goes on
  }
}

// The input shapes of a range: a tensor's shape, each element's of a list, [] for a number.
inline void add_shapes(std::vector<shape_t>& out, const tensor& t) {
  out.push_back(t.defined() ? t.shape() : shape_t{});
}
inline void add_shapes(std::vector<shape_t>& out, const tensor_list& ts) {
  for (const tensor& t : ts) add_shapes(out, t);
}
template <class X>
void add_shapes(std::vector<shape_t>& out, const X&) {
  if constexpr (std::is_arithmetic_v<X>) out.emplace_back();
}

// The scope of a forward op: `const prof::op_range range(&op_name<Op>, x...);`.
class op_range {
 public:
  // name: the op's name, or a function returning it (called only when recording)
  template <class Name, class... X>
  requires std::is_convertible_v<Name, const char*> || std::is_invocable_r_v<const char*, Name>
  explicit op_range(Name name, const X&... x) {
    if (const unsigned f = profiler_flags.load(std::memory_order_relaxed)) [[unlikely]]
      begin(f, name, x...);
  }
  op_range(const op_range&) = delete;
  op_range& operator=(const op_range&) = delete;
  ~op_range() {
    if (o_) [[unlikely]]
      close(o_);
  }

 private:
  template <class Name, class... X>
  [[gnu::cold, gnu::noinline]] void begin(unsigned f, Name name, const X&... x) {
    auto o = try_open(f);
    if (!o) return;
    if constexpr (std::is_convertible_v<Name, const char*>)
      o->r.name = name;
    else
      o->r.name = name();
    if (wants_shapes(*o)) (add_shapes(o->r.shapes, x), ...);
    o_ = start(std::move(o), range_kind::op);
  }
  open_range* o_ = nullptr;
};

// The scope of one backward node in the engine's call step; its shapes are those of the
// gradients the node receives (its forward outputs).
class node_range {
 public:
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  explicit node_range(graph_node& n) {
    if (const unsigned f = profiler_flags.load(std::memory_order_relaxed)) [[unlikely]]
      begin(f, n);
  }
  node_range(const node_range&) = delete;
  node_range& operator=(const node_range&) = delete;
  ~node_range() {
    if (o_) [[unlikely]]
      close(o_);
  }

 private:
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  [[gnu::cold, gnu::noinline]] void begin(unsigned f, graph_node& n) {
    auto o = try_open(f);
    if (!o) return;
    o->r.name.reserve(backward_prefix.size() + 16);
    o->r.name.append(backward_prefix).append(n.name());
    if (wants_shapes(*o))
      for (const tensor_meta& m : n.outputs()) o->r.shapes.push_back(m.shape());
    o_ = start(std::move(o), range_kind::backward);
  }
  open_range* o_ = nullptr;
};

}  // namespace mg::detail::prof

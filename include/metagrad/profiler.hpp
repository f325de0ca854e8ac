// The autograd profiler (torch.autograd.profiler) for mg::tensor: while a `profile` lives it
// records every forward op (built-in ops, mg::apply, mg::fuse), every node backward runs and
// every `record_function` range, on every thread, with wall time and, on request, input shapes.
// `emit_nvtx_guard` turns the same ranges into NVTX ranges for Nsight Systems.
//
// ```cpp
// namespace prof = mg::autograd::profiler;
// prof::profile p{{.record_shapes = true}};
// auto y = (x * x).sum();
// y.backward();
// p.stop();
// std::cout << p.key_averages().table();   // sorted by total time
// p.export_chrome_trace("trace.json");     // chrome://tracing, ui.perfetto.dev
// ```
//
// Backward nodes are recorded under torch's name for the engine's step,
// "autograd::engine::evaluate_function: " followed by the node's name() (e.g. "mul"), so the
// forward op and its backward node get separate rows. Ops that a backward node runs (a
// non-elementwise backward, or any backward under create_graph) are recorded nested in it.
// With no profile and no guard alive an op pays one relaxed atomic load (Note [Profiler cost]
// in detail/metagrad/runtime/profiler.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include <metagrad/error.hpp>
#include <metagrad/runtime/profiler.hpp>
#include <metagrad/runtime/profiler_report.hpp>
#include <metagrad/types.hpp>

// NVTX (the CUDA toolkit's header-only nvtx3) when asked for (MG_WITH_NVTX, or a translation unit
// nvcc compiles) and the include path has it: see emit_nvtx_guard. Not by default: nvtx3 defines
// about 70 functions in every translation unit that includes it (0.35 s of g++ -O2 per file).
#if (defined(MG_WITH_NVTX) || defined(__CUDACC__)) && __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define MG_PROFILER_NVTX 1
#else
#define MG_PROFILER_NVTX 0
#endif

namespace mg::autograd::profiler {

/// What an event stands for: `event_kind::op` (a forward op), `event_kind::backward` (a node run
/// by backward) or `event_kind::user` (a `record_function` range):
/// ```cpp
/// for (const auto& e : p.events()) if (e.kind == prof::event_kind::backward) ...
/// ```
using event_kind = detail::prof::range_kind;

/// Options of a `profile`: `prof::profile p{{.record_shapes = true}};`.
struct profile_options {
  /// false: the profile records nothing (torch's `enabled=False`).
  bool enabled = true;
  /// Keep the input shapes of every op (for a backward node: the shapes of the gradients it
  /// receives); they appear in the table, in `event::input_shapes` and in the trace's args.
  bool record_shapes = false;
};

/// One recorded range (torch's FunctionEvent). Times in microseconds from the profile's start;
/// `self_us` is the duration minus that of the ranges nested directly in it on the same thread.
/// `parent` is the `id` of the enclosing range on the same thread (0: none):
/// ```cpp
/// auto ev = p.events();   // in order of start time
/// ```
struct event {
  std::string name;
  event_kind kind = event_kind::op;
  std::uint32_t thread = 0;  ///< 1, 2, ... in order of the threads' first recorded range
  std::uint64_t id = 0, parent = 0;
  double start_us = 0, duration_us = 0, self_us = 0;
  std::vector<shape_t> input_shapes;  ///< empty unless record_shapes
};

/// One row of `key_averages()`: every event of one name (and one input-shape list when grouped
/// by it). `input_shapes` is the events' shapes as the table prints them ("[[3], []]"), "mixed"
/// when they differ, empty when shapes were not recorded:
/// ```cpp
/// auto mul = p.key_averages().find("mul");   // mul->count, mul->cpu_total_us ...
/// ```
struct event_average {
  std::string name;
  std::string input_shapes;
  std::size_t count = 0;
  double cpu_total_us = 0, self_cpu_us = 0;
  double cpu_time_avg_us() const { return count ? cpu_total_us / static_cast<double>(count) : 0; }
};

/// The column `table()` sorts by (descending): `{.sort_by = prof::sort_key::self_cpu}`.
enum class sort_key { cpu_total, self_cpu, count };

/// Options of `event_averages::table`: `table({.sort_by = prof::sort_key::count, .row_limit =
/// 10})`. `row_limit` 0 prints every row; names longer than `max_name_width` are cut ("...").
struct table_options {
  sort_key sort_by = sort_key::cpu_total;
  std::size_t row_limit = 0;
  std::size_t max_name_width = 55;
};

/// Options of `profile::key_averages`: `p.key_averages({.group_by_input_shape = true})` gives
/// one row per name and input-shape list (needs record_shapes).
struct average_options {
  bool group_by_input_shape = false;
};

/// The events of a profile averaged by name (torch's `key_averages()`), rows sorted by total
/// time, descending:
/// ```cpp
/// auto avg = p.key_averages();
/// std::cout << avg.table({.row_limit = 10});
/// EXPECT_EQ(avg.count("mul"), 3);
/// ```
class event_averages {
 public:
  event_averages() = default;

  /// Every row, sorted by cpu_total_us (descending), then by name. (On a temporary, a copy:
  /// `for (auto& r : p.key_averages().rows())` is safe.)
  const std::vector<event_average>& rows() const& { return rows_; }
  std::vector<event_average> rows() && { return std::move(rows_); }
  /// A copy of the first row of that name, if any.
  std::optional<event_average> find(std::string_view name) const {
    for (const auto& r : rows_)
      if (r.name == name) return r;
    return std::nullopt;
  }
  /// The number of events of that name (summed over input shapes when grouped by them).
  std::size_t count(std::string_view name) const {
    std::size_t n = 0;
    for (const auto& r : rows_)
      if (r.name == name) n += r.count;
    return n;
  }
  /// The sum of every event's self time: the denominator of the table's percentages.
  double self_cpu_total_us() const {
    double t = 0;
    for (const auto& r : rows_) t += r.self_cpu_us;
    return t;
  }
  /// One row summing all (torch's `total_average()`), named "Total".
  event_average total_average() const {
    event_average t{"Total", "", 0, 0, 0};
    for (const auto& r : rows_) {
      t.count += r.count;
      t.cpu_total_us += r.cpu_total_us;
      t.self_cpu_us += r.self_cpu_us;
    }
    return t;
  }
  /// The table: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, # of Calls,
  /// and Input Shapes when shapes were recorded; a last line gives the self CPU time total.
  template <int = 0>
  std::string table(const table_options& options = {}) const;

 private:
  friend class profile;
  std::vector<event_average> rows_;
  bool shapes_ = false;
};

/// Records, while it lives (or until `stop()`), every forward op, backward node and
/// `record_function` range of every thread (RAII, torch's `with profile() as p:`). One profile
/// records at a time: constructing a second while one records throws mg::error.
/// ```cpp
/// std::string report;
/// {
///   prof::profile p;
///   model_step();
///   report = p.key_averages().table();
/// }
/// ```
class profile {
 public:
  template <int = 0>
  explicit profile(const profile_options& options = {}) {
    if (!options.enabled) return;
    auto s = std::make_shared<detail::prof::session>(options.record_shapes);
    std::lock_guard lock(detail::prof::current_mutex);
    if (detail::prof::current_session)
      detail::fail(
          "profiler::profile: another profile is already recording (one records every thread, "
          "so only one may be active at a time); stop() it or let it go out of scope before "
          "starting this one");
    detail::prof::current_session = s;
    detail::prof::profiler_flags.fetch_or(1u, std::memory_order_relaxed);
    s_ = std::move(s);
  }
  profile(const profile&) = delete;
  profile& operator=(const profile&) = delete;
  ~profile() { stop(); }

  /// Stops recording (the destructor does it too); what was recorded stays readable. Ranges
  /// still open when it stops are not recorded. Calling it twice is harmless.
  void stop() {
    if (!s_) return;
    {
      std::lock_guard lock(detail::prof::current_mutex);
      if (detail::prof::current_session == s_) {
        detail::prof::current_session.reset();
        detail::prof::profiler_flags.fetch_and(~1u, std::memory_order_relaxed);
      }
    }
    std::lock_guard lock(s_->m);
    s_->recording = false;
  }

  /// Is this profile recording (constructed enabled and not stopped)?
  bool recording() const {
    if (!s_) return false;
    std::lock_guard lock(s_->m);
    return s_->recording;
  }

  /// Every range recorded so far, in order of start time (then of opening).
  template <int = 0>
  std::vector<event> events() const;

  /// The events averaged by name (and by input shapes with `.group_by_input_shape`).
  template <int = 0>
  event_averages key_averages(const average_options& options = {}) const;

  /// Writes the events as a Chrome trace (JSON trace events of phase "X", times in
  /// microseconds) that chrome://tracing and ui.perfetto.dev open; throws mg::error naming the
  /// path and the reason if it cannot be written.
  template <int = 0>
  void export_chrome_trace(const std::string& path) const;

 private:
  template <int = 0>
  std::vector<detail::prof::record> snapshot() const {
    if (!s_) return {};
    std::lock_guard lock(s_->m);
    return s_->records;
  }
  bool shapes() const { return s_ && s_->record_shapes; }

  std::shared_ptr<detail::prof::session> s_;
};

/// Prints `p.key_averages().table()`: `std::cout << p;`.
template <int = 0>
std::ostream& operator<<(std::ostream& os, const profile& p) {
  return os << p.key_averages().table();
}

/// A user range (RAII), recorded as an event of kind `user` around what runs in its scope on
/// this thread; ranges nest, and the ops inside get it as parent:
/// ```cpp
/// { prof::record_function r("loss"); loss = mg::sum((y - t) * (y - t)); }
/// ```
class record_function {
 public:
  explicit record_function(std::string_view name) {
    if (const unsigned f = detail::prof::profiler_flags.load(std::memory_order_relaxed)) {
      if (auto o = detail::prof::try_open(f)) {
        o->r.name = name;
        o_ = detail::prof::start(std::move(o), event_kind::user);
      }
    }
  }
  record_function(const record_function&) = delete;
  record_function& operator=(const record_function&) = delete;
  ~record_function() {
    if (o_) detail::prof::close(o_);
  }

 private:
  detail::prof::open_range* o_ = nullptr;
};

// The guard's class differs with and without NVTX; an inline namespace keeps the two apart
// (translation units of one program may see different include paths).
#if MG_PROFILER_NVTX
inline namespace with_nvtx {
#else
inline namespace without_nvtx {
#endif
/// While it lives, every forward op, backward node and record_function range is also an NVTX
/// range (push/pop, named like the profiler's events) for Nsight Systems (`nsys profile`), as
/// torch's `emit_nvtx()`. It needs the CUDA toolkit's header-only nvtx3 on the include path and
/// `MG_WITH_NVTX` defined (or the file compiled by nvcc); `available` tells, and without them
/// the guard does nothing:
/// ```cpp
/// { prof::emit_nvtx_guard nvtx; train_step(); }
/// ```
class emit_nvtx_guard {
 public:
  /// Whether this translation unit asked for NVTX (MG_WITH_NVTX) and found <nvtx3/nvToolsExt.h>.
  static constexpr bool available = MG_PROFILER_NVTX != 0;

  explicit emit_nvtx_guard(bool enabled = true) : on_(enabled && available) {
    if (!on_) return;
#if MG_PROFILER_NVTX
    static constexpr detail::prof::nvtx_api api{&push, &pop};
    detail::prof::nvtx_entry.store(&api, std::memory_order_release);
#endif
    detail::prof::profiler_flags.fetch_add(2u, std::memory_order_relaxed);
  }
  emit_nvtx_guard(const emit_nvtx_guard&) = delete;
  emit_nvtx_guard& operator=(const emit_nvtx_guard&) = delete;
  ~emit_nvtx_guard() {
    if (on_) detail::prof::profiler_flags.fetch_sub(2u, std::memory_order_relaxed);
  }

 private:
#if MG_PROFILER_NVTX
  static void push(const char* name) { nvtxRangePushA(name); }
  static void pop() { nvtxRangePop(); }
#endif
  bool on_;
};
}  // namespace with_nvtx / without_nvtx

// ---- definitions ---------------------------------------------------------------------------

template <int I>
std::vector<event> profile::events() const {
  const auto records = snapshot();
  std::vector<event> out;
  out.reserve(records.size());
  for (const auto& r : records) {
    event e;
    e.name = r.name;
    e.kind = r.kind;
    e.thread = r.thread;
    e.id = r.id;
    e.parent = r.parent;
    e.start_us = static_cast<double>(r.start_ns) / 1e3;
    e.duration_us = static_cast<double>(r.end_ns - r.start_ns) / 1e3;
    e.self_us = static_cast<double>(r.end_ns - r.start_ns - r.child_ns) / 1e3;
    e.input_shapes = r.shapes;
    out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(), [](const event& a, const event& b) {
    return a.start_us != b.start_us ? a.start_us < b.start_us : a.id < b.id;
  });
  return out;
}

template <int I>
event_averages profile::key_averages(const average_options& options) const {
  MG_DETAIL_LAZY_ENGINE(I);
  event_averages avg;
  avg.shapes_ = shapes();
  std::unordered_map<std::string, std::size_t> row_of;
  for (const auto& r : snapshot()) {
    const std::string shapes = avg.shapes_ ? detail::prof::shapes_text(r.shapes) : std::string();
    std::string key = r.name;
    if (options.group_by_input_shape) key.append(1, '\0').append(shapes);
    auto [it, fresh] = row_of.try_emplace(std::move(key), avg.rows_.size());
    if (fresh) avg.rows_.push_back({r.name, shapes, 0, 0, 0});
    event_average& row = avg.rows_[it->second];
    if (row.input_shapes != shapes) row.input_shapes = "mixed";
    ++row.count;
    row.cpu_total_us += static_cast<double>(r.end_ns - r.start_ns) / 1e3;
    row.self_cpu_us += static_cast<double>(r.end_ns - r.start_ns - r.child_ns) / 1e3;
  }
  std::stable_sort(
      avg.rows_.begin(), avg.rows_.end(), [](const event_average& a, const event_average& b) {
        return a.cpu_total_us != b.cpu_total_us ? a.cpu_total_us > b.cpu_total_us : a.name < b.name;
      });
  return avg;
}

template <int I>
std::string event_averages::table(const table_options& options) const {
  using detail::prof::fit;
  using detail::prof::format_percent;
  using detail::prof::format_time;
  std::vector<const event_average*> rows;
  for (const auto& r : rows_) rows.push_back(&r);
  const auto value = [&](const event_average& r) {
    switch (options.sort_by) {
      case sort_key::self_cpu:
        return r.self_cpu_us;
      case sort_key::count:
        return static_cast<double>(r.count);
      case sort_key::cpu_total:
        break;
    }
    return r.cpu_total_us;
  };
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const auto* a, const auto* b) { return value(*a) > value(*b); });
  if (options.row_limit && rows.size() > options.row_limit) rows.resize(options.row_limit);

  std::size_t name_w = 4;
  for (const auto* r : rows) name_w = std::max(name_w, r->name.size());
  name_w = std::min(name_w, std::max<std::size_t>(options.max_name_width, 8));
  constexpr std::size_t w = 12;
  const char* const heads[] = {"Self CPU %", "Self CPU",     "CPU total %",
                               "CPU total",  "CPU time avg", "# of Calls"};
  const double total_self = self_cpu_total_us();

  std::string rule = std::string(name_w, '-');
  for (int i = 0; i < 6; ++i) rule += "  " + std::string(w, '-');
  if (shapes_) rule += "  " + std::string(w, '-');
  rule += '\n';
  std::string out = rule + fit("Name", name_w, true);
  for (const char* h : heads) out += "  " + fit(h, w, false);
  if (shapes_) out += "  Input Shapes";
  out += '\n' + rule;
  for (const auto* r : rows) {
    out += fit(r->name, name_w, true);
    for (const std::string& cell :
         {format_percent(r->self_cpu_us, total_self), format_time(r->self_cpu_us),
          format_percent(r->cpu_total_us, total_self), format_time(r->cpu_total_us),
          format_time(r->cpu_time_avg_us()), std::to_string(r->count)})
      out += "  " + fit(cell, w, false);
    if (shapes_) out += "  " + r->input_shapes;
    out += '\n';
  }
  out += rule + "Self CPU time total: " + format_time(total_self) + '\n';
  return out;
}

template <int I>
void profile::export_chrome_trace(const std::string& path) const {
  if (path.empty())
    detail::fail(
        "profiler::export_chrome_trace: the path is empty; pass a file name such as "
        "\"trace.json\"");
  errno = 0;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) {
    const int e = errno;
    detail::fail("profiler::export_chrome_trace: cannot open '", path, "' for writing (",
                 e ? std::generic_category().message(e) : std::string("unknown reason"),
                 "); pass a path in an existing, writable directory");
  }
  const char* const cats[] = {"cpu_op", "backward", "user_annotation"};
  f << "{\"traceEvents\":[";
  bool first = true;
  for (const event& e : events()) {
    f << (first ? "\n" : ",\n") << "{\"name\":" << detail::prof::json_string(e.name)
      << ",\"cat\":\"" << cats[static_cast<int>(e.kind)]
      << "\",\"ph\":\"X\",\"ts\":" << detail::prof::format_fixed(e.start_us)
      << ",\"dur\":" << detail::prof::format_fixed(e.duration_us)
      << ",\"pid\":1,\"tid\":" << e.thread << ",\"args\":{\"id\":" << e.id
      << ",\"parent\":" << e.parent;
    if (shapes()) f << ",\"Input Shapes\":" << detail::prof::shapes_text(e.input_shapes, true);
    f << "}}";
    first = false;
  }
  f << "\n],\"displayTimeUnit\":\"ms\"}\n";
  f.flush();
  if (!f)
    detail::fail("profiler::export_chrome_trace: writing '", path,
                 "' failed (the disk may be full); pass a path with room for the trace");
}

}  // namespace mg::autograd::profiler

// Anomaly detection (torch's detect_anomaly): with it on, every node records the node whose
// backward created it (double backward), and the engine checks every gradient a node computes.
//
// Note [Anomaly detection]: a node knows the forward call that recorded it (graph_node::site):
// every public op function, operator and op member of mg::tensor, and mg::apply, captures its
// caller's std::source_location (mg::call_site, Note [Call sites] in <metagrad/call_site.hpp>)
// and record_node copies it into the node, anomaly mode or not (a pointer; the file, line and
// function are formatted only here). With anomaly mode on, a NaN or infinity in a gradient a
// node computed is an mg::error naming the node, the input, and that call as file:line; a second
// line names the node whose backward recorded this one (double backward), if any, and its call.
// Any mg::error thrown while a node runs (its backward, a saved tensor's version check, a
// custom Function's backward, a gradient of the wrong shape) gets the same lines appended by the
// engine's call step. A node recorded with no public call around it (a library-internal
// detail::call during backward) says "an unknown call".
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <sstream>
#include <string>

#include <metagrad/backend/tensor_kernels.hpp>
#include <metagrad/runtime/engine.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/hooks.hpp>

namespace mg::detail {

template <int>
void note_anomaly_parent(graph_node& n) {
  if (const auto* r = running_node(); r && *r) hooks_of(n.hooks).parent = *r;
}

inline std::string site_string(const source_location& s) {
  if (s.line() == 0) return "an unknown call (an op without a call site)";
  std::ostringstream os;
  os << s.file_name() << ":" << s.line() << " (in " << s.function_name() << ")";
  return std::move(os).str();
}

// The lines that say where n's forward ran, and where its parent's did.
inline std::string forward_trace(const graph_node& n) {
  std::string r =
      "\n  the forward of " + std::string(n.name()) + " was called at " + site_string(n.site);
  if (n.hooks)
    if (const auto p = n.hooks->parent.lock())
      r += "\n  it was recorded by the backward of " + std::string(p->name()) +
           ", whose forward was called at " + site_string(p->site);
  return r;
}

inline bool all_finite(const tensor_impl& g) {
  if (!is_floating(g.dtype())) return true;
  const auto h = copy_kernel(*transfer_kernel(g, mg::device::cpu), g.dtype(), g.shape);
  return dispatch_floating(g.dtype(), [&]<class T>(std::type_identity<T>) {
    const T* p = h->template data<T>();
    for (std::int64_t i = 0, n = h->numel(); i < n; ++i)
      if (!std::isfinite(p[i])) return false;
    return true;
  });
}

// The trace lines are appended by rethrow_with_trace, as to every error thrown while n runs.
template <int>
void check_anomaly(const graph_node& n, std::span<const impl_ptr> out) {
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i] && !all_finite(*out[i]))
      fail("anomaly detection: the backward of ", n.name(),
           " returned NaN or infinite values in its gradient for input ", i, " (shape ",
           shape_string(out[i]->shape), ")");
}

template <int>
[[noreturn]] inline void rethrow_with_trace(const graph_node& n, const mg::error& e) {
  throw mg::error(e.what() + forward_trace(n));
}

}  // namespace mg::detail

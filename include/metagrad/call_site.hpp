// mg::call_site: where an op was called, captured by a defaulted last parameter of every public
// op function (`mg::exp(x)`, `x.sum()`, `mg::apply<F>(x)`), so that anomaly detection can name
// the file and line of the forward call that recorded a failing node (Note [Anomaly detection]
// in detail/metagrad/runtime/anomaly.hpp). Operators take no defaulted parameter: theirs take a
// tensor operand as detail::tracked, converted where the operator is written.
//
// Note [Call sites]: the capture costs nothing where it is not used. On numbers, SIMD packs and
// static-engine expressions the site is an argument nobody reads, and inlining removes it (the
// scalar benchmark's instruction count is the same as without it). In device code it holds no
// location: std::source_location::current() there aborts nvcc's device compiler (cicc), so under
// __CUDA_ARCH__ the default constructor is an empty MG_HD one. On tensors the public function
// sets the thread's current site while it dispatches (site_scope) and record_node copies it into
// the node: a pointer to a static record, no string, until anomaly mode reports. The outermost
// public call wins: ops that a public function calls itself (softmax's exp and sum, the clone of
// an in-place op, a custom Function's forward) are recorded with the user's line, not the
// library's.
#pragma once

#include <cstdint>
#include <type_traits>
#include <version>
#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

#include <metagrad/core/config.hpp>

namespace mg {

class tensor;

namespace detail {
#if defined(__cpp_lib_source_location)
using source_location = std::source_location;
#else
// See Note [clang 14 source_location] in config.hpp: the same interface, from the builtins.
class source_location {
 public:
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           unsigned line = __builtin_LINE()) noexcept {
    source_location s;
    s.file_ = file;
    s.function_ = function;
    s.line_ = line;
    return s;
  }
  constexpr unsigned line() const noexcept { return line_; }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  unsigned line_ = 0;
};
#endif
}  // namespace detail

/// Where a public op was called. Every op function takes one as its last parameter, defaulted,
/// so it is the caller's line; a function of yours can pass its own caller's on:
/// ```cpp
/// mg::tensor layer(const mg::tensor& x, mg::call_site site = {}) { return mg::tanh(x, site); }
/// ```
struct call_site {
  detail::source_location where{};
#if defined(__CUDA_ARCH__)
  // See Note [Call sites]: no location in device code.
  MG_HD constexpr call_site() noexcept {}
#else
  constexpr call_site(detail::source_location w = detail::source_location::current()) noexcept
      : where(w) {}
#endif
};

namespace detail {

// The call site of the public op call being dispatched on this thread (line 0: none).
inline source_location& current_site() {
  thread_local source_location s{};
  return s;
}

// Sets the current site for its lifetime unless an enclosing public call set one (the outermost
// call wins, Note [Call sites]).
class site_scope {
 public:
  explicit site_scope(const call_site& site) : set_(current_site().line() == 0) {
    if (set_) current_site() = site.where;
  }
  site_scope(const site_scope&) = delete;
  site_scope& operator=(const site_scope&) = delete;
  ~site_scope() {
    if (set_) current_site() = {};
  }

 private:
  bool set_;
};

// What composite public functions (softmax, mse_loss...) open for their whole body: a site_scope
// on tensors, nothing in the other families (constexpr, free).
struct no_site_scope {
  MG_HD constexpr explicit no_site_scope(const call_site&) noexcept {}
};

// A tensor operand of an operator (`a / b`, `t[i]`), converted where the operator is written:
// its site is the caller's.
struct tracked {
  const tensor& value;
  call_site site;
  tracked(const tensor& t, call_site s = {}) noexcept : value(t), site(s) {}
};

// The index of `t[i]`.
struct tracked_index {
  std::int64_t value;
  call_site site;
  tracked_index(std::int64_t i, call_site s = {}) noexcept : value(i), site(s) {}
};

}  // namespace detail

}  // namespace mg

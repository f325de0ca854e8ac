// Where the runtime engine finds a device's backend and an op's kernels on it. See Note [Device
// backends] in backend.hpp: the CPU's entries are constant-initialised here, a device's are
// written by its backend's registration point before main runs.
#pragma once

#include <array>
#include <cstddef>

#include <metagrad/backend/backend.hpp>
#include <metagrad/backend/cpu.hpp>
#include <metagrad/core/type_name.hpp>
#include <metagrad/error.hpp>

namespace mg::detail {

inline constexpr std::size_t device_types = 2;

inline std::array<const backend*, device_types>& backends() {
  static std::array<const backend*, device_types> slots{&cpu_backend, nullptr};
  return slots;
}

// The kernels of Op on each device type: the CPU's from the struct, a device's once registered.
template <class Op>
inline std::array<const elementwise_kernels*, device_types> op_kernels{&cpu_kernels<Op>, nullptr};

/// Called by a backend header; returns true so that it can initialise an inline variable.
inline bool register_backend(device_type t, const backend* b) {
  backends()[static_cast<std::size_t>(t)] = b;
  return true;
}

/// The backend of device type t, or null.
inline const backend* registered_backend(device_type t) {
  return backends()[static_cast<std::size_t>(t)];
}

/// The backend of device d with d selected on this thread (Note [Devices] in backend.hpp), or an
/// mg::error naming op and the fix.
inline const backend& backend_of(device d, const char* op) {
  const backend* b = registered_backend(d.type());
  if (!b)
    fail(op,
         ": device cuda needs the Thrust backend, and no translation unit of this program "
         "includes <metagrad/cuda.hpp>; include it in one (linked with metagrad::cuda), or use "
         ".device = mg::device::cpu");
  if (b->select_device)
    b->select_device(d.index(), op);
  else if (d.index() != 0)
    fail(op, ": device ", device_name(d), " does not exist: there is one ", b->name,
         " device; use ", device_spelling(device{d.type()}));
  return *b;
}

/// Op's kernels on device d, or an mg::error naming the op and the line that registers it.
template <class Op>
const elementwise_kernels& kernels_of(device d) {
  backend_of(d, op_name<Op>());
  if (const elementwise_kernels* k = op_kernels<Op>[static_cast<std::size_t>(d.type())]) return *k;
  fail(op_name<Op>(), ": this op has no kernel on device ", device_name(d),
       "; register it in the translation unit that includes <metagrad/cuda.hpp>: "
       "`static const bool registered = mg::cuda::register_ops<",
       demangled_name<Op>(), ">();` (the op's functions must be MG_HD), or compute on device cpu");
}

}  // namespace mg::detail

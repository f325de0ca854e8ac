// Element types, devices and the storage behind mg::tensor.
//
// Note [Storage interface]: a storage is a block of bytes (data, nbytes) of one dtype on one
// device, with a release function chosen by whoever allocated it and a version counter. A device
// backend (<metagrad/cuda.hpp>) allocates differently by providing its own release function; the
// rest of the runtime engine only reads these five fields. allocate() is in device.hpp.
//
// Note [Version counter]: every in-place write bumps `version`. Views share the storage and so
// share the counter; saving a tensor for backward records the version, and unpacking it checks
// that nothing wrote to it in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/detail/broadcast.hpp>
#include <metagrad/error.hpp>

namespace mg {

/// The element type of an `mg::tensor`. `f32` and `f64` are implemented; `i64` and `b8` (bool)
/// are reserved for indices and masks.
enum class dtype : std::uint8_t { f32, f64, i64, b8 };
inline constexpr dtype f32 = dtype::f32;
inline constexpr dtype f64 = dtype::f64;

/// Where a tensor's storage lives. `cuda` needs the Thrust backend (<metagrad/cuda.hpp>).
enum class device : std::uint8_t { cpu, cuda };

/// A tensor shape: one extent per dimension, outermost first (row-major).
using shape_t = std::vector<std::int64_t>;

}  // namespace mg

namespace mg::detail {

constexpr const char* dtype_name(dtype d) {
  switch (d) {
    case dtype::f32:
      return "f32";
    case dtype::f64:
      return "f64";
    case dtype::i64:
      return "i64";
    case dtype::b8:
      return "bool";
  }
  return "?";
}

constexpr std::size_t element_size(dtype d) {
  switch (d) {
    case dtype::f32:
      return 4;
    case dtype::f64:
      return 8;
    case dtype::i64:
      return 8;
    case dtype::b8:
      return 1;
  }
  return 0;
}

constexpr const char* device_name(device d) { return d == device::cpu ? "cpu" : "cuda"; }

inline std::int64_t numel_of(const shape_t& s) {
  std::int64_t n = 1;
  for (auto e : s) n *= e;
  return n;
}

inline shape_t contiguous_strides(const shape_t& s) {
  shape_t st(s.size());
  std::int64_t acc = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return st;
}

struct storage {
  void* data = nullptr;
  std::size_t nbytes = 0;
  mg::dtype dtype = mg::dtype::f32;
  mg::device device = mg::device::cpu;
  std::uint64_t version = 0;  // See Note [Version counter]
  void (*release)(void*) = nullptr;
  // Scalars and tiny tensors live inside the storage object: one allocation instead of two.
  alignas(16) std::byte small[16];

  storage() = default;
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;
  ~storage() {
    if (release) release(data);
  }
};

inline constexpr std::size_t cpu_alignment = 64;

inline void check_dtype_implemented(dtype d, const char* op) {
  if (d != dtype::f32 && d != dtype::f64)
    fail(op, ": dtype ", dtype_name(d),
         " is declared but not implemented yet; use mg::f32 or mg::f64");
}

// Calls f(std::type_identity<T>{}) with the C++ element type of d.
template <class F>
decltype(auto) dispatch(dtype d, F&& f) {
  switch (d) {
    case dtype::f32:
      return std::forward<F>(f)(std::type_identity<float>{});
    case dtype::f64:
      return std::forward<F>(f)(std::type_identity<double>{});
    default:
      break;
  }
  check_dtype_implemented(d, "kernel");
  return std::forward<F>(f)(std::type_identity<double>{});  // unreachable
}

template <class T>
constexpr dtype dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "metagrad: mg::tensor holds float (mg::f32) or double (mg::f64) elements");
  return std::is_same_v<T, float> ? dtype::f32 : dtype::f64;
}

}  // namespace mg::detail

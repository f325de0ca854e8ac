// Element types and the storage behind mg::tensor.
//
// Note [Storage interface]: a storage is a block of bytes (data, nbytes) of one dtype on one
// device, with a release function chosen by the backend that allocated it and a version counter.
// The rest of the runtime engine only reads these fields; allocate() is in tensor_kernels.hpp.
//
// Note [Version counter]: every in-place write bumps `version`. Views share the storage and so
// share the counter; saving a tensor for backward records the version, and unpacking it checks
// that nothing wrote to it in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <metagrad/core/broadcast.hpp>
#include <metagrad/error.hpp>
#include <metagrad/types.hpp>

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

constexpr bool is_floating(dtype d) { return d == dtype::f32 || d == dtype::f64; }

/// "cpu", "cuda" (device 0), "cuda:1"; an invalid index prints as "cuda:?".
inline std::string device_name(device d) {
  std::string s = d.type() == device_type::cpu ? "cpu" : "cuda";
  if (d.index() == device::invalid_index) return s + ":?";
  return d.index() == 0 ? s : s + ":" + std::to_string(d.index());
}

/// How the device is written in C++: "mg::device::cuda", "mg::device::cuda(1)".
inline std::string device_spelling(device d) {
  std::string s = d.type() == device_type::cpu ? "mg::device::cpu" : "mg::device::cuda";
  return d.index() == 0 ? s : s + "(" + std::to_string(d.index()) + ")";
}

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

// 56 bytes, 72 with a shared_ptr's control block: a saved 0-d value keeps one (a chain of a
// million recorded ops saves a million of them).
struct storage {
  void* data = nullptr;
  std::size_t nbytes = 0;
  std::uint64_t version = 0;  // See Note [Version counter]
  void (*release)(void*, std::size_t, int device) = nullptr;
  std::uint32_t detaches = 0;  // detach_() calls on tensors with history (Note [Detached saved...])
  mg::dtype dtype = mg::dtype::f32;
  mg::device device = mg::device::cpu;
  // Scalars and tiny tensors live inside the storage object: one allocation instead of two
  // (aligned for any element type; no kernel loads them as SIMD vectors).
  alignas(8) std::byte small[16];

  storage() = default;
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;
  ~storage() {
    if (release) release(data, nbytes, device.index());
  }
};
static_assert(sizeof(void*) != 8 || sizeof(storage) == 56);

// The C++ element type of each dtype (bool for b8).
template <dtype D>
struct element_of;
template <>
struct element_of<dtype::f32> {
  using type = float;
};
template <>
struct element_of<dtype::f64> {
  using type = double;
};
template <>
struct element_of<dtype::i64> {
  using type = std::int64_t;
};
template <>
struct element_of<dtype::b8> {
  using type = bool;
};

// Calls f(std::type_identity<T>{}) with the C++ element type of d.
template <class F>
decltype(auto) dispatch(dtype d, F&& f) {
  switch (d) {
    case dtype::f64:
      return std::forward<F>(f)(std::type_identity<double>{});
    case dtype::i64:
      return std::forward<F>(f)(std::type_identity<std::int64_t>{});
    case dtype::b8:
      return std::forward<F>(f)(std::type_identity<bool>{});
    default:
      return std::forward<F>(f)(std::type_identity<float>{});
  }
}

// Like dispatch, for computations defined on floating-point elements only.
template <class F>
decltype(auto) dispatch_floating(dtype d, F&& f) {
  if (d == dtype::f64) return std::forward<F>(f)(std::type_identity<double>{});
  return std::forward<F>(f)(std::type_identity<float>{});
}

template <class T>
constexpr dtype dtype_of() {
  if constexpr (std::is_same_v<T, float>) {
    return dtype::f32;
  } else if constexpr (std::is_same_v<T, double>) {
    return dtype::f64;
  } else if constexpr (std::is_same_v<T, bool>) {
    return dtype::b8;
  } else {
    static_assert(std::is_integral_v<T>,
                  "metagrad: mg::tensor holds float, double, std::int64_t or bool elements");
    return dtype::i64;
  }
}

}  // namespace mg::detail

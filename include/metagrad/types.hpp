// The vocabulary types of mg::tensor: element types, devices and shapes.
#pragma once

#include <cstdint>

#include <metagrad/shape.hpp>

namespace mg {

/// The element type of an `mg::tensor`: `f32` (the default, as in torch), `f64`, `i64` (indices
/// and targets) and `b8` (bool: masks and comparison results).
enum class dtype : std::uint8_t { f32, f64, i64, b8 };
inline constexpr dtype f32 = dtype::f32;
inline constexpr dtype f64 = dtype::f64;
inline constexpr dtype i64 = dtype::i64;
inline constexpr dtype b8 = dtype::b8;

/// The kind of memory a tensor's storage lives in. `cuda` needs the Thrust backend
/// (<metagrad/cuda.hpp>, or the prebuilt metagrad::device).
enum class device_type : std::uint8_t { cpu, cuda };

/// Where a tensor's storage lives: a device type and, for cuda, the device's index.
/// `mg::device::cpu`, `mg::device::cuda` (device 0), `mg::device::cuda(1)` (device 1), or
/// `mg::device{mg::device_type::cuda, 1}`. Two devices are equal when type and index are. An
/// index outside [0, 254] makes a device that every use rejects with an mg::error.
class device {
 public:
  static constexpr int invalid_index = 255;
  constexpr device() = default;
  constexpr device(device_type type, int index = 0)
      : type_(type),
        index_(static_cast<std::uint8_t>(index < 0 || index >= invalid_index ? invalid_index
                                                                             : index)) {}
  static const device cpu;
  static const device cuda;
  /// The same device type with another index: `mg::device::cuda(1)`.
  constexpr device operator()(int index) const { return {type_, index}; }
  constexpr device_type type() const { return type_; }
  constexpr int index() const { return index_; }
  friend constexpr bool operator==(const device&, const device&) = default;

 private:
  device_type type_ = device_type::cpu;
  std::uint8_t index_ = 0;
};
inline constexpr device device::cpu{device_type::cpu};
inline constexpr device device::cuda{device_type::cuda};

}  // namespace mg

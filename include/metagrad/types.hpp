// The vocabulary types of mg::tensor: element types, devices and shapes.
#pragma once

#include <cstdint>
#include <vector>

namespace mg {

/// The element type of an `mg::tensor`: `f32` (the default, as in torch), `f64`, `i64` (indices
/// and targets) and `b8` (bool: masks and comparison results).
enum class dtype : std::uint8_t { f32, f64, i64, b8 };
inline constexpr dtype f32 = dtype::f32;
inline constexpr dtype f64 = dtype::f64;
inline constexpr dtype i64 = dtype::i64;
inline constexpr dtype b8 = dtype::b8;

/// Where a tensor's storage lives. `cuda` needs the Thrust backend (<metagrad/cuda.hpp>).
enum class device : std::uint8_t { cpu, cuda };

/// A tensor shape: one extent per dimension, outermost first (row-major).
using shape_t = std::vector<std::int64_t>;

}  // namespace mg

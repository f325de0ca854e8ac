// mg::shape_t: the extents (or strides) of a tensor, one per dimension, outermost first.
#pragma once

#include <algorithm>
#include <compare>
#include <cstdint>
#include <vector>

#include <metagrad/core/extents.hpp>

namespace mg {

/// A tensor shape: one extent per dimension, outermost first (row-major).
///
/// A vector of `std::int64_t` with the interface of `std::vector` that shapes use (iterators,
/// `size`, `operator[]`, `push_back`, `insert`, `erase`, `resize`, comparisons), which keeps up to
/// six extents inline: a tensor's shape and strides cost no allocation of their own. Longer shapes
/// move to the heap. It converts to and from `std::vector<std::int64_t>`.
///
/// Note [Inline shapes]: every tensor the runtime engine makes has a shape and strides, and every
/// op copies, broadcasts or compares a few of them; as `std::vector`s they were most of the heap
/// allocations of a small op (docs/performance.md, "The runtime engine on the same LSTM"). The
/// container is the static engine's (Note [Cheap extents] in core/extents.hpp).
class shape_t : public detail::extents<std::int64_t, 6> {
  using base = detail::extents<std::int64_t, 6>;

 public:
  static constexpr size_type inline_capacity = 6;

  using base::base;
  shape_t() noexcept = default;
  shape_t(const base& b) : base(b) {}  // NOLINT: implicit

  /// The same extents as a `std::vector`.
  operator std::vector<value_type>() const { return {begin(), end()}; }  // NOLINT: implicit

  // Comparisons, element by element (with each other and with std::vector).
  friend bool operator==(const shape_t& a, const shape_t& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend std::strong_ordering operator<=>(const shape_t& a, const shape_t& b) noexcept {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const shape_t& a, const std::vector<value_type>& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend void swap(shape_t& a, shape_t& b) noexcept { a.swap(b); }
};

}  // namespace mg

// Which elements argmax, argmin, max and min along a dim, and topk pick: positions along a
// dimension, computed on the host from contiguous row-major values, shared by every family.
//
// Note [Selection order]: elements are ranked by value, and equal values by position, the lower
// first; so argmax, argmin and max/min along a dim return the first extreme of each slice (torch
// documents this for max, min, argmax and argmin), and topk lists equal values in the order they
// appear (torch leaves that order unspecified). NaN ranks above every number for argmax, max and
// topk(largest), and is picked first by argmin and min too, as torch's NaN-propagating max and
// min are (their value is NaN, so their index points at one); topk(smallest) ranks NaN last, as
// torch's sort does.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <metagrad/types.hpp>

namespace mg::detail {

enum class pick : unsigned char {
  largest,   // argmax, max along a dim, topk(largest)
  smallest,  // argmin, min along a dim (NaN first)
  bottom,    // topk(largest = false) (NaN last)
};

// Does a (at position i) rank before b (at position j)? (Note [Selection order])
template <class T>
bool ranks_before(T a, std::int64_t i, T b, std::int64_t j, pick p) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) {
      if (na && nb) return i < j;
      return p == pick::bottom ? nb : na;
    }
  }
  if (a != b) return p == pick::largest ? a > b : a < b;
  return i < j;
}

/// The positions along dim d of the k elements of each slice of x (contiguous, row-major, of
/// `shape`) that rank first (Note [Selection order]), in rank order: a row-major array of x's
/// shape with extent k along d.
template <class T>
std::vector<std::int64_t> top_positions(const T* x, const shape_t& shape, std::size_t d,
                                        std::int64_t k, pick p) {
  std::int64_t outer = 1, inner = 1;
  const std::int64_t n = shape.empty() ? 1 : shape[d];
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < d) outer *= shape[i];
    if (i > d) inner *= shape[i];
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(outer * k * inner));
  if (out.empty()) return out;
  struct entry {
    T v;
    std::int64_t i;
  };
  std::vector<entry> row(static_cast<std::size_t>(n));
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t in = 0; in < inner; ++in) {
      const T* s = x + o * n * inner + in;  // element j of this slice is s[j * inner]
      std::int64_t* dst = out.data() + o * k * inner + in;
      if (k == 1) {  // one pass: the first NaN decides at once, else the first extreme
        std::int64_t best = -1;
        for (std::int64_t j = 0; j < n; ++j) {
          const T v = s[j * inner];
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(v)) {
              if (p == pick::bottom) continue;
              best = j;
              break;
            }
          }
          if (best < 0 || (p == pick::largest ? v > s[best * inner] : v < s[best * inner]))
            best = j;
        }
        dst[0] = best < 0 ? 0 : best;  // every element NaN, ranked last: the first
        continue;
      }
      bool nan = false;
      for (std::int64_t j = 0; j < n; ++j) {
        row[static_cast<std::size_t>(j)] = {s[j * inner], j};
        if constexpr (std::is_floating_point_v<T>) nan = nan || std::isnan(s[j * inner]);
      }
      const auto pick_k = [&](auto before) {
        std::nth_element(row.begin(), row.begin() + (k - 1), row.end(), before);
        std::sort(row.begin(), row.begin() + k, before);
        for (std::int64_t r = 0; r < k; ++r) dst[r * inner] = row[static_cast<std::size_t>(r)].i;
      };
      using E = const entry&;
      if (nan)
        pick_k([p](E a, E b) { return ranks_before(a.v, a.i, b.v, b.i, p); });
      else if (p == pick::largest)  // no NaN: plain comparisons
        pick_k([](E a, E b) { return a.v > b.v || (a.v == b.v && a.i < b.i); });
      else
        pick_k([](E a, E b) { return a.v < b.v || (a.v == b.v && a.i < b.i); });
    }
  }
  return out;
}

/// The flat (row-major) indices into x of the elements whose positions along d `top_positions`
/// gave, for x of `shape`.
inline std::vector<std::int64_t> flat_indices(const std::vector<std::int64_t>& positions,
                                              const shape_t& shape, std::size_t d, std::int64_t k) {
  std::int64_t inner = 1;
  const std::int64_t n = shape.empty() ? 1 : shape[d];
  for (std::size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  std::vector<std::int64_t> flat(positions.size());
  for (std::size_t f = 0; f < positions.size(); ++f) {
    const auto e = static_cast<std::int64_t>(f);
    const std::int64_t o = e / (k * inner), in = e % inner;
    flat[f] = (o * n + positions[f]) * inner + in;
  }
  return flat;
}

}  // namespace mg::detail

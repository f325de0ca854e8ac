// The shape arithmetic of the shape, indexing and matrix-product ops, shared by every array
// family: which shape a reshape gives (-1 inferred), which dimensions a squeeze drops, which
// elements a slice takes, how matmul's operands broadcast. Each rule checks its arguments and
// throws mg::error naming the op, the shapes and the valid range.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <metagrad/core/broadcast.hpp>
#include <metagrad/core/storage.hpp>
#include <metagrad/error.hpp>
#include <metagrad/types.hpp>

namespace mg::detail {

/// dim (negative counts from the end) of a shape of rank `rank`, checked. A 0-d tensor accepts
/// dims 0 and -1, as in torch.
inline std::size_t wrap_dim(std::int64_t dim, std::size_t rank, const char* op,
                            const shape_t& shape) {
  const auto n = static_cast<std::int64_t>(rank == 0 ? 1 : rank);
  if (dim < -n || dim >= n)
    fail(op, ": dim ", dim, " is out of range for a tensor of shape ", shape_string(shape),
         " (valid: ", -n, " to ", n - 1, ")");
  return static_cast<std::size_t>(dim < 0 ? dim + n : dim);
}

/// How a reshape-like op computes its result's shape from its input's.
struct shape_rule {
  enum kind_t : unsigned char { to, flatten, squeeze_all, squeeze_dim } kind = to;
  shape_t shape{};             // `to`: the requested shape, one -1 allowed
  std::int64_t a = 0, b = -1;  // flatten: start and end dims; squeeze_dim: the dim
  bool view = false;           // view(): a copy is an error

  const char* op() const {
    switch (kind) {
      case flatten:
        return "flatten";
      case squeeze_all:
      case squeeze_dim:
        return "squeeze";
      default:
        return view ? "view" : "reshape";
    }
  }

  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  shape_t apply(const shape_t& in) const {
    switch (kind) {
      case flatten: {
        if (in.empty()) return {1};
        const std::size_t s = wrap_dim(a, in.size(), "flatten", in);
        const std::size_t e = wrap_dim(b, in.size(), "flatten", in);
        if (s > e)
          fail("flatten: start_dim ", a, " comes after end_dim ", b, " for a tensor of shape ",
               shape_string(in), "; pass start_dim <= end_dim");
        shape_t out(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(s));
        std::int64_t n = 1;
        for (std::size_t i = s; i <= e; ++i) n *= in[i];
        out.push_back(n);
        out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(e) + 1, in.end());
        return out;
      }
      case squeeze_all: {
        shape_t out;
        for (auto e : in)
          if (e != 1) out.push_back(e);
        return out;
      }
      case squeeze_dim: {
        const std::size_t d = wrap_dim(a, in.size(), "squeeze", in);
        shape_t out = in;
        if (!in.empty() && in[d] == 1) out.erase(out.begin() + static_cast<std::ptrdiff_t>(d));
        return out;
      }
      default:
        return resolve(in);
    }
  }

  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  shape_t resolve(const shape_t& in) const {
    const std::int64_t n = numel_of(in);
    std::int64_t known = 1;
    std::optional<std::size_t> infer;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == -1) {
        if (infer)
          fail(op(), ": only one dimension can be inferred (-1), got shape ", shape_string(shape));
        infer = i;
      } else if (shape[i] < 0) {
        fail(op(), ": invalid extent ", shape[i], " in shape ", shape_string(shape),
             " (extents are >= 0, or -1 to infer one)");
      } else {
        known *= shape[i];
      }
    }
    shape_t out = shape;
    if (infer) {
      if (known == 0 || n % known != 0)
        fail(op(), ": shape ", shape_string(shape), " is invalid for an input of ", n,
             " elements (shape ", shape_string(in), "): the known extents do not divide ", n);
      out[*infer] = n / known;
    } else if (known != n) {
      fail(op(), ": shape ", shape_string(shape), " is invalid for an input of ", n,
           " elements (shape ", shape_string(in), "); the number of elements must stay ", n);
    }
    return out;
  }
};

/// The strides of a view of a tensor (shape, strides) with shape `to`, or nothing when the
/// elements are not laid out so that a view can have that shape (then reshape copies).
inline std::optional<shape_t> view_strides(const shape_t& shape, const shape_t& strides,
                                           const shape_t& to) {
  if (numel_of(shape) == 0 || shape.empty()) return contiguous_strides(to);
  shape_t out(to.size(), 0);
  // Walk both shapes from the last dimension, one chunk of x's dimensions that are contiguous
  // with each other at a time; each chunk must be covered exactly by dimensions of `to`.
  auto view_d = static_cast<std::ptrdiff_t>(to.size()) - 1;
  std::int64_t chunk_stride = strides.back(), tensor_n = 1, view_n = 1;
  for (auto d = static_cast<std::ptrdiff_t>(shape.size()) - 1; d >= 0; --d) {
    const auto du = static_cast<std::size_t>(d);
    tensor_n *= shape[du];
    if (d == 0 || (shape[du - 1] != 1 && strides[du - 1] != tensor_n * chunk_stride)) {
      while (view_d >= 0 && (view_n < tensor_n || to[static_cast<std::size_t>(view_d)] == 1)) {
        out[static_cast<std::size_t>(view_d)] = view_n * chunk_stride;
        view_n *= to[static_cast<std::size_t>(view_d)];
        --view_d;
      }
      if (view_n != tensor_n) return std::nullopt;
      if (d > 0) {
        chunk_stride = strides[du - 1];
        tensor_n = 1;
        view_n = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

/// A permutation of the dimensions: explicit (`dims`), or the swap of two (`transpose`).
struct permutation {
  std::vector<std::int64_t> dims{};
  std::int64_t d0 = 0, d1 = 0;
  bool swap = false;

  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  std::vector<std::size_t> apply(const shape_t& in) const {
    const std::size_t n = in.size();
    std::vector<std::size_t> p(n);
    for (std::size_t i = 0; i < n; ++i) p[i] = i;
    if (swap) {
      if (n == 0) {
        wrap_dim(d0, 0, "transpose", in);
        wrap_dim(d1, 0, "transpose", in);
        return p;
      }
      std::swap(p[wrap_dim(d0, n, "transpose", in)], p[wrap_dim(d1, n, "transpose", in)]);
      return p;
    }
    if (dims.size() != n)
      fail("permute: ", dims.size(), " dims given for a tensor of shape ", shape_string(in), " (",
           n, " dimensions); name every dimension once");
    std::vector<bool> seen(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      p[i] = wrap_dim(dims[i], n, "permute", in);
      if (seen[p[i]])
        fail("permute: dim ", dims[i], " appears twice in ", shape_string(dims),
             "; name every dimension of shape ", shape_string(in), " once");
      seen[p[i]] = true;
    }
    return p;
  }
  // The permutation that undoes this one on a tensor of rank n.
  // The permutation that undoes this one on a tensor of rank n (this one already checked).
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  permutation inverse(std::size_t n) const {
    if (swap) return *this;
    permutation r;
    r.dims.assign(n, 0);
    const auto rank = static_cast<std::int64_t>(n);
    for (std::size_t i = 0; i < n && i < dims.size(); ++i) {
      const std::int64_t d = dims[i] < 0 ? dims[i] + rank : dims[i];
      if (d >= 0 && d < rank) r.dims[static_cast<std::size_t>(d)] = static_cast<std::int64_t>(i);
    }
    return r;
  }
};

/// The elements start, start + step, ... below end along `dim` (torch's slice: start and end
/// clamped to the extent, negative ones counting from the end).
struct slice_spec {
  std::int64_t dim = 0;
  std::optional<std::int64_t> start{}, end{};
  std::int64_t step = 1;
};

struct slice_range {
  std::size_t dim;
  std::int64_t start, length, step;
};

template <int = 0>
slice_range resolve_slice(const slice_spec& s, const shape_t& in) {
  if (in.empty()) fail("slice: a 0-d tensor cannot be sliced (it has no dimensions)");
  const std::size_t d = wrap_dim(s.dim, in.size(), "slice", in);
  if (s.step <= 0)
    fail("slice: step ", s.step, " along dim ", s.dim, " of shape ", shape_string(in),
         "; the step must be positive (reverse with index_select)");
  const std::int64_t n = in[d];
  auto clamp = [n](std::optional<std::int64_t> v, std::int64_t dflt) {
    std::int64_t x = v.value_or(dflt);
    if (x < 0) x += n;
    return std::clamp<std::int64_t>(x, 0, n);
  };
  const std::int64_t b = clamp(s.start, 0), e = std::max(clamp(s.end, n), b);
  return {d, b, e == b ? 0 : (e - b - 1) / s.step + 1, s.step};
}

/// index i (negative counts from the end) along `dim` of shape `in`, checked.
template <int = 0>
std::int64_t wrap_index(std::int64_t i, std::int64_t extent, const char* op, std::size_t dim,
                        const shape_t& in) {
  if (i < -extent || i >= extent)
    fail(op, ": index ", i, " is out of range for dim ", dim, " of a tensor of shape ",
         shape_string(in), " (valid: ", -extent, " to ", extent - 1, ")");
  return i < 0 ? i + extent : i;
}

/// The shape of the concatenation of tensors of shapes `in` along dim, checked.
template <int = 0>
shape_t cat_shape(const std::vector<shape_t>& in, std::int64_t dim, const char* op,
                  std::size_t& d) {
  if (in.empty()) fail(op, ": expected a non-empty list of tensors");
  const shape_t& first = in[0];
  if (first.empty())
    fail(op,
         ": a 0-d tensor cannot be concatenated (it has no dimensions); unsqueeze it, or use "
         "stack");
  d = wrap_dim(dim, first.size(), op, first);
  shape_t out = first;
  out[d] = 0;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const shape_t& s = in[k];
    bool ok = s.size() == first.size();
    for (std::size_t i = 0; ok && i < s.size(); ++i) ok = i == d || s[i] == first[i];
    if (!ok)
      fail(op, ": tensor ", k, " has shape ", shape_string(s), " but tensor 0 has shape ",
           shape_string(first), "; all tensors must have the same shape except along dim ", dim);
    out[d] += s[d];
  }
  return out;
}

/// Shapes must be equal for stack.
template <int = 0>
void check_stack(const std::vector<shape_t>& in) {
  if (in.empty()) fail("stack: expected a non-empty list of tensors");
  for (std::size_t k = 1; k < in.size(); ++k)
    if (in[k] != in[0])
      fail("stack: tensor ", k, " has shape ", shape_string(in[k]), " but tensor 0 has shape ",
           shape_string(in[0]), "; stack needs tensors of equal shapes");
}

/// What matmul computes: operands read as (batch..., m, k) and (batch..., k, n) after 1-D
/// promotion, the broadcast batch shape, and the result's shape (promoted dimensions dropped).
struct matmul_plan {
  shape_t batch, a_full, b_full, out;
  std::int64_t m = 1, k = 1, n = 1;
};

template <int = 0>
matmul_plan plan_matmul(const shape_t& a, const shape_t& b, const char* op) {
  if (a.empty() || b.empty())
    fail(op, ": both arguments need at least 1 dimension, got shapes ", shape_string(a), " and ",
         shape_string(b), " (multiply a 0-d tensor with *)");
  matmul_plan p;
  shape_t a2 = a.size() == 1 ? shape_t{1, a[0]} : a;
  shape_t b2 = b.size() == 1 ? shape_t{b[0], 1} : b;
  p.m = a2[a2.size() - 2];
  p.k = a2.back();
  p.n = b2.back();
  if (b2[b2.size() - 2] != p.k)
    fail(op, ": shapes ", shape_string(a), " and ", shape_string(b),
         " cannot be multiplied (inner dimensions ", p.k, " and ", b2[b2.size() - 2],
         " differ); the last dimension of the first must equal ",
         b.size() == 1 ? "the length of the vector" : "the second-to-last of the second");
  const shape_t ab(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  const std::size_t r = std::max(ab.size(), bb.size());
  p.batch.assign(r, 1);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t x = i + ab.size() >= r ? ab[i + ab.size() - r] : 1;
    const std::int64_t y = i + bb.size() >= r ? bb[i + bb.size() - r] : 1;
    if (x != y && x != 1 && y != 1)
      fail(op, ": the batch dimensions of shapes ", shape_string(a), " and ", shape_string(b),
           " do not broadcast (", x, " and ", y, " differ and neither is 1); make them equal or 1");
    p.batch[i] = x == 1 ? y : x;
  }
  p.a_full = p.batch;
  p.a_full.insert(p.a_full.end(), {p.m, p.k});
  p.b_full = p.batch;
  p.b_full.insert(p.b_full.end(), {p.k, p.n});
  p.out = p.batch;
  if (a.size() > 1) p.out.push_back(p.m);
  if (b.size() > 1) p.out.push_back(p.n);
  return p;
}

}  // namespace mg::detail

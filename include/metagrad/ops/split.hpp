// Splitting a tensor into views along one dimension, as torch's unbind, chunk and split (with
// split_with_sizes) do. Each returns a tensor_list of views of the input (selects or slices:
// they share its storage and version counter), so a backward through any subset of the outputs
// gives the input their gradients at their elements and zeros elsewhere, to every order, and
// forward-mode tangents follow the views. Runtime engine only (mg::tensor); declared with the
// class in <metagrad/tensor_class.hpp>, with members `x.unbind()`, `x.chunk(n)`, `x.split(n)`.
//
// Note [Multi-output views]: torch does not let an output of a function that returns several
// views be modified in place when autograd records the write (grad mode on, and the view or the
// value written requires grad): its CreationMeta::MULTI_OUTPUT_NODE. The outputs here carry a
// view_origin (graph.hpp) naming the op and the output, and views made from them inherit it
// (view_of), as torch propagates the creation meta to views of views. Two places check it:
//   - in_place, when it records the write (check_multi_output_view with the in-place op's name);
//   - refresh_view, when the view is used in grad mode after its base or another view of its base
//     was written (torch's "indirect" case) and the base requires grad. Under no_grad the view is
//     left as it is until such a use.
// Writes that are not recorded (under no_grad_guard, or when nothing requires grad) are allowed
// and reach the base. (Each output here has a node of its own, so the rule is not what keeps the
// gradients right; it keeps programs behaving as they do in torch.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <metagrad/call_site.hpp>
#include <metagrad/core/shape_rules.hpp>
#include <metagrad/error.hpp>
#include <metagrad/ops/indexing.hpp>
#include <metagrad/runtime/apply.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg {

namespace detail {

// view_origin::op: which op made the view (0: none).
inline constexpr const char* multi_output_op_names[] = {"", "unbind", "split", "chunk"};
enum multi_output_op : std::uint32_t { by_unbind = 1, by_split = 2, by_chunk = 3 };

/// Fails when t is (a view of) an output of unbind, split or chunk: `op` names the in-place op
/// whose write is being recorded on t; null, that t's base or another view of its base was
/// written and t is used in grad mode (Note [Multi-output views]).
template <int = 0>  // Note [Lazy members]
void check_multi_output_view(const tensor_impl& t, const char* op) {
  if (!t.origin.op) return;
  const char* by = multi_output_op_names[t.origin.op];
  if (op)
    fail(op, ": output ", t.origin.output, " of ", by, " (or a view of it; shape ",
         shape_string(t.shape),
         ") is a view and is being modified inplace while autograd records it. This view is the "
         "output of a function that returns multiple views. Such functions do not allow the "
         "output views to be modified inplace. Use the out-of-place op instead, or modify a "
         "clone() of the output");
  fail(by, ": output ", t.origin.output, " (or a view of it; shape ", shape_string(t.shape),
       ") is a view and its base or another view of its base has been modified inplace since ", by,
       " made it. This view is the output of a function that returns multiple views. Such "
       "functions do not allow the output views to be modified inplace. Use the outputs before "
       "modifying the tensor, or take clone()s of them");
}

// The slices of x along d of the given lengths, in order, marked as outputs of `by`.
template <int I>
tensor_list split_views(const tensor& x, std::size_t d, const std::vector<std::int64_t>& sizes,
                        multi_output_op by, const call_site& site) {
  tensor_list out;
  out.reserve(sizes.size());
  std::int64_t at = 0;
  for (const std::int64_t s : sizes) {
    out.push_back(mg::slice(lazy<I>(x), static_cast<std::int64_t>(d), at, at + s, 1, site));
    at += s;
  }
  for (std::size_t k = 0; k < out.size(); ++k)
    out[k].impl()->origin = {by, static_cast<std::uint32_t>(k)};
  return out;
}

// The dimension of x that `op` splits, checked (x is at least 1-D).
template <int = 0>
std::size_t split_dim(const tensor& x, std::int64_t dim, const char* op) {
  const shape_t& xs = operand(x, op).shape;
  if (xs.empty())
    fail(op, ": a 0-d tensor has no dimension to split; reshape it to 1-D first (reshape({1}))");
  return wrap_dim(dim, xs.size(), op, xs);
}

}  // namespace detail

template <int I>
tensor_list unbind(const tensor& x, std::int64_t dim, call_site site) {
  const std::size_t d = detail::split_dim(x, dim, "unbind");
  const std::int64_t n = x.shape()[d];
  tensor_list out;
  out.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    out.push_back(mg::select(detail::lazy<I>(x), static_cast<std::int64_t>(d), i, site));
  for (std::size_t k = 0; k < out.size(); ++k)
    out[k].impl()->origin = {detail::by_unbind, static_cast<std::uint32_t>(k)};
  return out;
}

template <int I>
tensor_list chunk(const tensor& x, std::int64_t chunks, std::int64_t dim, call_site site) {
  const std::size_t d = detail::split_dim(x, dim, "chunk");
  if (chunks <= 0)
    detail::fail("chunk: chunks must be at least 1, got ", chunks, " (a tensor of shape ",
                 detail::shape_string(x.shape()), "); ask for 1 or more chunks");
  // torch's rule: pieces of ceil(n / chunks), the last shorter, so possibly fewer than asked;
  // an empty dimension gives `chunks` empty pieces
  const std::int64_t n = x.shape()[d], size = n / chunks + (n % chunks != 0);
  std::vector<std::int64_t> sizes;
  if (n == 0) sizes.assign(static_cast<std::size_t>(chunks), 0);
  for (std::int64_t at = 0; at < n; at += size) sizes.push_back(std::min(size, n - at));
  return detail::split_views<I>(x, d, sizes, detail::by_chunk, site);
}

template <int I>
tensor_list split(const tensor& x, std::int64_t split_size, std::int64_t dim, call_site site) {
  const std::size_t d = detail::split_dim(x, dim, "split");
  const std::int64_t n = x.shape()[d];
  if (split_size < 0 || (split_size == 0 && n != 0))
    detail::fail("split: split_size ", split_size, " for dim ", d, " of size ", n,
                 " (a tensor of shape ", detail::shape_string(x.shape()),
                 "); split_size must be at least 1 (0 only for an empty dim)");
  // torch's rule: pieces of split_size, the last shorter; always at least one piece
  std::vector<std::int64_t> sizes;
  for (std::int64_t at = 0; at < n; at += split_size) sizes.push_back(std::min(split_size, n - at));
  if (sizes.empty()) sizes.push_back(0);
  return detail::split_views<I>(x, d, sizes, detail::by_split, site);
}

template <int I>
tensor_list split(const tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t dim,
                  call_site site) {
  const std::size_t d = detail::split_dim(x, dim, "split");
  const std::int64_t n = x.shape()[d];
  std::int64_t total = 0;
  for (const std::int64_t s : sizes) {
    if (s < 0)
      detail::fail("split: sizes ", detail::shape_string(sizes), " for dim ", d,
                   " of a tensor of shape ", detail::shape_string(x.shape()),
                   " has a negative size; give sizes of 0 or more that sum to ", n);
    total += s;
  }
  if (total != n)
    detail::fail("split: sizes ", detail::shape_string(sizes), " sum to ", total, ", but dim ", d,
                 " of a tensor of shape ", detail::shape_string(x.shape()), " has size ", n,
                 "; give sizes that sum to ", n);
  return detail::split_views<I>(x, d, sizes, detail::by_split, site);
}

}  // namespace mg

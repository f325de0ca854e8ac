// Forward mode along a block of directions at once (Note [Blocks of directions]).
//
// Note [Blocks of directions]: a dual array's tangent may hold B directions: a leading dimension
// of extent B before the value's shape, so that its rank is the value's plus one (a tangent of
// the value's own rank is one direction, or zeros, which broadcast over any block). mg::jacobian
// and mg::hessian seed B columns of the identity at once, and one pass of f (for mg::hessian, one
// reverse sweep run on dual arrays) gives B columns of the result:
// - an elementwise op whose dual inputs have the result's shape computes each input's local
//   derivative once, on that shape, and then the tangent in one pass over [B, value shape] (a
//   pass more for each input beyond two); an input whose tangent is one direction of zeros (an
//   adjoint that has not yet met the directions) adds no term. Otherwise, in one region (one
//   SIMD loop) over [B, value shape]: a tangent of lower rank than the result gets unit
//   dimensions after its block dimension, and the numpy broadcast does the rest;
// - the linear ops a reverse sweep is made of (sum, expand, sum_to, slice and its adjoint embed)
//   apply themselves to the block with their dimensions shifted by one;
// - any other op computes its tangent once per direction (Note [Dual arrays]).
// B is chosen by the caller so that a block of tangents stays small (block_directions).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/dual_array.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/dual_tangents.hpp>
#include <metagrad/xt/pool.hpp>

namespace mg::detail {

// How many directions mg::jacobian and mg::hessian seed at once for an argument of n elements:
// all of them up to 128, and fewer for larger arguments, so that a block of tangents of the
// argument's size stays about 2^16 elements.
inline std::size_t block_directions(std::size_t n) {
  if (n <= 128) return std::max<std::size_t>(n, 1);
  return std::clamp<std::size_t>((std::size_t{1} << 16) / n, 1, 128);
}

// The number of directions in x's tangent: 0 for one direction (or no tangent).
template <class X>
std::size_t block_of(const X& x) {
  if constexpr (is_dual_v<X>) {
    return x.tangent.dimension() == x.value.dimension() + 1 ? x.tangent.shape()[0] : 0;
  } else {
    return 0;
  }
}

// [b, shape...], with `pad` unit dimensions after b (a block aligned with a result of higher rank)
template <class S>
std::vector<std::size_t> with_block(std::size_t b, const S& shape, std::size_t pad = 0) {
  std::vector<std::size_t> s{b};
  s.insert(s.end(), pad, 1);
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

template <class T, class Op, class... X>
struct block_rule {
  using D = typename dual_seq<X...>::type;

  // The tangents of op at x... along b directions, shape [b, y's shape].
  template <class Y>
  static work_array<T> of(const Op& op, const Y& y, std::size_t b, const X&... x) {
    const std::vector<std::size_t> ys = with_block(b, shape_of(y));
    work_array<T> t;
    if constexpr (is_elementwise<Op>()) {
      t = elementwise(op, y, b, shape_of(y).size(), D{}, std::make_index_sequence<D::size()>{},
                      x...);
    } else if constexpr (sizeof...(X) == 1 && (is_dual_v<X> && ...) && shifts_v) {
      t = shifted(op, x.tangent..., shape_of(x.value)...);
    } else {
      t = by_direction(op, y, b, x...);
    }
    if (!std::equal(t.shape().begin(), t.shape().end(), ys.begin(), ys.end())) {
      if (t.dimension() >= 1 && t.shape()[0] == b && t.size() == work_size(ys)) {
        t.reshape(ys);  // the same elements (a full sum with keepdim)
      } else {
        t = aligned_broadcast(std::move(t), b, ys);
      }
    }
    return t;
  }

 private:
  static constexpr bool shifts_v = std::is_same_v<Op, sum_op> || std::is_same_v<Op, expand_op> ||
                                   std::is_same_v<Op, sum_to_op> ||
                                   std::is_base_of_v<slice_op, Op> || std::is_same_v<Op, embed_op>;

  static std::size_t work_size(const std::vector<std::size_t>& s) {
    std::size_t n = 1;
    for (std::size_t e : s) n *= e;
    return n;
  }
  // t ([b, s...], or a tangent of one direction) broadcast to ys = [b, y's shape]
  static work_array<T> aligned_broadcast(work_array<T> t, std::size_t b,
                                         const std::vector<std::size_t>& ys) {
    if (t.dimension() >= 1 && t.shape()[0] == b && t.dimension() < ys.size()) {
      const std::vector<std::size_t> rest(t.shape().begin() + 1, t.shape().end());
      t.reshape(with_block(b, rest, ys.size() - t.dimension()));
    }
    return algebra<work_array<T>>::broadcast(t, shape_t(ys.begin(), ys.end()));
  }

  // a blocked tangent of lower rank than the result, with unit dimensions after the block one
  template <class A>
  static const work_array<T>& aligned(const A& a, std::size_t rank, work_array<T>& held) {
    const std::size_t r = a.value.dimension();
    if (a.tangent.dimension() != r + 1 || r >= rank) return a.tangent;
    held = a.tangent;
    held.reshape(with_block(a.tangent.shape()[0], a.value.shape(), rank - r));
    return held;
  }
  template <class Y, std::size_t... d, std::size_t... k>
  static work_array<T> elementwise(const Op& op, const Y& y, std::size_t b, std::size_t rank,
                                   std::index_sequence<d...>, std::index_sequence<k...>,
                                   const X&... x) {
    const auto all = std::forward_as_tuple(x...);
    const shape_t ys = shape_of(y);
    if ((same_shape(std::get<d>(all).value, ys) && ...)) {
      // every dual input has the result's shape: each local derivative once, on that shape, then
      // one pass over the block
      work_array<T> out = work_array<T>::from_shape(with_block(b, ys));
      const work_array<T> local[] = {local_of<d>(op, y, x...)...};
      term terms[sizeof...(d)];
      std::size_t live = 0;
      (add_term(terms, live, local[k], std::get<d>(all).tangent, b), ...);
      combine(out.data(), terms, live, b, out.size() / std::max<std::size_t>(b, 1));
      return out;
    }
    work_array<T> held[sizeof...(d) + 1];
    return as_work<T>(call(elementwise_tangent<Op, sizeof...(X), std::index_sequence<d...>>{op},
                           primal(x)..., y, aligned(std::get<d>(all), rank, held[k])...));
  }

  static bool same_shape(const work_array<T>& v, const shape_t& s) {
    return std::equal(v.shape().begin(), v.shape().end(), s.begin(), s.end());
  }
  // d op / d x_j on the result's shape (the backward at the seed 1, component j)
  template <std::size_t j, class Y>
  static work_array<T> local_of(const Op& op, const Y& y, const X&... x) {
    return as_work<T>(call(elementwise_tangent<Op, sizeof...(X), std::index_sequence<j>>{op},
                           primal(x)..., y, T(1)));
  }
  // One input's part of the tangent: its local derivative times its tangent, which holds the
  // block's directions one after another (step = the result's size) or one direction for all
  // (step 0).
  struct term {
    const T* local;
    const T* tangent;
    std::size_t step;
  };
  // x_j's term, unless its tangent is one direction of zeros (an adjoint before it meets the
  // directions): that term adds nothing, and a pass over the block is saved
  static void add_term(term* terms, std::size_t& live, const work_array<T>& local,
                       const work_array<T>& t, std::size_t b) {
    const std::size_t m = local.size();
    const bool blocked = t.size() == b * m && t.dimension() == local.dimension() + 1;
    if (!blocked && std::all_of(t.data(), t.data() + m, [](T v) { return v == T(0); })) return;
    terms[live++] = term{local.data(), t.data(), blocked ? m : 0};
  }
  // out = the sum of the terms, along each of the b directions: one pass over the block for one
  // or two terms, a pass more for each further one
  static void combine(T* out, const term* terms, std::size_t live, std::size_t b, std::size_t m) {
    if (live == 0) {
      std::fill(out, out + b * m, T(0));
      return;
    }
    for (std::size_t k = 0; k < b; ++k) {
      const term& u = terms[0];
      if (live == 1) {
        product(out + k * m, u.local, u.tangent + k * u.step, m);
      } else {
        const term& v = terms[1];
        product_sum(out + k * m, u.local, u.tangent + k * u.step, v.local, v.tangent + k * v.step,
                    m);
      }
      for (std::size_t i = 2; i < live; ++i)
        add_product(out + k * m, terms[i].local, terms[i].tangent + k * terms[i].step, m);
    }
  }
  // distinct arrays: __restrict lets -O2 vectorise without checking for overlap
  static void product(T* __restrict o, const T* __restrict l, const T* __restrict t,
                      std::size_t m) {
    for (std::size_t e = 0; e < m; ++e) o[e] = l[e] * t[e];
  }
  static void product_sum(T* __restrict o, const T* __restrict l, const T* __restrict t,
                          const T* __restrict l2, const T* __restrict t2, std::size_t m) {
    for (std::size_t e = 0; e < m; ++e) o[e] = l[e] * t[e] + l2[e] * t2[e];
  }
  static void add_product(T* __restrict o, const T* __restrict l, const T* __restrict t,
                          std::size_t m) {
    for (std::size_t e = 0; e < m; ++e) o[e] += l[e] * t[e];
  }

  // Linear ops of one input, applied to the block with their dimensions one further.
  static work_array<T> shifted(const Op& op, const work_array<T>& t, const shape_t& xs) {
    const std::size_t b = t.shape()[0];
    using A = algebra<work_array<T>>;
    if constexpr (std::is_same_v<Op, sum_op>) {
      if (op.r.all) {  // each direction's sum
        work_array<T> out = work_array<T>::from_shape({b});
        const std::size_t m = t.size() / std::max<std::size_t>(b, 1);
        for (std::size_t k = 0; k < b; ++k) {
          T acc(0);
          for (std::size_t e = 0; e < m; ++e) acc += t.data()[k * m + e];
          out.data()[k] = acc;
        }
        return out;
      }
      const std::size_t d = wrap_dim(op.r.dim, xs.size(), "sum", xs);
      return work_array<T>(
          A::sum(t, reduce_dims{false, static_cast<std::int64_t>(d + 1), op.r.keepdim}));
    } else if constexpr (std::is_same_v<Op, expand_op>) {
      work_array<T> u = t;
      u.reshape(with_block(b, xs, op.shape.size() - xs.size()));
      const std::vector<std::size_t> to = with_block(b, op.shape);
      return work_array<T>(A::broadcast(u, shape_t(to.begin(), to.end())));
    } else if constexpr (std::is_same_v<Op, sum_to_op>) {
      work_array<T> u = t;
      const std::size_t lead = xs.size() - std::min(xs.size(), op.shape.size());
      if (lead > 0) {  // the leading dimensions sum_to drops
        std::size_t m = 1;
        for (std::size_t i = 0; i < lead; ++i) m *= xs[i];
        std::vector<std::size_t> s{b, m};
        s.insert(s.end(), xs.begin() + static_cast<std::ptrdiff_t>(lead), xs.end());
        u.reshape(s);
        u = work_array<T>(A::sum(u, reduce_dims{false, 1, false}));
      }
      return work_array<T>(reduce_to_shape(u, with_block(b, op.shape)));
    } else if constexpr (std::is_base_of_v<slice_op, Op>) {
      const slice_range r = resolve_slice(op.s, xs);
      std::vector<std::size_t> to = with_block(b, xs);
      to[r.dim + 1] = static_cast<std::size_t>(r.length);
      work_array<T> out = work_array<T>::from_shape(to);
      strided_rows(t.data(), out.data(), true, slice_rows(with_block(b, xs), r, false));
      return out;
    } else {
      static_assert(std::is_same_v<Op, embed_op>);
      const std::vector<std::size_t> fs = with_block(b, op.shape);
      work_array<T> out = work_array<T>::from_shape(fs);
      const slice_rows g(fs, op.r, op.drop);
      zero_outside(out.data(), g);
      strided_rows(t.data(), out.data(), false, g);
      return out;
    }
  }
  // Slice r of dimension r.dim + 1 of a block array of shape fs (the block dimension first),
  // without that dimension when drop: outer x extent x inner elements, of which the slice takes
  // len runs of inner elements, step apart, from start.
  struct slice_rows {
    std::size_t outer = 1, extent, inner = 1, start, len, step;
    slice_rows(const std::vector<std::size_t>& fs, const slice_range& r, bool drop)
        : extent(fs[r.dim + 1]),
          start(static_cast<std::size_t>(r.start)),
          len(drop ? 1 : static_cast<std::size_t>(r.length)),
          step(drop ? 1 : static_cast<std::size_t>(r.step)) {
      for (std::size_t i = 0; i <= r.dim; ++i) outer *= fs[i];
      for (std::size_t i = r.dim + 2; i < fs.size(); ++i) inner *= fs[i];
    }
  };
  // Zeros the elements of the block array outside the slice (all of them for a strided slice).
  static void zero_outside(T* full, const slice_rows& g) {
    if (g.step != 1) {
      std::fill(full, full + g.outer * g.extent * g.inner, T(0));
      return;
    }
    for (std::size_t o = 0; o < g.outer; ++o) {
      T* row = full + o * g.extent * g.inner;
      std::fill(row, row + g.start * g.inner, T(0));
      std::fill(row + (g.start + g.len) * g.inner, row + g.extent * g.inner, T(0));
    }
  }
  // Copies between the block array at the slice and a contiguous array of the slice's elements:
  // from the block array into it (gather) or back.
  static void strided_rows(const T* from, T* to, bool gather, const slice_rows& g) {
    // with step 1 the slice of each outer index is one run of len * inner elements
    const std::size_t run = g.step == 1 ? g.len * g.inner : g.inner;
    const std::size_t runs = g.step == 1 ? 1 : g.len;
    for (std::size_t o = 0; o < g.outer; ++o)
      for (std::size_t l = 0; l < runs; ++l) {
        const std::size_t part = (o * g.len + l) * g.inner;
        const std::size_t full = (o * g.extent + g.start + l * g.step) * g.inner;
        const T* src = from + (gather ? full : part);
        T* dst = to + (gather ? part : full);
        for (std::size_t e = 0; e < run; ++e) dst[e] = src[e];
      }
  }

  // Any other op: its tangent along each direction in turn. Each blocked input's one-direction
  // dual is made once (its value copied once) and its tangent refilled per direction.
  template <class Y>
  static work_array<T> by_direction(const Op& op, const Y& y, std::size_t b, const X&... x) {
    const shape_t ys = shape_of(y);
    work_array<T> out = work_array<T>::from_shape(with_block(b, ys));
    const std::size_t m = out.size() / std::max<std::size_t>(b, 1);
    std::tuple<one_direction_t<X>...> xk{one_direction(x)...};
    for (std::size_t k = 0; k < b; ++k) {
      work_array<T> tk = std::apply(
          [&](auto&... a) {
            (load_direction(a, x, k), ...);
            return tangent_rule<T, Op, X...>::of(op, y, a...);
          },
          xk);
      if (!std::equal(tk.shape().begin(), tk.shape().end(), ys.begin(), ys.end()))
        tk = work_array<T>(xt::broadcast(tk, std::vector<std::size_t>(ys.begin(), ys.end())));
      std::copy(tk.data(), tk.data() + m, out.data() + k * m);
    }
    return out;
  }
  // an input along one direction: a dual array of its own for a blocked dual, else x itself
  template <class A>
  using one_direction_t = std::conditional_t<is_dual_v<A>, A, const A&>;
  template <class A>
  static one_direction_t<A> one_direction(const A& a) {
    if constexpr (is_dual_v<A>) {
      if (block_of(a) == 0) return a;
      return A{a.value, work_array<T>::from_shape(a.value.shape())};
    } else {
      return a;
    }
  }
  // direction k of x's block into its one-direction dual (nothing for other inputs)
  template <class H, class A>
  static void load_direction(H& h, const A& a, std::size_t k) {
    if constexpr (is_dual_v<A>) {
      if (block_of(a) == 0) return;
      const std::size_t n = h.tangent.size();
      std::copy(a.tangent.data() + k * n, a.tangent.data() + (k + 1) * n, h.tangent.data());
    }
  }
};

}  // namespace mg::detail

// Array functions on xtensor expressions for the shaped ops (sum, sum along an axis, matmul)
// and the policy under which the static engine keeps xtensor values materialised.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xexception.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xstorage.hpp>
#include <xtensor/xstrided_view.hpp>

#include <metagrad/backend/backend.hpp>
#include <metagrad/backend/cpu.hpp>
#include <metagrad/core/algebra.hpp>
#include <metagrad/core/broadcast.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/gemm.hpp>
#include <metagrad/core/selection.hpp>
#include <metagrad/core/shape_rules.hpp>
#include <metagrad/core/type_name.hpp>
#include <metagrad/error.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/types.hpp>
#include <metagrad/xt/pool.hpp>

namespace mg::detail {

template <class T>
concept XtExpr = xt::is_xexpression<std::remove_cvref_t<T>>::value;

template <class X>
using xt_value_t = typename std::remove_cvref_t<X>::value_type;

// xtensor arrays are evaluated by the ops' forward directly (detail::call).
template <class T>
requires XtExpr<T>
struct family_of_impl<T> {
  using type = array_family;
};

// An xtensor expression with strided memory behind it (containers, strided views): its elements
// can be read in place, from data() + data_offset() along strides(), when layout() allows.
template <class X>
concept XtStrided = XtExpr<X> && requires(const X& x) {
  x.data();
  x.data_offset();
  x.strides();
  x.layout();
};

// ... of elements of exactly type T
template <class X, class T>
concept XtStridedOf = XtStrided<X> && std::is_same_v<std::remove_cv_t<xt_value_t<X>>, T>;

// How BLAS reads a rows x cols matrix with element strides (s0, s1) in place: 'N' (row-major),
// 'T' (column-major: a transposed view), or 0 (neither).
inline char blas_layout(std::ptrdiff_t s0, std::ptrdiff_t s1, std::size_t rows, std::size_t cols) {
  const auto ir = static_cast<std::ptrdiff_t>(rows), ic = static_cast<std::ptrdiff_t>(cols);
  if ((s1 == 1 || cols <= 1) && (s0 == ic || rows <= 1)) return 'N';
  if ((s0 == 1 || rows <= 1) && (s1 == ir || cols <= 1)) return 'T';
  return 0;
}

// A 2-D operand as BLAS reads it: in place when its elements are contiguous in row-major order
// ('N') or column-major order ('T': a transposed view), else copied once into row-major order.
template <class T>
struct xt_gemm_operand {
  work_array<T> copy;
  const T* data = nullptr;
  char op = 'N';
  int ld = 1;

  template <class X>
  explicit xt_gemm_operand(const X& x) {
    const auto rows = x.shape()[0], cols = x.shape()[1];
    if constexpr (XtStridedOf<X, T>) {
      if (const char o = blas_layout(x.strides()[0], x.strides()[1], rows, cols)) {
        set(x.data() + x.data_offset(), o, o == 'N' ? cols : rows);
        return;
      }
    }
    copy = x;
    set(copy.data(), 'N', cols);
  }

 private:
  void set(const T* p, char o, std::size_t leading) {
    data = p;
    op = o;
    ld = static_cast<int>(std::max<std::size_t>(leading, 1));
  }
};

// A 1-D operand as BLAS reads it: in place along its (positive) stride, else copied once.
template <class T>
struct xt_vector_operand {
  work_array<T> copy;
  const T* data = nullptr;
  int inc = 1;

  // contiguous: in place only with stride 1
  template <class X>
  explicit xt_vector_operand(const X& x, bool contiguous = false) {
    if constexpr (XtStridedOf<X, T>) {
      const auto st = static_cast<std::ptrdiff_t>(x.strides()[0]);
      if ((contiguous ? st == 1 : st > 0) || x.size() <= 1) {
        data = x.data() + x.data_offset();
        inc = x.size() <= 1 ? 1 : static_cast<int>(st);
        return;
      }
    }
    copy = x;
    data = copy.data();
  }
};

// An array's extents inside the array evaluator: inline up to 4 dimensions, so that reading and
// broadcasting the shapes of a region's inputs allocates nothing (on arrays of a few elements,
// one heap allocation per input per region was a quarter of a step's instructions).
using dims = extents<std::size_t, 4>;

// out[...] = in broadcast: `in` is read with `strides` (0 along broadcast dimensions) over
// `shape` from dimension d on; out is contiguous. What a broadcast dimension repeats is written
// once and then copied, doubling the copied part each time (a row of 2 repeated 1000 times is 10
// copies, not 1000).
template <class T, class S>
void broadcast_rows(T*& out, const S* in, const dims& shape, const dims& strides, std::size_t d) {
  const std::size_t n = shape[d], st = strides[d];
  if (d + 1 == shape.size()) {
    if (st == 1) {
      for (std::size_t j = 0; j < n; ++j) out[j] = static_cast<T>(in[j]);
    } else {
      const T v = static_cast<T>(in[0]);
      for (std::size_t j = 0; j < n; ++j) out[j] = st == 0 ? v : static_cast<T>(in[j * st]);
    }
    out += n;
  } else if (st == 0) {
    T* const first = out;
    broadcast_rows(out, in, shape, strides, d + 1);
    const std::size_t block = static_cast<std::size_t>(out - first);
    for (std::size_t have = 1; have < n;) {
      const std::size_t c = std::min(have, n - have);
      std::copy(first, first + c * block, first + have * block);
      have += c;
    }
    out = first + n * block;
  } else {
    for (std::size_t j = 0; j < n; ++j) broadcast_rows(out, in + j * st, shape, strides, d + 1);
  }
}

// x broadcast to `shape`, in row-major order: row by row for an x with strided memory (a bias row
// repeated, a transposed view), adjacent dimensions that x reads contiguously (or broadcasts
// along both) merged into one; through xtensor's general assignment otherwise.
template <class T, class X>
work_array<T> broadcast_copy(const X& x, const dims& shape) {
  if constexpr (XtStrided<X>) {
    if (x.dimension() <= shape.size() && !shape.empty() &&
        std::all_of(x.strides().begin(), x.strides().end(), [](auto s) { return s >= 0; })) {
      const std::size_t lead = shape.size() - x.dimension();
      dims rows, strides;  // the merged extents, and x's stride along each
      for (std::size_t i = 0; i < shape.size(); ++i) {
        const bool own = i >= lead && x.shape()[i - lead] != 1;
        const std::size_t st = own ? static_cast<std::size_t>(x.strides()[i - lead]) : 0;
        if (shape[i] == 1) continue;
        if (!rows.empty() && strides.back() == st * shape[i]) {
          rows.back() *= shape[i];
          strides.back() = st;
        } else {
          rows.push_back(shape[i]);
          strides.push_back(st);
        }
      }
      work_array<T> copy = work_array<T>::from_shape(shape);
      T* out = copy.data();
      if (rows.empty()) {  // one element
        out[0] = static_cast<T>(x.data()[x.data_offset()]);
      } else if (copy.size() > 0) {
        broadcast_rows(out, x.data() + x.data_offset(), rows, strides, 0);
      }
      return copy;
    }
  }
  return work_array<T>(xt::broadcast(x, shape));
}

// An operand of a batched product, shape `to` (batch..., rows, cols) after numpy's promotion and
// broadcasting, as a gemm per batch reads it: each batch's matrix in place, row-major ('N') or
// transposed ('T', a transposed view), the batches `stride` elements apart (0: one matrix for all
// of them); else copied once, broadcast to `to`. A 1-D operand is one contiguous matrix.
template <class T>
struct xt_batch_operand {
  work_array<T> copy;
  const T* data = nullptr;
  char op = 'N';
  int ld = 1;
  std::size_t stride = 0;

  template <class X>
  xt_batch_operand(const X& x, const shape_t& to) {
    const std::size_t R = to.size();
    const auto rows = static_cast<std::size_t>(to[R - 2]),
               cols = static_cast<std::size_t>(to[R - 1]);
    if (x.dimension() == 1) {
      if constexpr (XtStridedOf<X, T>) {
        if (x.strides()[0] == 1 || x.size() <= 1) {
          set(x.data() + x.data_offset(), 'N', cols, 0);
          return;
        }
      }
      copy = x;
      set(copy.data(), 'N', cols, 0);
      return;
    }
    if constexpr (XtStridedOf<X, T>) {
      if (in_place(x, to, rows, cols)) return;
    }
    copy = broadcast_copy<T>(x, dims(to.begin(), to.end()));
    set(copy.data(), 'N', cols, rows * cols);
  }

 private:
  void set(const T* p, char o, std::size_t leading, std::size_t batch_stride) {
    data = p;
    op = o;
    ld = static_cast<int>(std::max<std::size_t>(leading, 1));
    stride = batch_stride;
  }
  template <class X>
  bool in_place(const X& x, const shape_t& to, std::size_t rows, std::size_t cols) {
    const std::size_t r = x.dimension();
    const auto& st = x.strides();
    const char o = blas_layout(st[r - 2], st[r - 1], rows, cols);
    if (!o) return false;
    // the batch dimensions: all of extent 1 (one matrix for every batch), or to's own, a
    // constant stride apart
    std::size_t batch = 1;
    for (std::size_t i = 0; i + 2 < r; ++i) batch *= x.shape()[i];
    std::ptrdiff_t between = 0;
    if (batch > 1) {
      if (r != to.size()) return false;
      between = st[r - 3];
      std::ptrdiff_t expect = between;
      for (std::size_t i = r - 2; i-- > 0;) {
        if (static_cast<std::int64_t>(x.shape()[i]) != to[i]) return false;
        if (x.shape()[i] != 1 && st[i] != expect) return false;
        expect *= static_cast<std::ptrdiff_t>(x.shape()[i]);
      }
      if (between <= 0) return false;
    }
    set(x.data() + x.data_offset(), o, o == 'N' ? cols : rows, static_cast<std::size_t>(between));
    return true;
  }
};

// xt_reduce (below) of an expression with strided memory behind it, read along its strides.
template <class R, class A>
auto xt_reduce_strided(const A& a, std::uint32_t reduced) {
  using T = std::remove_cv_t<xt_value_t<A>>;
  std::vector<std::size_t> kept;
  nd_space s;
  check_rank(a.shape(), "sum");
  s.rank = static_cast<int>(a.dimension());
  nd_operand in;
  in.data = const_cast<T*>(a.data() + a.data_offset());
  for (int d = 0; d < s.rank; ++d) {
    s.extents[d] = static_cast<std::int64_t>(a.shape()[static_cast<std::size_t>(d)]);
    in.strides[d] = static_cast<std::int64_t>(a.strides()[static_cast<std::size_t>(d)]);
  }
  s.numel = static_cast<std::int64_t>(a.size());
  for (int d = 0; d < s.rank; ++d)
    if (!((reduced >> d) & 1u)) kept.push_back(a.shape()[static_cast<std::size_t>(d)]);
  work_array<T> r = work_array<T>::from_shape(kept);
  if (a.size() == 0) {
    r.fill(static_cast<T>(R::template init<T>()));
  } else {
    cpu_reduce<R>(dtype_of<T>(), s, in, reduced, r.data());
  }
  return r;
}

// The sum of x over the axes in `reduced` (a bit per axis), accumulated in double (Note
// [Accurate sums] in backend/cpu.hpp); x is read in place when it has strided memory.
template <class R = sum_reduction, class X>
auto xt_reduce(const X& x, std::uint32_t reduced) {
  using T = std::remove_cv_t<xt_value_t<X>>;
  if constexpr (XtStridedOf<X, T>) {
    return xt_reduce_strided<R>(x, reduced);
  } else {
    return xt_reduce_strided<R>(work_array<T>(x), reduced);
  }
}
template <class X>
auto xt_sum(const X& x, std::uint32_t reduced) {
  return xt_reduce<sum_reduction>(x, reduced);
}

// A reduction of x as r says, keepdim included.
template <class R, class X>
auto xt_reduce_dims(const X& x, const reduce_dims& r, const char* op) {
  const shape_t shape(x.shape().begin(), x.shape().end());
  shape_t out;
  const std::uint32_t mask = reduced_mask(r, shape, op, out);
  auto a = xt_reduce<R>(x, mask);
  if (r.keepdim) a.reshape(std::vector<std::size_t>(out.begin(), out.end()));
  return a;
}

template <class G>
auto reduce_to_shape(const G& g, const std::vector<std::size_t>& xs);

// The shape of a value no wanted gradient reads (Note [Wanted gradients] in sweep.hpp): its own
// type, so that detail::holds_elements knows the value for a stand-in.
struct unread_shape : std::vector<std::size_t> {
  using std::vector<std::size_t>::vector;
};
template <class CT>
inline constexpr bool shape_only_v<xt::xbroadcast<CT, unread_shape>> = true;

// x's elements in row-major order: in place when x is laid out so, else copied into `copy`
template <class T, class X>
const T* row_major_data(const X& x, std::optional<work_array<T>>& copy) {
  if constexpr (XtStridedOf<X, T>) {
    if (x.layout() == xt::layout_type::row_major) return x.data() + x.data_offset();
  }
  copy.emplace(x);
  return copy->data();
}
// A reduction along all of x's dimensions or one (Note [Rows of logsumexp]): element (o, k, i) of
// x, row-major, is at (o len + k) inner + i, and k runs along the reduced dimensions; the result
// has the dimensions kept (`kept`), or `out` with keepdim.
struct lse_rows {
  std::size_t outer = 1, len = 1, inner = 1;
  dims kept;
  shape_t out;
  template <class X>
  lse_rows(const X& x, const reduce_dims& r) {
    const shape_t shape(x.shape().begin(), x.shape().end());
    const std::uint32_t mask = reduced_mask(r, shape, "logsumexp", out);
    bool seen = false;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const auto e = static_cast<std::size_t>(shape[i]);
      if ((mask >> i) & 1u) {
        len *= e;
        seen = true;
      } else {
        (seen ? inner : outer) *= e;
        kept.push_back(e);
      }
    }
  }
  // the sum of exp(row[k stride] - m) over k < len, in double; a contiguous row in packs, whose
  // sums go into the double every loop_block packs (Note [Blocked sums] in xt/element_loop.hpp)
  template <class T>
  static double exp_sum(const T* row, std::size_t len, std::size_t stride, T m) {
    double s = 0;
    std::size_t k = 0;
    if (stride == 1) {
      using P = pack<T>;
      const std::size_t packed = len - len % P::size;
      while (k < packed) {
        P acc(T(0));
        for (const std::size_t end = std::min(packed, k + loop_block * P::size); k < end;
             k += P::size)
          acc = acc + exp(P::load(row + k) - P(m));
        s += static_cast<double>(acc.reduce_add());
      }
    }
    for (; k < len; ++k) s += static_cast<double>(std::exp(row[k * stride] - m));
    return s;
  }
};

template <class X>
requires XtExpr<X>
struct algebra_impl<X> {
  static auto sum(const auto& x, const reduce_dims& r) {
    return xt_reduce_dims<sum_reduction>(x, r, "sum");
  }
  static auto prod(const auto& x, const reduce_dims& r) {
    return xt_reduce_dims<prod_reduction>(x, r, "prod");
  }
  static auto max(const auto& x, const reduce_dims& r) {
    return xt_reduce_dims<extreme_reduction<true>>(x, r, "max");
  }
  static auto min(const auto& x, const reduce_dims& r) {
    return xt_reduce_dims<extreme_reduction<false>>(x, r, "min");
  }
  // Note [Rows of logsumexp]: log(sum(exp(x))) along r, row by row over x's elements: the max,
  // then the sum of exp(x - max) in double, then log(sum) + max, as logsumexp_op's formula does
  // it on any family. Through that formula an xtensor array made five arrays (the kept max, the
  // shifted values, their exponentials, the sum, its log) and broadcast twice; on the 14-value
  // rows of an LSTM step that was a tenth of the gradient's instructions. The gradient,
  // g exp(x - y), is one loop too.
  static auto logsumexp(const auto& x, const reduce_dims& r) {
    using T = std::remove_cv_t<xt_value_t<decltype(x)>>;
    const lse_rows rows(x, r);
    std::optional<work_array<T>> copy;
    const T* p = row_major_data<T>(x, copy);
    work_array<T> y = work_array<T>::from_shape(rows.kept);
    T* q = y.data();
    for (std::size_t o = 0; o < rows.outer; ++o)
      for (std::size_t i = 0; i < rows.inner; ++i) {
        const T* row = p + o * rows.len * rows.inner + i;
        const auto stride = static_cast<std::int64_t>(rows.inner);
        const T m = extreme_reduction<true>::row(row, stride, static_cast<std::int64_t>(rows.len));
        const double s = lse_rows::exp_sum(row, rows.len, rows.inner, m);
        q[o * rows.inner + i] = static_cast<T>(std::log(static_cast<T>(s)) + m);
      }
    if (r.keepdim) y.reshape(std::vector<std::size_t>(rows.out.begin(), rows.out.end()));
    return y;
  }
  static auto logsumexp_backward(const auto& x, const auto& y, const auto& g,
                                 const reduce_dims& r) {
    using T = std::remove_cv_t<xt_value_t<decltype(x)>>;
    const lse_rows rows(x, r);
    std::optional<work_array<T>> xc, yc, gc;
    const T* p = row_major_data<T>(x, xc);
    const T* yp = row_major_data<T>(y, yc);
    const dims ys(y.shape().begin(), y.shape().end());
    const T* gp = nullptr;
    T gv{};
    if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(g)>>) {
      gv = static_cast<T>(g);
    } else if (same_extents(g.shape(), ys)) {
      gp = row_major_data<T>(g, gc);
    } else {
      gc = broadcast_copy<T>(g, ys);
      gp = gc->data();
    }
    work_array<T> out = work_array<T>::from_shape(dims(x.shape().begin(), x.shape().end()));
    T* d = out.data();
    for (std::size_t o = 0; o < rows.outer; ++o)
      for (std::size_t i = 0; i < rows.inner; ++i) {
        const std::size_t at = o * rows.len * rows.inner + i, j = o * rows.inner + i;
        const T gj = gp ? gp[j] : gv, yj = yp[j];
        std::size_t k = 0;
        if (rows.inner == 1) {  // a contiguous row: packs
          using P = pack<T>;
          for (; k + P::size <= rows.len; k += P::size)
            (P(gj) * exp(P::load(p + at + k) - P(yj))).store(d + at + k);
        }
        for (; k < rows.len; ++k)
          d[at + k * rows.inner] = gj * std::exp(p[at + k * rows.inner] - yj);
      }
    return out;
  }
  // axis counts in the result, which has one dimension more than g
  static auto unsqueeze(const auto& g, std::ptrdiff_t axis) {
    using T = xt_value_t<decltype(g)>;
    const std::size_t a = wrap_dim(axis, g.dimension() + 1, "unsqueeze", shape(g));
    return work_array<T>(xt::expand_dims(g, a));
  }
  static auto broadcast(const auto& x, const shape_t& shape) {
    using T = xt_value_t<decltype(x)>;
    const dims s(shape.begin(), shape.end());
    if (x.size() == 1 && x.dimension() <= s.size()) {  // a seed or a 0-d gradient: one fill
      work_array<T> r = work_array<T>::from_shape(s);
      r.fill(static_cast<T>(*x.begin()));
      return r;
    }
    // numpy's rules, checked here: broadcast_copy assumes them
    bool ok = x.dimension() <= s.size();
    for (std::size_t i = 0, lead = s.size() - x.dimension(); ok && i < x.dimension(); ++i)
      ok = x.shape()[i] == 1 || x.shape()[i] == s[lead + i];
    if (ok) return broadcast_copy<T>(x, s);
    try {
      return work_array<T>(xt::broadcast(x, s));
    } catch (const xt::broadcast_error&) {
      fail("expand: an array of shape ", shape_string(x.shape()), " cannot be expanded to shape ",
           shape_string(shape), " (numpy rules: trailing dimensions must be equal or 1)");
    }
  }
  static auto sum_to(const auto& x, const shape_t& shape) {
    using T = xt_value_t<decltype(x)>;
    const std::vector<std::size_t> s(shape.begin(), shape.end());
    return work_array<T>(reduce_to_shape(x, s));
  }
  static shape_t shape(const auto& x) { return shape_t(x.shape().begin(), x.shape().end()); }
  // x with its last two axes swapped (the identity below 2-D), as on tensors: a materialised
  // array (so `auto t = mg::transpose(f(x))` holds no reference to a temporary)
  static auto transpose(const auto& x) {
    return work_array<xt_value_t<decltype(x)>>(transpose_view(x));
  }
  // ... as a view (no copy), which matmul hands to BLAS as a transposed operand: only for use
  // within the expression that holds x (matmul's backward)
  static auto transpose_view(const auto& x) {
    const std::size_t n = x.dimension();
    if constexpr (shape_only_v<std::remove_cvref_t<decltype(x)>>) {  // a stand-in stays one
      unread_shape s(x.shape().begin(), x.shape().end());
      if (n >= 2) std::swap(s[n - 1], s[n - 2]);
      return xt::broadcast(xt_value_t<decltype(x)>(0), std::move(s));
    } else {
      return transpose_strided(x);
    }
  }
  static auto transpose_strided(const auto& x) {
    const std::size_t n = x.dimension();
    xt::svector<std::size_t, 4> perm(n);  // inline: a heap block per view cost more than the view
    for (std::size_t i = 0; i < n; ++i) perm[i] = i;
    if (n >= 2) std::swap(perm[n - 1], perm[n - 2]);
    return xt::transpose(x, std::move(perm));
  }
  static auto matmul(const auto& a, const auto& b, const char* op = "matmul") {
    using T = std::common_type_t<xt_value_t<decltype(a)>, xt_value_t<decltype(b)>>;
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "metagrad: matmul works on float or double arrays");
    // a matrix and a vector, shapes checked without allocation (else plan_matmul's message)
    const std::size_t ra = a.dimension(), rb = b.dimension();
    if (ra + rb == 3 && ra >= 1 && rb >= 1 && a.shape()[ra - 1] == b.shape()[0]) {
      work_array<T> c = work_array<T>::from_shape(
          std::array<std::size_t, 1>{ra == 2 ? a.shape()[0] : b.shape()[1]});
      matvec_into(a, b, c.data());
      return c;
    }
    if (ra == 2 && rb == 2 && a.shape()[1] == b.shape()[0]) {  // two matrices: no shape vectors
      work_array<T> c =
          work_array<T>::from_shape(std::array<std::size_t, 2>{a.shape()[0], b.shape()[1]});
      matmul_into(a, b, c.data());
      return c;
    }
    const shape_t sa = shape(a), sb = shape(b);
    const matmul_plan p = plan_matmul(sa, sb, op);
    work_array<T> c =
        work_array<T>::from_shape(std::vector<std::size_t>(p.out.begin(), p.out.end()));
    // one gemm per batch, each operand read in place where its layout allows
    if (p.m == 0 || p.n == 0) return c;
    if (p.k == 0) {
      c.fill(T(0));
      return c;
    }
    const xt_batch_operand<T> A(a, p.a_full), B(b, p.b_full);
    const std::size_t batches = static_cast<std::size_t>(numel_of(p.batch));
    const int m = static_cast<int>(p.m), k = static_cast<int>(p.k), n = static_cast<int>(p.n);
    for (std::size_t i = 0; i < batches; ++i)
      gemm(&B.op, &A.op, n, m, k, B.data + i * B.stride, B.ld, A.data + i * A.stride, A.ld,
           c.data() + i * std::size_t(m) * std::size_t(n), n);
    return c;
  }
  // A x (a matrix and a vector) or x A (a vector and a matrix), shapes that agree, written into
  // c: one element per row of A (A x) or per column (x A)
  template <class T>
  static void matvec_into(const auto& a, const auto& b, T* c) {
    const std::size_t ra = a.dimension();
    const std::size_t rows = ra == 2 ? a.shape()[0] : b.shape()[0],
                      cols = ra == 2 ? a.shape()[1] : b.shape()[1];
    const std::size_t n = ra == 2 ? rows : cols;
    if (n == 0) return;
    if (rows * cols == 0) {
      std::fill(c, c + n, T(0));
      return;
    }
    const auto mv = [&](const auto& mat, const auto& vec, bool mat_first) {
      const xt_gemm_operand<T> M(mat);
      const xt_vector_operand<T> v(vec);
      gemv_of(M, rows, cols, mat_first, v.data, v.inc, c);
    };
    if (ra == 2) {
      mv(a, b, true);
    } else {
      mv(b, a, false);
    }
  }
  // M x (mat_first) or x M for M of rows x cols as xt_gemm_operand reads it, into c.
  // Note [Row-major gemm]: M's storage read column-major is (cols, rows) for 'N' and (rows, cols)
  // for 'T'; M x wants op(storage) = M, x M wants op(storage) = M^T.
  template <class T>
  static void gemv_of(const xt_gemm_operand<T>& M, std::size_t rows, std::size_t cols,
                      bool mat_first, const T* x, int inc, T* c) {
    const bool stored_transposed = M.op == 'T';
    const int r = static_cast<int>(rows), q = static_cast<int>(cols);
    gemv(mat_first == stored_transposed ? 'N' : 'T', stored_transposed ? r : q,
         stored_transposed ? q : r, M.data, M.ld, x, inc, c);
  }
  // c = u v^T, row-major: m x n elements (rows of packs four at a time: the compiler's own
  // vectorisation of the plain loop checks for overlap and peels every row, 1.8 times the
  // instructions on 32 x 32)
  template <class T>
  static void outer_of(const T* u, std::size_t m, const T* v, std::size_t n, T* c) {
    if constexpr (std::is_floating_point_v<T>) {
      using P = pack<T>;
      constexpr std::size_t w = 4 * P::size;
      const std::size_t wide = n - n % w, packed = n - n % P::size;
      for (std::size_t i = 0; i < m; ++i, c += n) {
        const P ui(u[i]);
        std::size_t j = 0;
        for (; j < wide; j += w) {
          (ui * P::load(v + j)).store(c + j);
          (ui * P::load(v + j + P::size)).store(c + j + P::size);
          (ui * P::load(v + j + 2 * P::size)).store(c + j + 2 * P::size);
          (ui * P::load(v + j + 3 * P::size)).store(c + j + 3 * P::size);
        }
        for (; j < packed; j += P::size) (ui * P::load(v + j)).store(c + j);
        for (; j < n; ++j) c[j] = u[i] * v[j];
      }
    } else {
      for (std::size_t i = 0; i < m; ++i, c += n) {
        const T ui = u[i];
        for (std::size_t j = 0; j < n; ++j) c[j] = ui * v[j];
      }
    }
  }
  // C = A B for two matrices whose shapes agree (m x k by k x n), written into c: m x n elements,
  // row-major; the operands read in place where their layout allows
  template <class T>
  static void matmul_into(const auto& a, const auto& b, T* c) {
    const std::size_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
    if (m == 0 || n == 0) return;
    if (k == 0) {
      std::fill(c, c + m * n, T(0));
      return;
    }
    const xt_gemm_operand<T> A(a), B(b);
    // A column or a row (a 32x1 x, as users write W x): a gemv or an outer product; BLAS's gemm
    // takes 4 to 5 times as long on such shapes. An operand of one row or one column is
    // contiguous as xt_gemm_operand reads it (blas_layout), in either order: stride 1.
    if (n == 1) {
      gemv_of(A, m, k, true, B.data, 1, c);
      return;
    }
    if (m == 1) {
      gemv_of(B, k, n, false, A.data, 1, c);
      return;
    }
    if (k == 1) {
      outer_of(A.data, m, B.data, n, c);
      return;
    }
    // row-major C = A B is column-major C^T = B^T A^T: See Note [Row-major gemm] in blas.hpp
    gemm(&B.op, &A.op, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), B.data, B.ld,
         A.data, A.ld, c, static_cast<int>(n));
  }
  // the outer product of two 1-D operands (checked by the op)
  static auto outer(const auto& a, const auto& b) {
    using T = std::common_type_t<xt_value_t<decltype(a)>, xt_value_t<decltype(b)>>;
    work_array<T> c = work_array<T>::from_shape(std::array<std::size_t, 2>{a.size(), b.size()});
    outer_into(a, b, c.data());
    return c;
  }
  // the same, written into c: a.size() x b.size() elements, row-major
  template <class T>
  static void outer_into(const auto& a, const auto& b, T* c) {
    const std::size_t m = a.size(), n = b.size();
    const xt_vector_operand<T> u(a, true), v(b, true);
    outer_of(u.data, m, v.data, n, c);
  }
  static auto reshape(const auto& x, const shape_t& to, const auto&) {
    work_array<xt_value_t<decltype(x)>> r = x;
    r.reshape(std::vector<std::size_t>(to.begin(), to.end()));
    return r;
  }
  static auto permute(const auto& x, const std::vector<std::size_t>& p) {
    return work_array<xt_value_t<decltype(x)>>(xt::transpose(x, p));
  }
  // the strided view of x along d: elements start, start + step, ... (length of them), or the
  // one at start without the dimension (drop)
  static auto strided(auto& x, const slice_range& r, bool drop) {
    xt::xstrided_slice_vector sv(x.dimension(), xt::all());
    if (drop)
      sv[r.dim] = r.start;
    else if (r.length == 0)
      sv[r.dim] = xt::range(0, 0);
    else
      sv[r.dim] = xt::range(r.start, r.start + (r.length - 1) * r.step + 1, r.step);
    return xt::strided_view(x, sv);
  }
  static auto slice(const auto& x, const slice_range& r) {
    const work_array<xt_value_t<decltype(x)>> a = x;
    return work_array<xt_value_t<decltype(x)>>(strided(a, r, false));
  }
  static auto select(const auto& x, std::size_t d, std::int64_t i) {
    const work_array<xt_value_t<decltype(x)>> a = x;
    return work_array<xt_value_t<decltype(x)>>(strided(a, {d, i, 1, 1}, true));
  }
  static auto embed(const auto& g, const shape_t& shape, const slice_range& r, bool drop) {
    auto out = work_array<xt_value_t<decltype(g)>>(
        xt::zeros<xt_value_t<decltype(g)>>(std::vector<std::size_t>(shape.begin(), shape.end())));
    auto v = strided(out, r, drop);
    xt::noalias(v) = g;
    return out;
  }
  static auto index_select(const auto& x, std::size_t d, const std::vector<std::int64_t>& idx) {
    using T = xt_value_t<decltype(x)>;
    const work_array<T> a = x;
    std::vector<std::size_t> s(a.shape().begin(), a.shape().end());
    if (s.empty()) return work_array<T>(xt::broadcast(a, std::vector<std::size_t>{idx.size()}));
    s[d] = idx.size();
    work_array<T> out = work_array<T>::from_shape(s);
    for (std::size_t k = 0; k < idx.size(); ++k) {
      auto dst = strided(out, {d, static_cast<std::int64_t>(k), 1, 1}, true);
      xt::noalias(dst) = strided(a, {d, idx[k], 1, 1}, true);
    }
    return out;
  }
  static auto index_add(const auto& g, const shape_t& shape, std::size_t d,
                        const std::vector<std::int64_t>& idx) {
    using T = xt_value_t<decltype(g)>;
    const work_array<T> a = g;
    work_array<T> out = xt::zeros<T>(std::vector<std::size_t>(shape.begin(), shape.end()));
    if (shape.empty()) {
      out() = xt::sum(a)();
      return out;
    }
    for (std::size_t k = 0; k < idx.size(); ++k) {
      auto dst = strided(out, {d, idx[k], 1, 1}, true);
      xt::noalias(dst) += strided(a, {d, static_cast<std::int64_t>(k), 1, 1}, true);
    }
    return out;
  }
  template <class... Y>
  static auto cat(std::size_t d, const shape_t& shape, const Y&... x) {
    using T = std::common_type_t<xt_value_t<Y>...>;
    work_array<T> out =
        work_array<T>::from_shape(std::vector<std::size_t>(shape.begin(), shape.end()));
    std::int64_t off = 0;
    const auto put = [&](const auto& xi) {
      const auto n = static_cast<std::int64_t>(xi.shape()[d]);
      auto v = strided(out, {d, off, n, 1}, false);
      xt::noalias(v) = xi;
      off += n;
    };
    (put(x), ...);
    return out;
  }
  static auto iota(const auto& x, std::size_t d) {
    using T = xt_value_t<decltype(x)>;
    std::vector<std::size_t> s(x.dimension(), 1);
    const std::size_t n = s.empty() ? 1 : x.shape()[d];
    if (!s.empty()) s[d] = n;
    work_array<T> r = xt::arange<T>(static_cast<T>(n));
    r.reshape(s);
    return r;
  }
  // argmax, max along a dim and topk (ops/selection.hpp): positions in x's values read as a
  // row-major array of shape `as`, and the array of indices they return
  static std::vector<std::int64_t> top_positions(const auto& x, const shape_t& as, std::size_t d,
                                                 std::int64_t k, pick p) {
    const xt::xarray<xt_value_t<decltype(x)>, xt::layout_type::row_major> a = x;
    return detail::top_positions(a.data(), as, d, k, p);
  }
  static auto index_array(const std::vector<std::int64_t>& v, const shape_t& shape) {
    xt::xarray<std::int64_t> r = xt::adapt(v, std::vector<std::size_t>(shape.begin(), shape.end()));
    return r;
  }
};

// Sums an array g back to shape xs: over the leading axes xs lacks and over the axes where xs
// has extent 1 (numpy broadcasting), accurately (xt_sum).
template <class G>
auto reduce_to_shape(const G& g, const std::vector<std::size_t>& xs) {
  using T = std::remove_cv_t<xt_value_t<G>>;
  const auto& gs = g.shape();
  if (same_extents(gs, xs)) return work_array<T>(g);
  if (gs.size() < xs.size())
    fail("sum_to: an array of shape ", shape_string(gs), " cannot be summed to shape ",
         shape_string(xs), " (the target must broadcast to the source)");
  const std::size_t lead = gs.size() - xs.size();
  std::uint32_t reduced = 0;
  for (std::size_t i = 0; i < gs.size(); ++i)
    if (i < lead || (xs[i - lead] == 1 && gs[i] != 1)) reduced |= 1u << i;
  work_array<T> r = xt_sum(g, reduced);
  r.reshape(xs);
  return r;
}

// An array argument's gradient holder: the argument's own container type when it is a
// row-major one, else an xt::xarray. (The loops write gradients in row-major order, so a
// column-major container would get its elements transposed.)
template <class A, class T>
auto gradient_like(const A& a) {
  using R = std::remove_cvref_t<A>;
  if constexpr (requires { R::from_shape(a.shape()); } && std::is_same_v<xt_value_t<R>, T> &&
                R::static_layout == xt::layout_type::row_major) {
    return R::from_shape(a.shape());
  } else {
    return xt::xarray<T>::from_shape(a.shape());
  }
}

// Sums a gradient g (in an op's output shape) back to the shape of the input x it belongs to.
template <class G, class X>
auto reduce_to_shape_of(const G& g, const X& x) {
  if constexpr (std::is_arithmetic_v<X>) {
    if constexpr (std::is_arithmetic_v<G>) {
      return static_cast<X>(g);
    } else {
      return static_cast<X>(
          *xt_sum(g, static_cast<std::uint32_t>((std::uint64_t{1} << g.dimension()) - 1)).begin());
    }
  } else {
    using T = xt_value_t<X>;
    if constexpr (std::is_arithmetic_v<G>) {
      return work_array<T>(xt::broadcast(static_cast<T>(g), x.shape()));
    } else {
      return reduce_to_shape(g, std::vector<std::size_t>(x.shape().begin(), x.shape().end()));
    }
  }
}

struct backward_result {
  static constexpr const char* name = "backward";
};

// The adjoint terms of xt_policy are pooled arrays of the slot's shape, each its own (reduce_like
// makes or hands over one): the sweep adds them in place (static/sweep.hpp).
template <class T>
inline constexpr bool adds_in_place_v<work_array<T>> = true;
// Terms of one slot's adjoint have the slot's shape (reduce_like made them so): added by a loop
// over the elements, where xtensor's `+=` checked the shapes and built an assignment (about 280
// instructions on the 14 elements of an LSTM step's values).
template <class T>
struct in_place_add<work_array<T>> {
  static void add(work_array<T>& a, const work_array<T>& b) {
    if (!same_extents(a.shape(), b.shape())) {
      a += b;
      return;
    }
    T* p = a.data();
    const T* q = b.data();
    for (std::size_t i = 0, n = a.size(); i < n; ++i) p[i] += q[i];
  }
};
// ... and are built only when computed (Note [Slots built when computed] in core/slot_cell.hpp).
template <class T>
inline constexpr bool built_when_computed_v<work_array<T>> = true;

// Static-engine policy for xtensor values: every slot is materialised once (so shared
// subexpressions and the values backward needs are computed once), and broadcast gradients
// are summed back to their input's shape.
struct xt_policy {
  // Note [Gradients written into the results] in core/lent_results.hpp
  static constexpr bool lends_results = true;
  // Note [The loop's forward kept] in static/scan.hpp: an op may hand its sweep what its backward
  // reads (the other policies' sweeps do not look for it)
  static constexpr bool keeps_forwards = true;
  template <class Op, class X>
  static auto keep(X&& x) {
    if constexpr (XtExpr<X>) {
      try {
        return work_array<xt_value_t<X>>(std::forward<X>(x));
      } catch (const xt::broadcast_error& e) {
        fail(op_name<Op>(), ": the operands' shapes do not broadcast (", e.what(),
             "); make the shapes agree or give the smaller one extent 1 where they differ");
      }
    } else {
      return std::remove_cvref_t<X>(std::forward<X>(x));
    }
  }
  // a gradient the sweep hands over (an rvalue it no longer needs) is moved when it has x's
  // shape already
  template <class G, class X>
  static auto reduce_like(G&& g, const X& x) {
    using R = decltype(reduce_to_shape_of(g, x));
    if constexpr (XtExpr<G> && XtExpr<X> && std::is_same_v<std::remove_cvref_t<G>, R> &&
                  !std::is_lvalue_reference_v<G> && !std::is_const_v<std::remove_reference_t<G>>) {
      if (same_extents(g.shape(), x.shape())) return R(std::move(g));
    }
    return reduce_to_shape_of(g, x);
  }
  // a stand-in for an array that no wanted gradient reads: its shape, no elements
  template <class X>
  requires XtExpr<X>
  static auto unread(const X& x) {
    return xt::broadcast(xt_value_t<X>(0), unread_shape(x.shape().begin(), x.shape().end()));
  }
  template <class B>
  static auto keep_bwd(B&& b) {
    if constexpr (is_grads_v<std::remove_cvref_t<B>>) {
      return [&]<std::size_t... k>(std::index_sequence<k...>) {
        return grads{keep<backward_result>(get<k>(std::forward<B>(b)))...};
      }
      (std::make_index_sequence<std::remove_cvref_t<B>::size>{});
    } else {
      return keep<backward_result>(std::forward<B>(b));
    }
  }
};

}  // namespace mg::detail

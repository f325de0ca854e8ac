// Reductions: sum, prod, max, min, amax, amin, mean, norm, var (all elements, or along one dim,
// with keepdim), and logsumexp. max and min along a dim with their indices are in selection.hpp.
//
// A reduction's forward is a backend kernel (algebra<X>: sums and products accumulate in double,
// Note [Accurate sums]); its backward is written with the ops' public functions, so that it is
// itself differentiable.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include <metagrad/concepts.hpp>
#include <metagrad/core/algebra.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/comparison.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/ops/math.hpp>
#include <metagrad/ops/shape.hpp>

namespace mg {

namespace detail {
// g, a reduction's result (or its gradient), broadcast back to the shape of the reduced x.
template <class G, class X>
auto unreduce(const G& g, const X& x, const reduce_dims& r) {
  if constexpr (std::is_same_v<family_t<G>, expr_family> ||
                std::is_same_v<family_t<G>, number_family>) {
    return g;  // 0-d values: nothing was reduced
  } else {
    const shape_t s = shape_of(x);
    if (r.all || r.keepdim || s.empty()) return mg::expand(g, s);
    const auto d = static_cast<std::int64_t>(reduced_dim(r, s.size(), "sum", s));
    return mg::expand(mg::unsqueeze(g, d), s);
  }
}

// 1 where mask holds, else 0, in x's dtype on tensors (two C++ numbers would make an f64 tensor,
// and an f32 gradient would then be converted twice).
template <class M, class X>
auto indicator(const M& mask, const X& x) {
  if constexpr (std::is_same_v<family_t<X>, tensor_family>) {
    return mask.to(x.dtype());
  } else {
    return mg::where(mask, 1.0, 0.0);
  }
}
}  // namespace detail

/// The sum of all elements, or along `dim`.
struct sum_op {
  static constexpr const char* name = "sum";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::input_shapes;
  detail::reduce_dims r;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::sum(x, r); }
  // d/dx_i sum(x) = 1: g broadcast back to the shape of x
  auto backward(const auto& x, const auto&, const auto& g) const {
    return detail::unreduce(g, x, r);
  }
};
template <class X>
requires detail::Operands<X>
auto sum(const X& x, call_site site = {}) { return detail::call_at(site, sum_op{}, x); }
template <class X>
requires detail::Operands<X>
auto sum(const X& x, std::int64_t dim, bool keepdim, call_site site) {
  return detail::call_at(site, sum_op{{false, dim, keepdim}}, x);
}

/// The product of all elements, or along `dim`. Zeros are handled exactly: with one zero in a
/// slice, its gradient is the product of the others; with two or more, every gradient is 0.
struct prod_op {
  static constexpr const char* name = "prod";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::both;
  detail::reduce_dims r;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::prod(x, r); }
  // d/dx_i prod(x) = prod_{j != i} x_j: y / x_i without zeros, else the product of the others
  auto backward(const auto& x, const auto& y, const auto& g) const {
    using detail::unreduce;
    const auto zero = mg::eq(x, 0);
    const auto ge = unreduce(g, x, r);
    if constexpr (std::is_same_v<detail::family_t<decltype(x)>, detail::tensor_family>) {
      // a tensor without zeros (counted, and the count read): y / x_i alone, as the general
      // formula below gives it there, without its passes that place the zeros. Not on a device,
      // where reading the count would make the host wait (Note [Asynchronous device work]).
      if (x.device() == mg::device::cpu &&
          detail::call(sum_op{}, detail::indicator(zero, x)).template item<double>() == 0)
        return ge * unreduce(y, x, r) / x;
    }
    const auto zeros = unreduce(detail::call(sum_op{r}, detail::indicator(zero, x)), x, r);
    const auto others = unreduce(detail::call(prod_op{r}, mg::where(zero, 1.0, x)), x, r);
    return mg::where(mg::eq(zeros, 0), ge * unreduce(y, x, r) / mg::where(zero, 1.0, x),
                     mg::where(mg::eq(zeros, 1), mg::where(zero, ge * others, 0.0), 0.0));
  }
};
template <class X>
requires detail::Operands<X>
auto prod(const X& x, call_site site = {}) { return detail::call_at(site, prod_op{}, x); }
template <class X>
requires detail::Operands<X>
auto prod(const X& x, std::int64_t dim, bool keepdim = false, call_site site = {}) {
  return detail::call_at(site, prod_op{{false, dim, keepdim}}, x);
}

namespace detail {
template <class X, class Y, class G>
auto extreme_gradient(const X& x, const Y& y, const G& g, const reduce_dims& r, bool split);
}  // namespace detail

/// The largest element, or the largest along `dim` (the values of mg::max(x, dim), selection.hpp).
/// NaN propagates. The gradient of the largest of all elements is split evenly among the
/// elements equal to it; along a dim it goes to the first of them (torch 1.13's rules).
struct max_op {
  static constexpr const char* name = "max";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::both;
  detail::reduce_dims r;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::max(x, r); }
  // d/dx_i max(x) = 1/k at the k elements equal to the max, else 0
  auto backward(const auto& x, const auto& y, const auto& g) const {
    return detail::extreme_gradient(x, y, g, r, false);
  }
};
template <class X>
requires detail::Operands<X>
auto max(const X& x, call_site site = {}) { return detail::call_at(site, max_op{}, x); }

/// The smallest element, or the smallest along `dim` (the values of mg::min(x, dim)); as max.
struct min_op {
  static constexpr const char* name = "min";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::both;
  detail::reduce_dims r;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::min(x, r); }
  // d/dx_i min(x) = 1/k at the k elements equal to the min, else 0
  auto backward(const auto& x, const auto& y, const auto& g) const {
    return detail::extreme_gradient(x, y, g, r, false);
  }
};
template <class X>
requires detail::Operands<X>
auto min(const X& x, call_site site = {}) { return detail::call_at(site, min_op{}, x); }

/// The largest element, or the largest of each slice along `dim`, as values only (torch's amax):
/// the gradient is split evenly among the elements equal to the result in each slice. Runs in
/// the static engine too.
struct amax_op {
  static constexpr const char* name = "amax";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::both;
  detail::reduce_dims r;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::max(x, r); }
  auto backward(const auto& x, const auto& y, const auto& g) const {
    return detail::extreme_gradient(x, y, g, r, true);
  }
};
template <class X>
requires detail::Operands<X>
auto amax(const X& x, call_site site = {}) { return detail::call_at(site, amax_op{}, x); }
template <class X>
requires detail::Operands<X>
auto amax(const X& x, std::int64_t dim, bool keepdim = false, call_site site = {}) {
  return detail::call_at(site, amax_op{{false, dim, keepdim}}, x);
}

/// The smallest element, or the smallest of each slice along `dim`, as values only (torch's
/// amin); as amax.
struct amin_op {
  static constexpr const char* name = "amin";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::both;
  detail::reduce_dims r;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::min(x, r); }
  auto backward(const auto& x, const auto& y, const auto& g) const {
    return detail::extreme_gradient(x, y, g, r, true);
  }
};
template <class X>
requires detail::Operands<X>
auto amin(const X& x, call_site site = {}) { return detail::call_at(site, amin_op{}, x); }
template <class X>
requires detail::Operands<X>
auto amin(const X& x, std::int64_t dim, bool keepdim = false, call_site site = {}) {
  return detail::call_at(site, amin_op{{false, dim, keepdim}}, x);
}

namespace detail {
// The gradient of a max or min, as torch 1.13 gives it: over all elements (and along a dim when
// `split`, as amax and amin), g split evenly among the elements equal to the result; otherwise,
// along a dim, g goes to the first such element of each slice (the index max(x, dim) returns).
template <class X, class Y, class G>
auto extreme_gradient(const X& x, const Y& y, const G& g, const reduce_dims& r, bool split) {
  const auto ye = unreduce(y, x, r);
  // the elements equal to the result; a NaN result came from the NaN elements
  const auto general_hits = [&] { return mg::where(mg::ne(x, x), mg::ne(ye, ye), mg::eq(x, ye)); };
  if constexpr (std::is_same_v<family_t<X>, expr_family> ||
                std::is_same_v<family_t<X>, number_family>) {
    return mg::where(general_hits(), g, 0.0);  // 0-d: the one element is the result
  } else {
    const auto hit = [&] {
      if constexpr (std::is_same_v<family_t<X>, tensor_family>) {
        // without a NaN result (checked on the result, the small side) the hits are the elements
        // equal to it: one comparison instead of three and a select of booleans. On the CPU
        // only: on a device reading the check would make the host wait.
        if (x.device() == mg::device::cpu &&
            call(sum_op{}, indicator(mg::ne(y, y), y)).template item<double>() == 0)
          return mg::eq(x, ye);
      }
      return general_hits();
    }();
    const shape_t s = shape_of(x);
    if (split || r.all || s.empty()) {
      if constexpr (std::is_same_v<family_t<X>, tensor_family>) {
        // one mask in x's dtype, counted and applied: torch's `grad / mask.sum() * mask`
        const auto m = indicator(hit, x);
        return m * unreduce(g / call(sum_op{r}, m), x, r);
      } else {
        const auto count = call(sum_op{r}, indicator(hit, x));
        return mg::where(hit, unreduce(g / count, x, r), 0.0);
      }
    }
    const std::size_t d = reduced_dim(r, s.size(), "max", s);
    const auto at = algebra<X>::iota(x, d);  // 0, 1, ... along d
    const auto first = call(min_op{{false, static_cast<std::int64_t>(d), true}},
                            mg::where(hit, at, static_cast<double>(s[d])));
    return mg::where(mg::eq(at, first), unreduce(g, x, r), 0.0);
  }
}
}  // namespace detail

/// The L2 norm of all elements, or along `dim`; its gradient is 0 where the norm is 0.
struct norm_op {
  static constexpr const char* name = "norm";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::both;
  detail::reduce_dims r;
  auto forward(const auto& x) const {
    using std::sqrt;
    return sqrt(detail::algebra<decltype(x)>::sum(mg::square(x), r));
  }
  // d/dx_i |x| = x_i / |x| (0 where |x| = 0)
  auto backward(const auto& x, const auto& y, const auto& g) const {
    using detail::unreduce;
    return detail::call(mul_op{}, x, unreduce(g / mg::where(mg::eq(y, 0), 1.0, y), x, r));
  }
};
template <class X>
requires detail::Operands<X>
auto norm(const X& x, call_site site = {}) { return detail::call_at(site, norm_op{}, x); }
template <class X>
requires detail::Operands<X>
auto norm(const X& x, std::int64_t dim, bool keepdim = false, call_site site = {}) {
  return detail::call_at(site, norm_op{{false, dim, keepdim}}, x);
}

namespace detail {
// The number of elements a reduction of x combines.
template <class X>
double reduced_count(const X& x, const reduce_dims& r, const char* op) {
  const shape_t s = shape_of(x);
  if (s.empty()) return 1.0;
  if (!r.all) return static_cast<double>(s[reduced_dim(r, s.size(), op, s)]);
  double n = 1;
  for (auto e : s) n *= static_cast<double>(e);
  return n;
}
}  // namespace detail

/// The mean of all elements, or along `dim`.
struct mean_op {
  static constexpr const char* name = "mean";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::input_shapes;
  detail::reduce_dims r;
  auto forward(const auto& x) const {
    return detail::call(div_op{}, detail::algebra<decltype(x)>::sum(x, r),
                        detail::reduced_count(x, r, "mean"));
  }
  // d/dx_i mean(x) = 1/n
  auto backward(const auto& x, const auto&, const auto& g) const {
    return detail::call(div_op{}, detail::unreduce(g, x, r), detail::reduced_count(x, r, "mean"));
  }
};
namespace detail {
// torch's mean refuses integer and bool tensors (it could not say which dtype to give).
template <class X>
void check_mean_dtype(const X& x) {
  if constexpr (requires { x.dtype(); }) {
    if (x.defined() && x.dtype() != dtype::f32 && x.dtype() != dtype::f64)
      fail("mean: a tensor of shape ", shape_string(x.shape()),
           " is not floating-point; convert it first, e.g. with .to(mg::f32)");
  }
}
}  // namespace detail
template <class X>
requires detail::Operands<X>
auto mean(const X& x, call_site site = {}) {
  detail::check_mean_dtype(x);
  return detail::call_at(site, mean_op{}, x);
}
template <class X>
requires detail::Operands<X>
auto mean(const X& x, std::int64_t dim, bool keepdim = false, call_site site = {}) {
  detail::check_mean_dtype(x);
  return detail::call_at(site, mean_op{{false, dim, keepdim}}, x);
}

/// The variance of all elements, or along `dim`: the squared deviations from the mean summed
/// and divided by n - 1 (unbiased, torch's default) or n.
struct var_op {
  static constexpr const char* name = "var";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::inputs;
  detail::reduce_dims r;
  bool unbiased = true;
  auto centered(const auto& x) const {  // x - mean(x), the mean kept along the reduced dims
    detail::reduce_dims keep = r;
    keep.keepdim = true;
    return detail::call(sub_op{}, x, detail::call(mean_op{keep}, x));
  }
  double divisor(const auto& x) const {
    return detail::reduced_count(x, r, "var") - (unbiased ? 1.0 : 0.0);
  }
  auto forward(const auto& x) const {
    return detail::call(div_op{}, detail::algebra<decltype(x)>::sum(mg::square(centered(x)), r),
                        divisor(x));
  }
  // d/dx_i var(x) = 2 (x_i - mean) / (n - ddof)
  auto backward(const auto& x, const auto&, const auto& g) const {
    return detail::call(mul_op{}, centered(x),
                        detail::call(div_op{}, detail::unreduce(g, x, r), divisor(x) / 2));
  }
};
template <class X>
requires detail::Operands<X>
auto var(const X& x, call_site site = {}) { return detail::call_at(site, var_op{{}, true}, x); }
template <class X, class B>
requires detail::Operands<X> && std::same_as<B, bool>
auto var(const X& x, B unbiased, call_site site = {}) {
  return detail::call_at(site, var_op{{}, unbiased}, x);
}
// an integer second argument is a dim (var(x, 0) is along dim 0, as in torch)
template <class X, std::integral D>
requires detail::Operands<X> &&
    (!std::same_as<D, bool>)auto var(const X& x, D dim, bool unbiased = true, bool keepdim = false,
                                     call_site site = {}) {
  return detail::call_at(site, var_op{{false, static_cast<std::int64_t>(dim), keepdim}, unbiased},
                         x);
}

namespace detail {
// The max of x over r's dims, kept (extent 1) so that it broadcasts back: the stable shift of
// softmax, log_softmax and logsumexp, taken on values (Note [Fused composites] in nn.hpp).
template <class X>
auto kept_max(const X& x, reduce_dims r) {
  return algebra<X>::max(x, reduce_dims{r.all, r.dim, true});
}
}  // namespace detail

/// log(sum(exp(x))) of all elements or along `dim`, computed stably: one op, shifted by the max
/// on values (Note [Fused composites] in nn.hpp); its gradient is g exp(x - y), softmax(x) at
/// g = 1.
struct logsumexp_op {
  static constexpr const char* name = "logsumexp";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::both;
  detail::reduce_dims r;
  auto forward(const auto& x) const {
    using A = detail::algebra<decltype(x)>;
    if constexpr (requires { A::logsumexp(x, r); }) {  // one pass per row (xtensor arrays)
      return A::logsumexp(x, r);
    } else {
      const auto m = detail::kept_max(x, r);
      const auto shifted = mg::exp(detail::call(sub_op{}, x, m));
      // summing the kept dimensions (each of extent 1) drops them unless r keeps them
      return A::sum(detail::call(add_op{}, mg::log(A::sum(shifted, {r.all, r.dim, true})), m), r);
    }
  }
  // d/dx: g exp(x - y), g and y broadcast back along the reduced dimensions
  auto backward(const auto& x, const auto& y, const auto& g) const {
    using A = detail::algebra<decltype(x)>;
    if constexpr (requires { A::logsumexp_backward(x, y, g, r); }) {
      return A::logsumexp_backward(x, y, g, r);
    } else {
      using detail::unreduce;
      return detail::call(mul_op{}, unreduce(g, x, r),
                          mg::exp(detail::call(sub_op{}, x, unreduce(y, x, r))));
    }
  }
};
template <class X>
requires detail::Operands<X>
auto logsumexp(const X& x, call_site site = {}) { return detail::call_at(site, logsumexp_op{}, x); }
template <class X>
requires detail::Operands<X>
auto logsumexp(const X& x, std::int64_t dim, bool keepdim = false, call_site site = {}) {
  return detail::call_at(site, logsumexp_op{{false, dim, keepdim}}, x);
}

using reduction_ops = op_list<sum_op, prod_op, max_op, min_op, amax_op, amin_op, norm_op, mean_op,
                              var_op, logsumexp_op>;

}  // namespace mg

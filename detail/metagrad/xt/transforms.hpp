// The static engine's transforms beyond grad on xtensor arrays: mg::jvp, mg::vjp, mg::jacobian,
// mg::hessian, and grad of a gradient, built on dual arrays (Note [Dual arrays] in
// xt/dual_family.hpp).
//
// - jvp: f called once on dual arrays (the primals with their tangents): {f(x), J v}.
// - vjp: one forward and one reverse sweep of the general evaluator, seeded with u.
// - jacobian: forward mode, one call of f on dual arrays per block of up to 128 elements of an
//   argument, each giving as many columns of J (Note [Blocks of directions]), or, for a function
//   with fewer output elements than input elements, reverse mode, one sweep per output element
//   giving one row; a block of J has the shape f(x).shape ++ x.shape.
// - hessian = jacobian(grad(f)): grad's reverse sweep run on dual arrays, one pass per block.
// - grad of a transform (a gradient): like jacobian, for a function with one value; the
//   gradients come back in the arguments' types.
// Values and tangents come back as xt::xarray (0-d for one number).
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <xtensor/xarray.hpp>

#include <metagrad/error.hpp>
#include <metagrad/static/evaluator.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/dual_family.hpp>

namespace mg::detail {

template <class A>
struct xt_element_of {
  using type = A;  // a number
};
template <XtExpr A>
struct xt_element_of<A> {
  using type = std::remove_cv_t<xt_value_t<A>>;
};
template <class... A>
using xt_element_t = std::common_type_t<typename xt_element_of<A>::type...>;

// evaluator<Family> derives from this (Family: array_family); `by_tangents` routes mg::jvp,
// mg::vjp, mg::jacobian, mg::hessian and grad of a transform here (static.hpp).
template <class Family>
struct tangent_transforms {
  static constexpr bool by_tangents = true;

  template <class F, class... X, class... V>
  static auto jvp(const F& f, const std::tuple<X...>& x, const std::tuple<V...>& v) {
    using T = xt_element_t<X...>;
    auto d = duals<T>(x, v, std::index_sequence_for<X...>{});
    return split<T>(std::apply(f, d));
  }

  template <class F, class... X, class U>
  static auto vjp_value(const F& f, const std::tuple<X...>& x, const U& u) {
    static_assert(!returns_tuple_v<F, sizeof...(X)>,
                  "metagrad: vjp of a function of arrays returning several values is not "
                  "supported; take the vjp of each value");
    if constexpr (!returns_tuple_v<F, sizeof...(X)>) {
      return vjp_at(f, x, u, std::index_sequence_for<X...>{});
    } else {  // after the assertion: no cascade
      return std::pair<xt::xarray<xt_element_t<X...>>, xt::xarray<xt_element_t<X...>>>{};
    }
  }

  // The blocks of the Jacobian for arguments I... (all when none is named).
  template <std::size_t... I, class F, class... A>
  static auto jacobian(const F& f, const A&... args) {
    using T = xt_element_t<A...>;
    std::tuple<std::conditional_t<true, dual_array<T>, A>...> d{as_dual<T>(args)...};
    using Want = std::conditional_t<sizeof...(I) == 0, std::index_sequence_for<A...>,
                                    std::index_sequence<I...>>;
    return jacobian_at<T>(f, d, Want{});
  }

  template <bool ValueToo, std::size_t... I, class F, class... A>
  static auto grad_by_tangents(const F& f, const A&... args) {
    using T = xt_element_t<A...>;
    using R = decltype(f(as_dual<T>(args)...));
    static_assert(!tuple_like<R>,
                  "metagrad: grad differentiates a function with one value; this one returns "
                  "several (use mg::jacobian)");
    std::tuple<std::conditional_t<true, dual_array<T>, A>...> d{as_dual<T>(args)...};
    const dual_array<T> r = as_dual<T>(std::apply(f, d));
    if (r.value.size() != 1)
      fail("grad: the function's value has shape ", shape_string(shape_of(r)),
           "; grad differentiates a function with one value (for an array-valued function: "
           "mg::jacobian, or mg::hessian for the matrix of second derivatives)");
    std::tuple<decltype(out_like<T>(args))...> all{out_like<T>(args)...};
    (columns_into<I>(f, d, std::get<I>(all)), ...);
    auto g = bare_or_tuple(std::tuple{std::move(std::get<I>(all))...});
    if constexpr (ValueToo) {
      return std::pair{static_cast<T>(*r.value.begin()), std::move(g)};
    } else {
      return g;
    }
  }

 private:
  template <class T, class... X, class... V, std::size_t... i>
  static auto duals(const std::tuple<X...>& x, const std::tuple<V...>& v,
                    std::index_sequence<i...>) {
    return std::tuple{dual_of<T>(std::get<i>(x), std::get<i>(v), i)...};
  }
  template <class T, class X, class V>
  static dual_array<T> dual_of(const X& x, const V& v, std::size_t i) {
    static_assert(std::is_arithmetic_v<X> == std::is_arithmetic_v<V>,
                  "metagrad: jvp takes a number as the tangent of a number and an array as the "
                  "tangent of an array");
    dual_array<T> d{as_work<T>(x), as_work<T>(v)};
    if (!std::equal(d.value.shape().begin(), d.value.shape().end(), d.tangent.shape().begin(),
                    d.tangent.shape().end()))
      fail("jvp: the tangent of argument ", i, " has shape ", shape_string(shape_of(d.tangent)),
           " but the argument has shape ", shape_string(shape_of(d.value)),
           "; a tangent has its primal's shape");
    return d;
  }

  template <class T, class R>
  static auto split(const R& r) {
    if constexpr (tuple_like<R>) {
      return [&]<std::size_t... k>(std::index_sequence<k...>) {
        return std::pair{std::tuple{part<T, false>(std::get<k>(r))...},
                         std::tuple{part<T, true>(std::get<k>(r))...}};
      }
      (std::make_index_sequence<std::tuple_size_v<R>>{});
    } else {
      return std::pair{part<T, false>(r), part<T, true>(r)};
    }
  }
  template <class T, bool Tangent, class V>
  static xt::xarray<T> part(const V& v) {
    dual_array<T> d = as_dual<T>(v);
    return xt::xarray<T>(Tangent ? d.tangent : d.value);
  }

  template <class F, class... X, class U, std::size_t... I>
  static auto vjp_at(const F& f, const std::tuple<X...>& x, const U& u, std::index_sequence<I...>) {
    using T = xt_element_t<X...>;
    xt::xarray<T> value = evaluator<Family>::value(f, std::get<I>(x)...);
    auto g = evaluator<Family>::template vjp<I...>(f, u, std::get<I>(x)...);
    return std::pair{std::move(value), bare_or_tuple(std::move(g))};
  }

  // f's values: one, or the elements of the tuple it returns
  template <class R>
  static constexpr std::size_t outputs() {
    if constexpr (tuple_like<R>) {
      return std::tuple_size_v<std::remove_cvref_t<R>>;
    } else {
      return 1;
    }
  }
  // output c of f's result as a dual array: the result's own when it is one (no copy)
  template <std::size_t c, class T, class R>
  static decltype(auto) output(const R& r) {
    if constexpr (tuple_like<R>) {
      return output<0, T>(std::get<c>(r));
    } else if constexpr (std::is_same_v<R, dual_array<T>>) {
      return static_cast<const dual_array<T>&>(r);
    } else {
      return as_dual<T>(r);
    }
  }

  template <class T, class F, class D, std::size_t... I>
  static auto jacobian_at(const F& f, D& d, std::index_sequence<I...>) {
    using R = std::remove_cvref_t<decltype(std::apply(f, d))>;
    constexpr std::size_t m = outputs<R>();
    const R r0 = std::apply(f, d);
    std::array<std::array<xt::xarray<T>, sizeof...(I)>, m> J;
    shape_blocks<T, I...>(r0, d, J, std::make_index_sequence<m>{});
    // a function of one value with fewer output than input elements (a loss): reverse mode,
    // one sweep per output element, unless f is itself a transform (not traceable)
    bool reverse = false;
    if constexpr (!tuple_like<R> && !Transform<F>)
      reverse = output<0, T>(r0).value.size() < (std::get<I>(d).value.size() + ... + 0);
    if (reverse) {
      if constexpr (!tuple_like<R> && !Transform<F>)
        reverse_rows<T, I...>(f, d, J[0], output<0, T>(r0).value,
                              std::make_index_sequence<sizeof...(I)>{});
    } else {
      all_columns<T, m>(f, d, J, std::index_sequence<I...>{},
                        std::make_index_sequence<sizeof...(I)>{});
    }
    if constexpr (tuple_like<R>) {
      return rows<T, sizeof...(I)>(J, std::make_index_sequence<m>{});
    } else {
      return row<T>(J[0], std::make_index_sequence<sizeof...(I)>{});
    }
  }
  template <class T, std::size_t... I, class R, class D, class J, std::size_t... c>
  static void shape_blocks(const R& r0, const D& d, J& blocks, std::index_sequence<c...>) {
    (shape_row<T, I...>(output<c, T>(r0), d, blocks[c]), ...);
  }
  template <class T, std::size_t... I, class D, class Row>
  static void shape_row(const dual_array<T>& out, const D& d, Row& row) {
    std::size_t j = 0;
    ((row[j++] = block_of<T>(out, std::get<I>(d))), ...);
  }
  template <class T>
  static xt::xarray<T> block_of(const dual_array<T>& out, const dual_array<T>& arg) {
    std::vector<std::size_t> s(out.value.shape().begin(), out.value.shape().end());
    s.insert(s.end(), arg.value.shape().begin(), arg.value.shape().end());
    return xt::xarray<T>::from_shape(s);
  }
  template <class T, std::size_t m, class F, class D, class J, std::size_t... I, std::size_t... j>
  static void all_columns(const F& f, D& d, J& blocks, std::index_sequence<I...>,
                          std::index_sequence<j...>) {
    (columns<I, j, T>(f, d, blocks, std::make_index_sequence<m>{}), ...);
  }
  // columns k0 .. k0 + b - 1 of block (c, j), for every element k of argument i: f with the
  // tangents e_k0 .. e_(k0+b-1) on i at once (Note [Blocks of directions])
  template <std::size_t i, std::size_t j, class T, class F, class D, class J, std::size_t... c>
  static void columns(const F& f, D& d, J& blocks, std::index_sequence<c...>) {
    auto& x = std::get<i>(d);
    const std::size_t n = x.value.size();
    const std::size_t most = block_directions(n);
    for (std::size_t k0 = 0; k0 < n; k0 += most) {
      const std::size_t b = std::min(most, n - k0);
      seed_block(x, k0, b);
      const auto r = std::apply(f, d);
      (scatter(output<c, T>(r), blocks[c][j], k0, b, n), ...);
    }
    x = as_dual<T>(std::move(x.value));  // a zero tangent again
  }
  // x's tangents: the directions e_k0 .. e_(k0+b-1) (Note [Blocks of directions])
  template <class T>
  static void seed_block(dual_array<T>& x, std::size_t k0, std::size_t b) {
    const std::size_t n = x.value.size();
    x.tangent = work_array<T>::from_shape(with_block(b, x.value.shape()));
    x.tangent.fill(T(0));
    for (std::size_t k = 0; k < b; ++k) x.tangent.data()[k * n + k0 + k] = T(1);
  }
  // row e of every block: the gradients of sum(e_i * f), one reverse sweep
  template <class T, std::size_t... I, class F, class D, class Row, std::size_t... j>
  static void reverse_rows(const F& f, const D& d, Row& row, const work_array<T>& out,
                           std::index_sequence<j...>) {
    work_array<T> e = work_array<T>::from_shape(out.shape());
    e.fill(T(0));
    for (std::size_t i = 0; i < e.size(); ++i) {
      e.data()[i] = T(1);
      const auto g = vjp_values<I...>(f, e, d, std::make_index_sequence<std::tuple_size_v<D>>{});
      (put_row(row[j], std::get<j>(g), i), ...);
      e.data()[i] = T(0);
    }
  }
  template <std::size_t... I, class F, class S, class D, std::size_t... a>
  static auto vjp_values(const F& f, const S& seed, const D& d, std::index_sequence<a...>) {
    return evaluator<Family>::template vjp<I...>(f, seed, std::get<a>(d).value...);
  }
  template <class T, class G>
  static void put_row(xt::xarray<T>& block, const G& g, std::size_t i) {
    for (std::size_t k = 0; k < g.size(); ++k) block.data()[i * g.size() + k] = g.data()[k];
  }
  // the tangents of b directions ([b, output shape], or of the output's shape, the same for all:
  // the output does not depend on the argument) into columns k0 .. k0 + b - 1 of a block
  template <class T>
  static void scatter(const dual_array<T>& out, xt::xarray<T>& block, std::size_t k0, std::size_t b,
                      std::size_t n) {
    const work_array<T>& t = out.tangent;
    const std::size_t m = out.value.size();
    const bool blocked = t.dimension() == out.value.dimension() + 1;
    for (std::size_t k = 0; k < b; ++k)
      for (std::size_t e = 0; e < m; ++e)
        block.data()[e * n + k0 + k] = t.data()[blocked ? k * m + e : e];
  }
  template <class T, std::size_t n, class J, std::size_t... c>
  static auto rows(J& blocks, std::index_sequence<c...>) {
    return std::tuple{row<T>(blocks[c], std::make_index_sequence<n>{})...};
  }
  template <class T, class Row, std::size_t... j>
  static auto row(Row& r, std::index_sequence<j...>) {
    return bare_or_tuple(std::tuple{std::move(r[j])...});
  }

  // grad of a transform: the gradient of argument i in its own type
  template <class T, class A>
  static auto out_like(const A& a) {
    if constexpr (XtExpr<A>) {
      return gradient_like<A, T>(a);
    } else {
      return A(0);
    }
  }
  template <std::size_t i, class F, class D, class O>
  static void columns_into(const F& f, D& d, O& out) {
    using T = typename std::tuple_element_t<i, D>::value_type;
    auto& x = std::get<i>(d);
    const std::size_t n = x.value.size();
    const std::size_t most = block_directions(n);
    for (std::size_t k0 = 0; k0 < n; k0 += most) {  // Note [Blocks of directions]
      const std::size_t b = std::min(most, n - k0);
      seed_block(x, k0, b);
      const dual_array<T> r = as_dual<T>(std::apply(f, d));
      const bool blocked = r.tangent.dimension() == r.value.dimension() + 1;
      for (std::size_t k = 0; k < b; ++k) {
        const T v = r.tangent.data()[blocked ? k : 0];
        if constexpr (std::is_arithmetic_v<O>) {
          out = static_cast<O>(v);
        } else {
          out.data()[k0 + k] = v;
        }
      }
    }
    x = as_dual<T>(std::move(x.value));  // a zero tangent again
  }
};

}  // namespace mg::detail

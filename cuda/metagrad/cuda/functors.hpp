// The device side of the Thrust transforms (transforms.hpp): which arguments they take, and the
// functors that run the static engine on the element values of one index.
//
// A function is traced once, on the host, into its expression object E (mg::detail::trace). E
// holds only the constants and op attributes of the function (the 1 in `1 + x*x`, the exponent
// of pow) and is trivially copyable, so it is captured by value in the functor and copied to the
// device with it; the function object itself never runs there. Inside the functor the planned
// sweep of <metagrad/static/sweep.hpp> runs on plain numbers: forward, then (for gradients)
// reverse, all in registers, so one thrust::transform is one fused kernel.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

// Without a device system CUB fails deep inside its headers under a host compiler; say why here.
#if !defined(__CUDACC__) && !defined(THRUST_DEVICE_SYSTEM)
#error \
    "metagrad: compile <metagrad/cuda.hpp> with nvcc, or with a host compiler and -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP (or _OMP with -fopenmp); thrust_create_target() sets it"
#endif

#include <thrust/device_vector.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/tuple.h>

#include <metagrad/concepts.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/static.hpp>
#include <metagrad/static/sweep.hpp>

namespace mg::cuda::detail {

// An argument is a device array of float/double, or a float/double broadcast to every index.
template <class X>
struct arg_traits {
  static constexpr bool supported = false;
};

template <class T>
requires std::is_floating_point_v<T>
struct arg_traits<T> {
  static constexpr bool supported = true, is_array = false;
  using value_type = T;
  static auto begin(const T& x) { return thrust::make_constant_iterator(x); }
};

template <class T, class Alloc>
requires std::is_floating_point_v<T>
struct arg_traits<thrust::device_vector<T, Alloc>> {
  static constexpr bool supported = true, is_array = true;
  using value_type = T;
  static auto begin(const thrust::device_vector<T, Alloc>& x) { return x.cbegin(); }
};

template <class X>
using traits = arg_traits<std::remove_cvref_t<X>>;
template <class X>
using elem_t = typename traits<X>::value_type;
template <class X>
inline constexpr bool is_array_v = traits<X>::is_array;

// The element type of values: the common type of the arrays' elements. A broadcast number
// counts as float, which never widens it (a double constant in f does not make it double).
template <class... X>
using out_t = std::common_type_t<std::conditional_t<is_array_v<X>, elem_t<X>, float>...>;

template <class X>
auto begin(const X& x) {
  return traits<X>::begin(x);
}

// Does every node of E apply an elementwise op? (sum, matmul... have no per-element meaning.)
template <class E>
inline constexpr bool elementwise_v = true;
template <class Op, class... A>
inline constexpr bool elementwise_v<node<Op, A...>> = mg::detail::is_elementwise<Op>() &&
                                                      (elementwise_v<A> && ...);

template <class... X>
constexpr void check_arguments() {
  static_assert((traits<X>::supported && ...),
                "metagrad: mg::cuda takes thrust::device_vector<float or double> arguments, or "
                "float/double numbers broadcast to every element");
  static_assert((is_array_v<X> || ...),
                "metagrad: mg::cuda needs at least one thrust::device_vector argument");
}

template <class E>
constexpr void check_expression() {
  static_assert(elementwise_v<E>,
                "metagrad: mg::cuda evaluates elementwise functions only (no sum, matmul or "
                "other shaped op inside f)");
  static_assert(std::is_trivially_copyable_v<E>,
                "metagrad: the traced function must hold only trivially copyable constants to "
                "be copied to the device");
}

// The sweep of E on one index: argument types A..., seeded with the type of the result.
template <class E, class... A>
struct sweep_of {
  using args = mg::detail::tuple<A...>;
  using value =
      typename mg::detail::sweep_types<E, args, mg::detail::plain_policy,
                                       int>::template val_t<mg::detail::plan_v<E>.nslots - 1>;
  using type = mg::detail::sweep<E, args, mg::detail::plain_policy, value>;
};

// out[i] = f(x[i]...): z is the zip reference (x_0[i], ..., x_{n-1}[i]).
template <class Out, class E, class... A>
struct map_kernel {
  E e;

  template <class Z>
  MG_HD Out operator()(const Z& z) const {
    return eval(z, std::index_sequence_for<A...>{});
  }

  template <class Z, std::size_t... k>
  MG_HD MG_INLINE Out eval(const Z& z, std::index_sequence<k...>) const {
    using S = sweep_of<E, A...>;
    const typename S::args a{{static_cast<A>(thrust::get<k>(z))}...};
    typename S::type s(e, a);
    s.forward();
    return static_cast<Out>(s.result());
  }
};

// z = (seed[i], x_0[i], ..., x_{n-1}[i]); returns ([f(x[i]...),] seed[i] * df/dx_I (x[i]...)...)
// with each gradient in its argument's type.
template <bool WithValue, class Out, class E, class Selected, class... A>
struct grad_kernel;

template <bool WithValue, class Out, class E, std::size_t... I, class... A>
struct grad_kernel<WithValue, Out, E, std::index_sequence<I...>, A...> {
  E e;

  template <class Z>
  MG_HD auto operator()(const Z& z) const {
    return eval(z, std::index_sequence_for<A...>{});
  }

  template <class Z, std::size_t... k>
  MG_HD MG_INLINE auto eval(const Z& z, std::index_sequence<k...>) const {
    using S = sweep_of<E, A...>;
    const typename S::args a{{static_cast<A>(thrust::get<k + 1>(z))}...};
    typename S::type s(e, a);
    s.forward();
    const auto seed = static_cast<typename S::value>(thrust::get<0>(z));
    s.backward(seed);
    if constexpr (WithValue) {
      return thrust::make_tuple(static_cast<Out>(s.result()), gradient<I>(s, seed, a)...);
    } else {
      return thrust::make_tuple(gradient<I>(s, seed, a)...);
    }
  }

  // the gradient of argument J in its type, or zero when f does not use it
  template <std::size_t J, class S, class Seed, class Args>
  MG_HD MG_INLINE static auto gradient(const S& s, const Seed& seed, const Args& a) {
    using AJ = std::remove_cvref_t<decltype(mg::detail::at<J>(a))>;
    return static_cast<AJ>(s.template gradient<J>(seed, AJ(0)));
  }
};

}  // namespace mg::cuda::detail

namespace mg::cuda::detail {

// One argument of a loss kernel at index i: an array's element, or the broadcast number.
template <class T>
struct operand {
  const T* p = nullptr;
  T v{};
  MG_HD T at(std::int64_t i) const { return p ? p[i] : v; }
};

// What a loss kernel's reduction adds up: [0] the loss term, [1..] the terms of the selected
// broadcast numbers' gradients.
template <std::size_t K>
struct partial_sums {
  double v[K];
  MG_HD partial_sums operator+(const partial_sums& o) const {
    partial_sums r;
    for (std::size_t k = 0; k < K; ++k) r.v[k] = v[k] + o.v[k];
    return r;
  }
};
template <std::size_t K>
struct add_sums {
  MG_HD partial_sums<K> operator()(const partial_sums<K>& a, const partial_sums<K>& b) const {
    return a + b;
  }
};

// The running (max, sum of exp(value - max)) of a log-sum-exp, combined without overflow.
struct lse_pair {
  double m, s;
};
struct combine_lse {
  MG_HD lse_pair operator()(const lse_pair& a, const lse_pair& b) const {
    if (a.s == 0) return b;
    if (b.s == 0) return a;
    if (a.m != a.m || b.m != b.m) return {a.m + b.m, 1.0};  // NaN
    const double m = a.m > b.m ? a.m : b.m;
    return {m, a.s * ::exp(a.m - m) + b.s * ::exp(b.m - m)};
  }
};

/// The reduction that ends a loss given to mg::cuda::grad: sum, mean or logsumexp of all
/// elements of an elementwise expression.
enum class loss_kind { sum, mean, logsumexp };
template <class E>
struct loss_parts {
  static constexpr bool reduces = false;
};
template <class E1>
struct loss_parts<node<mg::sum_op, E1>> {
  static constexpr bool reduces = true;
  static constexpr loss_kind kind = loss_kind::sum;
  using inner = E1;
};
template <class E1>
struct loss_parts<node<mg::mean_op, E1>> {
  static constexpr bool reduces = true;
  static constexpr loss_kind kind = loss_kind::mean;
  using inner = E1;
};
template <class E1>
struct loss_parts<node<mg::logsumexp_op, E1>> {
  static constexpr bool reduces = true;
  static constexpr loss_kind kind = loss_kind::logsumexp;
  using inner = E1;
};

// f_i at index i, as the first step of a log-sum-exp: (f_i, 1).
template <class E, class... A>
struct lse_term_kernel {
  E e;
  mg::detail::tuple<operand<A>...> in;
  MG_HD lse_pair operator()(std::int64_t i) const {
    return eval(i, std::index_sequence_for<A...>{});
  }
  template <std::size_t... k>
  MG_HD MG_INLINE lse_pair eval(std::int64_t i, std::index_sequence<k...>) const {
    using S = sweep_of<E, A...>;
    const typename S::args a{{mg::detail::at<k>(in).at(i)}...};
    typename S::type s(e, a);
    s.forward();
    return {static_cast<double>(s.result()), 1.0};
  }
};

// Index i of a loss L = R(f(x_0[i], ...)) over all i: the sweep of f at i forward, then backward
// seeded with dL/df_i (`scale` for sum and mean; exp(f_i - shift) for logsumexp, shift being L);
// writes the gradient of each selected array argument at i (out[j]) and returns [f_i, the
// gradient terms of the selected numbers] for the reduction.
template <loss_kind Kind, class E, class Selected, class... A>
struct loss_kernel;

template <loss_kind Kind, class E, std::size_t... I, class... A>
struct loss_kernel<Kind, E, std::index_sequence<I...>, A...> {
  using args_t = mg::detail::tuple<A...>;
  template <std::size_t J>
  using arg_t = std::remove_cvref_t<decltype(mg::detail::at<J>(std::declval<args_t&>()))>;
  static constexpr std::size_t K = 1 + sizeof...(I);

  E e;
  mg::detail::tuple<operand<A>...> in;
  mg::detail::tuple<arg_t<I>*...> out;  // null: a number's gradient, summed into the result
  double scale = 1, shift = 0;

  MG_HD partial_sums<K> operator()(std::int64_t i) const {
    return eval(i, std::index_sequence_for<A...>{}, std::make_index_sequence<sizeof...(I)>{});
  }

  template <std::size_t... k, std::size_t... q>
  MG_HD MG_INLINE partial_sums<K> eval(std::int64_t i, std::index_sequence<k...>,
                                       std::index_sequence<q...>) const {
    using S = sweep_of<E, A...>;
    const typename S::args a{{mg::detail::at<k>(in).at(i)}...};
    typename S::type s(e, a);
    s.forward();
    const double f = static_cast<double>(s.result());
    double seed = scale;
    if constexpr (Kind == loss_kind::logsumexp) seed = ::exp(f - shift);
    const auto sv = static_cast<typename S::value>(seed);
    s.backward(sv);
    partial_sums<K> r;
    r.v[0] = f;
    ((r.v[q + 1] = write<I>(s, sv, i, mg::detail::at<q>(out))), ...);
    return r;
  }

  // Stores the gradient of argument J at i when it is an array; returns it when a number.
  template <std::size_t J, class Sw, class Seed, class P>
  MG_HD MG_INLINE static double write(const Sw& s, const Seed& seed, std::int64_t i, P* out) {
    const auto g = static_cast<P>(s.template gradient<J>(seed, P(0)));
    if (out) {
      out[i] = g;
      return 0;
    }
    return static_cast<double>(g);
  }
};

}  // namespace mg::cuda::detail

// The Thrust backend's function transforms: mg::cuda::map, vjp, grad, value_and_grad and sum.
//
// Each evaluates an elementwise function over device arrays with ONE thrust::transform whose
// functor runs the static engine on the element values of one index (see functors.hpp). Compiled
// by nvcc it is one fused CUDA kernel; compiled by a host compiler with
// THRUST_DEVICE_SYSTEM_CPP or _OMP it is a serial or OpenMP loop, which is how it is tested.
#pragma once

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <thrust/device_vector.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/reduce.h>
#include <thrust/transform.h>

#include <metagrad/cuda/functors.hpp>
#include <metagrad/error.hpp>
#include <metagrad/static.hpp>

namespace mg::cuda {

namespace detail {
// The common length of the array arguments; a length mismatch is a run-time error.
template <class... X>
std::size_t common_size(const char* what, const X&... xs) {
  std::size_t n = 0;
  bool seen = false, equal = true;
  const auto visit = [&](const auto& x) {
    if constexpr (is_array_v<decltype(x)>) {
      if (seen && x.size() != n) equal = false;
      if (!seen) n = x.size();
      seen = true;
    }
  };
  (visit(xs), ...);
  if (!equal) {
    std::string sizes;
    const auto list = [&](const auto& x) {
      if constexpr (is_array_v<decltype(x)>) {
        sizes += (sizes.empty() ? "" : ", ") + std::to_string(x.size());
      }
    };
    (list(xs), ...);
    throw mg::error(mg::detail::message(what, ": the device arrays have different sizes (", sizes,
                                        "); pass arrays of one size, or a number to broadcast"));
  }
  return n;
}

template <class F, class... X>
auto trace_for() {
  check_arguments<X...>();
  using E = mg::detail::traced_t<F, sizeof...(X)>;
  check_expression<E>();
  return std::type_identity<E>{};
}

// The results of the selected arguments I... (parts K... of the pass) in their arguments'
// types: arrays as they are, broadcast numbers summed.
template <class Args, std::size_t... I, std::size_t... K, class Parts>
auto finish_gradients(std::index_sequence<I...>, std::index_sequence<K...>, Parts& parts) {
  const auto finish = [](auto i, auto& part) {
    using XI = std::tuple_element_t<decltype(i)::value, Args>;
    if constexpr (is_array_v<XI>) {
      return std::move(part);
    } else {
      return thrust::reduce(part.begin(), part.end(), elem_t<XI>(0));
    }
  };
  return mg::detail::bare_or_tuple(
      std::tuple{finish(std::integral_constant<std::size_t, I>{}, std::get<K>(parts))...});
}

// One transform computing, per index, [the value and] seed * df/dx_I for each selected I. The
// gradient of a broadcast number is the sum of its per-index terms (one reduce after the pass).
template <bool WithValue, std::size_t... I, class E, class SeedIt, class... X>
auto run_gradients(std::index_sequence<I...> selected, const E& e, SeedIt seed, std::size_t n,
                   const X&... xs) {
  using Out = out_t<X...>;
  using Args = std::tuple<X...>;
  std::tuple<thrust::device_vector<elem_t<std::tuple_element_t<I, Args>>>...> parts{
      thrust::device_vector<elem_t<std::tuple_element_t<I, Args>>>(n)...};
  thrust::device_vector<Out> values(WithValue ? n : 0);

  const auto in = thrust::make_zip_iterator(seed, detail::begin(xs)...);
  const auto out = std::apply(
      [&](auto&... p) {
        if constexpr (WithValue) {
          return thrust::make_zip_iterator(values.begin(), p.begin()...);
        } else {
          return thrust::make_zip_iterator(p.begin()...);
        }
      },
      parts);
  thrust::transform(in, in + n, out,
                    grad_kernel<WithValue, Out, E, std::index_sequence<I...>, elem_t<X>...>{e});

  auto grads = finish_gradients<Args>(selected, std::make_index_sequence<sizeof...(I)>{}, parts);
  if constexpr (WithValue) {
    return std::pair{std::move(values), std::move(grads)};
  } else {
    return grads;
  }
}

template <std::size_t N, std::size_t... I>
constexpr bool indices_below(std::index_sequence<I...>) {
  return ((I < N) && ...);
}

template <bool WithValue, class Selected, class F, class SeedOf, class... X>
auto gradients(const char* what, const F& f, SeedOf seed_of, const X&... xs) {
  using E = typename decltype(trace_for<F, X...>())::type;
  static_assert(indices_below<sizeof...(X)>(Selected{}),
                "metagrad: grad<I...> names an argument index the call does not have");
  const E e = mg::detail::trace(f, std::index_sequence_for<X...>{});
  const std::size_t n = common_size(what, xs...);
  return run_gradients<WithValue>(Selected{}, e, seed_of(n), n, xs...);
}

template <bool WithValue, class F, std::size_t... I>
struct grad_fn {
  F f;

  template <class... X>
  auto operator()(const X&... xs) const {
    using Selected = std::conditional_t<sizeof...(I) == 0, std::index_sequence_for<X...>,
                                        std::index_sequence<I...>>;
    using Out = out_t<X...>;
    // the gradient of sum_i f(x_i): every index is seeded with 1
    return gradients<WithValue, Selected>(
        WithValue ? "mg::cuda::value_and_grad" : "mg::cuda::grad", f,
        [](std::size_t) { return thrust::make_constant_iterator(Out(1)); }, xs...);
  }
};
}  // namespace detail

/// Applies an elementwise function to device arrays: `out[i] = f(x[i]...)`, one fused
/// `thrust::transform`. `f` is any generic callable written for the static engine (built-in ops,
/// `mg::apply<F>` of custom ops marked `MG_HD`); it is traced once on the host and never runs on
/// the device itself. Arguments are `thrust::device_vector<float or double>` of one size, or
/// numbers broadcast to every element. The result has the arrays' (common) element type.
/// ```cpp
/// thrust::device_vector<double> x = ..., y = ...;
/// auto f = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
/// thrust::device_vector<double> z = mg::cuda::map(f, x, y);
/// thrust::device_vector<double> w = mg::cuda::map(f, x, 3.0);   // y broadcast
/// ```
template <class F, class... X>
auto map(const F& f, const X&... xs) {
  using E = typename decltype(detail::trace_for<F, X...>())::type;
  using Out = detail::out_t<X...>;
  const E e = mg::detail::trace(f, std::index_sequence_for<X...>{});
  const std::size_t n = detail::common_size("mg::cuda::map", xs...);
  thrust::device_vector<Out> out(n);
  const auto in = thrust::make_zip_iterator(detail::begin(xs)...);
  thrust::transform(in, in + n, out.begin(), detail::map_kernel<Out, E, detail::elem_t<X>...>{e});
  return out;
}

/// Vector-Jacobian product of an elementwise function: `dx_k[i] = g[i] * df/dx_k (x[i]...)`,
/// forward and reverse sweep per element in registers, one fused `thrust::transform`. With no
/// indices, with respect to every argument (a bare array for one, else a `std::tuple`);
/// `vjp<I...>` chooses. Gradients come back in the argument's type: the gradient of a broadcast
/// number is a number, `sum_i g[i] * df/dx_k (x[i]...)`.
/// ```cpp
/// auto [dx, dy] = mg::cuda::vjp(f, g, x, y);         // two device_vector<double>
/// thrust::device_vector<double> dy = mg::cuda::vjp<1>(f, g, x, y);
/// double ds = mg::cuda::vjp<1>(f, g, x, 3.0);        // broadcast number: summed
/// ```
template <std::size_t... I, class F, class G, class Alloc, class... X>
auto vjp(const F& f, const thrust::device_vector<G, Alloc>& g, const X&... xs) {
  static_assert(std::is_floating_point_v<G>,
                "metagrad: mg::cuda::vjp takes a thrust::device_vector<float or double> as g");
  const std::size_t n = detail::common_size("mg::cuda::vjp", xs...);
  if (g.size() != n) {
    throw mg::error(mg::detail::message("mg::cuda::vjp: g has ", g.size(),
                                        " elements but the arguments have ", n,
                                        "; g must have one entry per element of f's output"));
  }
  using Selected = std::conditional_t<sizeof...(I) == 0, std::index_sequence_for<X...>,
                                      std::index_sequence<I...>>;
  return detail::gradients<false, Selected>(
      "mg::cuda::vjp", f, [&](std::size_t) { return g.cbegin(); }, xs...);
}

/// Gradient of the loss `sum_i f(x[i]...)`, as a new function: per element `df/dx_k (x[i]...)`
/// for array arguments, the summed partials for broadcast numbers; one fused `thrust::transform`
/// (the per-element vjp seeded with 1). `grad<I...>` chooses arguments as in `mg::grad`.
/// ```cpp
/// auto [dx, dy] = mg::cuda::grad(f)(x, y);
/// thrust::device_vector<double> dx0 = mg::cuda::grad<0>(f)(x, y);
/// ```
template <std::size_t... I, class F>
auto grad(F f) {
  return detail::grad_fn<false, F, I...>{std::move(f)};
}

/// Like `grad`, but returns `{values, gradient(s)}` from the same single transform, `values[i] =
/// f(x[i]...)`; the loss is then `mg::cuda::sum(values)`:
/// ```cpp
/// auto [v, g] = mg::cuda::value_and_grad(f)(x, y);   // g: std::tuple of two device_vectors
/// double loss = mg::cuda::sum(v);
/// ```
template <std::size_t... I, class F>
auto value_and_grad(F f) {
  return detail::grad_fn<true, F, I...>{std::move(f)};
}

/// The sum of a device array's elements (`thrust::reduce`; order unspecified, so floating-point
/// results may differ from a serial sum in the last bits):
/// ```cpp
/// double total = mg::cuda::sum(x);
/// ```
template <class T, class Alloc>
T sum(const thrust::device_vector<T, Alloc>& x) {
  return thrust::reduce(x.begin(), x.end(), T(0));
}

}  // namespace mg::cuda

// The Thrust backend's function transforms: mg::cuda::map, vjp, grad, value_and_grad and sum.
//
// Each evaluates an elementwise function over device arrays with ONE thrust::transform whose
// functor runs the static engine on the element values of one index (see functors.hpp). Compiled
// by nvcc it is one fused CUDA kernel; compiled by a host compiler with
// THRUST_DEVICE_SYSTEM_CPP or _OMP it is a serial or OpenMP loop, which is how it is tested.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <thrust/device_vector.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/reduce.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <metagrad/cuda/functors.hpp>
#include <metagrad/cuda/memory.hpp>
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
      return thrust::reduce(policy(), part.begin(), part.end(), elem_t<XI>(0));
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
  thrust::transform(policy(), in, in + n, out,
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

// The per-element transforms: the gradient of sum_i f(x_i) of an elementwise f.
template <bool WithValue, class F, std::size_t... I>
struct elementwise_grad_fn {
  F f;

  template <class... X>
  auto operator()(const X&... xs) const {
    using Selected = std::conditional_t<sizeof...(I) == 0, std::index_sequence_for<X...>,
                                        std::index_sequence<I...>>;
    using Out = out_t<X...>;
    // the gradient of sum_i f(x_i): every index is seeded with 1
    return gradients<WithValue, Selected>(
        WithValue ? "mg::cuda::elementwise_value_and_grad" : "mg::cuda::elementwise_grad", f,
        [](std::size_t) { return thrust::make_constant_iterator(Out(1)); }, xs...);
  }
};

template <class E>
constexpr bool valid_loss() {
  if constexpr (loss_parts<E>::reduces) {
    return elementwise_v<typename loss_parts<E>::inner> && std::is_trivially_copyable_v<E>;
  } else {
    return false;
  }
}

template <class T, class X>
operand<T> operand_of(const X& x) {
  if constexpr (is_array_v<X>) {
    return {thrust::raw_pointer_cast(x.data()), T{}};
  } else {
    return {nullptr, static_cast<T>(x)};
  }
}

// The loss R(f(x_i)...) and the gradients of the selected arguments I...: array gradients written
// through out (each of n elements), number gradients returned in the second member.
template <std::size_t... I, class E, class Out, class... X>
auto run_loss(const char* what, std::index_sequence<I...>, const E& e, std::size_t n,
              const Out& out, const X&... xs) {
  using P = loss_parts<E>;
  using E1 = typename P::inner;
  using Kernel = loss_kernel<P::kind, E1, std::index_sequence<I...>, elem_t<X>...>;
  constexpr std::size_t K = Kernel::K;
  if (!e.op.r.all)
    throw mg::error(mg::detail::message(
        what,
        ": the loss reduces along one dimension; mg::cuda::grad's function reduces all "
        "elements (mg::sum(e), mg::mean(e) or mg::logsumexp(e))"));
  const E1 e1 = mg::detail::child<0>(e);
  const mg::detail::tuple<operand<elem_t<X>>...> in{{operand_of<elem_t<X>>(xs)}...};
  const auto index = [](std::size_t i) {
    return thrust::counting_iterator<std::int64_t>(static_cast<std::int64_t>(i));
  };
  double value = P::kind == loss_kind::sum    ? 0.0
                 : P::kind == loss_kind::mean ? std::numeric_limits<double>::quiet_NaN()
                                              : -std::numeric_limits<double>::infinity();
  std::array<double, K - 1 == 0 ? 1 : K - 1> numbers{};
  if (n == 0) return std::pair{value, numbers};
  Kernel k{e1, in, out};
  if constexpr (P::kind == loss_kind::mean) k.scale = 1.0 / static_cast<double>(n);
  if constexpr (P::kind == loss_kind::logsumexp) {
    const lse_pair p = thrust::transform_reduce(
        policy(), index(0), index(n), lse_term_kernel<E1, elem_t<X>...>{e1, in},
        lse_pair{-std::numeric_limits<double>::infinity(), 0.0}, combine_lse{});
    k.shift = value = p.m + std::log(p.s);
  }
  const partial_sums<K> r =
      thrust::transform_reduce(policy(), index(0), index(n), k, partial_sums<K>{}, add_sums<K>{});
  if constexpr (P::kind == loss_kind::sum) value = r.v[0];
  if constexpr (P::kind == loss_kind::mean) value = r.v[0] / static_cast<double>(n);
  for (std::size_t q = 0; q + 1 < K; ++q) numbers[q] = r.v[q + 1];
  return std::pair{value, numbers};
}

// The traced loss; its checks are in this auto function's body, which is instantiated where the
// call's type is deduced, so that a failed one is the first error.
template <class F, class... X>
auto trace_loss() {
  check_arguments<X...>();
  using E = mg::detail::traced_t<F, sizeof...(X)>;
  static_assert(loss_parts<E>::reduces,
                "metagrad: mg::cuda::grad takes a function that ends in mg::sum, mg::mean or "
                "mg::logsumexp of all elements, as mg::grad does; for the per-element gradients of "
                "an elementwise function use mg::cuda::elementwise_grad");
  if constexpr (loss_parts<E>::reduces) {
    static_assert(elementwise_v<typename loss_parts<E>::inner>,
                  "metagrad: inside the reduction that ends it, mg::cuda::grad's function may use "
                  "elementwise ops only (no inner sum, matmul or other shaped op)");
    static_assert(std::is_trivially_copyable_v<E>,
                  "metagrad: the traced function must hold only trivially copyable constants to "
                  "be copied to the device");
  }
  return std::type_identity<E>{};
}

template <bool WithValue, class F, std::size_t... I>
struct loss_grad_fn {
  F f;

  template <class... X>
  using selected_t = std::conditional_t<sizeof...(I) == 0, std::index_sequence_for<X...>,
                                        std::index_sequence<I...>>;
  static constexpr const char* what = WithValue ? "mg::cuda::value_and_grad" : "mg::cuda::grad";

  template <class... X>
  auto operator()(const X&... xs) const {
    return call(selected_t<X...>{}, xs...);
  }

  /// The same, writing the gradients of the (selected) array arguments into `out...`, device
  /// arrays of the arguments' size: nothing is allocated. Returns the loss (value_and_grad) or
  /// nothing (grad).
  template <class... G>
  auto into(G&... out) const {
    return into_fn<G...>{this, std::tie(out...)};
  }

  template <class... G>
  struct into_fn {
    const loss_grad_fn* self;
    std::tuple<G&...> outs;
    template <class... X>
    auto operator()(const X&... xs) const {
      return self->call_into(selected_t<X...>{}, outs, xs...);
    }
  };

  template <std::size_t... S, class... X>
  auto call(std::index_sequence<S...> selected, const X&... xs) const {
    using E = typename decltype(trace_loss<F, X...>())::type;
    static_assert(indices_below<sizeof...(X)>(std::index_sequence<S...>{}),
                  "metagrad: grad<I...> names an argument index the call does not have");
    if constexpr (valid_loss<E>()) return call_traced<E>(selected, xs...);
  }

  template <class E, std::size_t... S, class... X>
  auto call_traced(std::index_sequence<S...> selected, const X&... xs) const {
    using Args = std::tuple<X...>;
    const E e = mg::detail::trace(f, std::index_sequence_for<X...>{});
    const std::size_t n = common_size(what, xs...);
    std::tuple<
        std::conditional_t<is_array_v<std::tuple_element_t<S, Args>>,
                           thrust::device_vector<elem_t<std::tuple_element_t<S, Args>>>, int>...>
        arrays{make_output<std::tuple_element_t<S, Args>>(n)...};
    const auto out = pointers<Args>(selected, arrays, std::make_index_sequence<sizeof...(S)>{});
    auto [value, numbers] = run_loss(what, selected, e, n, out, xs...);
    auto grads = finish<Args>(selected, std::make_index_sequence<sizeof...(S)>{}, arrays, numbers);
    if constexpr (WithValue) {
      return std::pair{static_cast<out_t<X...>>(value), std::move(grads)};
    } else {
      return grads;
    }
  }

  template <std::size_t... S, class Outs, class... X>
  auto call_into(std::index_sequence<S...> selected, Outs outs, const X&... xs) const {
    using E = typename decltype(trace_loss<F, X...>())::type;
    if constexpr (valid_loss<E>()) return into_traced<E>(selected, outs, xs...);
  }

  template <class E, std::size_t... S, class Outs, class... X>
  auto into_traced(std::index_sequence<S...> selected, Outs outs, const X&... xs) const {
    using Args = std::tuple<X...>;
    static_assert(sizeof...(S) == std::tuple_size_v<Outs>,
                  "metagrad: into() takes one output array per selected argument");
    static_assert((is_array_v<std::tuple_element_t<S, Args>> && ...),
                  "metagrad: into() writes array gradients; a broadcast number's gradient is a "
                  "number (call without into)");
    const E e = mg::detail::trace(f, std::index_sequence_for<X...>{});
    const std::size_t n = common_size(what, xs...);
    const auto check = [&](const auto& o) {
      if (o.size() != n)
        throw mg::error(mg::detail::message(what, ": into() got an output array of ", o.size(),
                                            " elements for arguments of ", n,
                                            "; pass arrays of the arguments' size"));
    };
    std::apply([&](auto&... o) { (check(o), ...); }, outs);
    using out_tuple = mg::detail::tuple<elem_t<std::tuple_element_t<S, Args>>*...>;
    const out_tuple out = std::apply(
        [](auto&... o) { return out_tuple{{thrust::raw_pointer_cast(o.data())}...}; }, outs);
    auto [value, numbers] = run_loss(what, selected, e, n, out, xs...);
    (void)numbers;
    if constexpr (WithValue) return static_cast<out_t<X...>>(value);
  }

  template <class XI>
  static auto make_output(std::size_t n) {
    if constexpr (is_array_v<XI>) {
      return thrust::device_vector<elem_t<XI>>(n);
    } else {
      return 0;
    }
  }

  template <class Args, std::size_t... S, class Arrays, std::size_t... Q>
  static auto pointers(std::index_sequence<S...>, Arrays& arrays, std::index_sequence<Q...>) {
    const auto one = [](auto& a, auto type) -> typename decltype(type)::type* {
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(a)>, int>) {
        return nullptr;
      } else {
        return thrust::raw_pointer_cast(a.data());
      }
    };
    return mg::detail::tuple<elem_t<std::tuple_element_t<S, Args>>*...>{
        {one(std::get<Q>(arrays), std::type_identity<elem_t<std::tuple_element_t<S, Args>>>{})}...};
  }

  template <class Args, std::size_t... S, std::size_t... Q, class Arrays, class Numbers>
  static auto finish(std::index_sequence<S...>, std::index_sequence<Q...>, Arrays& arrays,
                     const Numbers& numbers) {
    return mg::detail::bare_or_tuple(
        std::tuple{finish_one<std::tuple_element_t<S, Args>, Q>(std::get<Q>(arrays), numbers)...});
  }

  // An array's gradient as written, or a number's from the reduction.
  template <class XI, std::size_t Q, class A, class Numbers>
  static auto finish_one(A& a, const Numbers& numbers) {
    if constexpr (is_array_v<XI>) {
      return std::move(a);
    } else {
      return static_cast<elem_t<XI>>(numbers[Q]);
    }
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
  thrust::transform(detail::policy(), in, in + n, out.begin(),
                    detail::map_kernel<Out, E, detail::elem_t<X>...>{e});
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

/// The per-element gradients of an elementwise f (the gradient of `sum_i f(x[i]...)`), as a new
/// function: per element `df/dx_k (x[i]...)` for array arguments, the summed partials for
/// broadcast numbers; one fused `thrust::transform` (the per-element vjp seeded with 1).
/// `elementwise_grad<I...>` chooses arguments as in `mg::grad`.
/// ```cpp
/// auto [dx, dy] = mg::cuda::elementwise_grad(f)(x, y);
/// thrust::device_vector<double> dx0 = mg::cuda::elementwise_grad<0>(f)(x, y);
/// ```
template <std::size_t... I, class F>
auto elementwise_grad(F f) {
  return detail::elementwise_grad_fn<false, F, I...>{std::move(f)};
}

/// Like `elementwise_grad`, but returns `{values, gradient(s)}` from the same single transform,
/// `values[i] = f(x[i]...)`:
/// ```cpp
/// auto [v, g] = mg::cuda::elementwise_value_and_grad(f)(x, y);  // g: a tuple of two arrays
/// ```
template <std::size_t... I, class F>
auto elementwise_value_and_grad(F f) {
  return detail::elementwise_grad_fn<true, F, I...>{std::move(f)};
}

/// The gradient of a loss over device arrays, taking the same callable as mg::grad: f ends in
/// mg::sum, mg::mean or mg::logsumexp of all elements of an elementwise expression of its
/// arguments (device arrays of one size, numbers broadcast to every element). One fused pass:
/// per index the forward sweep, the backward seeded with the reduction's derivative, the array
/// gradients written, and (for value_and_grad, or a broadcast number's gradient) per-block partial
/// sums reduced on the device; logsumexp takes one pass more for its shift. `grad<I...>` chooses
/// arguments as in mg::grad; a broadcast number's gradient is a number.
/// ```cpp
/// auto loss = [](auto x, auto y) { return mg::sum(pow(sin(x) * y, 2)); };
/// auto [gx, gy] = mg::cuda::grad(loss)(x, y);          // two device_vectors
/// auto [l, g] = mg::cuda::value_and_grad(loss)(x, 3.0); // l: the loss; g: {device_vector, double}
/// mg::cuda::grad<0>(loss).into(gx)(x, y);              // into the caller's array: no allocation
/// ```
template <std::size_t... I, class F>
auto grad(F f) {
  return detail::loss_grad_fn<false, F, I...>{std::move(f)};
}

/// Like grad, and the loss: `{loss, gradient(s)}` from the same pass.
template <std::size_t... I, class F>
auto value_and_grad(F f) {
  return detail::loss_grad_fn<true, F, I...>{std::move(f)};
}

/// The sum of a device array's elements (`thrust::reduce`; order unspecified, so floating-point
/// results may differ from a serial sum in the last bits):
/// ```cpp
/// double total = mg::cuda::sum(x);
/// ```
template <class T, class Alloc>
T sum(const thrust::device_vector<T, Alloc>& x) {
  return thrust::reduce(detail::policy(), x.begin(), x.end(), T(0));
}

}  // namespace mg::cuda

// The "Thrust vs CPU" checks of the gradient harness (see harness.hpp).
//
// check_thrust<T>(f, n, args...) draws random inputs (fixed seed) and compares the Thrust
// backend with the CPU, element by element:
//   1. mg::cuda::map against f called on plain numbers;
//   2. mg::cuda::elementwise_value_and_grad and elementwise_grad against the static CPU engine
//      mg::value_and_grad(f)(x[i]...) at every index (broadcast numbers: the summed partials);
//   3. mg::cuda::vjp with a random cotangent g against g[i] times the CPU gradient, and
//      vjp<I> of each single argument against the full vjp;
//   4. in float64, mg::cuda::value_and_grad of mg::sum(f): the loss against the sum of the
//      values, the gradients against the same per-index partials;
//   5. in float64, a central finite difference of f at a few indices against the gradients.
// An argument is mg_test::uniform_array{lo, hi} (a device array of n values drawn from [lo, hi]) or
// a number (broadcast). Float64 agrees to 1e-12 relative; float32 to 1e-5.
#pragma once

#include <cmath>
#include <cstddef>
#include <random>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <thrust/copy.h>
#include <thrust/device_vector.h>

#include <metagrad/cuda/transforms.hpp>
#include <metagrad/static.hpp>

#include "support/harness.hpp"

namespace mg_test {

/// A random array argument with values drawn uniformly from [lo, hi].
struct uniform_array {
  double lo, hi;
};

template <class T>
struct thrust_tolerance {
  static constexpr double value = std::is_same_v<T, double> ? 1e-12 : 1e-5;
};

template <class T>
std::vector<T> random_vector(std::size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(rng));
  return v;
}

template <class T>
std::vector<T> to_host(const thrust::device_vector<T>& d) {
  std::vector<T> h(d.size());
  thrust::copy(d.begin(), d.end(), h.begin());
  return h;
}

template <class T>
thrust::device_vector<T> to_device(const std::vector<T>& h) {
  return thrust::device_vector<T>(h.begin(), h.end());
}

// Host and device forms of one argument, and its value at index i.
template <class T>
auto host_form(const uniform_array& u, std::size_t n, std::mt19937_64& rng) {
  return random_vector<T>(n, u.lo, u.hi, rng);
}
template <class T, class S>
requires std::is_arithmetic_v<S> T host_form(S s, std::size_t, std::mt19937_64&) {
  return static_cast<T>(s);
}
template <class T>
auto device_form(const std::vector<T>& h) {
  return to_device(h);
}
template <class T>
T device_form(T s) {
  return s;
}
template <class T>
T at(const std::vector<T>& h, std::size_t i) {
  return h[i];
}
template <class T>
T at(T s, std::size_t) {
  return s;
}

// Calls f(std::integral_constant<std::size_t, K>{}) for K = 0, ..., N - 1.
template <class F, std::size_t... K>
void for_each_index(F&& f, std::index_sequence<K...>) {
  (f(std::integral_constant<std::size_t, K>{}), ...);
}
template <std::size_t N, class F>
void for_each_index(F&& f) {
  for_each_index(f, std::make_index_sequence<N>{});
}

// |a - b| <= tol * max(1, sum of |terms|): for sums whose order may differ (OMP reductions).
inline ::testing::AssertionResult near_sum(double a, double b, double abs_terms, double tol) {
  const double scale = std::fmax(1.0, abs_terms);
  if (std::fabs(a - b) <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " vs " << b << " (tolerance " << tol * scale << ")";
}

// A gradient of the Thrust backend (array or number) against per-index reference terms.
template <class T, class D>
void expect_gradient(const D& got, const std::vector<double>& terms, double tol, const char* what,
                     std::size_t k) {
  if constexpr (std::is_arithmetic_v<D>) {
    double sum = 0, abs = 0;
    for (double t : terms) sum += t, abs += std::fabs(t);
    EXPECT_TRUE(near_sum(double(got), sum, abs, 10 * tol)) << what << ": d/dx" << k << " (summed)";
  } else {
    const std::vector<T> h = to_host(got);
    ASSERT_EQ(h.size(), terms.size()) << what;
    std::size_t failures = 0;
    for (std::size_t i = 0; i < h.size() && failures < 5; ++i) {
      const auto r = near_rel(double(h[i]), terms[i], tol);
      if (!r) ++failures;
      EXPECT_TRUE(r) << what << ": d/dx" << k << " at index " << i;
    }
  }
}

/// Checks map, elementwise_value_and_grad, elementwise_grad, vjp, and (float64) the loss
/// transform value_and_grad of sum(f) of the Thrust backend against the CPU on n random elements
/// of type T (float or double).
template <class T, class F, class... Args>
void check_thrust(const F& f, std::size_t n, const Args&... args) {
  constexpr std::size_t arity = sizeof...(Args);
  const double tol = thrust_tolerance<T>::value;
  std::mt19937_64 rng(20240611);
  const auto host = std::tuple{host_form<T>(args, n, rng)...};
  const std::vector<T> g_host = random_vector<T>(n, -1.0, 1.0, rng);
  const auto dev = std::apply([](const auto&... h) { return std::tuple{device_form(h)...}; }, host);
  const thrust::device_vector<T> g = to_device(g_host);

  // the CPU references at index i: f on doubles, and the static engine on T
  const auto f_at = [&](std::size_t i) {
    return std::apply([&](const auto&... h) { return f(double(at(h, i))...); }, host);
  };
  const auto cpu_at = [&](std::size_t i) {
    return std::apply([&](const auto&... h) { return mg::value_and_grad(f)(at(h, i)...); }, host);
  };

  // 1. map
  const thrust::device_vector<T> mapped =
      std::apply([&](const auto&... d) { return mg::cuda::map(f, d...); }, dev);
  const std::vector<T> values = to_host(mapped);
  ASSERT_EQ(values.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(near_rel(double(values[i]), f_at(i), tol)) << "map at index " << i;
  }

  // 2. elementwise_value_and_grad, elementwise_grad; 3. vjp
  auto [vg_values, vg_grads] = std::apply(
      [&](const auto&... d) { return mg::cuda::elementwise_value_and_grad(f)(d...); }, dev);
  const auto grads = as_tuple(std::move(vg_grads));
  const auto grads_only = as_tuple(
      std::apply([&](const auto&... d) { return mg::cuda::elementwise_grad(f)(d...); }, dev));
  const auto vjps =
      as_tuple(std::apply([&](const auto&... d) { return mg::cuda::vjp(f, g, d...); }, dev));
  const std::vector<T> vg_host = to_host(vg_values);
  ASSERT_EQ(vg_host.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(near_rel(double(vg_host[i]), double(values[i]), tol))
        << "value_and_grad value at index " << i;
  }
  double abs_values = 0, total = 0;
  for (T v : values) total += v, abs_values += std::fabs(double(v));
  EXPECT_TRUE(near_sum(double(mg::cuda::sum(vg_values)), total, abs_values, 10 * tol)) << "sum";

  std::vector<std::vector<double>> partial(arity, std::vector<double>(n));
  for (std::size_t i = 0; i < n; ++i) {
    const auto g_cpu = as_tuple(cpu_at(i).second);
    for_each_index<arity>([&](auto k) { partial[k][i] = double(std::get<k>(g_cpu)); });
  }
  for_each_index<arity>([&]<std::size_t k>(std::integral_constant<std::size_t, k>) {
    std::vector<double> weighted(n);
    for (std::size_t i = 0; i < n; ++i) weighted[i] = double(g_host[i]) * partial[k][i];
    expect_gradient<T>(std::get<k>(grads), partial[k], tol, "value_and_grad", k);
    expect_gradient<T>(std::get<k>(grads_only), partial[k], tol, "grad", k);
    expect_gradient<T>(std::get<k>(vjps), weighted, tol, "vjp", k);
    const auto single =
        std::apply([&](const auto&... d) { return mg::cuda::vjp<k>(f, g, d...); }, dev);
    expect_gradient<T>(single, weighted, tol, "vjp<k>", k);
  });

  // 4. the loss transform on sum(f), in float64 (one more kernel per op and argument kinds; the
  // other reductions, float32 and into() are in transforms_test.cpp): the loss against the sum of
  // the values, the gradients against the same per-index partials
  if constexpr (std::is_same_v<T, double>) {
    const auto sum_f = [f](auto... a) { return mg::sum(f(a...)); };
    auto [loss_sum, grads_sum] =
        std::apply([&](const auto&... d) { return mg::cuda::value_and_grad(sum_f)(d...); }, dev);
    EXPECT_TRUE(near_sum(double(loss_sum), total, abs_values, 10 * tol)) << "loss sum";
    const auto gs = as_tuple(std::move(grads_sum));
    for_each_index<arity>([&]<std::size_t k>(std::integral_constant<std::size_t, k>) {
      expect_gradient<T>(std::get<k>(gs), partial[k], tol, "grad of sum(f)", k);
    });
  }

  // 5. finite differences (float64) at a few indices, against the Thrust gradient of an array
  // argument and the per-index CPU partial of a broadcast one
  if constexpr (std::is_same_v<T, double>) {
    for_each_index<arity>([&]<std::size_t k>(std::integral_constant<std::size_t, k>) {
      std::vector<double> got = partial[k];
      if constexpr (!std::is_arithmetic_v<std::remove_cvref_t<decltype(std::get<k>(grads))>>) {
        const std::vector<T> h = to_host(std::get<k>(grads));
        got.assign(h.begin(), h.end());
      }
      for (std::size_t i : {std::size_t{0}, n / 2, n - 1}) {
        const auto x =
            std::apply([&](const auto&... h) { return std::tuple{double(at(h, i))...}; }, host);
        EXPECT_TRUE(near_rel(got[i], central_difference<k>(f, x), 1e-6))
            << "finite difference d/dx" << k << " at index " << i;
      }
    });
  }
}

}  // namespace mg_test

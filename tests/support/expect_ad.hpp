// expect_ad: the one gradient check every op and function goes through (see docs/testing.md).
//
//   mg_test::expect_ad(f, {.ranges = {{0.5, 2.0}}});
//
// f is a generic callable of N arguments (N = 1..4). Every evaluator that can run f checks its
// value, first and second derivatives in float64 against central differences, and against the
// other evaluators:
//   - static engine on numbers: value, gradient and Hessian (grad of grad) at two random points;
//   - runtime engine on 0-d tensors at the same points: value, backward, and double backward
//     through create_graph, against the static engine (1e-12);
//   - static engine on xtensor arrays: the general path (vjp, every element against differences)
//     and the fused path (against the general path);
//   - runtime engine on CPU tensors: every gradient element against differences, and a
//     Hessian-vector product through create_graph; f32 on a sample;
// and where the binary has the Thrust backend (see cpu_legs and device_legs below):
//   - the runtime engine on device cuda (the Thrust backend), the same array checks, f64 and f32;
//   - with MG_TEST_TRANSFORMS (a translation unit that can include <metagrad/cuda/transforms.hpp>:
//   the
//     CPP and OMP device systems): mg::cuda::map/grad/value_and_grad/vjp for elementwise f,
//     against the CPU static engine.
#pragma once

#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/metagrad.hpp>

#include "support/harness.hpp"
#include "support/harness_runtime.hpp"
#include "support/harness_xtensor.hpp"

#if defined(MG_TEST_TRANSFORMS)
#include "support/harness_thrust.hpp"
#endif

namespace mg_test {

// Which legs this binary runs:
//   - by default the CPU legs (the static engine, the runtime engine on device cpu);
//   - with MG_TEST_DEVICE the device legs only (the CUDA binary, whose op files the host compiler
//     builds: it has no static engine legs of its own to add);
//   - with MG_TEST_WITH_DEVICE both, from one compile of the op table (the op table binary when
//     Thrust's CPP or OMP device system is available: the runtime legs are the same instantiations
//     on either device, so the device legs cost little more than running them).
#if defined(MG_TEST_DEVICE)
inline constexpr bool cpu_legs = false, device_legs = true;
#elif defined(MG_TEST_WITH_DEVICE)
inline constexpr bool cpu_legs = true, device_legs = true;
#else
inline constexpr bool cpu_legs = true, device_legs = false;
#endif

/// The devices this binary's runtime legs and semantics tests run on.
inline std::vector<mg::device> test_devices() {
  std::vector<mg::device> d;
  if (cpu_legs) d.push_back(mg::device::cpu);
  if (device_legs) d.push_back(mg::device::cuda);
  return d;
}

/// Semantics tests that run once on each device of the binary:
///
///   MG_TEST_ON_EACH_DEVICE(ReductionSemantics);
///   TEST_P(ReductionSemantics, Name) { const mg::device dev = GetParam(); ... }
class on_each_device : public ::testing::TestWithParam<mg::device> {};
inline std::string device_param_name(const ::testing::TestParamInfo<mg::device>& info) {
  return mg::detail::device_name(info.param);
}
#define MG_TEST_ON_EACH_DEVICE(suite)                                                 \
  class suite : public ::mg_test::on_each_device {};                                  \
  INSTANTIATE_TEST_SUITE_P(On, suite, ::testing::ValuesIn(::mg_test::test_devices()), \
                           ::mg_test::device_param_name)

struct ad_options {
  std::vector<std::pair<double, double>> ranges{};  // per argument; default [-1, 1]
  std::vector<mg::shape_t> shapes{};                // per argument; default {2, 3}
  bool scalar = true;        // the static engine on numbers, the runtime engine on 0-d tensors
  bool xtensor = true;       // the static engine on xtensor arrays
  bool second_order = true;  // Hessians and Hessian-vector products
  bool f32 = true;           // a float32 sample on the runtime engine
  bool device = true;        // the runtime engine on device cuda (matmul: not yet)
};

template <class F, std::size_t N>
constexpr bool invocable_with() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return std::is_invocable_v<const F&, mg::detail::number<I>...>;
  }
  (std::make_index_sequence<N>{});
}

template <class F>
constexpr std::size_t arity_of() {
  if constexpr (invocable_with<F, 1>())
    return 1;
  else if constexpr (invocable_with<F, 2>())
    return 2;
  else if constexpr (invocable_with<F, 3>())
    return 3;
  else
    return 4;
}

template <std::size_t N, class F>
std::function<mg::tensor(const mg::tensor_list&)> on_list(const F& f) {
  return [f](const mg::tensor_list& t) {
    return [&]<std::size_t... k>(std::index_sequence<k...>) { return mg::tensor(f(t[k]...)); }
    (std::make_index_sequence<N>{});
  };
}

// Under AddressSanitizer an elementwise f skips the static engine's xtensor leg. On arrays such an
// f is one region (Note [Regions]): one loop, the same code for every op, that calls the op's
// forward and backward on packs and numbers. The loop's indexing, tails and broadcasting are
// what a sanitizer can catch there, and tests/static (xtensor_test.cpp, captured_test.cpp) run
// it under the sanitizer; the op's arithmetic is checked by this binary's other legs. The leg is
// a third of the op table's compile time, and the sanitized op table is CI's longest compile.
// Forward mode on arrays (check_xt_forward) is skipped there too: it evaluates each op through
// the same region loops, and tests/static/array_transforms_test.cpp runs it under the sanitizer.
// Elsewhere it runs for the ops that are not elementwise (reductions, shapes, products and the
// composites): an elementwise op's tangent is its backward at the seed 1 times the tangent, in
// one loop common to all of them, and the other legs check that backward.
#if defined(__SANITIZE_ADDRESS__)
template <class F, std::size_t N>
inline constexpr bool skip_xtensor_leg = mg::detail::all_elementwise_v<mg::detail::traced_t<F, N>>;
template <class F, std::size_t N>
inline constexpr bool forward_leg = false;
#else
template <class F, std::size_t N>
inline constexpr bool skip_xtensor_leg = false;
template <class F, std::size_t N>
inline constexpr bool forward_leg = !mg::detail::all_elementwise_v<mg::detail::traced_t<F, N>>;
#endif

template <class F>
void expect_ad(const F& f, const ad_options& o = {}) {
  constexpr std::size_t N = arity_of<F>();
  std::vector<std::pair<double, double>> ranges = o.ranges;
  ranges.resize(N, o.ranges.size() == 1 ? o.ranges[0] : std::pair{-1.0, 1.0});
  std::vector<mg::shape_t> shapes = o.shapes;
  shapes.resize(N, o.shapes.size() == 1 ? o.shapes[0] : mg::shape_t{2, 3});
  array_options arrays{.ranges = ranges, .second_order = o.second_order};
  if constexpr (cpu_legs) {
    std::mt19937_64 gen(3);
    if (o.scalar) {
      for (int point = 0; point < 2; ++point) {
        std::array<double, N> x;
        for (std::size_t k = 0; k < N; ++k)
          x[k] = std::uniform_real_distribution<double>(ranges[k].first, ranges[k].second)(gen);
        SCOPED_TRACE("scalar point " + std::to_string(point));
        std::apply([&](auto... xi) { check_static(f, xi...); }, x);
        std::apply([&](auto... xi) { check_runtime(f, xi...); }, x);
      }
    }
    if constexpr (!skip_xtensor_leg<F, N>) {
      if (o.xtensor) {
        SCOPED_TRACE("static engine on xtensor");
        std::vector<std::vector<std::size_t>> s;
        for (const auto& sh : shapes) s.emplace_back(sh.begin(), sh.end());
        check_xt_arrays<N>(f, s, ranges);
        if constexpr (forward_leg<F, N>) check_xt_forward<N>(f, s, ranges, o.second_order);
      }
    }
  }
  // The runtime legs: one instantiation of check_arrays serves every device and dtype.
  const auto runtime_f = on_list<N>(f);
  for (const mg::device dev : test_devices()) {
    if (dev == mg::device::cuda && !o.device) continue;
    for (const mg::dtype dt : {mg::f64, mg::f32}) {
      if (dt == mg::f32 && !o.f32) continue;
      SCOPED_TRACE(std::string("runtime engine on ") + mg::detail::device_name(dev) +
                   (dt == mg::f64 ? ", f64" : ", f32"));
      auto a = arrays;
      a.device = dev;
      a.dtype = dt;
      check_arrays(runtime_f, shapes, a);
    }
  }
#if defined(MG_TEST_TRANSFORMS)
  using E = mg::detail::traced_t<F, N>;
  if constexpr (mg::cuda::detail::elementwise_v<E>) {
    SCOPED_TRACE("mg::cuda transforms");
    [&]<std::size_t... k>(std::index_sequence<k...>) {
      check_thrust<double>(f, 257, uniform_array{ranges[k].first, ranges[k].second}...);
      check_thrust<float>(f, 257, uniform_array{ranges[k].first, ranges[k].second}...);
    }
    (std::make_index_sequence<N>{});
  }
#endif
}

}  // namespace mg_test

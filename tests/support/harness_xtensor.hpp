// Array version of the harness for the static engine on xtensor (see harness.hpp): the value
// and every element of every gradient against central finite differences in float64.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>

#include <gtest/gtest.h>
#include <xtensor/xarray.hpp>

#include <metagrad/xtensor.hpp>

#include "support/harness.hpp"

namespace mg_test {

template <class F, class Tuple>
double static_value(const F& f, const Tuple& args) {
  return std::apply([&](const auto&... a) { return double(mg::value_and_grad(f)(a...).first); },
                    args);
}

// Checks every gradient element of f at args (xt::xarray<double> or double) against central
// differences of the static engine's own value.
template <class F, class... A>
void check_xt(const F& f, const A&... args) {
  const std::tuple<A...> at{args...};
  auto [value, grads] = mg::value_and_grad(f)(args...);
  (void)value;
  const auto g = as_tuple(grads);
  [&]<std::size_t... k>(std::index_sequence<k...>) {
    (
        [&] {
          const auto& gk = std::get<k>(g);
          using Ak = std::remove_cvref_t<decltype(std::get<k>(at))>;
          if constexpr (std::is_arithmetic_v<Ak>) {
            auto plus = at, minus = at;
            std::get<k>(plus) += fd_step;
            std::get<k>(minus) -= fd_step;
            const double fd = (static_value(f, plus) - static_value(f, minus)) / (2 * fd_step);
            EXPECT_TRUE(near_rel(gk, fd, 1e-6)) << "d/d(argument " << k << ")";
          } else {
            ASSERT_EQ(gk.shape(), std::get<k>(at).shape()) << "gradient " << k << " shape";
            for (std::size_t j = 0; j < gk.size(); ++j) {
              auto plus = at, minus = at;
              std::get<k>(plus).flat(j) += fd_step;
              std::get<k>(minus).flat(j) -= fd_step;
              const double fd = (static_value(f, plus) - static_value(f, minus)) / (2 * fd_step);
              EXPECT_TRUE(near_rel(gk.flat(j), fd, 1e-6))
                  << "d/d(argument " << k << ")[" << j << "]";
            }
          }
        }(),
        ...);
  }
  (std::index_sequence_for<A...>{});
}

}  // namespace mg_test

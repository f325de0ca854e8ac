// The ctx-free custom ops every engine's tests apply (static, runtime, Thrust): one declaration,
// marked MG_HD like the built-ins so that it also runs inside a device functor.
#pragma once

#include <cmath>

#include <metagrad/concepts.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/grads.hpp>

namespace mg_test {

struct softplus {
  static constexpr const char* name = "softplus";
  MG_HD static auto forward(const auto& x) {
    using std::exp, std::log;
    return log(1 + exp(x));
  }
  // d/dx log(1 + e^x) = 1 - 1/(1 + e^x) = 1 - exp(-y)
  MG_HD static auto backward(const auto&, const auto& y, const auto& g) {
    using std::exp;
    return g * (1 - exp(-y));
  }
};
static_assert(mg::StaticOp<softplus>);

struct hypot2 {  // sqrt(a^2 + b^2) as one op with two inputs
  MG_HD static auto forward(const auto& a, const auto& b) {
    using std::pow;
    return pow(a * a + b * b, 0.5);
  }
  // d/da = a / y, d/db = b / y
  MG_HD static auto backward(const auto& a, const auto& b, const auto& y, const auto& g) {
    return mg::grads{g * a / y, g * b / y};
  }
};
static_assert(mg::StaticOp<hypot2>);

}  // namespace mg_test

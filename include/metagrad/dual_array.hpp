// mg::dual_array: an xtensor array with its tangent, what mg::jvp passes to a function of arrays
// (Note [Dual arrays] in xt/dual_family.hpp, where its evaluator is).
#pragma once

#include <metagrad/core/dispatch.hpp>
#include <metagrad/xt/pool.hpp>

namespace mg {

/// An array with its tangent (Note [Dual arrays]): what mg::jvp passes to a function of arrays.
/// Both parts have the value's shape; a number is a 0-d array. Ops and operators on it compute
/// the value and the tangent together.
template <class T>
struct dual_array {
  using mg_family = detail::dual_family;
  using value_type = T;
  detail::work_array<T> value;
  detail::work_array<T> tangent;
};

}  // namespace mg

// The static engine's working arrays keep their shapes and strides in extents (core/extents.hpp,
// Note [Cheap extents]); xtensor learns here that the strides of such a shape are extents too.
#pragma once

#include <cstddef>

#include <xtensor/xutils.hpp>

#include <metagrad/core/extents.hpp>

// The strides of an array whose shape is extents<size_t, N>: extents<ptrdiff_t, N>.
template <class X, class T, std::size_t N>
struct xt::rebind_container<X, mg::detail::extents<T, N>> {
  using type = mg::detail::extents<X, N>;
};

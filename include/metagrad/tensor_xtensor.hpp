// mg::tensor to xtensor: `t.to_xtensor<double>()` and `xt::xarray<double>(t)` copy a tensor's
// elements into an xt::xarray (from any device). The other way, `mg::tensor(e)` for any xtensor
// expression of float or double, needs only <metagrad/tensor.hpp>. <metagrad/metagrad.hpp>
// includes this header; <metagrad/tensor.hpp> does not, so that a file using tensors alone does
// not compile xtensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <xtensor/xarray.hpp>

#include <metagrad/tensor_class.hpp>

namespace mg {

namespace detail {
template <class T>
struct xarray_type {
  using type = xt::xarray<T>;
};
}  // namespace detail

template <class T>
typename detail::xarray_type<T>::type tensor::to_xtensor() const {
  const auto& t = checked("to_xtensor");
  xt::xarray<T> r =
      xt::xarray<T>::from_shape(std::vector<std::size_t>(t.shape.begin(), t.shape.end()));
  const auto n = static_cast<std::size_t>(t.numel());
  if (n == 0) return r;
  // the elements as f64 or i64 (exact for every dtype), then as T
  if (detail::is_floating(t.dtype())) {
    std::vector<double> v(n);
    detail::read_elements(t, dtype::f64, v.data());
    for (std::size_t i = 0; i < n; ++i) r.data()[i] = static_cast<T>(v[i]);
  } else {
    std::vector<std::int64_t> v(n);
    detail::read_elements(t, dtype::i64, v.data());
    for (std::size_t i = 0; i < n; ++i) r.data()[i] = static_cast<T>(v[i]);
  }
  return r;
}

}  // namespace mg

// mg::tensor to xtensor: `t.to_xtensor<double>()` and `xt::xarray<double>(t)` copy a tensor's
// elements into an xt::xarray (from any device). The other way, `mg::tensor(e)` for any xtensor
// expression of float or double, needs only <metagrad/tensor.hpp>. <metagrad/metagrad.hpp>
// includes this header; <metagrad/tensor.hpp> does not, so that a file using tensors alone does
// not compile xtensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
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
  // the elements as f64 or i64 (exact for every dtype), then as T: straight into r when T is
  // that type, else through a buffer that nothing zeroes first
  const bool floating = detail::is_floating(t.dtype());
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::int64_t>) {
    if (floating == std::is_same_v<T, double>) {
      detail::read_elements(t, floating ? dtype::f64 : dtype::i64, r.data());
      return r;
    }
  }
  if (floating) {
    const std::unique_ptr<double[]> v(new double[n]);
    detail::read_elements(t, dtype::f64, v.get());
    for (std::size_t i = 0; i < n; ++i) r.data()[i] = static_cast<T>(v[i]);
  } else {
    const std::unique_ptr<std::int64_t[]> v(new std::int64_t[n]);
    detail::read_elements(t, dtype::i64, v.get());
    for (std::size_t i = 0; i < n; ++i) r.data()[i] = static_cast<T>(v[i]);
  }
  return r;
}

}  // namespace mg

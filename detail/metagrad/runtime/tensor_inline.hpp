// The members of mg::tensor that are templates on the caller's types, defined in every build
// mode (Note [Compiled core] in config.hpp): the constructors from numbers, nested lists and
// xtensor expressions (Note [Literal dtypes]), and item<T>(). They reach the engine only through
// the functions the library compiles (detail::from_values, detail::item_of), so this header
// includes no kernel.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include <metagrad/error.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg {

namespace detail {
// Note [Literal dtypes]: a tensor made of C++ numbers follows libtorch's rule for literals (its
// torch::tensor): floating values, float or double, give the default dtype, f32; integers give
// i64; bools give bool. A dtype given as the last argument overrides it. The values are read
// exactly (as f64, i64 or bool) and then converted. (An xtensor expression keeps its element
// type: its data have a dtype of their own.)
template <class T>
constexpr dtype literal_dtype() {
  if constexpr (std::is_same_v<T, bool>)
    return dtype::b8;
  else if constexpr (std::is_integral_v<T>)
    return dtype::i64;
  else
    return dtype::f32;
}
// How the values are stored before the conversion, and in which dtype.
template <class T>
using literal_storage_t =
    std::conditional_t<std::is_same_v<T, bool>, unsigned char,
                       std::conditional_t<std::is_integral_v<T>, std::int64_t, double>>;
template <class T>
constexpr dtype literal_storage_dtype() {
  return std::is_same_v<T, bool> ? dtype::b8 : std::is_integral_v<T> ? dtype::i64 : dtype::f64;
}

// Shape and elements of a nested initializer list, checking that it is not ragged.
template <class T>
inline constexpr std::size_t list_depth = 0;
template <class E>
inline constexpr std::size_t list_depth<std::initializer_list<E>> = 1 + list_depth<E>;

template <class T, std::size_t D>
void flatten_nested(const T& v, std::size_t, std::array<std::int64_t, D>&,
                    std::vector<literal_storage_t<T>>& out) {
  out.push_back(static_cast<literal_storage_t<T>>(v));
}
template <class T, class E, std::size_t D>
void flatten_nested(std::initializer_list<E> l, std::size_t depth,
                    std::array<std::int64_t, D>& shape, std::vector<literal_storage_t<T>>& out) {
  const auto n = static_cast<std::int64_t>(l.size());
  if (shape[depth] < 0)
    shape[depth] = n;
  else if (shape[depth] != n)
    fail("tensor: ragged nested list (dimension ", depth, " has lengths ", shape[depth], " and ", n,
         "); every row must have the same length");
  for (const auto& e : l) flatten_nested<T>(e, depth + 1, shape, out);
}

template <class T, class L>
impl_ptr from_nested(const L& list, dtype wanted) {
  std::array<std::int64_t, list_depth<L>> dims;
  dims.fill(-1);
  std::vector<literal_storage_t<T>> values;
  flatten_nested<T>(list, 0, dims, values);
  shape_t shape(dims.begin(), dims.end());
  for (auto& e : shape) e = e < 0 ? 0 : e;
  return from_values(shape, literal_storage_dtype<T>(), values.data(), wanted);
}
template <class T>
impl_ptr from_number(T value, dtype wanted) {
  const literal_storage_t<T> v = static_cast<literal_storage_t<T>>(value);
  return from_values({}, literal_storage_dtype<T>(), &v, wanted);
}
}  // namespace detail

template <detail::Literal T>
tensor::tensor(T value) : impl_(detail::from_number(value, detail::literal_dtype<T>())) {}
template <detail::Literal T>
tensor::tensor(T value, mg::dtype d) : impl_(detail::from_number(value, d)) {}
template <detail::Literal T>
tensor::tensor(std::initializer_list<T> values)
    : impl_(detail::from_nested<T>(values, detail::literal_dtype<T>())) {}
template <detail::Literal T>
tensor::tensor(std::initializer_list<T> values, mg::dtype d)
    : impl_(detail::from_nested<T>(values, d)) {}
template <detail::Literal T>
tensor::tensor(std::initializer_list<std::initializer_list<T>> values)
    : impl_(detail::from_nested<T>(values, detail::literal_dtype<T>())) {}
template <detail::Literal T>
tensor::tensor(std::initializer_list<std::initializer_list<T>> values, mg::dtype d)
    : impl_(detail::from_nested<T>(values, d)) {}
template <detail::Literal T>
tensor::tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values)
    : impl_(detail::from_nested<T>(values, detail::literal_dtype<T>())) {}
template <detail::Literal T>
tensor::tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values,
               mg::dtype d)
    : impl_(detail::from_nested<T>(values, d)) {}

// Any xtensor expression, read in row-major order (its iterators' default), so a lazy one is not
// evaluated into a temporary first. Only names that depend on E: no xtensor header is needed here.
template <class E>
tensor::tensor(const xt::xexpression<E>& e) {
  using V = typename E::value_type;
  static_assert(std::is_floating_point_v<V>,
                "metagrad: mg::tensor holds float or double elements; convert integer xtensor data "
                "with xt::cast<double>(e) first");
  const E& a = e.derived_cast();
  const shape_t shape(a.shape().begin(), a.shape().end());
  // elements in row-major order in memory (a container, a contiguous view): read in place
  if constexpr (requires {
                  a.data() + a.data_offset();
                  a.layout();
                }) {
    using layout = std::remove_cvref_t<decltype(a.layout())>;
    if (a.layout() == layout::row_major) {
      impl_ = detail::from_values(shape, detail::dtype_of<V>(), a.data() + a.data_offset(),
                                  detail::dtype_of<V>());
      return;
    }
  }
  std::vector<V> values(a.begin(), a.end());
  impl_ = detail::from_values(shape, detail::dtype_of<V>(), values.data(), detail::dtype_of<V>());
}

template <class T>
T tensor::item() const {
  const auto& t = checked("item");
  if (t.numel() != 1)
    detail::fail("item: a tensor of shape ", detail::shape_string(t.shape), " has ", t.numel(),
                 " elements; item() needs exactly one (reduce it with sum() first)");
  const detail::item_value v = detail::item_of(t);
  return v.is_integral ? static_cast<T>(v.integral) : static_cast<T>(v.floating);
}

}  // namespace mg

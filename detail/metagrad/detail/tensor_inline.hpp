// The members of mg::tensor that are templates on the caller's types, defined in every build
// mode (Note [Compiled core] in config.hpp): the constructors from numbers, nested lists and
// xtensor expressions, and item<T>(). They reach the engine only through the functions the
// library compiles (detail::from_values, detail::item_of), so this header includes no kernel.
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
// Shape and elements of a nested initializer list, checking that it is not ragged.
template <class T>
inline constexpr std::size_t list_depth = 0;
template <class E>
inline constexpr std::size_t list_depth<std::initializer_list<E>> = 1 + list_depth<E>;

template <class T, std::size_t D>
void flatten_nested(const T& v, std::size_t, std::array<std::int64_t, D>&, std::vector<T>& out) {
  out.push_back(v);
}
template <class T, class E, std::size_t D>
void flatten_nested(std::initializer_list<E> l, std::size_t depth,
                    std::array<std::int64_t, D>& shape, std::vector<T>& out) {
  const auto n = static_cast<std::int64_t>(l.size());
  if (shape[depth] < 0)
    shape[depth] = n;
  else if (shape[depth] != n)
    fail("tensor: ragged nested list (dimension ", depth, " has lengths ", shape[depth], " and ", n,
         "); every row must have the same length");
  for (const auto& e : l) flatten_nested<T>(e, depth + 1, shape, out);
}

template <class T, class L>
impl_ptr from_nested(const L& list) {
  std::array<std::int64_t, list_depth<L>> dims;
  dims.fill(-1);
  std::vector<T> values;
  flatten_nested<T>(list, 0, dims, values);
  shape_t shape(dims.begin(), dims.end());
  for (auto& e : shape) e = e < 0 ? 0 : e;
  return from_values(shape, dtype_of<T>(), values.data());
}
}  // namespace detail

template <std::floating_point T>
tensor::tensor(T value) : impl_(detail::from_values({}, detail::dtype_of<T>(), &value)) {}
template <std::floating_point T>
tensor::tensor(std::initializer_list<T> values) : impl_(detail::from_nested<T>(values)) {}
template <std::floating_point T>
tensor::tensor(std::initializer_list<std::initializer_list<T>> values)
    : impl_(detail::from_nested<T>(values)) {}
template <std::floating_point T>
tensor::tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values)
    : impl_(detail::from_nested<T>(values)) {}

// Any xtensor expression, read in row-major order (its iterators' default), so a lazy one is not
// evaluated into a temporary first. Only names that depend on E: no xtensor header is needed here.
template <class E>
tensor::tensor(const xt::xexpression<E>& e) {
  using V = typename E::value_type;
  static_assert(std::is_floating_point_v<V>,
                "metagrad: mg::tensor holds float or double elements; convert integer xtensor data "
                "with xt::cast<double>(e) first");
  const E& a = e.derived_cast();
  std::vector<V> values(a.begin(), a.end());
  impl_ = detail::from_values(shape_t(a.shape().begin(), a.shape().end()), detail::dtype_of<V>(),
                              values.data());
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

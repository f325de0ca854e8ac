// mg::grads: the gradients an operation's backward returns, one per input.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/detail/config.hpp>

namespace mg {

namespace detail {
template <std::size_t I, class T>
struct grads_slot {
  T value;
};

// A minimal tuple that works in device code: one base per element, indexed so that repeated
// types stay distinct. Also the argument storage of static-engine nodes.
template <class Seq, class... Ts>
struct tuple_impl;

template <std::size_t... Is, class... Ts>
struct tuple_impl<std::index_sequence<Is...>, Ts...> : grads_slot<Is, Ts>... {};

template <class... Ts>
using tuple = tuple_impl<std::index_sequence_for<Ts...>, Ts...>;

template <std::size_t I, class T>
MG_HD constexpr T& grads_get(grads_slot<I, T>& s) noexcept {
  return s.value;
}
template <std::size_t I, class T>
MG_HD constexpr const T& grads_get(const grads_slot<I, T>& s) noexcept {
  return s.value;
}
}  // namespace detail

/// The gradients returned by the `backward` of an operation with several inputs, in input order.
/// A plain aggregate (usable in device code), read with `get<I>` or structured bindings:
/// ```cpp
/// MG_HD static constexpr auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
///   return mg::grads{g * b, g * a};   // d/da (a*b) = b, d/db (a*b) = a
/// }
/// ```
template <class... Ts>
struct grads : detail::tuple<Ts...> {
  static constexpr std::size_t size = sizeof...(Ts);

  constexpr grads() = default;  // defaulted: host and device already (nvcc #20012)
  MG_HD constexpr explicit(sizeof...(Ts) == 1) grads(Ts... vs)
      : detail::tuple<Ts...>{{std::move(vs)}...} {}
};

template <class... Ts>
grads(Ts...) -> grads<Ts...>;

template <std::size_t I, class... Ts>
MG_HD constexpr auto& get(grads<Ts...>& g) noexcept {
  return detail::grads_get<I>(g);
}
template <std::size_t I, class... Ts>
MG_HD constexpr const auto& get(const grads<Ts...>& g) noexcept {
  return detail::grads_get<I>(g);
}
template <std::size_t I, class... Ts>
MG_HD constexpr auto&& get(grads<Ts...>&& g) noexcept {
  return std::move(detail::grads_get<I>(g));
}

}  // namespace mg

template <class... Ts>
struct std::tuple_size<mg::grads<Ts...>> : std::integral_constant<std::size_t, sizeof...(Ts)> {};
template <std::size_t I, class... Ts>
struct std::tuple_element<I, mg::grads<Ts...>> {
  using type = std::tuple_element_t<I, std::tuple<Ts...>>;
};

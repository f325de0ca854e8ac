// mg::grads: the gradients an operation's backward returns, one per input.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/core/config.hpp>
#include <metagrad/core/tuple.hpp>

namespace mg {

/// The gradients returned by the `backward` of an operation with several inputs, in input order.
/// A plain aggregate (usable in device code), read with `get<I>` or structured bindings:
/// ```cpp
/// MG_HD static constexpr auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
///   return mg::grads{g * b, g * a};   // d/da (a*b) = b, d/db (a*b) = a
/// }
/// ```
/// An input that has no gradient (a condition, an index) gets `mg::no_grad{}` in its place.
template <class... Ts>
struct grads : detail::tuple<Ts...> {
  static constexpr std::size_t size = sizeof...(Ts);

  constexpr grads() = default;  // defaulted: host and device already (nvcc #20012)
  MG_HD constexpr explicit(sizeof...(Ts) == 1) grads(Ts... vs)
      : detail::tuple<Ts...>{{std::move(vs)}...} {}
};

template <class... Ts>
grads(Ts...) -> grads<Ts...>;

/// The gradient of an input that is not differentiable (a bool condition, an integer index).
struct no_grad {};

template <std::size_t I, class... Ts>
MG_HD constexpr auto& get(grads<Ts...>& g) noexcept {
  return detail::at<I>(g);
}
template <std::size_t I, class... Ts>
MG_HD constexpr const auto& get(const grads<Ts...>& g) noexcept {
  return detail::at<I>(g);
}
template <std::size_t I, class... Ts>
MG_HD constexpr auto&& get(grads<Ts...>&& g) noexcept {
  return std::move(detail::at<I>(g));
}

namespace detail {
template <class T>
inline constexpr bool is_grads_v = false;
template <class... Ts>
inline constexpr bool is_grads_v<grads<Ts...>> = true;

// Component k of a backward result; a one-input op returns its gradient bare.
template <std::size_t k, class B>
MG_HD MG_INLINE constexpr const auto& component(const B& b) {
  if constexpr (is_grads_v<B>) {
    return get<k>(b);
  } else {
    static_assert(k == 0, "metagrad: a backward with one gradient belongs to a one-input op");
    return b;
  }
}
template <std::size_t k, class B>
using component_t = std::remove_cvref_t<decltype(component<k>(std::declval<const B&>()))>;
}  // namespace detail

}  // namespace mg

template <class... Ts>
struct std::tuple_size<mg::grads<Ts...>> : std::integral_constant<std::size_t, sizeof...(Ts)> {};
template <std::size_t I, class... Ts>
struct std::tuple_element<I, mg::grads<Ts...>> {
  using type = std::tuple_element_t<I, std::tuple<Ts...>>;
};

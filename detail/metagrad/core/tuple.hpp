// A minimal tuple that works in device code: one base per element, indexed so that repeated types
// stay distinct. The argument storage of static-engine nodes, the slot storage of the sweep, and
// the base of mg::grads. Read with detail::at<I>(t).
#pragma once

#include <cstddef>
#include <utility>

#include <metagrad/core/config.hpp>

namespace mg::detail {

template <std::size_t I, class T>
struct tuple_slot {
  T value;
};

template <class Seq, class... Ts>
struct tuple_impl;

template <std::size_t... Is, class... Ts>
struct tuple_impl<std::index_sequence<Is...>, Ts...> : tuple_slot<Is, Ts>... {};

template <class... Ts>
using tuple = tuple_impl<std::index_sequence_for<Ts...>, Ts...>;

template <std::size_t I, class T>
MG_HD constexpr T& at(tuple_slot<I, T>& s) noexcept {
  return s.value;
}
template <std::size_t I, class T>
MG_HD constexpr const T& at(const tuple_slot<I, T>& s) noexcept {
  return s.value;
}

}  // namespace mg::detail

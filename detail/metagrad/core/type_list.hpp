// Type lists: the boundary inputs of a region (xt/region.hpp) and the op families' op_lists.
#pragma once

#include <cstddef>
#include <type_traits>

namespace mg::detail {

template <class... T>
struct type_list {};

// The elements of several lists of one template L, in order: concat<L<A...>, L<B...>>::type is
// L<A..., B...>.
template <class... Lists>
struct concat {
  using type = type_list<>;  // no list at all
};
template <template <class...> class L, class... A>
struct concat<L<A...>> {
  using type = L<A...>;
};
template <template <class...> class L, class... A, class... B, class... R>
struct concat<L<A...>, L<B...>, R...> {
  using type = typename concat<L<A..., B...>, R...>::type;
};

// Set operations, first occurrences kept in order: push_unique<L, X> appends X unless L holds it;
// merge_unique<L, M> appends M's new elements; merge_all<L, M...> merges every M.
template <class L, class X>
struct push_unique;
template <class... T, class X>
struct push_unique<type_list<T...>, X> {
  using type =
      std::conditional_t<(std::is_same_v<T, X> || ...), type_list<T...>, type_list<T..., X>>;
};
template <class L, class M>
struct merge_unique {
  using type = L;
};
template <class L, class X, class... R>
struct merge_unique<L, type_list<X, R...>>
    : merge_unique<typename push_unique<L, X>::type, type_list<R...>> {};
template <class L, class... M>
struct merge_all {
  using type = L;
};
template <class L, class M, class... R>
struct merge_all<L, M, R...> : merge_all<typename merge_unique<L, M>::type, R...> {};

// The position of X in a list (the list's size when it is absent).
template <class X, class... T>
constexpr std::size_t index_in(type_list<T...>) {
  std::size_t i = 0, r = sizeof...(T);
  ((r = std::is_same_v<X, T> ? i : r, ++i), ...);
  return r;
}

template <class L>
struct list_size;
template <class... T>
struct list_size<type_list<T...>> {
  static constexpr std::size_t value = sizeof...(T);
};

}  // namespace mg::detail

// Type lists: the boundary inputs of a region (xt/region.hpp) and the op families' op_lists.
#pragma once

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

}  // namespace mg::detail

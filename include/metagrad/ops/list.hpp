// op_list: the type list each op family declares once (`using math_ops = op_list<...>;`). The
// device backend instantiates its kernels from these lists, and the tests check every op in
// them; nothing else needs to name an op.
#pragma once

namespace mg {

template <class... Ops>
struct op_list {};

namespace detail {
template <class... Lists>
struct op_concat;
template <>
struct op_concat<> {
  using type = op_list<>;
};
template <class... A>
struct op_concat<op_list<A...>> {
  using type = op_list<A...>;
};
template <class... A, class... B, class... R>
struct op_concat<op_list<A...>, op_list<B...>, R...> {
  using type = typename op_concat<op_list<A..., B...>, R...>::type;
};
}  // namespace detail

/// The ops of several lists, in order.
template <class... Lists>
using op_list_concat = typename detail::op_concat<Lists...>::type;

}  // namespace mg

// op_list: the type list each op family declares once (`using math_ops = op_list<...>;`). The
// device backend instantiates its kernels from these lists, and tests/static/type_facts_test.cpp
// checks that every op in them is a StaticOp; nothing else needs to name an op.
#pragma once

#include <metagrad/core/type_list.hpp>

namespace mg {

template <class... Ops>
struct op_list {};

/// The ops of several lists, in order.
template <class... Lists>
using op_list_concat = typename detail::concat<Lists...>::type;

}  // namespace mg

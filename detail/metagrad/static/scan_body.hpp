// The parts of mg::repeat's scan node (Note [Scan] in static/scan.hpp) that concern its step:
// the state as symbolic leaves and as values, which arguments the traced body reads and its
// renaming, and the body's value and vector-Jacobian product at given values.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/core/tuple.hpp>
#include <metagrad/core/type_list.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/static/evaluator.hpp>
#include <metagrad/static/sweep.hpp>

namespace mg::detail {

// ---- the state, as symbolic leaves and as values ----------------------------------------------

template <class S>
concept scan_tuple = requires {
  std::tuple_size<std::remove_cvref_t<S>>::value;
};

template <class S>
constexpr std::size_t state_size();

// The first component of element i of a tuple state T.
template <class T>
constexpr std::size_t locate_first(std::size_t i) {
  std::size_t before = 0;
  [&]<std::size_t... e>(std::index_sequence<e...>) {
    ((e < i ? void(before += state_size<std::tuple_element_t<e, T>>()) : void()), ...);
  }
  (std::make_index_sequence<std::tuple_size_v<T>>{});
  return before;
}

// A state is a value, or a pair or tuple of states (nested ones too). Its components are its
// values in order, nested ones flattened: std::tuple{a, std::pair{b, c}} has three.
template <class S>
constexpr std::size_t state_size() {
  if constexpr (scan_tuple<S>) {
    using T = std::remove_cvref_t<S>;
    return []<std::size_t... i>(std::index_sequence<i...>) {
      return (std::size_t{0} + ... + state_size<std::tuple_element_t<i, T>>());
    }
    (std::make_index_sequence<std::tuple_size_v<T>>{});
  } else {
    return 1;
  }
}

// Where component j of a tuple state T is: which element, and which component of it.
template <class T>
constexpr std::pair<std::size_t, std::size_t> locate_component(std::size_t j) {
  std::size_t element = 0, before = 0;
  bool found = false;  // (past the element that holds j, nothing moves)
  [&]<std::size_t... i>(std::index_sequence<i...>) {
    ((found = found || j < before + state_size<std::tuple_element_t<i, T>>(),
      found ? void() : void((before += state_size<std::tuple_element_t<i, T>>(), ++element))),
     ...);
  }
  (std::make_index_sequence<std::tuple_size_v<T>>{});
  return {element, j - before};
}

// Component j of a state (the state itself when it is one value).
template <std::size_t j, class S>
constexpr decltype(auto) state_component(S&& s) {
  if constexpr (scan_tuple<S>) {
    constexpr auto at = locate_component<std::remove_cvref_t<S>>(j);
    return state_component<at.second>(std::get<at.first>(std::forward<S>(s)));
  } else {
    return std::forward<S>(s);
  }
}

// A state shaped like S (a value, a pair or a tuple, nested as S is) of the given components.
template <class S, class... C>
constexpr auto state_like(C... c) {
  if constexpr (!scan_tuple<S>) {
    return (c, ...);
  } else {
    using T = std::remove_cvref_t<S>;
    std::tuple<C...> all{std::move(c)...};
    // element i of the result, from its components
    auto element = [&]<std::size_t i>(std::integral_constant<std::size_t, i>) {
      using E = std::tuple_element_t<i, T>;
      constexpr std::size_t first = locate_first<T>(i);
      return [&]<std::size_t... k>(std::index_sequence<k...>) {
        return state_like<E>(std::get<first + k>(std::move(all))...);
      }
      (std::make_index_sequence<state_size<E>()>{});
    };
    using zero = std::integral_constant<std::size_t, 0>;
    using one = std::integral_constant<std::size_t, 1>;
    if constexpr (requires { typename T::first_type; }) {
      return std::pair<decltype(element(zero{})), decltype(element(one{}))>{element(zero{}),
                                                                            element(one{})};
    } else {
      return [&]<std::size_t... i>(std::index_sequence<i...>) {
        return std::tuple<decltype(element(std::integral_constant<std::size_t, i>{}))...>{
            element(std::integral_constant<std::size_t, i>{})...};
      }
      (std::make_index_sequence<std::tuple_size_v<T>>{});
    }
  }
}

template <std::size_t Base, class S, std::size_t... j>
constexpr auto symbolic_state(std::index_sequence<j...>) {
  return state_like<S>(arg<Base + j>{}...);
}

// The body of the step traced at base A: one expression per state component. With rows (Note
// [Per-step inputs]) the step's row is the leaf after the state's, arg<A + M>.
template <std::size_t A, class S, bool WithRow, class Step, std::size_t... j>
constexpr auto trace_body(Step& step, std::index_sequence<j...> seq) {
  auto r = [&] {
    if constexpr (WithRow) {
      return step(symbolic_state<A, S>(seq), arg<A + sizeof...(j)>{});
    } else {
      return step(symbolic_state<A, S>(seq));
    }
  }();
  static_assert(state_size<decltype(r)>() == sizeof...(j),
                "metagrad: mg::repeat's step must return a state with as many values as it "
                "takes");
  return std::tuple{as_expr(state_component<j>(std::move(r)))...};
}
template <std::size_t A, class S, class Step, bool WithRow = false>
using body_t = decltype(trace_body<A, S, WithRow>(std::declval<Step&>(),
                                                  std::make_index_sequence<state_size<S>()>{}));

// ---- a trace read again (Note [Scan]: a loop with constants is traced once) -------------------

// Do two values a step captured agree? Numbers bit for bit; arrays (a copy, or an xtensor
// expression over its operands) element by element; types with == by it; others when their
// bytes agree, where bytes are all of the value; otherwise they are taken to agree.
template <class T>
bool same_constant(const T& a, const T& b) {
  if constexpr (std::is_empty_v<T>) {
    return true;
  } else if constexpr (std::is_floating_point_v<T>) {
    return same_number(a, b);
  } else if constexpr (std::is_arithmetic_v<T>) {
    return a == b;
  } else if constexpr (requires {
                         a.shape();
                         a.begin();
                         a.end();
                       }) {
    if (!std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end()))
      return false;
    auto j = b.begin();
    for (auto i = a.begin(); i != a.end(); ++i, ++j) {
      const auto x = *i, y = *j;
      if (!same_constant(x, y)) return false;
    }
    return true;
  } else if constexpr (requires {
                         { a == b } -> std::convertible_to<bool>;
                       }) {
    return static_cast<bool>(a == b);
  } else if constexpr (std::has_unique_object_representations_v<T>) {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  } else {
    return true;
  }
}

template <class... B>
bool same_trace(const std::tuple<B...>& a, const std::tuple<B...>& b);

template <std::size_t I>
bool same_trace(const arg<I>&, const arg<I>&) {
  return true;
}
template <class T, class O>
bool same_trace(const cst<T, O>& a, const cst<T, O>& b) {
  return same_constant(a.value, b.value);
}
template <class Op, class... A>
bool same_trace(const node<Op, A...>& a, const node<Op, A...>& b) {
  if constexpr (stateless_v<node<Op, A...>>) {
    return true;
  } else {
    bool same_op;
    if constexpr (requires { a.op.body; }) {
      same_op = same_trace(a.op.body, b.op.body);  // a loop inside the step: its own body
    } else {
      same_op = same_constant(a.op, b.op);
    }
    return same_op&& [&]<std::size_t... j>(std::index_sequence<j...>) {
      return (same_trace(child<j>(a), child<j>(b)) && ...);
    }
    (std::index_sequence_for<A...>{});
  }
}
template <class... B>
bool same_trace(const std::tuple<B...>& a, const std::tuple<B...>& b) {
  return [&]<std::size_t... j>(std::index_sequence<j...>) {
    return (same_trace(std::get<j>(a), std::get<j>(b)) && ...);
  }
  (std::index_sequence_for<B...>{});
}

// ---- which arguments the body reads, and its renaming ------------------------------------------

template <class... T>
constexpr std::size_t arg_end(type_list<T...>) {
  std::size_t m = 0;
  ((m = is_arg_v<T> && arg_index_v<T> + 1 > m ? arg_index_v<T> + 1 : m), ...);
  return m;
}

template <class Tuple>
struct body_types;
template <class... B>
struct body_types<std::tuple<B...>> {
  using type = typename merge_all<type_list<>, distinct_t<B>...>::type;
};

template <std::size_t Below, class... T>
constexpr auto outer_args(type_list<T...>) {
  struct set {
    std::array<std::size_t, sizeof...(T) + 1> v{};
    std::size_t n = 0;
  } r;
  ((is_arg_v<T> && arg_index_v<T> < Below ? void(r.v[r.n++] = arg_index_v<T>) : void()), ...);
  std::sort(r.v.begin(), r.v.begin() + r.n);
  r.n = static_cast<std::size_t>(std::unique(r.v.begin(), r.v.begin() + r.n) - r.v.begin());
  return r;
}
template <std::size_t Below, class L, std::size_t... k>
constexpr auto outer_seq(std::index_sequence<k...>) {
  return std::index_sequence<outer_args<Below>(L{}).v[k]...>{};
}
template <std::size_t Below, class L>
using outer_seq_t =
    decltype(outer_seq<Below, L>(std::make_index_sequence<outer_args<Below>(L{}).n>{}));

// arg<i> of the traced body -> arg<to(i)> of the scan body: caps first, then the state.
template <std::size_t Base, std::size_t K, class Outer>
struct renaming;
template <std::size_t Base, std::size_t K, std::size_t... O>
struct renaming<Base, K, std::index_sequence<O...>> {
  static constexpr std::size_t to(std::size_t i) {
    if (i >= Base) return K + (i - Base);
    std::size_t k = 0, r = 0;
    ((r = O == i ? k : r, ++k), ...);
    return r;
  }
};

template <class Map, class E>
struct renamed {
  using type = E;  // constants
};
template <class Map, std::size_t I>
struct renamed<Map, arg<I>> {
  using type = arg<Map::to(I)>;
};
template <class Map, class Op, class... A>
struct renamed<Map, node<Op, A...>> {
  using type = node<Op, typename renamed<Map, A>::type...>;
};

template <class Map, std::size_t I>
constexpr auto rename(const arg<I>&) {
  return typename renamed<Map, arg<I>>::type{};
}
template <class Map, class T, class O>
constexpr auto rename(const cst<T, O>& c) {
  return c;
}
template <class Map, class Op, class... A>
constexpr auto rename(const node<Op, A...>& e) {
  if constexpr (stateless_v<node<Op, A...>>) {
    return typename renamed<Map, node<Op, A...>>::type{};  // its type is all of it
  } else {
    return [&]<std::size_t... j>(std::index_sequence<j...>) {
      return assemble(e.op, rename<Map>(child<j>(e))...);
    }
    (std::index_sequence_for<A...>{});
  }
}

// ---- one sweep per step: Note [One sweep per step] in static/scan.hpp ---------------------------

// The root of a step's bodies taken together: its children are the M bodies, its own value is
// not read (the state's values are its children's slots), and its backward sends component j of
// its seed (the adjoints of the M new state values) to child j, in that child's value type.
struct pack_token {};
struct pack_op {
  static constexpr const char* name = "repeat step";
  static constexpr bool elementwise = false;
  template <class... V>
  static constexpr pack_token forward(const V&...) {
    return {};
  }
  // backward(value_0, ..., value_{M-1}, token, seed)
  template <class... V>
  static auto backward(const V&... v) {
    constexpr std::size_t m = sizeof...(V) - 2;
    const auto all = std::forward_as_tuple(v...);
    const auto& seed = std::get<m + 1>(all);
    return [&]<std::size_t... j>(std::index_sequence<j...>) {
      return grads{like_value(std::get<j>(all), std::get<j>(seed))...};
    }
    (std::make_index_sequence<m>{});
  }
  // an adjoint a in the type of the value v it is the adjoint of (a number from a one-element
  // array)
  template <class V, class A>
  static V like_value(const V&, const A& a) {
    if constexpr (std::is_arithmetic_v<V> && !std::is_arithmetic_v<A>) {
      return static_cast<V>(*a.begin());
    } else {
      return V(a);
    }
  }
};

// ---- evaluating the body ----------------------------------------------------------------------

template <class... V>
inline constexpr bool all_numbers_v = (std::is_arithmetic_v<std::remove_cvref_t<V>> && ...);

// Does family F's evaluator take a step's bodies together (pack_values, pack_vjp)?
template <class F>
concept PacksSteps = HasEvaluator<F> && requires {
  requires evaluator<F>::packs_steps;
};
// The family of the values a step reads (a std::tuple of their types) when its evaluator takes the
// step's bodies together, else void.
template <class Values>
struct packed_family_of {
  using type = void;
};
template <class... V>
requires(!all_numbers_v<V...> &&
         PacksSteps<evaluator_family_t<V...>>) struct packed_family_of<std::tuple<V...>> {
  using type = evaluator_family_t<V...>;
};
template <class Values>
using packed_family_of_t = typename packed_family_of<Values>::type;

template <class E, class... V>
struct plain_eval {
  using Args = tuple<V...>;
  using R = typename value_types<E, Args, plain_policy>::template val_t<plan_v<E>.nslots - 1>;
  using S = sweep<E, Args, plain_policy, R>;
};

// The body expression b as a function to trace: it ignores its symbolic arguments.
template <class B>
struct constant_function {
  const B* b;
  template <class... A>
  const B& operator()(const A&...) const {
    return *b;
  }
};

template <class... V>
void require_scan_family() {
  static_assert(all_numbers_v<V...> || HasEvaluator<evaluator_family_t<V...>>,
                "metagrad: mg::repeat with a step holding constants runs on numbers and xtensor "
                "arrays (on mg::tensor it is a plain loop)");
}

// Is b, at numbers v..., evaluated by plain sweeps? Unless it holds an array it captured (Note
// [Captured arrays]): then by the array evaluator of its family, and its value is a number again.
template <class B, class... V>
using body_family_t = typename refine_family<
    std::conditional_t<all_numbers_v<V...>, number_family, evaluator_family_t<V...>>,
    constant_function<B>, sizeof...(V)>::type;
template <class B, class... V>
inline constexpr bool plain_body_v =
    all_numbers_v<V...>&& std::is_same_v<body_family_t<B, V...>, number_family>;

// b's value at v... (caps, then state).
template <class B, class... V>
auto body_value(const B& b, const V&... v) {
  require_scan_family<V...>();
  if constexpr (plain_body_v<B, V...>) {
    using P = plain_eval<B, V...>;
    const typename P::Args a{{v}...};
    typename P::S s(b, a);
    s.forward();
    return typename P::R(s.result());
  } else if constexpr (all_numbers_v<V...>) {
    const auto r = evaluator<body_family_t<B, V...>>::value(constant_function<B>{&b}, v...);
    if (r.dimension() != 0)
      fail("mg::repeat: a step on a number state returned an array of ", r.size(),
           " elements; make the state an array, or reduce the step's value to a number (sum)");
    return std::common_type_t<V...>(r());
  } else {
    return evaluator<evaluator_family_t<V...>>::value(constant_function<B>{&b}, v...);
  }
}

// The gradient of seed * b (of sum(seed * b) on arrays) w.r.t. every v: a std::tuple.
template <class B, class Seed, class... V>
auto body_vjp(const B& b, const Seed& seed, const V&... v) {
  if constexpr (plain_body_v<B, V...>) {
    using P = plain_eval<B, V...>;
    const typename P::Args a{{v}...};
    typename P::S s(b, a);
    s.forward();
    const typename P::R sd(seed);
    s.backward(sd);
    return [&]<std::size_t... i>(std::index_sequence<i...>) {
      return std::tuple{static_cast<V>(s.template gradient<i>(sd, V(0)))...};
    }
    (std::index_sequence_for<V...>{});
  } else {
    using F =
        std::conditional_t<all_numbers_v<V...>, body_family_t<B, V...>, evaluator_family_t<V...>>;
    return [&]<std::size_t... i>(std::index_sequence<i...>) {
      return evaluator<F>::template vjp<i...>(constant_function<B>{&b}, seed, v...);
    }
    (std::index_sequence_for<V...>{});
  }
}

template <class V>
V zeros_shaped_like(const V& v) {
  if constexpr (std::is_arithmetic_v<V>) {
    return V(0);
  } else {
    V r = v;
    r.fill(0);
    return r;
  }
}

// Component j of the adjoint after the last step: g in component J, zeros elsewhere.
template <std::size_t j, std::size_t J, class Sj, class G>
Sj seed_component(const G& g, const Sj& like) {
  if constexpr (j == J) {
    return Sj(g);
  } else {
    return zeros_shaped_like(like);
  }
}
template <std::size_t Off, class T, std::size_t... k>
auto tuple_slice_impl(const T& t, std::index_sequence<k...>) {
  return std::tuple<std::remove_cvref_t<std::tuple_element_t<Off + k, T>>...>{
      std::get<Off + k>(t)...};
}
template <std::size_t Off, std::size_t Len, class T>
auto tuple_slice(const T& t) {
  return tuple_slice_impl<Off>(t, std::make_index_sequence<Len>{});
}

// The same, as references into t (the caps and initial state a node's inputs are: no copies).
template <std::size_t Off, class T, std::size_t... k>
auto tuple_slice_ref_impl(const T& t, std::index_sequence<k...>) {
  return std::tuple<const std::remove_cvref_t<std::tuple_element_t<Off + k, T>>&...>{
      std::get<Off + k>(t)...};
}
template <std::size_t Off, std::size_t Len, class T>
auto tuple_slice_ref(const T& t) {
  return tuple_slice_ref_impl<Off>(t, std::make_index_sequence<Len>{});
}

template <class A, class B, std::size_t... k>
void add_each(A& a, const B& b, std::index_sequence<k...>) {
  ((std::get<k>(a) += std::get<k>(b)), ...);
}

}  // namespace mg::detail

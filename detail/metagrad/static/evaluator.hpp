// The static engine's transforms (what <metagrad/static.hpp>'s public functions are made of): the
// objects mg::grad, mg::value_and_grad, mg::jacobian and mg::hessian return, which run the
// evaluator of their arguments' family (static/family.hpp; the number family's is included here,
// the others come with their headers). The loop node (static/scan.hpp) and the xtensor
// evaluator (xt/) build on them.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/core/algebra.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/static/family.hpp>
#include <metagrad/static/number_family.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/to_string.hpp>

namespace mg {

namespace detail {
// Is F one of the transforms below (a function that is not traced, but computes derivatives;
// component_of is one when the function inside it is)?
template <class F>
concept Transform = requires {
  requires bool(F::mg_transform);
};

// Does a family's evaluator differentiate a transform by tangents (arrays: Note [Dual arrays])?
template <class Family>
concept TangentFamily = requires {
  evaluator<Family>::by_tangents;
};

template <class F, std::size_t... I>
struct grad_transform {
  static constexpr bool mg_transform = true;
  using mg_inner = F;
  F f;
  bool with_value;

  template <class... A>
  MG_INLINE constexpr auto operator()(const A&... args) const {
    return run<true>(args...);
  }

  // ValueToo: {value, gradient(s)} (mg::value_and_grad); else the gradient(s) alone (mg::grad).
  template <bool ValueToo, class... A>
  MG_INLINE constexpr auto run(const A&... args) const {
    using Family = typename refine_family<evaluator_family_t<A...>, F, sizeof...(A)>::type;
    static_assert(!std::is_void_v<Family>,
                  "metagrad: grad takes floating-point numbers, xtensor containers or mg::tensor "
                  "arguments of one family (numbers may mix with either)");
    static_assert(HasEvaluator<Family>,
                  "metagrad: include <metagrad/metagrad.hpp> (or the header of this argument "
                  "family) to differentiate with these arguments");
    static_assert(((I < sizeof...(A)) && ...),
                  "metagrad: grad<I...> names an argument index the call does not have");
    // an evaluator that builds the final results in place says so (xt/array_family.hpp): no copy of
    // them
    constexpr bool in_place = requires { evaluator<Family>::builds_final_result; };
    return [&]<std::size_t... J>(std::index_sequence<J...>) MG_LAMBDA_INLINE {
      if constexpr (Transform<F> && TangentFamily<Family>) {
        // the gradient of a gradient on arrays: forward mode over f (Note [Dual arrays])
        return evaluator<Family>::template grad_by_tangents<ValueToo, J...>(f, args...);
      } else if constexpr (in_place && ValueToo) {
        return evaluator<Family>::template value_and_grad_final<J...>(f, args...);
      } else if constexpr (in_place) {
        return evaluator<Family>::template grad_final<J...>(f, args...);
      } else {
        auto [v, g] = evaluator<Family>::template value_and_grad<J...>(f, args...);
        if constexpr (ValueToo) {
          return std::pair{std::move(v), bare_or_tuple(std::move(g))};
        } else {
          return bare_or_tuple(std::move(g));
        }
      }
    }
    (std::conditional_t<sizeof...(I) == 0, std::index_sequence_for<A...>,
                        std::index_sequence<I...>>{});
  }
};

// Is R (what a traced function returns) a tuple or pair of values rather than one value?
template <class R>
concept tuple_like = requires {
  std::tuple_size<std::remove_cvref_t<R>>::value;
};

// Component K of f's result, as a function (f itself when f returns one value).
template <std::size_t K, class F>
struct component_of {
  static constexpr bool mg_transform = Transform<F>;
  using mg_inner = F;
  F f;
  template <class... A>
  constexpr auto operator()(const A&... a) const {
    if constexpr (tuple_like<decltype(f(a...))>) {
      return std::get<K>(f(a...));
    } else {
      return f(a...);
    }
  }
};

// Does f, traced with N arguments, return a tuple or pair? How many values (1 for one value)?
template <class F, std::size_t... I>
auto traced_result(std::index_sequence<I...>) -> decltype(std::declval<const F&>()(arg<I>{}...));
template <class F, std::size_t N>
inline constexpr bool returns_tuple_v =
    tuple_like<decltype(traced_result<F>(std::make_index_sequence<N>{}))>;
template <class F, std::size_t N>
constexpr std::size_t result_count() {
  using R = decltype(traced_result<F>(std::make_index_sequence<N>{}));
  if constexpr (tuple_like<R>) {
    return std::tuple_size_v<std::remove_cvref_t<R>>;
  } else {
    return 1;
  }
}

// Note [Forward mode from the local derivatives] (sweep.hpp), for one value of f.
template <class F, class... X, class... V, std::size_t... I>
constexpr auto jvp_one(const F& f, const std::tuple<X...>& x, const std::tuple<V...>& v,
                       std::index_sequence<I...> seq) {
  using E = traced_t<F, sizeof...(X)>;
  const E e = trace(f, seq);
  const tuple<X...> a{{std::get<I>(x)}...};
  const tuple<V...> t{{std::get<I>(v)}...};
  using R =
      typename value_types<E, tuple<X...>, plain_policy>::template val_t<plan_v<E>.nslots - 1>;
  sweep<E, tuple<X...>, plain_policy, R> s(e, a);
  s.forward();
  return std::pair{s.result(), s.tangent(t)};
}

template <class F, std::size_t... I>
struct grad_only {
  static constexpr bool mg_transform = true;
  using mg_inner = F;
  grad_transform<F, I...> inner;
  template <class... A>
  constexpr auto operator()(const A&... args) const {
    return inner.template run<false>(args...);
  }
};

// grad<I>(grad<I>(f)); a family whose evaluator has check_hessian<I> (mg::tensor) first checks
// that the inner gradient can be differentiated by the outer grad.
template <class F, std::size_t I>
struct hessian_transform {
  static constexpr bool mg_transform = true;
  using mg_inner = F;
  grad_only<grad_only<F, I>, I> inner;
  template <class... A>
  constexpr auto operator()(const A&... args) const {
    using Family = typename refine_family<evaluator_family_t<A...>, F, sizeof...(A)>::type;
    if constexpr (TangentFamily<Family>) {
      // arrays: the block of argument I of the Hessian matrix (Note [Dual arrays])
      return evaluator<Family>::template jacobian<I>(inner.inner.f, args...);
    } else {
      if constexpr (HasEvaluator<Family>)
        if constexpr (requires { evaluator<Family>::template check_hessian<I>(args...); })
          evaluator<Family>::template check_hessian<I>(args...);
      return inner(args...);
    }
  }
};

// Note [One forward for a Jacobian]: mg::jacobian of a function of numbers with m values traces
// it once and makes its values the children of one root node (rows_op), so that the planner sees
// one DAG and what the values share is one slot. One forward sweep computes it; then row k's
// reverse sweep starts from the seed row_seed<k>, with which the root sends 1 to value k and
// nothing to the others: a subexpression that only other values read runs no backward (Note [No
// gradient] in static/sweep.hpp). The m reverse sweeps read the one forward's values, and inline
// into one body with it, so the compiler computes each local derivative once for all rows (the
// bundle-adjustment Jacobian in benchmarks/ba.cpp: its 2 rows share rotation and projection).
template <std::size_t k>
struct row_seed {};

struct rows_op {
  static constexpr const char* name = "rows";
  // (the root's value is not read: value k is child k's slot)
  template <class A, class... B>
  MG_HD static constexpr A forward(const A& a, const B&...) {
    return a;
  }
  // backward(value_0, ..., value_{m-1}, output, row_seed<k>)
  template <class... V>
  MG_HD static constexpr auto backward(const V&... v) {
    constexpr std::size_t m = sizeof...(V) - 2;
    const auto all = std::forward_as_tuple(v...);
    using S = std::remove_cvref_t<std::tuple_element_t<m + 1, std::tuple<V...>>>;
    return [&]<std::size_t... j>(std::index_sequence<j...>) {
      return grads{row_component<j>(std::get<j>(all), S{})...};
    }
    (std::make_index_sequence<m>{});
  }
  template <std::size_t j, class A, std::size_t k>
  MG_HD static constexpr auto row_component(const A& a, row_seed<k>) {
    if constexpr (j == k) {
      return one_like(a);
    } else {
      return no_grad{};
    }
  }
};

// Can f's values (traced with N arguments) be the children of rows_op: expressions or numbers?
template <class F, std::size_t N>
constexpr bool rows_of_numbers() {
  using R = std::remove_cvref_t<decltype(traced_result<F>(std::make_index_sequence<N>{}))>;
  return []<std::size_t... k>(std::index_sequence<k...>) {
    return ((Expr<std::tuple_element_t<k, R>> ||
             std::is_arithmetic_v<std::remove_cvref_t<std::tuple_element_t<k, R>>>)&&...);
  }
  (std::make_index_sequence<std::tuple_size_v<R>>{});
}

// Row k of the Jacobian: the reverse sweep from row_seed<k> over the values `first` computed.
template <std::size_t k, class E, class... X, class First>
MG_INLINE constexpr auto jacobian_row(const tuple<X...>& a, First& first) {
  const auto grads_of = [&](auto& s) MG_LAMBDA_INLINE {
    s.backward(row_seed<k>{});
    return [&]<std::size_t... i>(std::index_sequence<i...>) MG_LAMBDA_INLINE {
      return bare_or_tuple(arg_gradients<i...>(s, row_seed<k>{}, a));
    }
    (std::index_sequence_for<X...>{});
  };
  if constexpr (k == 0) {
    return grads_of(first);
  } else {
    sweep<E, tuple<X...>, plain_policy, row_seed<k>, all_args, true> s(first);
    return grads_of(s);
  }
}

template <class F, class... X>
MG_INLINE constexpr auto jacobian_rows(const F& f, const X&... x) {
  constexpr std::size_t m = result_count<F, sizeof...(X)>();
  const auto e = [&]<std::size_t... i>(std::index_sequence<i...>) MG_LAMBDA_INLINE {
    return std::apply([](const auto&... v) { return make_expr(rows_op{}, v...); }, f(arg<i>{}...));
  }
  (std::index_sequence_for<X...>{});
  using E = std::remove_cvref_t<decltype(e)>;
  using Args = tuple<X...>;
  const Args a{{x}...};
  sweep<E, Args, plain_policy, row_seed<0>> first(e, a);
  first.forward();
  return [&]<std::size_t... k>(std::index_sequence<k...>) MG_LAMBDA_INLINE {
    return std::tuple{jacobian_row<k, E>(a, first)...};
  }
  (std::make_index_sequence<m>{});
}

// mg::jacobian's function: on numbers one forward sweep and a reverse sweep per value of f (Note
// [One forward for a Jacobian]), on arrays forward mode.
template <class F>
struct jacobian_transform {
  static constexpr bool mg_transform = true;
  using mg_inner = F;
  F f;
  template <class... X>
  MG_INLINE constexpr auto operator()(const X&... x) const {
    using Family = typename refine_family<evaluator_family_t<X...>, F, sizeof...(X)>::type;
    if constexpr (TangentFamily<Family>) {
      return evaluator<Family>::jacobian(f, x...);
    } else {
      constexpr std::size_t m = result_count<F, sizeof...(x)>();
      if constexpr (!returns_tuple_v<F, sizeof...(x)>) {
        return grad_only<F>{{f, false}}(x...);
      } else if constexpr (rows_of_numbers<F, sizeof...(x)>()) {
        return jacobian_rows(f, x...);
      } else {
        return [&]<std::size_t... K>(std::index_sequence<K...>) {
          return std::tuple{grad_only<component_of<K, F>>{{component_of<K, F>{f}, false}}(x...)...};
        }
        (std::make_index_sequence<m>{});
      }
    }
  }
};
}  // namespace detail

}  // namespace mg

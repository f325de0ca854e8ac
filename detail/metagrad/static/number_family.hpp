// The number family's evaluator: floating-point numbers, and static-engine expressions being
// traced (grad of grad), differentiated by one forward and one reverse sweep under plain_policy
// (static/sweep.hpp). A function of numbers whose expression holds a captured array is
// refined to that array's family (Note [Captured arrays] in xt/array_family.hpp). Numbers have
// no apply_in: detail::call evaluates an op's forward on them directly.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/core/config.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/static/family.hpp>
#include <metagrad/static/plan.hpp>
#include <metagrad/static/sweep.hpp>

namespace mg::detail {

template <class T>
requires(std::is_floating_point_v<T> || Expr<T>) struct evaluator_family_of<T> {
  using type = number_family;
};

template <class F, std::size_t N>
struct refine_family<number_family, F, N> {
  using type = typename constants_family<traced_t<typename innermost<F>::type, N>>::type;
};

// The gradients of the arguments I... (of types A...) after sweep s's backward(seed), each in its
// argument's type (0 for an argument the expression does not use).
// (The arguments' tuple is deduced whole: nvcc cannot deduce A... through the tuple alias.)
template <std::size_t... I, class S, class Seed, class Args>
MG_INLINE constexpr auto arg_gradients(const S& s, const Seed& seed, const Args& a) {
  return std::tuple{as_arg_type<std::remove_cvref_t<decltype(at<I>(a))>>(
      s.template gradient<I>(seed, zero_like(at<I>(a))))...};
}

template <>
struct evaluator<number_family> {
  template <std::size_t... I, class F, class... A>
  MG_INLINE static constexpr auto value_and_grad(const F& f, const A&... args) {
    return value_and_vjp<I...>(
        f, [](const auto& v) { return one_like(v); }, args...);
  }

  // {f(args), seed * gradient}, one forward and one backward sweep; seed_of(value) is the seed.
  template <std::size_t... I, class F, class SeedOf, class... A>
  MG_INLINE static constexpr auto value_and_vjp(const F& f, SeedOf seed_of, const A&... args) {
    using E = traced_t<F, sizeof...(A)>;
    const E e = trace(f, std::index_sequence_for<A...>{});
    const tuple<A...> a{{args}...};
    using V =
        typename value_types<E, tuple<A...>, plain_policy>::template val_t<plan_v<E>.nslots - 1>;
    using Seed = decltype(seed_of(std::declval<const V&>()));
    sweep<E, tuple<A...>, plain_policy, Seed> s(e, a);
    s.forward();
    const Seed seed = seed_of(s.result());
    s.backward(seed);
    return std::pair{s.result(), arg_gradients<I...>(s, seed, a)};
  }
};

}  // namespace mg::detail

// mg::repeat's scan node: a fixed-length loop whose step holds constants, as one node.
//
// Note [Scan]: mg::repeat<N>(step, init) on expressions unrolls the loop when its step carries
// no run-time state: the planner then shares the steps' common subexpressions by type and
// fuses them (Note [Planning on the DAG] in plan.hpp). A step holding a constant (a literal
// 0.05, a captured double, the exponent of pow) cannot be shared by type (Note [Slot
// identity]), so unrolled, its tree of occurrences would be planned: exponential in N. Such a
// loop becomes one node instead:
//   1. the step is traced once on symbolic state leaves, arg<A + j> for state component j. A is
//      first 2^24, then one past every argument index that trace read, so the leaves of an
//      enclosing loop's state (themselves arguments of that loop's step) are told apart. It is
//      traced a second time and the two traces compared: a step that reads other data at each
//      call (a captured counter it advances) would silently run its first trace N times, and
//      is an mg::error instead;
//   2. the body's other leaves (the function's arguments it captured, maybe an enclosing loop's
//      state) become the node's first K children, and the initial state its next M; the body is
//      renamed to read caps as arg<0..K-1>, the state as arg<K..K+M-1> and a row as arg<K+M>;
//   3. the node, scan_op<N, K, M, J, Rows, Body...>, holds the body (its constants included),
//      the rows its steps read if any (Note [Per-step inputs] in static/scan_rows.hpp), and
//      yields state component J after N steps. Forward runs the body N times through the
//      family's own evaluator (plain sweeps on numbers, the array evaluator on xtensor arrays);
//      backward runs the forward again keeping the N states, then the body's vector-Jacobian
//      product N times in reverse, summing the captured arguments' gradients.
// Compile time is that of one step, whatever N. Second derivatives on numbers (mg::hessian,
// grad of grad): backward on expressions yields scan_vjp_op nodes; their own backward is a
// Hessian-vector product, computed by forward mode through the reverse loop with the body's
// symbolic gradient (the symmetry of second derivatives turns the one tangent into the row
// that reverse mode asks for).
//
// Note [One sweep per step]: on a family whose evaluator says packs_steps (the array evaluator),
// a step's M bodies are the children of one root, pack_op (static/scan_body.hpp): one sweep
// computes all M new state values, and one sweep back from the M adjoints at once (the pack's
// backward sends adjoint j to body j) gives the whole vector-Jacobian product of the step. What
// the bodies share (a layer that both its hidden and its cell value read) is then one slot,
// where M sweeps of their own computed it M times. On numbers the bodies stay apart: plain
// sweeps inline, and the reverse step is one sweep over sum_j a_j body_j.
//
// Note [Loop-invariant reads]: the subexpressions of the step that read captured arguments and
// constants only (a weight row `select(w, 0, k)`, its slices, `exp(a)`) have the same value at
// every step. On a packed family the node computes them once per call (static/scan_hoist.hpp):
// the outermost such subexpressions are the children of a pack over the caps; the step reads
// their values as its first arguments; the reverse loop sums their gradients, and one sweep back
// through that pack turns them into the caps' gradients. Invariants are merged as the planner
// merges slots (Note [Slot identity]): one whose type is all of it (mg::slice<0, 2, 4>(w), Note
// [Fixed indices] in ops/indexing.hpp) is one value however often it occurs; one holding run-time
// attributes (mg::slice(w, 0, 2, 4)) is one value per occurrence, since another slice of the same
// type may take other elements. With fixed indices the rest of the step is typically free of
// run-time state too, so the bodies share it by type; with run-time ones each body computes its
// own copy.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/core/tuple.hpp>
#include <metagrad/core/type_list.hpp>
#include <metagrad/error.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/static/evaluator.hpp>
#include <metagrad/static/plan.hpp>
#include <metagrad/static/scan_body.hpp>
#include <metagrad/static/scan_hoist.hpp>
#include <metagrad/static/scan_rows.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/unroll.hpp>

namespace mg::detail {

inline constexpr std::size_t scan_first_base = std::size_t{1} << 24;

// ---- the node --------------------------------------------------------------------------------

// R: the rows the steps read (Note [Per-step inputs]), or no_rows.
template <std::size_t N, std::size_t K, std::size_t M, std::size_t J, class R, class... B>
struct scan_op {
  static constexpr const char* name = "repeat";
  static constexpr bool elementwise = false;
  static constexpr std::size_t arity = K + M;
  static constexpr std::size_t steps = N, ncaps = K, nstate = M, component = J;
  std::tuple<B...> body;
  R rows;

  // The step split at its loop-invariant reads (Note [Loop-invariant reads]): used by a family
  // that evaluates a step's M bodies as one expression (Note [One sweep per step]).
  using hoisted_t = decltype(hoist<K>(std::declval<const std::tuple<B...>&>()));
  hoisted_t hoisted = hoist<K>(body);

  // The family of caps, initial state and row when its evaluator takes a step's bodies as one
  // (PacksSteps), else void.
  template <class Caps, class Init>
  using packed_family_t = packed_family_of_t<decltype(std::tuple_cat(
      std::declval<const Caps&>(), std::declval<const Init&>(), std::declval<const R&>().at(0)))>;

  // What the steps read besides the state and row: the caps, or for a packed family the values of
  // the invariant reads (computed here, once).
  template <class F, class Caps>
  auto inputs(const Caps& caps) const {
    if constexpr (std::is_void_v<F> || K == 0) {
      return caps;
    } else {
      return std::apply(
          [&](const auto&... c) {
            return evaluator<F>::template pack_values<true>(hoisted.caps, c...);
          },
          caps);
    }
  }

  // Step k: the state after `s` (a tuple of M values), given the inputs (a tuple); the body reads
  // step k's row after the state.
  template <class F, class In, class S>
  auto step(const In& in, const S& s, std::size_t k) const {
    return std::apply(
        [&](const auto&... v) {
          if constexpr (std::is_void_v<F>) {
            return [&]<std::size_t... j>(std::index_sequence<j...>) {
              return std::tuple{body_value(std::get<j>(body), v...)...};
            }
            (std::make_index_sequence<M>{});
          } else {
            return evaluator<F>::template pack_values<false>(hoisted.step, v...);
          }
        },
        std::tuple_cat(tuple_slice_ref<0, std::tuple_size_v<In>>(in), tuple_slice_ref<0, M>(s),
                       rows.at(k)));
  }

  // The state's value types: those one step yields from the initial state, which must be those
  // the next step yields.
  // (Self keeps the object dependent: clang would look into the still incomplete class)
  template <class Caps, class Init, class Self = scan_op>
  using inputs_t =
      decltype(std::declval<const Self&>().template inputs<packed_family_t<Caps, Init>>(
          std::declval<const Caps&>()));
  template <class Caps, class Init, class Self = scan_op, class S = Init>
  using state_t = decltype(std::declval<const Self&>().template step<packed_family_t<Caps, Init>>(
      std::declval<const inputs_t<Caps, Init, Self>&>(), std::declval<const S&>(), std::size_t{0}));

  template <class Caps, class Init>
  auto run(const Caps& caps, const Init& init) const {
    using S = state_t<Caps, Init>;
    static_assert(std::is_same_v<S, state_t<Caps, Init, scan_op, S>>,
                  "metagrad: mg::repeat's step must keep the type of each state value (a float "
                  "state meeting a double constant changes it: make them agree)");
    using F = packed_family_t<Caps, Init>;
    const auto in = inputs<F>(caps);
    S s = step<F>(in, init, 0);
    for (std::size_t k = 1; k < N; ++k) s = step<F>(in, s, k);
    return s;
  }

  template <class... X>
  auto forward(const X&... x) const {
    const auto all = std::tie(x...);
    return std::get<J>(run(tuple_slice_ref<0, K>(all), tuple_slice_ref<K, M>(all)));
  }

  // Note [The loop's forward kept]: on a packed family the sweep that will go back asks the node
  // for its value through forward_keeping, which runs the steps as the reverse loop needs them
  // (one forward sweep per step, its values kept: Note [A kept forward] in xt/general.hpp) and
  // hands the sweep the value with that run; backward_kept then only sweeps back over it. Before,
  // the node ran its N steps for the value, and its backward ran them again, keeping them: on the
  // LSTM objective that second forward was a fifth of the gradient's instructions. A sweep that
  // only computes a value (no wanted argument below the node) calls forward, which keeps nothing.
  template <class Caps, class Init>
  struct kept_run {
    using F = packed_family_t<Caps, Init>;
    using S = state_t<Caps, Init>;
    using In = inputs_t<Caps, Init>;
    // the tape reads `in` and `states` where they are: the run does not move
    In in;
    std::vector<S> states;
    decltype(evaluator<F>::pack_tape(std::declval<const hoisted_t&>().step,
                                     std::declval<const In&>(), std::declval<std::vector<S>&>(), N,
                                     std::declval<const R&>())) tape;

    kept_run(const scan_op& op, const Caps& caps, const Init& init)
        : in(op.template inputs<F>(caps)),
          states(N),
          tape(evaluator<F>::pack_tape(op.hoisted.step, in, states, N, op.rows)) {
      states[0] = [&]<std::size_t... j>(std::index_sequence<j...>) {
        return S{std::tuple_element_t<j, S>(std::get<j>(init))...};
      }
      (std::make_index_sequence<M>{});
      tape.forward();
    }
    kept_run(const kept_run&) = delete;
    kept_run& operator=(const kept_run&) = delete;
  };
  template <class... X>
  using caps_of_t = decltype(tuple_slice_ref<0, K>(std::tie(std::declval<const X&>()...)));
  template <class... X>
  using init_of_t = decltype(tuple_slice_ref<K, M>(std::tie(std::declval<const X&>()...)));

  template <class... X>
  requires(!std::is_void_v<packed_family_t<caps_of_t<X...>, init_of_t<X...>>>) auto forward_keeping(
      const X&... x) const {
    const auto all = std::tie(x...);
    using Run = kept_run<caps_of_t<X...>, init_of_t<X...>>;
    auto run = std::make_unique<Run>(*this, tuple_slice_ref<0, K>(all), tuple_slice_ref<K, M>(all));
    auto value = run->tape.template final_value<J>();
    return kept_forward<decltype(value), std::unique_ptr<Run>>{std::move(value), std::move(run)};
  }
  // x: the K caps, the M initial values, the value, its adjoint
  template <class Run, class... X>
  auto backward_kept(const std::unique_ptr<Run>& run, const X&... x) const {
    const auto all = std::tie(x...);
    return std::apply([](auto... d) { return grads{std::move(d)...}; },
                      vjp_kept(*run, tuple_slice_ref<0, K>(all), std::get<K + M + 1>(all)));
  }

  // The gradients of component J's value w.r.t. caps and the initial state, at seed g: the
  // forward again keeping the states, then the body's vector-Jacobian products in reverse.
  template <class Caps, class Init, class G>
  auto vjp(const Caps& caps, const Init& init, const G& g) const {
    using S = state_t<Caps, Init>;
    using F = packed_family_t<Caps, Init>;
    if constexpr (!std::is_void_v<F>) {
      kept_run<Caps, Init> run(*this, caps, init);
      return vjp_kept(run, caps, g);
    } else {
      S s0 = [&]<std::size_t... j>(std::index_sequence<j...>) {
        return S{std::tuple_element_t<j, S>(std::get<j>(init))...};
      }
      (std::make_index_sequence<M>{});
      const auto in = inputs<F>(caps);
      if constexpr (numbers_v<S> && N * sizeof(S) <= 16384) {
        std::array<S, N> states;  // on the stack for numbers
        return vjp_over<F>(in, states, std::move(s0), g);
      } else {
        std::vector<S> states(N);
        return vjp_over<F>(in, states, std::move(s0), g);
      }
    }
  }

 private:
  // the adjoint of the state after step N: g in component J (`last`: the state step N starts from)
  template <class S, class G>
  static S final_adjoint(const S& last, const G& g) {
    return [&]<std::size_t... j>(std::index_sequence<j...>) {
      return S{seed_component<j, J, std::tuple_element_t<j, S>>(g, std::get<j>(last))...};
    }
    (std::make_index_sequence<M>{});
  }

  // The sweeps back over a kept run (Note [The loop's forward kept]), then the invariants'
  // gradients back to the caps, once.
  template <class Caps, class Init, class G>
  auto vjp_kept(kept_run<Caps, Init>& run, const Caps& caps, const G& g) const {
    using S = state_t<Caps, Init>;
    using F = packed_family_t<Caps, Init>;
    S a = final_adjoint(run.states[N - 1], g);
    auto din = run.tape.back(a);
    if constexpr (K == 0) {
      return std::tuple_cat(std::move(din), std::move(a));
    } else {
      constexpr std::size_t H = std::tuple_size_v<typename kept_run<Caps, Init>::In>;
      auto dcaps = std::apply(
          [&](const auto&... c) {
            return [&]<std::size_t... i>(std::index_sequence<i...>) {
              return evaluator<F>::template pack_vjp<i...>(hoisted.caps, din, c...);
            }
            (std::make_index_sequence<K>{});
          },
          caps);
      static_assert(std::tuple_size_v<decltype(din)> == H);
      return std::tuple_cat(std::move(dcaps), std::move(a));
    }
  }

 private:
  template <class S>
  static constexpr bool numbers_v = []<std::size_t... j>(std::index_sequence<j...>) {
    return (std::is_arithmetic_v<std::tuple_element_t<j, S>> && ...);
  }
  (std::make_index_sequence<M>{});

  // The gradients of the caps and of the initial state, on a family whose steps are not packed
  // (Note [One sweep per step]).
  template <class F, class In, class States, class S, class G>
  auto vjp_over(const In& in, States& states, S s0, const G& g) const {
    constexpr std::size_t KI = std::tuple_size_v<In>;
    states[0] = std::move(s0);  // states[k]: the state step k starts from
    for (std::size_t k = 1; k < N; ++k) states[k] = step<F>(in, states[k - 1], k - 1);
    S a = final_adjoint(states[N - 1], g);
    // on numbers with several state values, one sweep over sum_j a_j body_j (the adjoints its
    // arguments K+M+P..., after the row when there is one) gives the whole vector-Jacobian
    // product
    constexpr std::size_t P = R::present ? 1 : 0;
    const auto lagrangian = [&]<std::size_t... j>(std::index_sequence<j...>) {
      if constexpr (numbers_v<S> && M > 1) {
        return as_expr(((std::get<j>(body) * arg<K + M + P + j>{}) + ...));
      } else {
        return 0;
      }
    }
    (std::make_index_sequence<M>{});
    const auto back = [&](const S& s, std::size_t k) {
      const auto values = std::tuple_cat(in, tuple_slice_ref<0, M>(s), rows.at(k));
      if constexpr (numbers_v<S> && M > 1) {
        using T = std::tuple_element_t<0, S>;
        return tuple_slice<0, K + M>(
            std::apply([&](const auto&... v) { return body_vjp(lagrangian, T(1), v...); },
                       std::tuple_cat(values, tuple_slice_ref<0, M>(a))));
      } else if constexpr (R::present) {
        return tuple_slice<0, K + M>(back_each(values, a));
      } else {
        return back_each(values, a);
      }
    };
    auto sum = back(states[N - 1], N - 1);
    auto din = tuple_slice<0, KI>(sum);
    for (std::size_t k = N - 1; k-- > 0;) {
      a = tuple_slice<KI, M>(sum);
      sum = back(states[k], k);
      add_each(din, sum, std::make_index_sequence<KI>{});
    }
    return std::tuple_cat(std::move(din), tuple_slice<KI, M>(sum));
  }

  // The vector-Jacobian product of each body at values (caps, state, row) with adjoints a, summed:
  // a gradient per value.
  template <class Values, class S>
  auto back_each(const Values& values, const S& a) const {
    return [&]<std::size_t... j>(std::index_sequence<j...>) {
      auto one = [&]<std::size_t i>(std::integral_constant<std::size_t, i>) {
        return std::apply(
            [&](const auto&... v) { return body_vjp(std::get<i>(body), std::get<i>(a), v...); },
            values);
      };
      auto r = one(std::integral_constant<std::size_t, 0>{});
      ((j > 0 ? add_each(r, one(std::integral_constant<std::size_t, j>{}),
                         std::make_index_sequence<K + M>{})
              : void()),
       ...);
      return r;
    }
    (std::make_index_sequence<M>{});
  }

 public:
  template <class... X>
  auto backward(const X&... x) const;
  template <std::size_t i, class All>
  auto vjp_node(const All& all) const;
};

// d(component I of the gradients of a scan node's value)/d(inputs): a node of grad of grad.
template <std::size_t I, class Scan>
struct scan_vjp_op {
  static constexpr const char* name = "repeat_vjp";
  static constexpr bool elementwise = false;
  static constexpr std::size_t K = Scan::ncaps, M = Scan::nstate;
  static constexpr std::size_t arity = K + M + 1;
  Scan scan;

  template <class... X>
  auto forward(const X&... x) const {
    const auto all = std::tie(x...);
    return std::get<I>(
        scan.vjp(tuple_slice_ref<0, K>(all), tuple_slice_ref<K, M>(all), std::get<K + M>(all)));
  }
  template <class... X>
  auto backward(const X&... x) const;
  template <class... X>
  auto hvp(const X&... x) const;
};

template <std::size_t N, std::size_t K, std::size_t M, std::size_t J, class R, class... B>
template <class... X>
auto scan_op<N, K, M, J, R, B...>::backward(const X&... x) const {
  // x: the K caps, the M initial values, the value, its adjoint
  const auto all = std::tie(x...);
  if constexpr (std::is_same_v<family_t<X...>, dual_family>) {
    static_assert(always_false_v<scan_op>,
                  "metagrad: second derivatives on arrays through mg::repeat with a step holding "
                  "constants are not available (first derivatives and jvp are): pass the step's "
                  "constants as arguments of the function");
    return grads{x...};  // after the assertion: no cascade of errors
  } else if constexpr (!(Expr<X> || ...)) {
    return std::apply(
        [](auto... d) { return grads{std::move(d)...}; },
        vjp(tuple_slice_ref<0, K>(all), tuple_slice_ref<K, M>(all), std::get<K + M + 1>(all)));
  } else if constexpr (R::present) {
    static_assert(always_false_v<scan_op>,
                  "metagrad: second derivatives through mg::repeat with per-step inputs (xs) are "
                  "not available (first derivatives are): unroll the loop "
                  "(mg::repeat<N, mg::unroll::always>)");
    return [&]<std::size_t... c>(std::index_sequence<c...>) {
      return grads{std::get<c>(all)...};  // after the assertion: no cascade of errors
    }
    (std::make_index_sequence<K + M>{});
  } else {
    // grad of grad: the gradients as nodes of the enclosing expression
    return [&]<std::size_t... i>(std::index_sequence<i...>) { return grads{vjp_node<i>(all)...}; }
    (std::make_index_sequence<K + M>{});
  }
}

template <std::size_t N, std::size_t K, std::size_t M, std::size_t J, class R, class... B>
template <std::size_t i, class All>
auto scan_op<N, K, M, J, R, B...>::vjp_node(const All& all) const {
  return [&]<std::size_t... c>(std::index_sequence<c...>) {
    return make_expr(scan_vjp_op<i, scan_op>{*this}, std::get<c>(all)..., std::get<K + M + 1>(all));
  }
  (std::make_index_sequence<K + M>{});
}

// ---- second order: Note [Scan] ----------------------------------------------------------------

// The body's symbolic vector-Jacobian product: expression i (over caps, state, adjoints as
// arg<0..K+M-1>, arg<K+M..K+2M-1>) is sum_j a_j d body_j / d x_i.
template <std::size_t K, std::size_t M, class Body, std::size_t... x>
auto symbolic_vjp(const Body& body, std::index_sequence<x...>) {
  using Args = tuple<arg<x>...>;
  const Args args{};
  auto of = [&]<std::size_t j>(std::integral_constant<std::size_t, j>) {
    const auto& b = std::get<j>(body);
    using B = std::remove_cvref_t<decltype(b)>;
    using Seed = arg<K + M + j>;
    sweep<B, Args, plain_policy, Seed> s(b, args);
    s.forward();
    s.backward(Seed{});
    return std::tuple{as_expr(s.template gradient<x>(Seed{}, cst<known<0>>{}))...};
  };
  return [&]<std::size_t... j>(std::index_sequence<j...>) {
    auto sum_at = [&]<std::size_t i>(std::integral_constant<std::size_t, i>, const auto&... g) {
      return as_expr((std::get<i>(g) + ...));
    };
    const auto parts = std::make_tuple(of(std::integral_constant<std::size_t, j>{})...);
    return std::apply(
        [&](const auto&... g) {
          return std::tuple{sum_at(std::integral_constant<std::size_t, x>{}, g...)...};
        },
        parts);
  }
  (std::make_index_sequence<M>{});
}

// e's value and its directional derivative along t, at numbers v.
template <class E, class V, class T>
auto value_and_tangent(const E& e, const V& v, const T& t) {
  return std::apply(
      [&](const auto&... vs) {
        using P = plain_eval<E, std::remove_cvref_t<decltype(vs)>...>;
        const typename P::Args a{{vs}...};
        typename P::S s(e, a);
        s.forward();
        const auto tt = std::apply(
            [](const auto&... ts) { return tuple<std::remove_cvref_t<decltype(ts)>...>{{ts}...}; },
            t);
        return std::pair{typename P::R(s.result()), typename P::R(s.tangent(tt))};
      },
      v);
}

template <std::size_t I, class Scan>
template <class... X>
auto scan_vjp_op<I, Scan>::backward(const X&... x) const {
  if constexpr (!all_numbers_v<X...>) {
    static_assert(always_false_v<scan_vjp_op>,
                  "metagrad: third derivatives through mg::repeat with a step holding constants "
                  "are not available: pass the step's constants as arguments of the function");
    return [&]<std::size_t... c>(std::index_sequence<c...>) {
      return grads{std::get<c>(std::tie(x...))...};  // after the assertion: no cascade
    }
    (std::make_index_sequence<K + M + 1>{});
  } else {
    return hvp(x...);
  }
}

template <std::size_t I, class Scan>
template <class... X>
auto scan_vjp_op<I, Scan>::hvp(const X&... x) const {
  // x: caps, initial state, g, this node's value, its adjoint u. Forward mode along u e_I
  // through the loop and its reverse gives u times row I of the Hessian of g * value (which is
  // its column I), and u d value / d x_I for g.
  const auto all = std::tie(x...);
  using T = std::common_type_t<X...>;
  const T g = std::get<K + M>(all), u = std::get<K + M + 2>(all);
  constexpr std::size_t J = Scan::component, N = Scan::steps;
  using Vec = std::array<T, K + M>;  // caps and state
  Vec z{}, dz{};
  [&]<std::size_t... c>(std::index_sequence<c...>) { ((z[c] = std::get<c>(all)), ...); }
  (std::make_index_sequence<K + M>{});
  dz[I] = u;
  const auto& body = scan.body;
  const auto vb = symbolic_vjp<K, M>(body, std::make_index_sequence<K + M>{});
  auto as_tuple = [](const auto& arr) {
    return std::apply([](auto... e) { return std::tuple{e...}; }, arr);
  };
  // forward, with tangents; the states kept
  std::vector<Vec> zs, dzs;  // caps then state, per step
  zs.reserve(N + 1);
  dzs.reserve(N + 1);
  zs.push_back(z);
  dzs.push_back(dz);
  for (std::size_t k = 0; k < N; ++k) {
    Vec nz = zs.back(), ndz = dzs.back();
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      ((std::tie(nz[K + j], ndz[K + j]) =
            value_and_tangent(std::get<j>(body), as_tuple(zs.back()), as_tuple(dzs.back()))),
       ...);
    }
    (std::make_index_sequence<M>{});
    zs.push_back(nz);
    dzs.push_back(ndz);
  }
  // reverse, with tangents: adjoints a (tangent da) of the state, sums of the caps' gradients
  std::array<T, M> a{}, da{};
  a[J] = g;
  std::array<T, K> dc{}, ddc{};
  for (std::size_t k = N; k-- > 0;) {
    std::array<T, K + 2 * M> w{}, dw{};
    for (std::size_t i = 0; i < K + M; ++i) {
      w[i] = zs[k][i];
      dw[i] = dzs[k][i];
    }
    for (std::size_t j = 0; j < M; ++j) {
      w[K + M + j] = a[j];
      dw[K + M + j] = da[j];
    }
    std::array<T, K + M> v{}, dv{};
    [&]<std::size_t... i>(std::index_sequence<i...>) {
      ((std::tie(v[i], dv[i]) = value_and_tangent(std::get<i>(vb), as_tuple(w), as_tuple(dw))),
       ...);
    }
    (std::make_index_sequence<K + M>{});
    for (std::size_t c = 0; c < K; ++c) {
      dc[c] += v[c];
      ddc[c] += dv[c];
    }
    for (std::size_t j = 0; j < M; ++j) {
      a[j] = v[K + j];
      da[j] = dv[K + j];
    }
  }
  // d/dx: the tangent of the gradients (caps' sums, then the initial state's adjoint); d/dg
  // the tangent of the value
  return [&]<std::size_t... c>(std::index_sequence<c...>) {
    return grads{(c < K ? ddc[c < K ? c : 0] : da[c < K ? 0 : c - K])..., dzs[N][K + J]};
  }
  (std::make_index_sequence<K + M>{});
}

// ---- building the node: Note [Scan] ---------------------------------------------------------

// Is a step on state S, whose result is a traced expression, one that holds constants?
template <class Step, class S>
constexpr bool step_holds_state() {
  using B = body_t<scan_first_base, S, Step>;
  return []<std::size_t... j>(std::index_sequence<j...>) {
    return !(stateless_v<std::tuple_element_t<j, B>> && ...);
  }
  (std::make_index_sequence<state_size<S>()>{});
}

// Does mg::repeat run `step` on `S` as a scan node? When its result is a traced expression (in
// some component) and U says so: always for unroll::never, for unroll::automatic when the step
// holds constants or reads a row (Row, the row's type: Note [Per-step inputs]).
template <class Step, class S, unroll U, class... Row>
constexpr bool scanned() {
  using R = std::remove_cvref_t<decltype(std::declval<Step&>()(std::declval<S>(),
                                                               std::declval<Row>()...))>;
  constexpr bool traced = []<std::size_t... j>(std::index_sequence<j...>) {
    return (Expr<decltype(state_component<j>(std::declval<R>()))> || ...);
  }
  (std::make_index_sequence<state_size<R>()>{});
  if constexpr (U == unroll::always || !traced || state_size<R>() != state_size<S>()) {
    return false;
  } else if constexpr (U == unroll::never || sizeof...(Row) > 0) {
    return true;
  } else {
    return step_holds_state<Step, S>();
  }
}
template <class Step, class S, unroll U, class... Row>
inline constexpr bool scanned_v = scanned<std::remove_reference_t<Step>, S, U, Row...>();

// Is a state value of type Sj rebuilt from a step's Rj without changing it? When the types are
// the same, or Sj is a container built from an expression (an xtensor array from a lazy xtensor
// expression); a number never is (an int state meeting a double would be truncated).
template <class Sj, class Rj>
constexpr bool rebuilds() {
  if constexpr (std::is_same_v<Sj, Rj>) {
    return true;
  } else {
    return !std::is_arithmetic_v<Sj> && !Expr<Rj> && std::is_constructible_v<Sj, Rj>;
  }
}

// Does mg::repeat run `step` on `S` (and a row of type Row) as a plain loop? When each state value
// is rebuilt from what step returns.
template <class Step, class S, class... Row>
constexpr bool plain_loop() {
  using R = std::remove_cvref_t<decltype(std::declval<Step&>()(std::declval<S>(),
                                                               std::declval<Row>()...))>;
  if constexpr (!std::is_move_assignable_v<S>) {
    return false;
  } else if constexpr (std::is_same_v<R, S>) {
    return true;
  } else if constexpr (state_size<R>() != state_size<S>() || !std::is_constructible_v<S, R>) {
    return false;
  } else {
    return []<std::size_t... j>(std::index_sequence<j...>) {
      return (rebuilds<std::remove_cvref_t<decltype(state_component<j>(std::declval<S>()))>,
                       std::remove_cvref_t<decltype(state_component<j>(std::declval<R>()))>>() &&
              ...);
    }
    (std::make_index_sequence<state_size<R>()>{});
  }
}
template <class Step, class S, class... Row>
inline constexpr bool plain_loop_v = plain_loop<std::remove_reference_t<Step>, S, Row...>();

// The loop node of N steps of `step` from `init`, reading `rows` (no_rows, or scan_rows: Note
// [Per-step inputs]).
template <std::size_t N, class Step, class S, class Rows = no_rows>
auto scan(Step& step, S init, Rows rows = {}) {
  constexpr std::size_t M = state_size<S>();
  constexpr bool with_row = Rows::present;
  using seq = std::make_index_sequence<M>;
  // 1. trace the step past every argument index a first trace read
  constexpr std::size_t A =
      arg_end(typename body_types<body_t<scan_first_base, S, Step, with_row>>::type{});
  const auto body = trace_body<A, S, with_row>(step, seq{});
  if (!same_trace(body, trace_body<A, S, with_row>(step, seq{})))
    fail(
        "mg::repeat: the step read other values when it was traced again (a captured counter or "
        "index that the step advances?); a loop whose step holds constants is traced once and "
        "runs that trace at every step, so its step must read the same data at every call: "
        "carry data that changes between steps in the state, or unroll the loop "
        "(mg::repeat<N, mg::unroll::always>) to trace every step");
  using L = typename body_types<std::remove_cvref_t<decltype(body)>>::type;
  using Outer = outer_seq_t<A, L>;
  constexpr std::size_t K = Outer::size();
  using Map = renaming<A, K, Outer>;
  // 2. the renamed body, 3. one node per state component
  return [&]<std::size_t... j, std::size_t... o>(std::index_sequence<j...>,
                                                 std::index_sequence<o...>) {
    using Op0 =
        scan_op<N, K, M, 0, Rows,
                typename renamed<
                    Map, std::tuple_element_t<j, std::remove_cvref_t<decltype(body)>>>::type...>;
    const Op0 op0{std::tuple{rename<Map>(std::get<j>(body))...}, rows};
    auto node_of = [&]<std::size_t c>(std::integral_constant<std::size_t, c>) {
      using Op =
          scan_op<N, K, M, c, Rows,
                  typename renamed<
                      Map, std::tuple_element_t<j, std::remove_cvref_t<decltype(body)>>>::type...>;
      return make_expr(Op{op0.body, op0.rows}, arg<o>{}..., state_component<j>(init)...);
    };
    return state_like<S>(node_of(std::integral_constant<std::size_t, j>{})...);
  }
  (seq{}, Outer{});
}

}  // namespace mg::detail

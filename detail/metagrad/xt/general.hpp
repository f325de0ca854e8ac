// The array evaluator's general path (Note [Regions] in xt/region.hpp): every distinct node
// materialised once, any shapes, any ops, by a sweep under xt_policy. Also the results' forms
// and the gradient holders the fused paths (xt/fused_paths.hpp, xt/boundaries.hpp) share, and
// mg::vjp's and the value's evaluation on arrays. evaluator<array_family> (xt/array_family.hpp)
// derives from it.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xbuilder.hpp>

#include <metagrad/core/shape_rules.hpp>
#include <metagrad/error.hpp>
#include <metagrad/static/evaluator.hpp>
#include <metagrad/static/plan.hpp>
#include <metagrad/static/scan_body.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/region.hpp>

namespace mg::detail {

template <class A>
struct value_of {
  using type = A;  // a number
};
template <XtExpr A>
struct value_of<A> {
  using type = xt_value_t<A>;
};

// Converts to what f returns, by calling it: an object constructed from it where it lives.
template <class F>
struct constructed_by {
  F f;
  operator std::invoke_result_t<const F&>() const { return f(); }
};
template <class F>
constructed_by(F) -> constructed_by<F>;  // clang 16 deduces no aggregate's arguments

struct array_general {
  // f's value on arrays (any shape), by the general evaluator.
  template <class F, class... A>
  static auto value(const F& f, const A&... args) {
    const auto e = regionize(trace(f, std::index_sequence_for<A...>{}));  // Note [Regions]
    using E = std::remove_cvref_t<decltype(e)>;
    using Args = tuple<const A&...>;
    const Args a{{args}...};
    using T = std::common_type_t<typename value_of<A>::type...>;
    sweep<E, Args, xt_policy, work_array<T>, wanted_args<>> s(e, a);  // forward only
    s.forward();
    return xt::xarray<T>(s.result());
  }

  // The vector-Jacobian product of f at args with the cotangent `seed` (f's output shape):
  // the gradient of sum(seed * f) with respect to arguments I..., in the arguments' types.
  template <std::size_t... I, class F, class S, class... A>
  static auto vjp(const F& f, const S& seed, const A&... args) {
    using T = std::common_type_t<typename value_of<A>::type...>;
    return vjp_of<I...>(
        trace(f, std::index_sequence_for<A...>{}),
        [&](const auto& r) { return seed_like<T>(r, seed); }, args...);
  }

  // mg::repeat's step, its M bodies as one expression p (Note [One sweep per step] in
  // static/scan.hpp): their values in one sweep (Stored: as the sweep holds them, else as
  // a work_array, the type of a state value), and the gradients of sum_j <a_j, body_j> with respect
  // to arguments I... in one sweep back.
  static constexpr bool packs_steps = true;
  template <bool Stored, class P, class... A>
  static auto pack_values(const P& p, const A&... args) {
    const auto e = regionize(p);
    using E = std::remove_cvref_t<decltype(e)>;
    using Args = tuple<const A&...>;
    const Args a{{args}...};
    using T = std::common_type_t<typename value_of<A>::type...>;
    constexpr std::size_t root = plan_v<E>.nslots - 1;
    return [&]<std::size_t... j>(std::index_sequence<j...>) {
      // (the seed type the pack's backward would take: only the forward runs)
      using Seed = std::tuple<
          typename value_types<E, Args, xt_policy>::template val_t<plan_v<E>.child[root][j]>...>;
      sweep<E, Args, xt_policy, Seed, wanted_args<>> s(e, a);  // forward only
      s.forward();
      if constexpr (Stored) {
        return std::tuple{
            std::tuple_element_t<j, Seed>(s.template value<plan_v<E>.child[root][j]>())...};
      } else {
        return std::tuple{work_array<T>(s.template value<plan_v<E>.child[root][j]>())...};
      }
    }
    (std::make_index_sequence<plan_v<E>.nchild[root]>{});
  }
  template <std::size_t... I, class P, class Adjoints, class... A>
  static auto pack_vjp(const P& p, const Adjoints& a, const A&... args) {
    return vjp_of<I...>(
        p, [&](const auto&) -> const Adjoints& { return a; }, args...);
  }
  // Note [A kept forward]: mg::repeat's reverse loop over a packed step (static/scan.hpp) runs
  // one forward sweep per step, keeping its slot values and computing the next state (forward:
  // states[0] is given, states[1..n-1] are written), then one sweep back per step over the kept
  // values (back: the inputs' gradients summed into din; a, the last state's adjoint, ends as the
  // initial state's), so no step runs its forward twice.
  template <class P, class In, class States, class Rows>
  static auto pack_tape(const P& p, const In& in, States& states, std::size_t n, const Rows& rows) {
    using E = std::remove_cvref_t<decltype(regionize(p))>;
    return tape_of<E, In, States, Rows>(regionize(p), in, states, n, rows);
  }

 private:
  template <class E, class In, class States, class Rows>
  struct tape_of {
    using S = std::remove_cvref_t<decltype(std::declval<States&>()[0])>;
    static constexpr std::size_t KI = std::tuple_size_v<In>, M = std::tuple_size_v<S>;
    using RowTuple = decltype(std::declval<const Rows&>().at(0));
    template <class Tup>
    static auto refs(Tup& t) {
      return std::apply([](auto&... x) { return std::tie(x...); }, t);
    }
    using All =
        decltype(std::tuple_cat(refs(std::declval<const In&>()), refs(std::declval<const S&>()),
                                refs(std::declval<const RowTuple&>())));
    template <class Seq>
    struct types;
    template <std::size_t... v>
    struct types<std::index_sequence<v...>> {
      using Args = tuple<std::tuple_element_t<v, All>...>;
      using T = std::common_type_t<
          typename value_of<std::remove_cvref_t<std::tuple_element_t<v, All>>>::type...>;
    };
    using Seq = std::make_index_sequence<std::tuple_size_v<All>>;
    using Args = typename types<Seq>::Args;
    using T = typename types<Seq>::T;
    // the gradients of the inputs and the state, not of the row
    template <std::size_t... i>
    static wanted_args<i...> wanted(std::index_sequence<i...>);
    using Wanted = decltype(wanted(std::make_index_sequence<KI + M>{}));
    using Forward = sweep<E, Args, xt_policy, S, Wanted, false, true>;
    using Back = sweep<E, Args, xt_policy, S, Wanted, true>;

    E e;
    const In& in;
    States& states;
    std::size_t n;
    std::vector<RowTuple> rows;
    std::vector<typename Forward::values_type> kept;

    tape_of(E e_, const In& in_, States& states_, std::size_t n_, const Rows& r)
        : e(std::move(e_)), in(in_), states(states_), n(n_) {
      rows.reserve(n);
      for (std::size_t k = 0; k < n; ++k) rows.push_back(r.at(k));
    }
    Args args_at(std::size_t k) const {
      const auto all = std::tuple_cat(refs(in), refs(states[k]), refs(rows[k]));
      return [&]<std::size_t... v>(std::index_sequence<v...>) {
        return Args{{std::get<v>(all)}...};
      }
      (Seq{});
    }
    void forward() {
      constexpr std::size_t root = plan_v<E>.nslots - 1;
      kept.reserve(n);
      for (std::size_t k = 0; k < n; ++k) {
        const Args args = args_at(k);
        // the step's values are written where they are kept (reserved: kept never moves)
        Forward s(e, args, kept.emplace_back());
        s.forward();
        if (k + 1 < n) {
          [&]<std::size_t... j>(std::index_sequence<j...>) {
            ((std::get<j>(states[k + 1]) =
                  std::tuple_element_t<j, S>(s.template value<plan_v<E>.child[root][j]>())),
             ...);
          }
          (std::make_index_sequence<M>{});
        }
      }
    }
    // Component j of the state after the last step, read from its kept values.
    template <std::size_t j>
    auto final_value() const {
      constexpr std::size_t root = plan_v<E>.nslots - 1;
      const Args args = args_at(n - 1);
      const Back s(e, args, kept[n - 1]);
      return std::tuple_element_t<j, S>(s.template value<plan_v<E>.child[root][j]>());
    }
    // The inputs' gradients, summed over the steps; a ends as the initial state's adjoint.
    auto back(S& a) {
      auto din = [&]<std::size_t... i>(std::index_sequence<i...>) {
        return std::tuple<decltype(make_out<T>(
            std::declval<const std::remove_cvref_t<std::tuple_element_t<i, In>>&>()))...>{};
      }
      (std::make_index_sequence<KI>{});
      for (std::size_t k = n; k-- > 0;) {
        const Args args = args_at(k);
        Back s(e, args, kept[k]);
        s.backward(a);
        auto outs = std::tuple_cat(refs(din), refs(a));
        const bool first = k + 1 == n;  // writes the sums; later steps add to them
        [&]<std::size_t... j>(std::index_sequence<j...>) {
          (write_gradient<T>(std::get<j>(outs), s.template take_gradient<j>(a, unused{}),
                             at<j>(args), !first && j < KI),
           ...);
        }
        (std::make_index_sequence<KI + M>{});
        kept[k] = {};  // its arrays back to the pool
      }
      return din;
    }
  };

 public:
 protected:
  // The form of a result: {value, tuple of gradients}; {value, gradient(s)}; gradient(s).
  static constexpr int pair_of_tuple = 0, pair_final = 1, gradients_only = 2;
  template <int Form, class T, class Grads>
  using result_t = std::conditional_t<
      Form == gradients_only,
      std::conditional_t<std::tuple_size_v<Grads> == 1, std::tuple_element_t<0, Grads>, Grads>,
      std::pair<T, std::conditional_t<Form == pair_final && std::tuple_size_v<Grads> == 1,
                                      std::tuple_element_t<0, Grads>, Grads>>>;

  // A result with its gradients shaped like their arguments and not initialised: each is
  // constructed where it lives (GCC elides through the conversion), so an xt::xtensor_fixed is
  // neither zeroed (as value-initialising the pair or tuple would) nor copied.
  template <int Form, class T, std::size_t... I, class... A>
  static auto make_result(const A&... args) {
    const auto all = std::forward_as_tuple(args...);
    using Grads = std::tuple<decltype(make_out<T>(std::get<I>(all)))...>;
    constexpr bool one = sizeof...(I) == 1;
    if constexpr (Form == gradients_only && one) {
      return make_out<T>(std::get<I...>(all));
    } else if constexpr (Form == gradients_only) {
      return Grads(constructed_by{[&a = std::get<I>(all)] { return make_out<T>(a); }}...);
    } else {
      return result_t<Form, T, Grads>(std::piecewise_construct, std::forward_as_tuple(T{}),
                                      std::forward_as_tuple(constructed_by{
                                          [&a = std::get<I>(all)] { return make_out<T>(a); }}...));
    }
  }
  // The gradients of a result, as a tuple of references; its value, where it has one.
  template <int Form, class R>
  static auto gradients_of(R& r) {
    auto& g = [&]() -> auto& {
      if constexpr (Form == gradients_only) {
        return r;
      } else {
        return r.second;
      }
    }
    ();
    if constexpr (requires { std::tuple_size<std::remove_cvref_t<decltype(g)>>::value; }) {
      return std::apply([](auto&... x) { return std::tie(x...); }, g);
    } else {
      return std::tie(g);
    }
  }
  template <int Form, class R, class T>
  static void set_value(R& r, T value) {
    if constexpr (Form != gradients_only) r.first = value;
  }

  // g takes the shape of argument a: a fixed-size array has it already (and is not copied), a
  // dynamic one gets new storage; every element is written by the loop.
  template <class T, class G, class A>
  static void shape_like(G& g, const A& a) {
    if constexpr (XtExpr<A>) {
      if (!same_extents(g.shape(), a.shape())) g = gradient_like<A, T>(a);
    }
  }

  // gradient holder for argument k: an array like it, or a number
  template <class T, class A>
  static auto make_out(const A& a) {
    if constexpr (XtExpr<A>) {
      return gradient_like<A, T>(a);
    } else {
      return static_cast<A>(0);
    }
  }

  // Each distinct node materialised once; any shapes, any ops. The result is built in place (a
  // fixed-size gradient is copied once, from the sweep into it); its value also in `value`.
  template <int Form, std::size_t... I, class E, class T, class... A>
  static auto general(const E& e, T& value, const A&... args) {
    auto result = make_result<Form, T, I...>(args...);
    general_into<I...>(e, value, gradients_of<Form>(result), args...);
    set_value<Form>(result, value);
    return result;
  }
  template <std::size_t... I, class E, class T, class Outs, class... A>
  static void general_into(const E& e, T& value, Outs outs, const A&... args) {
    general_sweep<I...>(
        e, std::tuple<const A&...>{args...},
        [](const auto& r) {
          using R = std::remove_cvref_t<decltype(r)>;
          if constexpr (std::is_arithmetic_v<R>) {
            return R(1);
          } else {
            if (r.size() != 1)
              fail(
                  "grad: the function must return a scalar (a 0-d or one-element array) but "
                  "returned shape ",
                  shape_string(r.shape()), "; reduce it, e.g. with mg::sum");
            return work_array<T>(xt::ones<T>(r.shape()));
          }
        },
        value, outs);
  }

  // out = g (written is false) or out += g, g summed to a's shape
  template <class T, class O, class G, class A>
  static void add_gradient(O& out, const G& g, const A& a, bool written) {
    if (!written) {
      to_argument<T>(out, g, a);
      return;
    }
    if constexpr (XtStridedOf<G, T>) {
      if (g.layout() == xt::layout_type::row_major && same_extents(g.shape(), a.shape())) {
        const T* p = g.data() + g.data_offset();
        T* o = out.data();
        for (std::size_t i = 0, size = g.size(); i < size; ++i) o[i] += p[i];
        return;
      }
    }
    out += reduce_to_shape_of(g, a);
  }

  // vjp's seed: the cotangent, of the value's shape (a number for one value)
  template <class T, class R, class S>
  static auto seed_like(const R& r, const S& seed) {
    if constexpr (std::is_arithmetic_v<R>) {
      if constexpr (std::is_arithmetic_v<S>) {
        return static_cast<R>(seed);
      } else {
        check_seed(seed.size() == 1, r, seed);
        return static_cast<R>(*seed.begin());
      }
    } else if constexpr (std::is_arithmetic_v<S>) {
      check_seed(r.size() == 1, r, seed);
      return work_array<T>(xt::broadcast(static_cast<T>(seed), r.shape()));
    } else {
      const shape_t rs = shape_of(r), ss = shape_of(seed);
      check_seed(rs == ss, r, seed);
      return work_array<T>(seed);
    }
  }
  template <class R, class S>
  static void check_seed(bool ok, const R& r, const S& seed) {
    if (!ok)
      fail("vjp: the cotangent has shape ", shape_string(shape_of(seed)),
           " but the function's value has shape ", shape_string(shape_of(r)),
           "; pass a cotangent of the value's shape");
  }

  // The gradients of e's arguments I... after its sweep back from seed_of(e's value).
  template <std::size_t... I, class E, class SeedOf, class... A>
  static auto vjp_of(const E& e, SeedOf seed_of, const A&... args) {
    using T = std::common_type_t<typename value_of<A>::type...>;
    std::tuple<decltype(make_out<T>(std::get<I>(std::forward_as_tuple(args...))))...> out;
    T value{};
    general_sweep<I...>(e, std::tuple<const A&...>{args...}, seed_of, value,
                        std::apply([](auto&... o) { return std::tie(o...); }, out));
    return out;
  }

  // The general sweep: the value into `value`, the gradient of argument I_j into out_j.
  template <std::size_t... I, class Traced, class... A, class SeedOf, class T, class Out>
  static void general_sweep(const Traced& traced, const std::tuple<const A&...>& args,
                            SeedOf seed_of, T& value, Out out) {
    const auto e = regionize(traced);  // Note [Regions]
    using E = std::remove_cvref_t<decltype(e)>;
    using Args = tuple<const A&...>;
    const Args a = std::apply([](const A&... x) { return Args{{x}...}; }, args);
    using Root = typename value_types<E, Args, xt_policy>::template val_t<plan_v<E>.nslots - 1>;
    using Seed = std::remove_cvref_t<decltype(seed_of(std::declval<const Root&>()))>;
    // declared before the sweep, so that its arrays are freed while the results are lent
    lent_results lent;
    const lending_scope lending(lent);
    sweep<E, Args, xt_policy, Seed, wanted_args<I...>> s(e, a);
    lend_results<T, I...>(lent, &s, args, out);
    s.forward();
    const auto& r = s.result();
    const Seed& seed = seed_of(r);
    if constexpr (std::is_arithmetic_v<Root>) {
      value = static_cast<T>(r);
    } else if constexpr (!std::is_same_v<Root, pack_token>) {
      value = r.size() == 1 ? static_cast<T>(*r.begin()) : T(0);
    }
    s.backward(seed);
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      if constexpr (distinct_indices<I...>()) {  // each adjoint is read once: Note [Handing over]
        (to_argument<T>(std::get<j>(out), s.template take_gradient<I>(seed, unused{}),
                        std::get<I>(args)),
         ...);
      } else {
        (to_argument<T>(std::get<j>(out), s.template gradient<I>(seed, unused{}),
                        std::get<I>(args)),
         ...);
      }
    }
    (std::index_sequence_for<decltype(I)...>{});
  }
  struct unused {};

  // Note [Gradients written into the results] in core/lent_results.hpp: each wanted argument's
  // result, row-major of the element type and shaped as the argument, offered to the sweep.
  template <class T, std::size_t... I, class... A, class Out>
  static void lend_results(lent_results& lent, const void* sweep,
                           const std::tuple<const A&...>& args, Out& out) {
    if constexpr (distinct_indices<I...>()) {
      lent.owner = sweep;
      [&]<std::size_t... j>(std::index_sequence<j...>) {
        (lend_result<T, I>(lent, std::get<j>(out), std::get<I>(args)), ...);
      }
      (std::index_sequence_for<decltype(I)...>{});
    }
  }
  template <class T, std::size_t I, class O, class A>
  static void lend_result(lent_results& lent, O& out, const A& a) {
    if constexpr (lendable<T, O, A>() && I < lent_results::max_args) {
      shape_like<T>(out, a);
      if (out.size() == 0 || !same_extents(out.shape(), a.shape())) return;
      lent.data[I] = out.data();
      lent.bytes[I] = out.size() * sizeof(T);
    }
  }
  template <class T, class O, class A>
  static constexpr bool lendable() {
    if constexpr (std::is_arithmetic_v<A> || !requires(O & o) {
                    o.data();
                    O::static_layout;
                  }) {
      return false;
    } else if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(*std::declval<O&>().data())>,
                                         T>) {
      return false;
    } else {
      return O::static_layout == xt::layout_type::row_major;
    }
  }

  // out = g in a's type (add false), or out += g
  template <class T, class O, class G, class A>
  static void write_gradient(O& out, const G& g, const A& a, bool add) {
    if (!add) {
      to_argument<T>(out, g, a);
    } else if constexpr (std::is_same_v<G, unused>) {
      // nothing to add
    } else if constexpr (std::is_arithmetic_v<A>) {
      out += static_cast<A>(reduce_to_shape_of(g, a));
    } else {
      add_gradient<T>(out, g, a, true);
    }
  }

  // out = a gradient in its argument's type (zeros when f does not use the argument): a
  // fixed-size out has the shape already, a dynamic one gets it.
  template <class T, class O, class G, class A>
  static void to_argument(O& out, const G& g, const A& a) {
    if constexpr (std::is_arithmetic_v<A>) {
      if constexpr (std::is_same_v<G, unused>) {
        out = A(0);
      } else {
        out = static_cast<A>(reduce_to_shape_of(g, a));
      }
    } else {
      shape_like<T>(out, a);
      if constexpr (std::is_same_v<G, unused>) {
        out.fill(T(0));
      } else if constexpr (XtStridedOf<G, T>) {
        const T* from = g.data() + g.data_offset();
        if (g.layout() == xt::layout_type::row_major && same_extents(g.shape(), a.shape())) {
          // already there: Note [Gradients written into the results] in core/lent_results.hpp
          if (from != out.data()) std::copy(from, from + g.size(), out.data());
          return;
        }
        if (from == out.data()) {  // not expected; read it from a copy rather than in place
          out = reduce_to_shape_of(work_array<T>(g), a);
          return;
        }
        out = reduce_to_shape_of(g, a);
      } else {
        out = reduce_to_shape_of(g, a);
      }
    }
  }
};

}  // namespace mg::detail

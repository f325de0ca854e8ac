// What a struct must provide to be an operation of metagrad, and the facts every evaluator reads
// from it (arity, what backward reads, elementwise or not, differentiable or not).
//
// A ctx-free op (StaticOp) is a struct like the built-ins in <metagrad/ops/>:
// `forward(inputs...)` and `backward(inputs..., output, grad_output)`, both callable on plain
// numbers, returning one gradient (one input) or mg::grads{...} (several inputs). Optional
// members: `name` (a string literal for messages and grad_fn()->name()), `saves` (which values
// backward reads, so the runtime engine keeps only those), `elementwise = false` (an op whose
// forward sees whole arrays: reductions, shape ops), `arity = N` (an op written for arrays only,
// which cannot be probed with numbers: Note [Ops on arrays only]), `differentiable = false`
// (comparisons), `simd = false` (numbers only), `keeps_integers = true` (i64 in, i64 out on
// tensors), `linear = mg::linearity::...` (how a non-elementwise op is linear: forward mode on
// arrays reads it, Note [Dual arrays] in xt/dual_family.hpp).
#pragma once

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <metagrad/grads.hpp>

namespace mg {

/// What an op's backward reads besides the output gradient (`static constexpr auto saves =
/// mg::saved::inputs;`). The runtime engine keeps exactly
/// these for backward; the others reach backward as `mg::not_saved`, so a backward that reads a
/// value it did not declare does not compile (no silently wrong gradient).
/// `input_shapes`: backward reads its inputs' shapes only (a sum, a view), so writing an input in
/// place afterwards is no error.
enum class saved : unsigned char { nothing, inputs, output, both, input_shapes };

/// How a non-elementwise op is linear (`static constexpr auto linear = mg::linearity::jointly;`),
/// which gives forward mode its tangent without a formula of its own:
/// `jointly`: in all its inputs together (reshape, sum, cat): the tangent is op(tangents...);
/// `separately`: in each input with the others fixed (matmul, outer): the tangent is the sum over
/// inputs j of op(inputs with input j replaced by its tangent).
/// An op that is neither is a reduction (a `reduce_dims r` member: sum of its local derivatives
/// times the tangent over each reduced slice), or has no tangent on arrays.
enum class linearity : unsigned char { none, jointly, separately };

/// Stands in, in a call to backward, for a value the op declared it does not read.
struct not_saved {};

namespace detail {
template <std::size_t>
using number = double;

template <class F, std::size_t... I>
concept forward_takes = requires(const F& f, number<I>... x) {
  f.forward(x...);
};

template <class F, std::size_t... I>
concept backward_takes = requires(const F& f, number<I>... x, double y, double g) {
  f.backward(x..., y, g);
};

template <class F, std::size_t N>
constexpr bool forward_arity_is() {
  return []<std::size_t... I>(std::index_sequence<I...>) { return forward_takes<F, I...>; }
  (std::make_index_sequence<N>{});
}

// Note [Ops on arrays only]: an op whose forward and backward are written for arrays (with
// xtensor's functions: a user's prod, a user's matmul) cannot be probed with numbers, because
// the probe would instantiate its body (`xt::prod(double)` is a hard error, not a substitution
// failure). Such an op declares `static constexpr std::size_t arity = N;` and is not probed: its
// forward and backward meet their real argument types where the op is applied.
template <class F>
concept declares_arity = requires {
  { F::arity } -> std::convertible_to<std::size_t>;
};

// The number of inputs of op F: its declared arity, else the smallest N in 1..6 for which forward
// takes N numbers.
template <class F>
constexpr std::size_t op_arity() {
  if constexpr (declares_arity<F>)
    return F::arity;
  else if constexpr (forward_arity_is<F, 1>())
    return 1;
  else if constexpr (forward_arity_is<F, 2>())
    return 2;
  else if constexpr (forward_arity_is<F, 3>())
    return 3;
  else if constexpr (forward_arity_is<F, 4>())
    return 4;
  else if constexpr (forward_arity_is<F, 5>())
    return 5;
  else if constexpr (forward_arity_is<F, 6>())
    return 6;
  else
    return 0;
}

template <class F, std::size_t N>
constexpr bool has_backward() {
  if constexpr (declares_arity<F>) {
    return true;  // not probed (Note [Ops on arrays only])
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) { return backward_takes<F, I...>; }
    (std::make_index_sequence<N>{});
  }
}

template <class T>
struct gradient_count : std::integral_constant<std::size_t, 1> {};
template <class... Ts>
struct gradient_count<grads<Ts...>> : std::integral_constant<std::size_t, sizeof...(Ts)> {};

template <class F, std::size_t N>
constexpr std::size_t backward_gradient_count() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    // number<I>(I), not number<I>{}: see Note [nvcc alias packs] in config.hpp
    using R = decltype(std::declval<const F&>().backward(number<I>(I)..., 0.0, 0.0));
    return gradient_count<std::remove_cvref_t<R>>::value;
  }
  (std::make_index_sequence<N>{});
}

// Is F elementwise? Yes unless it says `static constexpr bool elementwise = false`.
template <class F>
constexpr bool is_elementwise() {
  if constexpr (requires { F::elementwise; }) {
    return F::elementwise;
  } else {
    return true;
  }
}

// How F is linear (Note [Dual arrays]): linearity::none unless it says otherwise.
template <class F>
constexpr linearity linearity_of() {
  if constexpr (requires { F::linear; }) {
    return F::linear;
  } else {
    return linearity::none;
  }
}

// Has F a gradient? Yes unless it says `static constexpr bool differentiable = false`.
template <class F>
constexpr bool is_differentiable() {
  if constexpr (requires { F::differentiable; }) {
    return F::differentiable;
  } else {
    return true;
  }
}

// Does F run on SIMD packs? Yes unless it says `static constexpr bool simd = false` (its body uses
// a function packs lack): then every evaluator runs it on numbers only.
template <class F>
constexpr bool simd_enabled() {
  if constexpr (requires { F::simd; }) {
    return F::simd;
  } else {
    return true;
  }
}

// Does F map integers to integers (add, mul, maximum, where...)? Then on i64 and bool tensors
// its result is i64 (or bool), as in torch; else an integer input gives a floating result.
// Declared with `static constexpr bool keeps_integers = true`.
template <class F>
constexpr bool keeps_integers() {
  if constexpr (requires { F::keeps_integers; }) {
    return F::keeps_integers;
  } else {
    return false;
  }
}

// What F's backward reads: its `saves` member, else everything.
template <class F>
constexpr saved saves_of() {
  if constexpr (requires { F::saves; }) {
    return F::saves;
  } else {
    return saved::both;
  }
}
template <class F>
inline constexpr bool saves_inputs_v = saves_of<F>() == saved::inputs
                                       || saves_of<F>() == saved::both
                                       || saves_of<F>() == saved::input_shapes;
// Are the saved inputs' values read (so an in-place write to one before backward is an error)?
template <class F>
inline constexpr bool checks_input_versions_v = saves_of<F>() != saved::input_shapes;
template <class F>
inline constexpr bool saves_output_v = saves_of<F>() == saved::output
                                       || saves_of<F>() == saved::both;

template <class F>
constexpr bool backward_count_ok() {
  constexpr std::size_t n = op_arity<F>();
  if constexpr (declares_arity<F>) {
    return n > 0;  // not probed (Note [Ops on arrays only])
  } else if constexpr (n == 0 || !has_backward<F, n>()) {
    return false;
  } else {
    return backward_gradient_count<F, n>() == n;
  }
}
}  // namespace detail

/// A ctx-free operation usable in both engines and on both backends.
template <class F>
concept StaticOp = std::is_default_constructible_v<F> &&(detail::op_arity<F>() > 0) &&
                   (!detail::is_differentiable<F>() ||
                    (detail::has_backward<F, detail::op_arity<F>()>() &&
                     detail::backward_count_ok<F>()));

namespace detail {
// Entry points call this so a malformed op is reported in one sentence, not forty candidates.
template <class F>
constexpr void diagnose_static_op() {
  static_assert(
      std::is_default_constructible_v<F>,
      "metagrad: a custom op must be default-constructible (a struct of static functions)");
  static_assert(op_arity<F>() > 0,
                "metagrad: a custom op needs a static forward(inputs...) callable on numbers");
  if constexpr (op_arity<F>() > 0 && is_differentiable<F>()) {
    static_assert(has_backward<F, op_arity<F>()>(),
                  "metagrad: a custom op needs a static backward(inputs..., output, grad_output)");
    if constexpr (has_backward<F, op_arity<F>()>()) {
      static_assert(backward_count_ok<F>(),
                    "metagrad: backward must return one gradient per input (mg::grads{...} for "
                    "several)");
    }
  }
}
}  // namespace detail

}  // namespace mg

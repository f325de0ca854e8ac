// Templates in name only: how the runtime engine's code, written in headers, is compiled only
// where a program calls it in header-only mode, and once, in the library, otherwise (Note
// [Compiled core] in core/config.hpp: the library instantiates each of them explicitly).
#pragma once

namespace mg::detail {

// Note [Lazy members]: in header-only mode (Note [Compiled core] in core/config.hpp) the
// members of mg::tensor that apply an op (sum, reshape, add_, ...) are
// templates in name only (`template <int = 0>`), and their bodies reach the op through
// lazy<I>(*this), an expression that depends on I. So an op's function, its node and the
// backward kernels behind it are instantiated where a program calls the member, not in every
// file that includes the header (a non-template inline member instantiated about 30 op nodes
// with their kernels in every such file; docs/performance.md, "Cheap headers"). The free
// functions cat, stack, cross_entropy and index_select with a tensor index are templates in name
// only too.
//
// The same holds for the engine's own code: a non-template inline function is compiled in every
// file that includes it, with every template it names (std::stable_sort, a hash map's insert, a
// kernel per dtype). So the functions whose bodies instantiate templates are templates in name
// only as well: the backward engine (run_backward and its steps), the profiler's reports, to_dot,
// printing a tensor, the hook functions, saved_variable's save and unpack, the allow-mutation
// guard, the shape rules, and tensor members such as retain_grad and requires_grad_.
// benchmarks/compile_time/eager_roots.py lists what a file that calls nothing still instantiates
// and from where; MG_DETAIL_LAZY_ENGINE (core/config.hpp) keeps a few sentinels lazy.
template <int, class T>
constexpr T& lazy(T& t) noexcept {
  return t;
}
// 0, as a value that depends on T: a template calls a helper that is a template in name only as
// helper<lazy_v<T>>(...), so that the helper is instantiated with the caller, not where the
// caller is defined (g++ binds a call with no dependent argument there, and instantiates the
// callee at once when its return type is deduced, as an op's is; with a declared return type it
// waits).
template <class...>
inline constexpr int lazy_v = 0;

}  // namespace mg::detail

// mg::tensor: the runtime engine's n-dimensional array, which records the operations applied to
// it (torch.autograd semantics). The same generic callable runs on numbers, on static-engine
// leaves and on mg::tensor:
// ```cpp
// auto f = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
// mg::tensor x = mg::tensor(2.0).requires_grad_(), y = mg::tensor(3.0).requires_grad_();
// f(x, y).backward();   // x.grad(), y.grad()
// ```
//
// - **Construction.** `mg::tensor{{1., 2.}, {3., 4.}}` (2x2), `mg::tensor{1., 2.}` (1-D),
//   `mg::tensor(3.0)` (0-d; note `mg::tensor{3.0}` is 1-D with one element): floating literals
//   give the default dtype, f32, as libtorch's torch::tensor does; integers give i64, bools bool;
//   a dtype as last argument overrides it: `mg::tensor({1., 2.}, mg::f64)`.
//   `mg::tensor(xt::xarray<double>{...})`: any xtensor expression of float or double, in its
//   element type;
//   and the factories `zeros`, `ones`, `full`, `randn` with `{.dtype, .device, .requires_grad}`.
// - **Reading.** `shape()`, `strides()`, `numel()`, `dim()`, `dtype()`, `device()`,
//   `item<T>()` (one element), `to_xtensor<T>()` / `xt::xarray<T>(t)` (a copy).
// - **Autograd.** `requires_grad()`, `requires_grad_()`, `grad()` (undefined until a backward
//   reaches it; `defined()`), `set_grad()`, `grad_fn()` (null for leaves; `->name()` is the op,
//   e.g. "mul"), `is_leaf()`, `detach()` (shares storage), `retain_grad()`,
//   `backward(grad = {}, {.retain_graph, .create_graph, .inputs})`.
// - **Operations**: the op families of <metagrad/ops.hpp> (free functions in namespace mg; binary
//   ones broadcast with numpy rules and promote f32 with f64 to f64; a C++ number on either side
//   keeps the tensor's dtype); `x.to(dtype)`, `x.to(device)` (recorded: gradients flow back to
//   the source device), `x.contiguous()`; shape and indexing members (`reshape`, `view`,
//   `permute`, `t[i]`...: views where torch's are); in place (`add_`, `mul_`, `copy_`, `exp_`...:
//   recorded as torch records them, through views too, with version checks).
// - **Devices.** `mg::device::cuda` runs on the Thrust backend once a translation unit of the
//   program includes <metagrad/cuda.hpp> (docs/runtime.md, Devices).
//
// Misuse throws mg::error naming the operation, the shapes and the fix.
//
// This header declares the class; <metagrad/tensor.hpp> brings in its operations.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/call_site.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/error.hpp>
#include <metagrad/node.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/lazy.hpp>
#include <metagrad/types.hpp>

namespace xt {
template <class D>
class xexpression;
}  // namespace xt

namespace mg {

namespace detail {
// The xtensor array of element type T: defined by <metagrad/tensor_xtensor.hpp>, which a file
// that converts a tensor to xtensor includes (so that this header does not include xtensor).
template <class T>
struct xarray_type;

}  // namespace detail

class tensor;
using tensor_list = std::vector<tensor>;

namespace detail {
// One element read by tensor::item<T>() (<metagrad/runtime/tensor_inline.hpp>).
struct item_value {
  double floating;
  std::int64_t integral;
  bool is_integral;
};
MG_API item_value item_of(const tensor_impl& t);
// A C++ number type a tensor can be made of (<metagrad/runtime/tensor_inline.hpp>).
template <class T>
concept Literal = std::is_arithmetic_v<T>;
// A CPU tensor of `shape` and dtype `wanted` holding `values` (numel elements of dtype `stored`,
// contiguous), converted.
MG_API impl_ptr from_values(const shape_t& shape, dtype stored, const void* values, dtype wanted);
// t's elements in row-major order, converted to dtype d, copied to `out` (on the CPU).
MG_API void read_elements(const tensor_impl& t, dtype d, void* out);

struct hook_access;
void release_self_capture(const impl_ptr& t, long held, long held_fn);  // hooks.hpp
}  // namespace detail

/// What registering a hook returns: `remove()` removes the hook (also after the tensor or node is
/// gone; removing twice is harmless). Dropping the handle keeps the hook, as torch's
/// RemovableHandle does.
class hook_handle {
 public:
  hook_handle() = default;
  template <int = 0>  // Note [Lazy members]
  void remove();

 private:
  friend struct detail::hook_access;
  std::vector<std::pair<std::weak_ptr<detail::hook_set>, std::uint64_t>> hooks_;
};

/// Options of the tensor factories; an aggregate, used with designated initialisers:
/// `mg::randn({3, 3}, {.dtype = mg::f64, .requires_grad = true})`. The default dtype is f32, as
/// in torch.
struct tensor_options {
  mg::dtype dtype = mg::dtype::f32;
  mg::device device = mg::device::cpu;
  bool requires_grad = false;
};

struct backward_options;  // below tensor: it holds a tensor_list

class tensor {
 public:
  using mg_family = detail::tensor_family;

  tensor() = default;
  explicit tensor(detail::impl_ptr impl) : impl_(std::move(impl)) {}
  tensor(const tensor&) = default;
  tensor(tensor&&) noexcept = default;
  tensor& operator=(const tensor& o) {
    drop(std::exchange(impl_, o.impl_));
    return *this;
  }
  tensor& operator=(tensor&& o) noexcept {
    drop(std::exchange(impl_, std::move(o.impl_)));
    return *this;
  }
  ~tensor() { drop(std::move(impl_)); }

  // A C++ number or a nested list of them, read as libtorch reads literals (Note [Literal
  // dtypes] in runtime/tensor_inline.hpp): floating values give the default dtype, f32, integers
  // i64 and bools bool; or the dtype given: `mg::tensor({1.0, 2.0}, mg::f64)`. A list of integers
  // or bools converts explicitly only (`mg::tensor({2, 0})`), so that a braced list of indices
  // passed where a function also takes a std::vector<std::int64_t> stays that vector.
  template <detail::Literal T>
  explicit tensor(T value);
  template <detail::Literal T>
  explicit tensor(T value, mg::dtype d);
  template <detail::Literal T>
  explicit(!std::is_floating_point_v<T>) tensor(std::initializer_list<T> values);
  template <detail::Literal T>
  explicit tensor(std::initializer_list<T> values, mg::dtype d);
  template <detail::Literal T>
  explicit(!std::is_floating_point_v<T>)
      tensor(std::initializer_list<std::initializer_list<T>> values);
  template <detail::Literal T>
  explicit tensor(std::initializer_list<std::initializer_list<T>> values, mg::dtype d);
  template <detail::Literal T>
  explicit(!std::is_floating_point_v<T>)
      tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values);
  template <detail::Literal T>
  explicit tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values,
                  mg::dtype d);
  template <class E>
  explicit tensor(const xt::xexpression<E>& e);

  bool defined() const { return impl_ != nullptr; }
  const shape_t& shape() const { return checked("shape").shape; }
  const shape_t& strides() const { return checked("strides").strides; }
  std::int64_t numel() const { return checked("numel").numel(); }
  std::int64_t dim() const { return static_cast<std::int64_t>(checked("dim").shape.size()); }
  mg::dtype dtype() const { return checked("dtype").dtype(); }
  mg::device device() const { return checked("device").device(); }
  bool is_contiguous() const { return checked("is_contiguous").is_contiguous(); }
  std::uint64_t version() const { return checked("version").store->version; }

  /// Does a gradient flow to this tensor? (A view of a tensor written in place since it was made
  /// does exactly when its base does: its history is the base's new one, which grad_fn() and
  /// ops read.)
  bool requires_grad() const {
    if (!impl_) return false;
    const detail::tensor_impl& t = *impl_;
    if (t.is_view && t.base && t.store->version != t.view_version)
      return (t.requires_grad && !t.grad_fn) || detail::requires_grad(*t.base);
    return detail::requires_grad(t);
  }
  template <int = 0>  // Note [Lazy members]
  tensor& requires_grad_(bool on = true);
  tensor grad() const { return tensor(checked("grad").grad); }
  template <int = 0>  // Note [Lazy members]
  void set_grad(const tensor& g);
  std::shared_ptr<autograd::node> grad_fn() const;
  bool is_leaf() const {
    if (checked("is_leaf").is_view) detail::refresh_view(*impl_);
    return impl_->grad_fn == nullptr;
  }
  /// Created under mg::inference_mode_guard (cannot be saved for backward).
  bool is_inference() const { return checked("is_inference").is_inference; }
  bool retains_grad() const;
  template <int = 0>  // Note [Lazy members]
  void retain_grad() const;
  /// A tensor sharing this one's elements (and version counter) without its history.
  tensor detach() const { return tensor(detail::alias_of(checked("detach"))); }
  /// Detaches this tensor from the graph in place: it becomes a leaf that does not require grad.
  template <int = 0>  // Note [Lazy members]
  tensor& detach_();
  /// Registers `fn(const mg::tensor& grad) -> mg::tensor` (or void), called with this tensor's
  /// gradient each time it is computed; a defined result replaces the gradient (same shape,
  /// dtype and device). On a leaf it runs before accumulation into `.grad()`:
  /// ```cpp
  /// auto h = v.register_hook([](const mg::tensor& g) { return g * 2; });   // doubles it
  /// h.remove();
  /// ```
  template <class F>
  hook_handle register_hook(F&& fn) const;
  /// Registers `fn(const mg::tensor& leaf)` on a leaf that requires grad, called after each
  /// backward accumulated into its `.grad()` (torch's register_post_accumulate_grad_hook; where
  /// an optimiser step can run during backward). The hook receives the leaf: capturing it would
  /// keep it alive.
  /// ```cpp
  /// w.register_post_accumulate_grad_hook([](const mg::tensor& p) {
  ///   mg::no_grad_guard ng;
  ///   p.detach().sub_(p.grad() * 0.1);   // an SGD step as soon as w's gradient is ready
  /// });
  /// ```
  template <class F>
  hook_handle register_post_accumulate_grad_hook(F&& fn) const;

  template <class T>
  T item() const;
  /// A copy as `xt::xarray<T>` (include <metagrad/tensor_xtensor.hpp>, or the umbrella).
  template <class T>
  typename detail::xarray_type<T>::type to_xtensor() const;
  /// `xt::xarray<T>(t)`: to_xtensor<T>().
  template <class A>
  requires requires { typename detail::xarray_type<typename A::value_type>::type; }
  explicit operator A() const { return to_xtensor<typename A::value_type>(); }

  // The members that record an operation take, last, the call site (Note [Call sites]). They
  // are templates in name only (Note [Lazy members] in runtime/tensor_members.hpp).
  template <int = 0>
  tensor to(mg::dtype d, call_site site = {}) const;
  template <int = 0>
  tensor to(mg::device d, call_site site = {}) const;
  template <int = 0>
  tensor contiguous(call_site site = {}) const;
  template <int = 0>
  tensor clone(call_site site = {}) const;
  template <int = 0>
  tensor sum(call_site site = {}) const;
  template <int = 0>
  tensor sum(std::int64_t axis, call_site site = {}) const;
  template <int = 0>
  tensor mean(call_site site = {}) const;
  template <int = 0>
  tensor t(call_site site = {}) const;

  // Shape and indexing (views where torch's are; see <metagrad/ops/shape.hpp>, indexing.hpp).
  template <int = 0>
  tensor reshape(const shape_t& shape, call_site site = {}) const;
  template <int = 0>
  tensor view(const shape_t& shape, call_site site = {}) const;
  template <int = 0>
  tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1, call_site site = {}) const;
  template <int = 0>
  tensor squeeze(call_site site = {}) const;
  template <int = 0>
  tensor squeeze(std::int64_t dim, call_site site = {}) const;
  template <int = 0>
  tensor unsqueeze(std::int64_t dim, call_site site = {}) const;
  template <int = 0>
  tensor permute(const std::vector<std::int64_t>& dims, call_site site = {}) const;
  template <int = 0>
  tensor transpose(std::int64_t d0, std::int64_t d1, call_site site = {}) const;
  template <int = 0>
  tensor expand(const shape_t& shape, call_site site = {}) const;
  template <int = 0>
  tensor select(std::int64_t dim, std::int64_t index, call_site site = {}) const;
  template <int = 0>
  tensor slice(std::int64_t dim, std::optional<std::int64_t> start = {},
               std::optional<std::int64_t> end = {}, std::int64_t step = 1,
               call_site site = {}) const;
  template <int = 0>
  tensor index_select(std::int64_t dim, const tensor& index, call_site site = {}) const;
  // mg::unbind, mg::chunk, mg::split (<metagrad/ops/split.hpp>): lists of views
  template <int = 0>
  tensor_list unbind(std::int64_t dim = 0, call_site site = {}) const;
  template <int = 0>
  tensor_list chunk(std::int64_t chunks, std::int64_t dim = 0, call_site site = {}) const;
  template <int = 0>
  tensor_list split(std::int64_t split_size, std::int64_t dim = 0, call_site site = {}) const;
  template <int = 0>
  tensor_list split(const std::vector<std::int64_t>& sizes, std::int64_t dim = 0,
                    call_site site = {}) const;
  /// select(0, i): `t[1]` is the second row, a view.
  template <int = 0>
  tensor operator[](detail::tracked_index i) const;

  // In place (torch's semantics): recorded in the graph when grad mode is on; the version
  // counter is bumped; a leaf that requires grad cannot be modified in place in grad mode.
  template <int = 0>
  tensor& add_(const tensor& other, call_site site = {});
  template <int = 0>
  tensor& add_(double other, call_site site = {});
  template <int = 0>
  tensor& sub_(const tensor& other, call_site site = {});
  template <int = 0>
  tensor& sub_(double other, call_site site = {});
  template <int = 0>
  tensor& mul_(const tensor& other, call_site site = {});
  template <int = 0>
  tensor& mul_(double other, call_site site = {});
  template <int = 0>
  tensor& div_(const tensor& other, call_site site = {});
  template <int = 0>
  tensor& div_(double other, call_site site = {});
  template <int = 0>
  tensor& pow_(double exponent, call_site site = {});
  template <int = 0>
  tensor& copy_(const tensor& src, call_site site = {});
  template <int = 0>
  tensor& zero_(call_site site = {});
  template <int = 0>
  tensor& fill_(double value, call_site site = {});
  template <int = 0>
  tensor& clamp_(double lo, double hi, call_site site = {});
  template <int = 0>
  tensor& neg_(call_site site = {});
  template <int = 0>
  tensor& exp_(call_site site = {});
  template <int = 0>
  tensor& log_(call_site site = {});
  template <int = 0>
  tensor& sqrt_(call_site site = {});
  template <int = 0>
  tensor& abs_(call_site site = {});
  template <int = 0>
  tensor& sin_(call_site site = {});
  template <int = 0>
  tensor& cos_(call_site site = {});
  template <int = 0>
  tensor& tanh_(call_site site = {});
  template <int = 0>
  tensor& sigmoid_(call_site site = {});
  template <int = 0>
  tensor& relu_(call_site site = {});

  // templates in name only, as the engine's other entry points (Note [Engine ops])
  template <int = 0>
  void backward(const tensor& grad = {}) const;
  template <int = 0>
  void backward(const tensor& grad, const backward_options& options) const;
  template <int = 0>
  void backward(const backward_options& options) const;

  const detail::impl_ptr& impl() const { return impl_; }

 private:
  // See Note [Hooks that capture their tensor] (hooks.hpp).
  static void drop(detail::impl_ptr p) {
    if (p && p->hook_self_refs) [[unlikely]]
      detail::release_self_capture(p, 1, 0);
  }
  const detail::tensor_impl& checked(const char* what) const {
    if (!impl_)
      detail::fail(what,
                   ": the tensor is undefined (default-constructed, or an unused gradient); "
                   "check defined() first");
    return *impl_;
  }
  detail::impl_ptr impl_;
};

/// Options of `tensor::backward`. `retain_graph` defaults to `create_graph`; `inputs`, when not
/// empty, restricts accumulation into `.grad()` to those tensors. (Defined after tensor, which a
/// tensor_list needs complete: clang instantiates its constructor at the member's `{}`.)
struct backward_options {
  std::optional<bool> retain_graph{};
  bool create_graph = false;
  tensor_list inputs{};
};

namespace detail {
// The tensor family of detail::call, defined in runtime/apply.hpp; declared here so that every
// op's function finds it wherever it is instantiated.
template <class Op, class... X>
tensor apply_in(tensor_family, const Op& op, const X&... x);
}  // namespace detail

/// A tensor of `shape` filled with `value`: `mg::full({2, 3}, 0.5, {.dtype = mg::f64})`.
tensor full(const shape_t& shape, double value, const tensor_options& options = {});
/// Zeros: `mg::zeros({2, 3})` is f32; `mg::zeros({2, 3}, {.dtype = mg::f64})`.
tensor zeros(const shape_t& shape, const tensor_options& options = {});
/// Ones: `mg::ones({3}, {.requires_grad = true})`.
tensor ones(const shape_t& shape, const tensor_options& options = {});
/// Standard normal samples: `mg::randn({3, 3}, {.requires_grad = true})`.
tensor randn(const shape_t& shape, const tensor_options& options = {});
/// Seeds the generator of `mg::randn`: the same seed gives the same tensors.
void manual_seed(std::uint64_t seed);

/// Tensors of t's shape, dtype and device (not requiring grad): `mg::zeros_like(x)`.
tensor zeros_like(const tensor& t);
tensor ones_like(const tensor& t);
tensor full_like(const tensor& t, double value);
tensor randn_like(const tensor& t);
/// A recorded copy of t that owns its storage (torch's clone): `auto y = mg::clone(x);`.
template <int = 0>  // Note [Lazy members]
tensor clone(const tensor& t, call_site site = {});

/// The tensors joined along `dim` (`mg::cat({a, b}, 1)`); all shapes agree except along dim.
template <int = 0>  // Note [Lazy members]
tensor cat(const tensor_list& tensors, std::int64_t dim = 0, call_site site = {});
/// The tensors (of equal shapes) stacked along a new dimension `dim`.
template <int = 0>  // Note [Lazy members]
tensor stack(const tensor_list& tensors, std::int64_t dim = 0, call_site site = {});
/// The views x.select(dim, i) for each i along dim (torch's unbind):
/// `auto rows = mg::unbind(m);`. Like chunk and split, its outputs cannot be modified in place
/// while autograd records the write (torch's rule; Note [Multi-output views] in ops/split.hpp).
template <int = 0>  // Note [Lazy members]
tensor_list unbind(const tensor& x, std::int64_t dim = 0, call_site site = {});
/// `chunks` views along dim (torch's chunk): each ceil(size / chunks) long, the last shorter, so
/// possibly fewer than asked.
template <int = 0>  // Note [Lazy members]
tensor_list chunk(const tensor& x, std::int64_t chunks, std::int64_t dim = 0, call_site site = {});
/// Views of split_size elements along dim, the last shorter (torch's split).
template <int = 0>  // Note [Lazy members]
tensor_list split(const tensor& x, std::int64_t split_size, std::int64_t dim = 0,
                  call_site site = {});
/// Views of the given lengths along dim, which sum to its size (torch's split_with_sizes):
/// `mg::split(x, {1, 3}, 1)`. (A one-element braced list is a split_size: write
/// `std::vector<std::int64_t>{n}`.)
template <int = 0>  // Note [Lazy members]
tensor_list split(const tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t dim = 0,
                  call_site site = {});
/// index_select with an i64 index tensor (1-D).
template <int = 0>  // Note [Lazy members]
tensor index_select(const tensor& x, std::int64_t dim, const tensor& index, call_site site = {});
/// cross_entropy with i64 class targets [N] for logits [N, C] (mean over the batch).
template <int = 0>  // Note [Lazy members]
tensor cross_entropy(const tensor& logits, const tensor& targets, call_site site = {});

/// Prints the values (the first and last few of a large tensor), then shape, dtype, device,
/// requires_grad and grad_fn: `std::cout << x;`.
template <int = 0>  // Note [Lazy members]
std::ostream& operator<<(std::ostream& os, const tensor& t);

}  // namespace mg

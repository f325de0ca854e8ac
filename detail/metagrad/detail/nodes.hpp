// The nodes the runtime engine records: one template for every op struct (built-in or a
// ctx-free custom op), and the grad accumulator of a leaf.
//
// Note [One formula]: an op_node's backward is the op struct's own `backward`, in one of two
// ways:
//   - create_graph off (the common case) and an elementwise op: ONE kernel on the output's device
//     evaluates the struct's backward per element and writes every wanted input gradient
//     (tensor_kernels.hpp); nothing is recorded.
//   - otherwise: backward is called with mg::tensor arguments, so it runs the ops' public
//     functions, which are recorded when create_graph is on. That is how higher derivatives work.
// The values an op declared it does not save (its `saves`) reach backward as mg::not_saved in
// both ways, so a backward that reads one does not compile.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/concepts.hpp>
#include <metagrad/detail/graph.hpp>
#include <metagrad/detail/tensor_kernels.hpp>
#include <metagrad/detail/type_name.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/conversion.hpp>
#include <metagrad/ops/shape.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg::detail {

struct input_meta {
  shape_t shape;
  mg::dtype dtype;
};

// A gradient g for an input described by m: summed back over broadcast dimensions and converted
// to the input's dtype; a gradient that cannot be brought to the input's shape is an error.
inline impl_ptr fit_gradient(const tensor& g, const input_meta& m, const char* op, std::size_t i) {
  if (!g.defined()) return nullptr;
  tensor r = g;
  if (r.shape() != m.shape) {
    if (!broadcastable_to(m.shape, r.shape()))
      fail(op, ": backward returned a gradient of shape ", shape_string(r.shape()), " for input ",
           i, " of shape ", shape_string(m.shape),
           "; return one gradient per input, in the input's shape (or broadcastable from it)");
    r = mg::sum_to(r, m.shape);
  }
  if (r.dtype() != m.dtype) r = r.to(m.dtype);
  return r.impl();
}

// The node that receives the gradient of t: its grad_fn, its grad accumulator (a leaf that
// requires grad), or null.
std::shared_ptr<graph_node> gradient_edge(const impl_ptr& t);

// Gives a view whose base was written in place since its grad_fn was recorded a grad_fn that
// reads the base's current history (tensor_members.hpp; Note [Views and in-place writes]).
void refresh_view(tensor_impl& t);

// Component k of a backward result as a tensor (undefined for mg::no_grad).
template <std::size_t k, class R>
tensor gradient_component(const R& r) {
  if constexpr (std::is_same_v<component_t<k, R>, no_grad>) {
    return tensor{};
  } else {
    return tensor(component<k>(r));
  }
}

template <bool Saved>
auto saved_arg(const tensor& t) {
  if constexpr (Saved) {
    return t;
  } else {
    return not_saved{};
  }
}

template <class Op, std::size_t N>
struct op_node final : graph_node {
  Op op;
  std::array<input_meta, N> meta;

  explicit op_node(Op o) : op(std::move(o)) {}
  const char* name() const override { return op_name<Op>(); }

  std::vector<impl_ptr> apply(impl_ptr grad) override {
    constexpr bool ins = saves_inputs_v<Op>, out = saves_output_v<Op>;
    std::array<tensor, N> x;
    if constexpr (ins)
      for (std::size_t i = 0; i < N; ++i) x[i] = tensor(saved[i].unpack(name()));
    tensor y;
    if constexpr (out) y = tensor(saved[ins ? N : 0].unpack(name()));
    const tensor g(std::move(grad));
    std::vector<impl_ptr> r(N);
    if constexpr (is_elementwise<Op>()) {
      if (!grad_mode()) {  // Note [One formula]: one kernel
        std::array<const tensor_impl*, N> in{};
        std::array<bool, N> wanted{};
        for (std::size_t i = 0; i < N; ++i) {
          in[i] = x[i].impl().get();
          wanted[i] = next[i] != nullptr;
        }
        auto gs = elementwise_backward_kernel(op, in, y.impl().get(), *g.impl(), wanted);
        for (std::size_t i = 0; i < N; ++i)
          if (gs[i]) r[i] = fit_gradient(tensor(std::move(gs[i])), meta[i], name(), i);
        return r;
      }
    }
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      const auto b = op.backward(saved_arg<ins>(x[I])..., saved_arg<out>(y), g);
      ((r[I] = next[I] ? fit_gradient(gradient_component<I>(b), meta[I], name(), I) : nullptr),
       ...);
    }
    (std::make_index_sequence<N>{});
    return r;
  }
};

struct accumulate_grad final : graph_node {
  explicit accumulate_grad(impl_ptr variable) { leaf = std::move(variable); }
  const char* name() const override { return "accumulate_grad"; }
  std::vector<impl_ptr> apply(impl_ptr grad) override;
};

// grad accumulated into t.grad: kept as is with create_graph (it carries its graph), else as a
// copy that owns its storage, as torch's AccumulateGrad does.
inline void accumulate_into(tensor_impl& t, const impl_ptr& g) {
  if (!g) return;
  if (!t.grad) {
    t.grad = grad_mode() ? g : copy_kernel(*g, g->dtype(), g->shape);
  } else {
    t.grad = (tensor(t.grad) + tensor(g)).impl();
  }
}

inline std::vector<impl_ptr> accumulate_grad::apply(impl_ptr grad) {
  accumulate_into(*leaf, grad);
  return {};
}

inline std::shared_ptr<graph_node> gradient_edge(const impl_ptr& t) {
  if (!t) return nullptr;
  refresh_view(*t);
  if (t->grad_fn) return t->grad_fn;
  if (!t->requires_grad) return nullptr;
  auto acc = t->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<accumulate_grad>(t);
    t->grad_accumulator = acc;
  }
  return acc;
}

// Records `out = op(in...)` when grad mode is on, the op is differentiable and an input requires
// grad. out must be a fresh tensor (no grad_fn yet).
template <class Op, class... T>
tensor record(const Op& op, tensor out, const T&... in) {
  if constexpr (!is_differentiable<Op>()) {
    return out;
  } else {
    if (!grad_mode() || !(in.requires_grad() || ...)) return out;
    constexpr std::size_t N = sizeof...(T);
    auto n = std::make_shared<op_node<Op, N>>(op);
    n->next = {gradient_edge(in.impl())...};
    n->meta = {input_meta{in.shape(), in.dtype()}...};
    if constexpr (saves_inputs_v<Op>)
      (n->saved.emplace_back(in.impl(), false, n, checks_input_versions_v<Op>), ...);
    out.impl()->grad_fn = n;
    if constexpr (saves_output_v<Op>) n->saved.emplace_back(out.impl(), true, n);
    return out;
  }
}

}  // namespace mg::detail

// The nodes the runtime engine records: one template for every op struct (built-in or a
// ctx-free custom op), and the grad accumulator of a leaf.
//
// Note [One formula]: an op_node's backward is the op struct's own `backward`, called with
// mg::tensor arguments; so it runs tensor operations, which are themselves recorded when
// create_graph is on. That is how higher derivatives work. The forward values are computed by
// kernels that call the same struct's `forward` on elements (kernels.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include <metagrad/detail/graph.hpp>
#include <metagrad/detail/tensor_core.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/elementwise.hpp>
#include <metagrad/ops/shaped.hpp>

namespace mg::detail {

// Which arguments an op's backward reads, so the node saves only those (a tensor it does not
// save is freed as soon as the user drops it). Unlisted ops, custom ones included, save all.
// Note: a wrong entry here cannot give a wrong gradient: backward would receive an undefined
// tensor and throw.
template <class Op>
struct saved_by {
  static constexpr bool inputs = true, output = true;
};
template <class Op>
struct saves_nothing {
  static constexpr bool inputs = false, output = false;
};
struct saves_inputs {
  static constexpr bool inputs = true, output = false;
};
struct saves_output {
  static constexpr bool inputs = false, output = true;
};
template <>
struct saved_by<add_op> : saves_nothing<add_op> {};
template <>
struct saved_by<sub_op> : saves_nothing<sub_op> {};
template <>
struct saved_by<neg_op> : saves_nothing<neg_op> {};
template <>
struct saved_by<mul_op> : saves_inputs {};
template <>
struct saved_by<exp_op> : saves_output {};
template <>
struct saved_by<tanh_op> : saves_output {};
template <>
struct saved_by<log_op> : saves_inputs {};
template <>
struct saved_by<sin_op> : saves_inputs {};
template <>
struct saved_by<cos_op> : saves_inputs {};
template <>
struct saved_by<pow_op> : saves_inputs {};
template <>
struct saved_by<sum_op> : saves_inputs {};
template <>
struct saved_by<sum_axis_op> : saves_inputs {};
template <>
struct saved_by<matmul_op> : saves_inputs {};

// Runtime-only structural ops: their attributes carry the shapes backward needs.
struct expand_op {
  static constexpr const char* name = "expand";
  shape_t from;
  // d/dx expand(x) = sum back over the broadcast dimensions
  tensor backward(const tensor&, const tensor&, const tensor& g) const { return sum_to(g, from); }
};
struct sum_to_op {
  static constexpr const char* name = "sum_to";
  shape_t from;
  tensor backward(const tensor&, const tensor&, const tensor& g) const { return expand(g, from); }
};
struct unsqueeze_op {
  static constexpr const char* name = "unsqueeze";
  std::int64_t axis;
  tensor backward(const tensor&, const tensor&, const tensor& g) const { return sum(g, axis); }
};
struct transpose_op {
  static constexpr const char* name = "transpose";
  tensor backward(const tensor&, const tensor&, const tensor& g) const { return transpose(g); }
};
struct to_op {
  static constexpr const char* name = "to";
  mg::dtype from;
  tensor backward(const tensor&, const tensor&, const tensor& g) const { return g.to(from); }
};
struct to_device_op {
  static constexpr const char* name = "to_device";
  mg::device from;
  tensor backward(const tensor&, const tensor&, const tensor& g) const { return g.to(from); }
};
struct copy_op {
  static constexpr const char* name = "contiguous";
  tensor backward(const tensor&, const tensor&, const tensor& g) const { return g; }
};
template <>
struct saved_by<expand_op> : saves_nothing<expand_op> {};
template <>
struct saved_by<sum_to_op> : saves_nothing<sum_to_op> {};
template <>
struct saved_by<unsqueeze_op> : saves_nothing<unsqueeze_op> {};
template <>
struct saved_by<transpose_op> : saves_nothing<transpose_op> {};
template <>
struct saved_by<to_op> : saves_nothing<to_op> {};
template <>
struct saved_by<to_device_op> : saves_nothing<to_device_op> {};
template <>
struct saved_by<copy_op> : saves_nothing<copy_op> {};

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
    r = sum_to(r, m.shape);
  }
  if (r.dtype() != m.dtype) r = r.to(m.dtype);
  return r.impl();
}

// The node that receives the gradient of t: its grad_fn, its grad accumulator (a leaf that
// requires grad), or null.
std::shared_ptr<graph_node> gradient_edge(const impl_ptr& t);

template <class T>
inline constexpr bool is_grads_tuple = false;
template <class... Ts>
inline constexpr bool is_grads_tuple<grads<Ts...>> = true;

template <std::size_t k, class R>
tensor gradient_component(R&& r) {
  if constexpr (is_grads_tuple<std::remove_cvref_t<R>>) {
    return tensor(get<k>(std::forward<R>(r)));
  } else {
    return tensor(std::forward<R>(r));
  }
}

template <class Op, std::size_t N>
struct op_node final : graph_node {
  Op op;
  std::array<input_meta, N> meta;

  explicit op_node(Op o) : op(std::move(o)) {}
  const char* name() const override { return op_name<Op>(); }

  std::vector<impl_ptr> apply(impl_ptr grad) override {
    constexpr bool ins = saved_by<Op>::inputs, out = saved_by<Op>::output;
    auto unpack = [this](std::size_t i) { return tensor(saved[i].unpack(name())); };
    const tensor g(std::move(grad));
    const tensor y = out ? unpack(ins ? N : 0) : tensor{};
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      auto r = op.backward((ins ? unpack(I) : tensor{})..., y, g);
      return std::vector<impl_ptr>{
          (next[I] ? fit_gradient(gradient_component<I>(std::move(r)), meta[I], name(), I)
                   : nullptr)...};
    }
    (std::make_index_sequence<N>{});
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
  if (t->grad_fn) return t->grad_fn;
  if (!t->requires_grad) return nullptr;
  auto acc = t->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<accumulate_grad>(t);
    t->grad_accumulator = acc;
  }
  return acc;
}

// Records `out = op(in...)` when grad mode is on and an input requires grad. out must be a fresh
// tensor (no grad_fn yet).
template <class Op, class... T>
tensor record(const Op& op, tensor out, const T&... in) {
  if (!grad_mode() || !(in.requires_grad() || ...)) return out;
  constexpr std::size_t N = sizeof...(T);
  auto n = std::make_shared<op_node<Op, N>>(op);
  n->next = {gradient_edge(in.impl())...};
  n->meta = {input_meta{in.shape(), in.dtype()}...};
  if constexpr (saved_by<Op>::inputs) (n->saved.emplace_back(in.impl(), false, n), ...);
  out.impl()->grad_fn = n;
  if constexpr (saved_by<Op>::output) n->saved.emplace_back(out.impl(), true, n);
  return out;
}

}  // namespace mg::detail

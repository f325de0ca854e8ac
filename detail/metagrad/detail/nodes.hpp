// How nodes join the graph (record_node, the one place for every node kind), the node of every
// op struct (built-in or a ctx-free custom op), and the grad accumulator of a leaf.
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
//
// Note [What a node saves]: a node saves only what the gradients it must compute read, as
// torch's do: `x * c` with only x requiring grad saves c, not x. For an elementwise op this is
// read off its backward at compile time, by tracing it with the static engine's symbolic leaves
// (gradient_reads); other ops save what their `saves` declares. A value not saved reaches
// backward as a placeholder (a 0-d one) in the gradients nobody wants.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/call_site.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/detail/graph.hpp>
#include <metagrad/detail/hooks.hpp>
#include <metagrad/detail/saved.hpp>
#include <metagrad/detail/tensor_kernels.hpp>
#include <metagrad/detail/type_name.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/conversion.hpp>
#include <metagrad/ops/shape.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg::detail {

inline impl_ptr number_tensor(double v, mg::dtype d, mg::device dev) {
  auto t = fill_kernel({}, v, d, dev);
  t->wrapped_number = true;
  return t;
}

inline std::shared_ptr<storage> empty_storage(mg::dtype d, mg::device dev) {
  static const auto all = [] {
    std::array<std::shared_ptr<storage>, 8> r;
    for (int k = 0; k < 8; ++k)
      r[k] = allocate(0, static_cast<mg::dtype>(k % 4), static_cast<mg::device>(k / 4));
    return r;
  }();
  return all[static_cast<int>(d) + 4 * static_cast<int>(dev)];
}

inline impl_ptr copy_of(const tensor_impl& t) { return copy_kernel(t, t.dtype(), t.shape); }

inline tensor_meta meta_of(const tensor_impl& t) { return {t.shape, t.dtype(), t.device()}; }

// ---- Note [What a node saves] -------------------------------------------------------------------

template <std::size_t J, class E>
inline constexpr bool reads_arg_v = false;
template <std::size_t J>
inline constexpr bool reads_arg_v<J, arg<J>> = true;
template <std::size_t J, class Op, class... A>
inline constexpr bool reads_arg_v<J, mg::node<Op, A...>> = (reads_arg_v<J, A> || ...);

template <bool Saved, std::size_t I>
using traced_arg_t = std::conditional_t<Saved, arg<I>, not_saved>;

template <class Op, std::size_t N, std::size_t... I>
auto traced_backward(std::index_sequence<I...>)
    -> decltype(std::declval<const Op&>().backward(traced_arg_t<saves_inputs_v<Op>, I>{}...,
                                                   traced_arg_t<saves_output_v<Op>, N>{},
                                                   arg<N + 1>{}));

// For each input k: a mask of the saved values (inputs 0..N-1, output N) its gradient reads.
template <class Op, std::size_t N>
constexpr std::array<std::uint32_t, N> gradient_reads() {
  std::array<std::uint32_t, N> r{};
  if constexpr (!is_elementwise<Op>()) {
    r.fill(~0u);
  } else {
    using R = decltype(traced_backward<Op, N>(std::make_index_sequence<N>{}));
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      ((r[K] =
            [&]<std::size_t... J>(std::index_sequence<J...>) {
              using E = component_t<K, R>;
              return ((reads_arg_v<J, E> ? 1u << J : 0u) | ... | 0u);
            }(std::make_index_sequence<N + 1>{})),
       ...);
    }
    (std::make_index_sequence<N>{});
  }
  return r;
}

// ---- joining the graph --------------------------------------------------------------------------

// The node that receives the gradient of t: its grad_fn, its grad accumulator (a leaf that
// requires grad), or none.
edge gradient_edge(const impl_ptr& t);

// Anomaly mode: is it on, and which node is running backward (the parent of nodes recorded
// by a backward under create_graph).
inline std::atomic<bool>& anomaly_mode() {
  static std::atomic<bool> on{false};
  return on;
}
void note_anomaly_parent(graph_node& n);  // anomaly.hpp

// Connects a new node n: its edges to the gradient nodes of `inputs`, and `outputs` (which get n
// as grad_fn, their output number and metadata). The one place where nodes join the graph.
template <class In, class Out>
void record_node(const std::shared_ptr<graph_node>& n, const In& inputs, const Out& outputs) {
  auto edges = n->next_edges();
  std::size_t i = 0;
  for (const tensor& x : inputs) {
    if (x.defined() && x.requires_grad()) edges[i] = gradient_edge(x.impl());
    ++i;
  }
  auto meta = n->outputs();
  std::uint32_t k = 0;
  for (const tensor& y : outputs) {
    tensor_impl& o = *y.impl();
    o.grad_fn = n;
    o.output_nr = k;
    meta[k] = meta_of(o);
    ++k;
  }
  n->site = current_site();  // Note [Call sites] (<metagrad/call_site.hpp>)
  if (anomaly_mode().load(std::memory_order_relaxed)) note_anomaly_parent(*n);
}

// ---- the node of an op struct -------------------------------------------------------------------

template <class Op, std::size_t N>
struct op_node : graph_node {
  static constexpr bool ins = saves_inputs_v<Op>, outs = saves_output_v<Op>;
  static constexpr std::size_t n_saved = (ins ? N : 0) + (outs ? 1 : 0);
  static constexpr auto reads = gradient_reads<Op, N>();

  Op op;
  std::array<edge, N> next;
  std::array<saved_variable, n_saved> saved_values;
  tensor_meta meta;

  explicit op_node(Op o) : op(std::move(o)) {}
  const char* name() const override { return op_name<Op>(); }
  std::span<edge> next_edges() override { return next; }
  std::span<tensor_meta> outputs() override { return {&meta, 1}; }
  std::span<saved_variable> saved() override { return saved_values; }

  // Saves what the wanted gradients read (Note [What a node saves]).
  template <class... T>
  void save(const tensor& out, const T&... in) {
    std::uint32_t need = 0;
    for (std::size_t i = 0; i < N; ++i)
      if (next[i]) need |= reads[i];
    if constexpr (ins) {
      std::size_t j = 0;
      ((need & (1u << j)
            ? saved_values[j].save(in.impl(), false, checks_input_versions_v<Op>, name())
            : void(),
        ++j),
       ...);
    }
    if constexpr (outs)
      if (need & (1u << N)) saved_values[n_saved - 1].save(out.impl(), true, true, name());
  }

  void apply(std::span<impl_ptr> grads, std::span<impl_ptr> out) override {
    if (!grads[0]) return;
    std::array<tensor, N> x;
    tensor y;
    const auto placeholder = [&] {
      return tensor(fill_kernel({}, 1.0, grads[0]->dtype(), grads[0]->device()));
    };
    if constexpr (ins)
      for (std::size_t i = 0; i < N; ++i) {
        x[i] = tensor(saved_values[i].unpack(this, name()));
        if (!x[i].defined()) x[i] = placeholder();
      }
    if constexpr (outs) {
      y = tensor(saved_values[n_saved - 1].unpack(this, name()));
      if (!y.defined()) y = placeholder();
    }
    const tensor g(std::move(grads[0]));
    if constexpr (is_elementwise<Op>()) {
      if (!grad_mode()) {  // Note [One formula]: one kernel
        std::array<const tensor_impl*, N> in{};
        std::array<bool, N> wanted{};
        for (std::size_t i = 0; i < N; ++i) {
          in[i] = x[i].impl().get();
          wanted[i] = next[i].function != nullptr;
        }
        auto gs = elementwise_backward_kernel(op, in, y.impl().get(), *g.impl(), wanted);
        for (std::size_t i = 0; i < N; ++i) out[i] = std::move(gs[i]);
        return;
      }
    }
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      const auto b = op.backward(saved_arg<ins>(x[I])..., saved_arg<outs>(y), g);
      ((out[I] = next[I] ? gradient_component<I>(b).impl() : nullptr), ...);
    }
    (std::make_index_sequence<N>{});
  }

 private:
  // Component k of a backward result as a tensor (undefined for mg::no_grad).
  template <std::size_t k, class R>
  static tensor gradient_component(const R& r) {
    if constexpr (std::is_same_v<component_t<k, R>, no_grad>) {
      return tensor{};
    } else {
      return tensor(component<k>(r));
    }
  }
  template <bool Saved>
  static auto saved_arg(const tensor& t) {
    if constexpr (Saved) {
      return t;
    } else {
      return not_saved{};
    }
  }
};

// ---- leaves -------------------------------------------------------------------------------------

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

// Striped mutexes keyed by an object's address, one family per Kind: accumulations into one
// leaf from several threads (graphs sharing parameters) are serialised, as torch's are, and so
// is the creation of a leaf's grad accumulator. Two families: an accumulation may record ops
// (create_graph) and so create an accumulator.
template <int Kind>
std::mutex& striped_mutex(const void* p) {
  static std::array<std::mutex, 64> m;
  return m[(reinterpret_cast<std::uintptr_t>(p) >> 4) % m.size()];
}

struct accumulate_grad : graph_node {
  impl_ptr leaf;
  tensor_meta meta;

  explicit accumulate_grad(impl_ptr variable) : leaf(std::move(variable)), meta(meta_of(*leaf)) {
    sequence_nr = std::numeric_limits<std::uint64_t>::max();  // runs first among the ready
  }
  const char* name() const override { return "accumulate_grad"; }
  hook_set* tensor_hook_set() override { return leaf ? leaf->hooks.get() : nullptr; }
  bool is_accumulator() const override { return true; }
  std::span<edge> next_edges() override { return {}; }
  std::span<tensor_meta> outputs() override { return {&meta, 1}; }
  void apply(std::span<impl_ptr> grads, std::span<impl_ptr>) override {
    std::lock_guard lock(striped_mutex<0>(leaf.get()));
    accumulate_into(*leaf, grads[0]);
  }
  void surrender_extra() override {
    release_self_capture(leaf, 1, 0);
    if (leaf) drain().others.push_back(std::move(leaf));
  }
};

inline edge gradient_edge(const impl_ptr& t) {
  if (!t) return {};
  refresh_view(*t);
  if (t->grad_fn) return {t->grad_fn, t->output_nr};
  if (!t->requires_grad) return {};
  std::lock_guard lock(striped_mutex<1>(t.get()));
  auto acc = t->grad_accumulator.lock();
  if (!acc) {
    acc = make_node<accumulate_grad>(t);
    t->grad_accumulator = acc;
  }
  return {std::move(acc), 0};
}

// Forward-mode AD (forward_ad.hpp). The open dual level (one at a time, as torch's): the tensors
// given tangents while it is open, cleared when it closes.
struct dual_levels {
  std::mutex m;
  bool open = false;
  std::vector<std::weak_ptr<tensor_impl>> duals;
  std::size_t pruned = 64;  // prune expired entries when the list doubles past this
};
inline dual_levels& duals() {
  static dual_levels d;
  return d;
}
inline std::atomic<bool>& dual_level_open() {
  static std::atomic<bool> open{false};
  return open;
}
// Off while a tangent formula runs in this thread.
inline bool& tangents_suspended() {
  thread_local bool suspended = false;
  return suspended;
}
inline bool forward_ad_active() {
  return dual_level_open().load(std::memory_order_relaxed) && !tangents_suspended();
}

class suspend_tangents {
 public:
  suspend_tangents() : previous_(tangents_suspended()) { tangents_suspended() = true; }
  suspend_tangents(const suspend_tangents&) = delete;
  suspend_tangents& operator=(const suspend_tangents&) = delete;
  ~suspend_tangents() { tangents_suspended() = previous_; }

 private:
  bool previous_;
};

// Gives out the tangent of op at its inputs' tangents (Note [Tangents from the backward]).
template <class Op, class... T>
void propagate_tangent(const Op& op, const tensor& out, const T&... in);

// Records `out = op(in...)` when grad mode is on, the op is differentiable and an input requires
// grad. out must be a fresh tensor (no grad_fn yet).
template <class Op, class... T>
tensor record(const Op& op, tensor out, const T&... in) {
  if constexpr (!is_differentiable<Op>()) {
    return out;
  } else {
    if (forward_ad_active()) propagate_tangent(op, out, in...);
    if (!grad_mode() || !(in.requires_grad() || ...)) return out;
    constexpr std::size_t N = sizeof...(T);
    auto n = make_node<op_node<Op, N>>(op);
    record_node(n, std::array<std::reference_wrapper<const tensor>, N>{std::cref(in)...},
                std::array<std::reference_wrapper<const tensor>, 1>{std::cref(out)});
    n->save(out, in...);
    return out;
  }
}

}  // namespace mg::detail

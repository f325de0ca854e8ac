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
// both ways, so a backward that reads one does not compile. What a node saves:
// runtime/saves.hpp.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/backend/tensor_kernels.hpp>
#include <metagrad/call_site.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/core/type_name.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/conversion.hpp>
#include <metagrad/ops/shape.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/hooks.hpp>
#include <metagrad/runtime/saved.hpp>
#include <metagrad/runtime/saves.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg::detail {

// ---- joining the graph --------------------------------------------------------------------------

// The node that receives the gradient of t: its grad_fn, its grad accumulator (a leaf that
// requires grad), or none.
template <int>
edge gradient_edge(const impl_ptr& t);

// Anomaly mode: is it on, and which node is running backward (the parent of nodes recorded
// by a backward under create_graph).
inline std::atomic<bool>& anomaly_mode() {
  static std::atomic<bool> on{false};
  return on;
}
// With anomaly mode on: are gradients checked for NaN and infinity (torch's check_nan)?
inline std::atomic<bool>& anomaly_check_nan() {
  static std::atomic<bool> on{true};
  return on;
}
template <int = 0>
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

// A 0-d kernel operand holding v in dtype d on device dev: on the stack for the CPU (no
// allocation; the kernels take tensor_impl pointers and keep nothing), a device tensor elsewhere.
// Used for number operands and for the placeholders of values a backward does not read.
class scalar_operand {
 public:
  scalar_operand(double v, mg::dtype d, mg::device dev) {
    if (dev != mg::device::cpu) {
      heap_ = number_tensor(v, d, dev);
      p_ = heap_.get();
      return;
    }
    st_.dtype = d;
    st_.device = dev;
    st_.nbytes = element_size(d);
    st_.data = st_.small;
    dispatch(d, [&]<class T>(std::type_identity<T>) { *static_cast<T*>(st_.data) = T(v); });
    impl_.store = std::shared_ptr<storage>(std::shared_ptr<void>(), &st_);  // owns nothing
    impl_.wrapped_number = true;
    p_ = &impl_;
  }
  scalar_operand(const scalar_operand&) = delete;
  scalar_operand& operator=(const scalar_operand&) = delete;
  const tensor_impl* get() const { return p_; }

 private:
  storage st_;
  tensor_impl impl_;
  impl_ptr heap_;
  const tensor_impl* p_ = nullptr;
};

// The C++ number operands of a recorded op, by value (Note [Number operands]).
template <std::size_t K>
struct bound_numbers {
  std::array<double, K> values{};
  mg::dtype dtype = mg::dtype::f64;  // the dtype the op computes them in
};

// std::array<T, N>; for N = 0 an empty class (std::array<T, 0> is not one), so that a
// [[no_unique_address]] member of it takes no room. Its elements are never accessed.
template <class T, std::size_t N>
struct inline_array : std::array<T, N> {
  inline_array& operator=(const std::array<T, N>& a) {
    static_cast<std::array<T, N>&>(*this) = a;
    return *this;
  }
};
template <class T>
struct inline_array<T, 0> {
  T* data() { return nullptr; }
  static constexpr std::size_t size() { return 0; }
  [[noreturn]] T& operator[](std::size_t) { std::terminate(); }
  [[noreturn]] const T& operator[](std::size_t) const { std::terminate(); }
  inline_array& operator=(const std::array<T, 0>&) { return *this; }
};

constexpr std::uint32_t bit_count(std::uint32_t m) {
  return static_cast<std::uint32_t>(std::popcount(m));
}

// Note [Number operands]: in `y * 1.5` the number is no tensor of the graph: op_node<Op, N,
// Numbers> (Numbers: a bit per operand that is a C++ number, known at compile time) stores edges
// for the tensor operands only (24 bytes a number would cost every such node of a long chain),
// reports the numbers' positions (number_operands()) so that next_functions() and the node's
// hooks show an empty edge there, as torch's (whose numbers are wrapped tensors that need no
// gradient), keeps the numbers by value and saves only tensor operands (or the output) that a
// wanted gradient reads. Backward gives the op the numbers back as 0-d operands of the dtype the
// op computed in (on the stack for the one-kernel backward on the CPU).
template <class Op, std::size_t N, std::uint32_t Numbers = 0>
struct op_node : graph_node {
  static constexpr bool ins = saves_inputs_v<Op>, outs = saves_output_v<Op>;
  static constexpr std::uint32_t all_inputs = (1u << N) - 1;
  static constexpr std::uint32_t tensors = all_inputs & ~Numbers;
  static constexpr std::size_t n_edges = bit_count(tensors);
  static constexpr std::size_t n_numbers = bit_count(Numbers);
  static constexpr auto reads = gradient_reads<Op, N>();
  // the values the gradients of tensor operands may read, less the numbers
  static constexpr std::uint32_t may_save = [] {
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < N; ++i)
      if (tensors >> i & 1) m |= reads[i];
    return m & ((ins ? tensors : 0u) | (outs ? 1u << N : 0u));
  }();
  static constexpr std::size_t n_saved = bit_count(may_save);
  // position in next / saved_values / numbers of operand (or output) j
  static constexpr std::size_t edge_of(std::size_t j) {
    return bit_count(tensors & ((1u << j) - 1));
  }
  static constexpr std::size_t slot_of(std::size_t j) {
    return bit_count(may_save & ((1u << j) - 1));
  }
  static constexpr std::size_t number_of(std::size_t j) {
    return bit_count(Numbers & ((1u << j) - 1));
  }
  static constexpr bool is_number(std::size_t j) { return (Numbers >> j & 1) != 0; }
  static constexpr auto operand_of_edge = [] {
    std::array<std::size_t, n_edges> p{};
    for (std::size_t i = 0, e = 0; i < N; ++i)
      if (!is_number(i)) p[e++] = i;
    return p;
  }();

  // The numbers' dtype is the output's when the op maps each floating type to itself (elementwise
  // ops compute in one dtype), else it is kept.
  static constexpr bool numbers_in_output_dtype = [] {
    if constexpr (is_elementwise<Op>()) {
      return std::is_same_v<forward_result_t<Op, float>, float> &&
             std::is_same_v<forward_result_t<Op, double>, double>;
    } else {
      return false;
    }
  }();
  struct no_dtype {};
  using number_dtype_t =
      std::conditional_t<n_numbers == 0 || numbers_in_output_dtype, no_dtype, mg::dtype>;

  [[no_unique_address]] Op op;
  [[no_unique_address]] number_dtype_t kept_number_dtype{};
  std::array<edge, n_edges> next;
  [[no_unique_address]] inline_array<saved_variable, n_saved> saved_values;
  [[no_unique_address]] inline_array<double, n_numbers> numbers;
  tensor_meta meta;

  explicit op_node(Op o) : op(std::move(o)) {}
  const char* name() const override { return op_name<Op>(); }
  std::span<edge> next_edges() override { return next; }
  std::uint32_t number_operands() const override { return Numbers; }
  std::span<tensor_meta> outputs() override { return {&meta, 1}; }
  std::span<saved_variable> saved() override { return {saved_values.data(), n_saved}; }
  bool embeds_gradient(const tensor_meta* input, slice_range& r, bool& drop) const override {
    if constexpr (requires(const shape_t& s) { op.embedding(s); }) {
      if (input) {
        r = op.embedding(input->shape());
        drop = Op::drops_dimension;
      }
      return true;
    } else {
      return false;
    }
  }

  void set_number_dtype(mg::dtype d) {
    if constexpr (std::is_same_v<number_dtype_t, mg::dtype>) kept_number_dtype = d;
  }
  mg::dtype number_dtype() const {
    if constexpr (std::is_same_v<number_dtype_t, mg::dtype>) {
      return kept_number_dtype;
    } else {
      return meta.dtype;
    }
  }

  // Saves what the wanted gradients read (Note [What a node saves]); in... are all N operands
  // (those at number positions are not read).
  template <class... T>
  void save(const tensor& out, const T&... in) {
    std::uint32_t need = 0;
    for (std::size_t i = 0; i < N; ++i)
      if ((tensors >> i & 1) && next[edge_of(i)]) need |= reads[i];
    need &= may_save;
    if constexpr (ins && n_saved > 0) {
      std::size_t j = 0;
      ((need & (1u << j)
            ? saved_values[slot_of(j)].save(in.impl(), false, checks_input_versions_v<Op>, name(),
                                            {&next[edge_of(j)], std::uint32_t(edge_of(j))})
        : declares_gradient_reads<Op> && (may_save >> j & 1)
            ? saved_values[slot_of(j)].save(in.impl(), false, false, name())  // its shape only
            : void(),
        ++j),
       ...);
    }
    if constexpr (outs && n_saved > 0)
      if (need & (1u << N)) saved_values[n_saved - 1].save(out.impl(), true, true, name());
    if constexpr (keeps_indices<Op> && n_saved > 0)
      for (std::size_t j = 0; j < n_saved; ++j) saved_values[j].free_with_graph();
  }

  void backward(std::span<impl_ptr> grads, std::span<impl_ptr> out) {
    if (!grads[0]) return;
    const tensor g(std::move(grads[0]));
    const tensor_impl& gi = *g.impl();
    if constexpr (std::is_same_v<Op, add_op>) {
      // d/da (a + b) = d/db = g, handed on as it is, not written out once per operand (a
      // broadcast g, as sum's gradient, is written only where it must be: a leaf's .grad; summed
      // to a broadcast operand's shape it is a product: sum_to_kernel, tensor_kernels.hpp)
      if (!grad_mode()) {
        for (std::size_t i = 0; i < N; ++i)
          if (!is_number(i) && next[edge_of(i)].function) out[edge_of(i)] = g.impl();
        return;
      }
    }
    if constexpr (is_elementwise<Op>()) {
      if (!grad_mode()) {  // Note [One formula]: one kernel
        // the saved values: read in place when all is 0-d on the CPU, else unpacked
        std::array<impl_ptr, n_saved> kept;
        std::array<const void*, N + 1> at{};
        bool zero_d = gi.device() == mg::device::cpu && gi.shape.empty();
        for (std::size_t j = 0; j <= N && zero_d; ++j)
          if (may_save >> j & 1) {
            const auto p = saved_values[slot_of(j)].peek(name());
            const tensor_impl* t = p.store ? nullptr : unpacked(j, kept);
            if (p.store && p.rank == 0 && p.store->device == mg::device::cpu)
              at[j] = static_cast<const char*>(p.store->data) +
                      p.offset * static_cast<std::int64_t>(element_size(p.store->dtype));
            else if (t && t->shape.empty() && t->device() == mg::device::cpu)
              at[j] = element_address(*t);
            else
              zero_d = zero_d && !p.store && !t;  // nothing saved: a placeholder
          }
        std::array<bool, N> wanted{};
        for (std::size_t i = 0; i < N; ++i)
          wanted[i] = !is_number(i) && next[edge_of(i)].function != nullptr;
        if (zero_d) {  // Note [Zero-d kernels] in tensor_kernels.hpp
          std::array<element_value, N + 1> e;
          const auto value = [&](std::size_t j) -> const void* {
            if (is_number(j)) return e[j].set(numbers[number_of(j)], number_dtype());
            if (at[j]) return at[j];
            return e[j].set(1.0, gi.dtype());  // not read
          };
          std::array<const void*, N> in{};
          std::array<void*, N> gp{};
          for (std::size_t i = 0; i < N; ++i) {
            if constexpr (ins) in[i] = value(i);
            if (wanted[i]) {
              out[edge_of(i)] = make_impl({}, gi.dtype(), mg::device::cpu);
              gp[i] = element_address(*out[edge_of(i)]);
            }
          }
          const void* y = outs ? value(N) : nullptr;
          zero_d_backward_kernel(op, gi.dtype(), in, y, element_address(gi), gp);
          return;
        }
        for (std::size_t j = 0; j <= N; ++j)
          if (may_save >> j & 1) unpacked(j, kept);
        std::array<std::optional<scalar_operand>, N + 1> scalars;
        const auto value = [&](std::size_t j) -> const tensor_impl* {
          if (is_number(j))
            return scalars[j].emplace(numbers[number_of(j)], number_dtype(), meta.device).get();
          if ((may_save >> j & 1) && kept[slot_of(j)]) return kept[slot_of(j)].get();
          return scalars[j].emplace(1.0, gi.dtype(), gi.device()).get();  // not read
        };
        std::array<const tensor_impl*, N> in{};
        for (std::size_t i = 0; i < N; ++i) in[i] = ins ? value(i) : nullptr;
        const tensor_impl* y = outs ? value(N) : nullptr;
        auto gs = elementwise_backward_kernel(op, in, y, gi, wanted);
        for (std::size_t i = 0; i < N; ++i)
          if (!is_number(i)) out[edge_of(i)] = std::move(gs[i]);
        return;
      }
    }
    const auto value = [&](std::size_t j) {
      if (is_number(j))
        return tensor(number_tensor(numbers[number_of(j)], number_dtype(), meta.device));
      if (may_save >> j & 1)
        if (tensor t(saved_values[slot_of(j)].unpack(this, name())); t.defined()) return t;
      return tensor(fill_kernel({}, 1.0, gi.dtype(), gi.device()));  // a placeholder: not read
    };
    std::array<tensor, N> x;
    tensor y;
    if constexpr (ins)
      for (std::size_t i = 0; i < N; ++i) x[i] = value(i);
    if constexpr (outs) y = value(N);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      const auto b = op.backward(saved_arg<ins>(x[I])..., saved_arg<outs>(y), g);
      (
          [&] {
            if constexpr (!is_number(I))
              if (next[edge_of(I)]) out[edge_of(I)] = gradient_component<I>(b).impl();
          }(),
          ...);
    }
    (std::make_index_sequence<N>{});
  }

 private:
  // Saved value j unpacked into kept (once).
  const tensor_impl* unpacked(std::size_t j, std::array<impl_ptr, n_saved>& kept) const {
    impl_ptr& k = kept[slot_of(j)];
    if (!k) k = saved_values[slot_of(j)].unpack(this, name());
    return k.get();
  }
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

// Note [Engine ops]: the ops the engine applies itself (the sum of two gradients that reach one
// tensor; a gradient summed to its input's shape, cast to its dtype) are reached through this
// table, which the engine's entry points (tensor::backward, autograd::grad, autograd::backward
// and forward-mode's double vjp: templates) pass in backward_call, and nodes read from the
// running task (task_ops()). The engine is not a template: calling the ops directly would
// instantiate them, their nodes and kernels and every op those reach in their backward, in every
// file that includes the header (0.3 s of g++, docs/performance.md "Cheap headers"); through the
// table they are instantiated where a program runs backward.
struct engine_ops {
  tensor (*add)(const tensor&, const tensor&);
  tensor (*sum_to)(const tensor&, const shape_t&);
  tensor (*to)(const tensor&, dtype);
  void (*add_in_place)(tensor&, const tensor&);
  tensor (*clone)(const tensor&);
};
template <int I>
const engine_ops* engine_ops_of() {
  static constexpr engine_ops ops{
      [](const tensor& a, const tensor& b) -> tensor { return lazy<I>(a) + b; },
      [](const tensor& g, const shape_t& s) -> tensor { return mg::sum_to(lazy<I>(g), s); },
      [](const tensor& g, dtype d) { return lazy<I>(g).to(d); },
      [](tensor& a, const tensor& b) { lazy<I>(a).add_(b); },
      [](const tensor& g) { return lazy<I>(g).clone(); }};
  return &ops;
}
// The running task's table (engine.hpp).
const engine_ops& task_ops();

// Note [Accumulating .grad]: as torch's AccumulateGrad, the first gradient into t.grad is a
// tensor that owns its storage: into a leaf, the gradient itself when nothing else holds it (the
// engine's buffer alone holds it and its storage) and it is contiguous, as torch's AccumulateGrad
// steals it; else a copy (a recorded clone with create_graph, so that it carries its graph). A
// leaf's later gradients are added into that tensor in place when create_graph is off, so that
// a handle to .grad() (what an optimiser holds) sees them. With create_graph, or when the
// existing .grad cannot take the sum in place (another dtype, an expanded or inference tensor),
// the sum is a new tensor. retain_grad and backward's non-leaf .inputs accumulate out of place
// (in_place false) and copy, as torch's retains_grad hook does.
// Nothing but this handle holds g or its elements, which are contiguous and have no history: a
// gradient the engine may keep as it is, or write into.
inline bool sole_owner(const impl_ptr& g) {
  return g.use_count() == 1 && g->store.use_count() == 1 && !g->is_view && !g->base &&
         !g->grad_fn && !g->is_inference && g->offset == 0 && g->is_contiguous();
}

template <int = 0>
void accumulate_into(const engine_ops& ops, tensor_impl& t, const impl_ptr& g,
                     bool in_place = false) {
  if (!g) return;
  if (!t.grad) {
    if (grad_mode()) {
      t.grad = ops.clone(tensor(g)).impl();
    } else if (in_place && sole_owner(g)) {
      t.grad = g;
    } else {
      t.grad = copy_kernel(*g, g->dtype(), g->shape);
    }
    return;
  }
  const tensor_impl& c = *t.grad;
  if (in_place && !grad_mode() && !c.is_inference && c.dtype() == g->dtype() &&
      c.device() == g->device() && c.shape == g->shape && !c.is_expanded()) {
    tensor current(t.grad);
    ops.add_in_place(current, tensor(g));
  } else {
    t.grad = ops.add(tensor(t.grad), tensor(g)).impl();
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
  void backward(std::span<impl_ptr> grads, std::span<impl_ptr>) {
    {
      std::lock_guard lock(striped_mutex<0>(leaf.get()));
      accumulate_into(task_ops(), *leaf, grads[0], /*in_place=*/true);
    }
    if (grads[0] && leaf->hooks && !leaf->hooks->post_accumulate.empty())
      run_post_accumulate_hooks(leaf);
  }
  void surrender_extra() override {
    release_self_capture(leaf, 1, 0);
    if (leaf) drain().others.push_back(std::move(leaf));
  }
};

template <int>
edge gradient_edge(const impl_ptr& t) {
  if (!t) return {};
  refresh_view(*t);
  if (t->grad_fn) return {t->grad_fn, t->output_nr};
  if (!t->requires_grad) return {};
  std::lock_guard lock(striped_mutex<1>(t.get()));
  auto acc = t->grad_accumulator.lock();
  if (!acc) {
    acc = new_graph_node<accumulate_grad>(t);
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
// grad. out must be a fresh tensor (no grad_fn yet). The operands at the positions in Numbers
// are C++ numbers given by value in `nums` (Note [Number operands]); `in` holds a tensor for
// every operand, undefined or a 0-d tensor at those positions.
template <std::uint32_t Numbers, class Op, std::size_t K, class... T>
tensor record(const Op& op, tensor out, const bound_numbers<K>& nums, const T&... in) {
  if constexpr (!is_differentiable<Op>()) {
    return out;
  } else {
    constexpr std::size_t N = sizeof...(T);
    static_assert(K == bit_count(Numbers) && Numbers < (1u << N));
    using node_t = op_node<Op, N, Numbers>;
    const auto operands = std::tie(in...);
    if (forward_ad_active()) {
      if constexpr (Numbers == 0) {
        propagate_tangent(op, out, in...);
      } else {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          const std::array<tensor, N> all{
              (node_t::is_number(I) ? tensor(number_tensor(nums.values[node_t::number_of(I)],
                                                           nums.dtype, out.device()))
                                    : std::get<I>(operands))...};
          propagate_tangent(op, out, all[I]...);
        }
        (std::make_index_sequence<N>{});
      }
    }
    const bool any = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return ((!node_t::is_number(I) && std::get<I>(operands).requires_grad()) || ...);
    }
    (std::make_index_sequence<N>{});
    // an integer or bool result (x.to(mg::i64)) carries no gradient, as in torch
    if (!grad_mode() || !any || !is_floating(out.dtype())) return out;
    auto n = new_graph_node<node_t>(op);
    n->numbers = nums.values;
    n->set_number_dtype(nums.dtype);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      record_node(n,
                  std::array<std::reference_wrapper<const tensor>, node_t::n_edges>{
                      std::cref(std::get<node_t::operand_of_edge[I]>(operands))...},
                  std::array<std::reference_wrapper<const tensor>, 1>{std::cref(out)});
    }
    (std::make_index_sequence<node_t::n_edges>{});
    n->save(out, in...);
    return out;
  }
}

template <class Op, class... T>
tensor record(const Op& op, tensor out, const T&... in) {
  return record<0u>(op, std::move(out), bound_numbers<0>{}, in...);
}

}  // namespace mg::detail

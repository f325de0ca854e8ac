// What the compiled library instantiates (Note [Compiled core] in config.hpp), included with
// MG_INSTANCE defined as `template` by the library's sources (src/), each with one of the
// sections MG_INSTANCES_{CORE,ARITHMETIC,MATH,SHAPED} defined, and as `extern template` by
// runtime/definitions.hpp in compiled mode, with every section. No include guard: it is included
// once per meaning of MG_INSTANCE.
//   - core: mg::tensor's members and the free functions on tensors that are templates in name
//     only (Note [Lazy members] in runtime/lazy.hpp), and the engine functions the public
//     headers declare;
//   - the others: the tensor family of detail::call for each built-in op, with every kind of
//     operand a program can pass: tensors, and numbers as double, std::int64_t or bool
//     (detail::canonical in dispatch.hpp).
#if defined(MG_INSTANCE)  // nothing otherwise (the header-set check compiles it alone)

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <vector>

#if !defined(MG_INSTANCES_CORE) && !defined(MG_INSTANCES_ARITHMETIC) && \
    !defined(MG_INSTANCES_MATH) && !defined(MG_INSTANCES_SHAPED)
#define MG_INSTANCES_ALL 1
#endif

#define MG_APPLY(Op, ...)                                                               \
  MG_INSTANCE ::mg::tensor mg::detail::apply_in(::mg::detail::tensor_family, const Op&, \
                                                __VA_ARGS__);

// An op of one tensor.
#define MG_APPLY_1(Op) MG_APPLY(Op, const ::mg::tensor&)

// An op of two operands, at least one a tensor.
#define MG_APPLY_2(Op)                                   \
  MG_APPLY(Op, const ::mg::tensor&, const ::mg::tensor&) \
  MG_APPLY(Op, const ::mg::tensor&, const double&)       \
  MG_APPLY(Op, const ::mg::tensor&, const std::int64_t&) \
  MG_APPLY(Op, const ::mg::tensor&, const bool&)         \
  MG_APPLY(Op, const double&, const ::mg::tensor&)       \
  MG_APPLY(Op, const std::int64_t&, const ::mg::tensor&) \
  MG_APPLY(Op, const bool&, const ::mg::tensor&)

// An op of a tensor and two operands (where's condition and its two values).
#define MG_APPLY_3_AFTER(Op, A)                             \
  MG_APPLY(Op, const ::mg::tensor&, A, const ::mg::tensor&) \
  MG_APPLY(Op, const ::mg::tensor&, A, const double&)       \
  MG_APPLY(Op, const ::mg::tensor&, A, const std::int64_t&) \
  MG_APPLY(Op, const ::mg::tensor&, A, const bool&)
#define MG_APPLY_3(Op)                      \
  MG_APPLY_3_AFTER(Op, const ::mg::tensor&) \
  MG_APPLY_3_AFTER(Op, const double&)       \
  MG_APPLY_3_AFTER(Op, const std::int64_t&) \
  MG_APPLY_3_AFTER(Op, const bool&)

#if defined(MG_INSTANCES_ALL) || defined(MG_INSTANCES_CORE)
namespace mg {

using instance_dims = std::vector<std::int64_t>;

// ---- members -----------------------------------------------------------------------------------
MG_INSTANCE void hook_handle::remove<0>();
MG_INSTANCE tensor& tensor::requires_grad_<0>(bool);
MG_INSTANCE void tensor::set_grad<0>(const tensor&);
MG_INSTANCE void tensor::retain_grad<0>() const;
MG_INSTANCE tensor& tensor::detach_<0>();
MG_INSTANCE tensor tensor::to<0>(mg::dtype, call_site) const;
MG_INSTANCE tensor tensor::to<0>(mg::device, call_site) const;
MG_INSTANCE tensor tensor::contiguous<0>(call_site) const;
MG_INSTANCE tensor tensor::clone<0>(call_site) const;
MG_INSTANCE tensor tensor::sum<0>(call_site) const;
MG_INSTANCE tensor tensor::sum<0>(std::int64_t, call_site) const;
MG_INSTANCE tensor tensor::mean<0>(call_site) const;
MG_INSTANCE tensor tensor::t<0>(call_site) const;
MG_INSTANCE tensor tensor::reshape<0>(const shape_t&, call_site) const;
MG_INSTANCE tensor tensor::view<0>(const shape_t&, call_site) const;
MG_INSTANCE tensor tensor::flatten<0>(std::int64_t, std::int64_t, call_site) const;
MG_INSTANCE tensor tensor::squeeze<0>(call_site) const;
MG_INSTANCE tensor tensor::squeeze<0>(std::int64_t, call_site) const;
MG_INSTANCE tensor tensor::unsqueeze<0>(std::int64_t, call_site) const;
MG_INSTANCE tensor tensor::permute<0>(const instance_dims&, call_site) const;
MG_INSTANCE tensor tensor::transpose<0>(std::int64_t, std::int64_t, call_site) const;
MG_INSTANCE tensor tensor::expand<0>(const shape_t&, call_site) const;
MG_INSTANCE tensor tensor::select<0>(std::int64_t, std::int64_t, call_site) const;
MG_INSTANCE tensor tensor::slice<0>(std::int64_t, std::optional<std::int64_t>,
                                    std::optional<std::int64_t>, std::int64_t, call_site) const;
MG_INSTANCE tensor tensor::index_select<0>(std::int64_t, const tensor&, call_site) const;
MG_INSTANCE tensor_list tensor::unbind<0>(std::int64_t, call_site) const;
MG_INSTANCE tensor_list tensor::chunk<0>(std::int64_t, std::int64_t, call_site) const;
MG_INSTANCE tensor_list tensor::split<0>(std::int64_t, std::int64_t, call_site) const;
MG_INSTANCE tensor_list tensor::split<0>(const instance_dims&, std::int64_t, call_site) const;
MG_INSTANCE tensor tensor::operator[]<0>(detail::tracked_index) const;
MG_INSTANCE tensor& tensor::add_<0>(const tensor&, call_site);
MG_INSTANCE tensor& tensor::add_<0>(double, call_site);
MG_INSTANCE tensor& tensor::sub_<0>(const tensor&, call_site);
MG_INSTANCE tensor& tensor::sub_<0>(double, call_site);
MG_INSTANCE tensor& tensor::mul_<0>(const tensor&, call_site);
MG_INSTANCE tensor& tensor::mul_<0>(double, call_site);
MG_INSTANCE tensor& tensor::div_<0>(const tensor&, call_site);
MG_INSTANCE tensor& tensor::div_<0>(double, call_site);
MG_INSTANCE tensor& tensor::pow_<0>(double, call_site);
MG_INSTANCE tensor& tensor::copy_<0>(const tensor&, call_site);
MG_INSTANCE tensor& tensor::zero_<0>(call_site);
MG_INSTANCE tensor& tensor::fill_<0>(double, call_site);
MG_INSTANCE tensor& tensor::clamp_<0>(double, double, call_site);
MG_INSTANCE tensor& tensor::neg_<0>(call_site);
MG_INSTANCE tensor& tensor::exp_<0>(call_site);
MG_INSTANCE tensor& tensor::log_<0>(call_site);
MG_INSTANCE tensor& tensor::sqrt_<0>(call_site);
MG_INSTANCE tensor& tensor::abs_<0>(call_site);
MG_INSTANCE tensor& tensor::sin_<0>(call_site);
MG_INSTANCE tensor& tensor::cos_<0>(call_site);
MG_INSTANCE tensor& tensor::tanh_<0>(call_site);
MG_INSTANCE tensor& tensor::sigmoid_<0>(call_site);
MG_INSTANCE tensor& tensor::relu_<0>(call_site);
MG_INSTANCE void tensor::backward<0>(const tensor&) const;
MG_INSTANCE void tensor::backward<0>(const tensor&, const backward_options&) const;
MG_INSTANCE void tensor::backward<0>(const backward_options&) const;

// ---- free functions
// ------------------------------------------------------------------------------
MG_INSTANCE tensor clone<0>(const tensor&, call_site);
MG_INSTANCE tensor cat<0>(const tensor_list&, std::int64_t, call_site);
MG_INSTANCE tensor stack<0>(const tensor_list&, std::int64_t, call_site);
MG_INSTANCE tensor_list unbind<0>(const tensor&, std::int64_t, call_site);
MG_INSTANCE tensor_list chunk<0>(const tensor&, std::int64_t, std::int64_t, call_site);
MG_INSTANCE tensor_list split<0>(const tensor&, std::int64_t, std::int64_t, call_site);
MG_INSTANCE tensor_list split<0>(const tensor&, const instance_dims&, std::int64_t, call_site);
MG_INSTANCE tensor index_select<0>(const tensor&, std::int64_t, const tensor&, call_site);
MG_INSTANCE tensor cross_entropy<0>(const tensor&, const tensor&, call_site);
MG_INSTANCE std::vector<std::int64_t> detail::tensor_top_positions<0>(const tensor&, const shape_t&,
                                                                      std::size_t, std::int64_t,
                                                                      detail::pick);
MG_INSTANCE tensor detail::index_tensor<0>(const std::vector<std::int64_t>&, const shape_t&,
                                           const tensor&);
MG_INSTANCE std::ostream& operator<< <0>(std::ostream&, const tensor&);

namespace detail {
MG_INSTANCE void refresh_view<0>(tensor_impl&);
// the engine, as the templates on the caller's types (custom Functions, mg::fuse, the
// functional API) reach it
MG_INSTANCE std::vector<impl_ptr> run_backward<0>(const tensor_list&, const tensor_list&,
                                                  const tensor_list&, const backward_call&);
MG_INSTANCE const engine_ops* engine_ops_of<0>();
MG_INSTANCE void bump_version<0>(tensor_impl&);
MG_INSTANCE void set_tangent<0>(const impl_ptr&, tensor, const char*, std::size_t);
MG_INSTANCE edge gradient_edge<0>(const impl_ptr&);
MG_INSTANCE void accumulate_into<0>(const engine_ops&, tensor_impl&, const impl_ptr&, bool);
MG_INSTANCE void note_anomaly_parent<0>(graph_node&);
MG_INSTANCE void check_anomaly<0>(const graph_node&, std::span<const impl_ptr>);
MG_INSTANCE void saved_variable::save<0>(const impl_ptr&, bool, bool, const char*, operand_edge);
MG_INSTANCE impl_ptr saved_variable::unpack<0>(const graph_node*, const char*) const;
MG_INSTANCE saved_variable::elements saved_variable::peek<0>(const char*) const;
}  // namespace detail

}  // namespace mg
#endif

#if defined(MG_INSTANCES_ALL) || defined(MG_INSTANCES_ARITHMETIC)

MG_APPLY_2(mg::add_op)
MG_APPLY_2(mg::sub_op)
MG_APPLY_2(mg::mul_op)
MG_APPLY_2(mg::div_op)
MG_APPLY_1(mg::neg_op)
MG_APPLY_1(mg::pow_op)
MG_APPLY_2(mg::pow_elementwise_op)
MG_APPLY_2(mg::maximum_op)
MG_APPLY_2(mg::minimum_op)
MG_APPLY_2(mg::atan2_op)
MG_APPLY_2(mg::gt_op)
MG_APPLY_2(mg::lt_op)
MG_APPLY_2(mg::ge_op)
MG_APPLY_2(mg::le_op)
MG_APPLY_2(mg::eq_op)
MG_APPLY_2(mg::ne_op)
MG_APPLY_3(mg::where_op)
#endif

#if defined(MG_INSTANCES_ALL) || defined(MG_INSTANCES_MATH)

MG_APPLY_1(mg::exp_op)
MG_APPLY_1(mg::log_op)
MG_APPLY_1(mg::log1p_op)
MG_APPLY_1(mg::expm1_op)
MG_APPLY_1(mg::sqrt_op)
MG_APPLY_1(mg::rsqrt_op)
MG_APPLY_1(mg::abs_op)
MG_APPLY_1(mg::sin_op)
MG_APPLY_1(mg::cos_op)
MG_APPLY_1(mg::tan_op)
MG_APPLY_1(mg::tanh_op)
MG_APPLY_1(mg::sigmoid_op)
MG_APPLY_1(mg::relu_op)
MG_APPLY_1(mg::erf_op)
MG_APPLY_1(mg::square_op)
MG_APPLY_1(mg::reciprocal_op)
MG_APPLY_1(mg::softplus_op)
MG_APPLY_1(mg::clamp_op)
#endif

#if defined(MG_INSTANCES_ALL) || defined(MG_INSTANCES_SHAPED)

MG_APPLY_1(mg::sum_op)
MG_APPLY_1(mg::prod_op)
MG_APPLY_1(mg::max_op)
MG_APPLY_1(mg::min_op)
MG_APPLY_1(mg::norm_op)
MG_APPLY_1(mg::mean_op)
MG_APPLY_1(mg::var_op)
MG_APPLY_1(mg::amax_op)
MG_APPLY_1(mg::amin_op)
MG_APPLY_1(mg::logsumexp_op)
MG_APPLY_1(mg::softmax_op)
MG_APPLY_1(mg::log_softmax_op)
MG_APPLY_1(mg::cross_entropy_op)
MG_APPLY_1(mg::topk_op)
MG_APPLY_1(mg::max_dim_op)
MG_APPLY_1(mg::min_dim_op)
MG_APPLY_1(mg::expand_op)
MG_APPLY_1(mg::sum_to_op)
MG_APPLY_1(mg::unsqueeze_op)
MG_APPLY_1(mg::transpose_op)
MG_APPLY_1(mg::reshape_op)
MG_APPLY_1(mg::permute_op)
MG_APPLY_1(mg::embed_op)
MG_APPLY_1(mg::slice_op)
MG_APPLY_1(mg::select_op)
MG_APPLY_1(mg::index_add_op)
MG_APPLY_1(mg::index_select_op)
MG_APPLY_1(mg::to_dtype_op)
MG_APPLY_1(mg::to_device_op)
MG_APPLY_1(mg::contiguous_op)
MG_APPLY_1(mg::clone_op)
MG_APPLY(mg::matmul_op, const ::mg::tensor&, const ::mg::tensor&)
MG_APPLY(mg::dot_op, const ::mg::tensor&, const ::mg::tensor&)
MG_APPLY(mg::outer_op, const ::mg::tensor&, const ::mg::tensor&)
#endif

#undef MG_APPLY
#undef MG_APPLY_1
#undef MG_APPLY_2
#undef MG_APPLY_3_AFTER
#undef MG_APPLY_3
#undef MG_INSTANCES_ALL

#endif  // MG_INSTANCE

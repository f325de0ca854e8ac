// The interface between the runtime engine and a device backend.
//
// Note [Device backends]: the runtime engine's kernels run on the CPU; a tensor on another device
// is computed by a backend that registers itself for that device. <metagrad/cuda.hpp> registers
// the Thrust backend for device::cuda when it is included (an inline variable's initialiser), so:
//   - the core headers never include Thrust, and the host code that builds graphs compiles with
//     the host compiler;
//   - one translation unit that includes <metagrad/cuda.hpp> (compiled by nvcc for a GPU, or by
//     the host compiler with the CPP/OMP device system) is enough for a whole program.
// The backend receives plain descriptions (nd_space, nd_operand: trivially copyable, so they
// travel into device functors by value) and an op code; it evaluates the op structs of
// <metagrad/ops/elementwise.hpp> through apply_elementwise, so the formula is the same one every
// other engine runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include <metagrad/detail/config.hpp>
#include <metagrad/detail/storage.hpp>
#include <metagrad/error.hpp>
#include <metagrad/ops/elementwise.hpp>

namespace mg::detail {

/// The most dimensions a tensor on a backend device may have.
inline constexpr int max_device_rank = 8;

/// The index space of one kernel: row-major extents.
struct nd_space {
  int rank = 0;
  std::int64_t extents[max_device_rank] = {};
  std::int64_t numel = 1;
};

/// One operand of a kernel: the address of element (0,...,0) and its strides (in elements) in
/// the kernel's index space (0 along broadcast dimensions).
struct nd_operand {
  void* data = nullptr;
  std::int64_t strides[max_device_rank] = {};
};

/// The element offset of linear index i of `s` in operand `o`.
MG_HD inline std::int64_t nd_offset(const nd_space& s, const nd_operand& o, std::int64_t i) {
  if (s.rank == 1) return i * o.strides[0];
  std::int64_t off = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    const std::int64_t e = s.extents[d];
    off += (i % e) * o.strides[d];
    i /= e;
  }
  return off;
}

/// The built-in elementwise ops a backend evaluates.
enum class op_code : std::uint8_t { add, sub, mul, div, neg, exp, log, sin, cos, tanh, pow };

template <class Op>
inline constexpr bool has_op_code = false;
template <class Op>
inline constexpr op_code op_code_of = op_code::add;
#define MG_DETAIL_OP_CODE(Op, code)             \
  template <>                                   \
  inline constexpr bool has_op_code<Op> = true; \
  template <>                                   \
  inline constexpr op_code op_code_of<Op> = op_code::code;
MG_DETAIL_OP_CODE(add_op, add)
MG_DETAIL_OP_CODE(sub_op, sub)
MG_DETAIL_OP_CODE(mul_op, mul)
MG_DETAIL_OP_CODE(div_op, div)
MG_DETAIL_OP_CODE(neg_op, neg)
MG_DETAIL_OP_CODE(exp_op, exp)
MG_DETAIL_OP_CODE(log_op, log)
MG_DETAIL_OP_CODE(sin_op, sin)
MG_DETAIL_OP_CODE(cos_op, cos)
MG_DETAIL_OP_CODE(tanh_op, tanh)
MG_DETAIL_OP_CODE(pow_op, pow)
#undef MG_DETAIL_OP_CODE

template <class Op>
constexpr const char* op_name() {
  if constexpr (requires { Op::name; }) {
    return Op::name;
  } else {
    return "custom_op";
  }
}

// The op's runtime attribute (pow's exponent); 0 for the others.
template <class Op>
double op_param(const Op& op) {
  if constexpr (requires { op.p; })
    return op.p;
  else
    return 0.0;
}

/// The forward of op `c` on elements: a unary op reads a, a binary op reads a and b. The
/// switch is on a value that is the same for every element, so it costs one predictable branch.
template <class T>
MG_HD inline T apply_elementwise(op_code c, double param, T a, T b) {
  switch (c) {
    case op_code::add:
      return add_op::forward(a, b);
    case op_code::sub:
      return sub_op::forward(a, b);
    case op_code::mul:
      return mul_op::forward(a, b);
    case op_code::div:
      return div_op::forward(a, b);
    case op_code::neg:
      return neg_op::forward(a);
    case op_code::exp:
      return exp_op::forward(a);
    case op_code::log:
      return log_op::forward(a);
    case op_code::sin:
      return sin_op::forward(a);
    case op_code::cos:
      return cos_op::forward(a);
    case op_code::tanh:
      return tanh_op::forward(a);
    case op_code::pow:
      return static_cast<T>(pow_op{param}.forward(a));
  }
  return a;
}

/// What a device backend provides. Every kernel writes a fresh contiguous output; operands are
/// of one dtype except in `copy`, which converts.
struct device_backend {
  const char* name;
  void* (*allocate)(std::size_t nbytes);
  void (*release)(void* p);
  void (*to_host)(void* dst, const void* src, std::size_t nbytes);
  void (*from_host)(void* dst, const void* src, std::size_t nbytes);
  void (*fill)(void* dst, dtype d, std::int64_t n, double value);
  // out[i] = convert(in[i]) over `space`
  void (*copy)(const nd_space& space, dtype out_t, const nd_operand& out, dtype in_t,
               const nd_operand& in);
  // out[i] = op(a[i]) or op(a[i], b[i]) over `space`
  void (*elementwise)(op_code c, double param, dtype d, const nd_space& space,
                      const nd_operand& out, const nd_operand& a, const nd_operand& b);
  // out (contiguous over the dimensions of `space` not in reduced_mask) = sum of x over the
  // dimensions in reduced_mask (bit d set: dimension d is summed)
  void (*sum)(dtype d, const nd_space& space, const nd_operand& x, std::uint32_t reduced_mask,
              void* out);
};

inline const device_backend*& backend_slot() {
  static const device_backend* slot = nullptr;
  return slot;
}

/// Called by a backend header; returns true so that it can initialise an inline variable.
inline bool register_cuda_backend(const device_backend* b) {
  backend_slot() = b;
  return true;
}

/// The backend of device::cuda, or an mg::error naming op and the fix.
inline const device_backend& cuda_backend(const char* op) {
  if (const device_backend* b = backend_slot()) return *b;
  fail(op,
       ": device cuda needs the Thrust backend, and no translation unit of this program includes "
       "<metagrad/cuda.hpp>; include it in one (linked with metagrad::cuda), or use .device = "
       "mg::device::cpu");
}

inline void check_device_rank(const shape_t& s, const char* op) {
  if (s.size() > static_cast<std::size_t>(max_device_rank))
    fail(op, ": a tensor of shape ", shape_string(s), " has ", s.size(),
         " dimensions; tensors on device cuda have at most ", max_device_rank,
         " (reshape it, or compute on device cpu)");
}

// Allocates uninitialised storage for n elements. See Note [Storage interface].
inline std::shared_ptr<storage> allocate(std::int64_t n, dtype d, device dev) {
  check_dtype_implemented(d, "allocate");
  auto s = std::make_shared<storage>();
  s->nbytes = static_cast<std::size_t>(n) * element_size(d);
  s->dtype = d;
  s->device = dev;
  if (dev == device::cuda) {
    const device_backend& b = cuda_backend("allocate");
    s->data = s->nbytes ? b.allocate(s->nbytes) : nullptr;
    if (s->data) s->release = b.release;
  } else if (s->nbytes <= sizeof(s->small)) {
    s->data = s->small;
  } else {
    s->data = ::operator new (s->nbytes, std::align_val_t{cpu_alignment});
    s->release = [](void* p) { ::operator delete (p, std::align_val_t{cpu_alignment}); };
  }
  return s;
}

}  // namespace mg::detail

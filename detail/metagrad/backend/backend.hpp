// The interface between the runtime engine and the backends that compute on tensors.
//
// Note [Device backends]: every device has a backend: the CPU's is built in (backend/cpu.hpp),
// device::cuda's is registered by <metagrad/cuda.hpp> when a translation unit includes it (an
// inline variable's initialiser). So the core never includes Thrust, the host code that builds
// graphs compiles with the host compiler, and one translation unit that includes
// <metagrad/cuda.hpp> serves a whole program. A backend receives plain descriptions (nd_space,
// nd_operand: trivially copyable, so they travel into device functors by value). Two kinds of
// kernels:
//   - one table per backend (`backend`): memory, copies with conversion, reductions;
//   - one table per op and backend (`elementwise_kernels`): the op's forward over an index space,
//     and its backward as ONE kernel that evaluates the struct's backward per element. The CPU's
//     tables are instantiated from the op struct on first use; a device's are registered by its
//     backend for the ops it was compiled with (every built-in, and the user's ops named at the
//     registration point). There is no op code: the table is found by the op's type, and the op
//     object (with its attributes) is passed to the kernel by address.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <metagrad/backend/block_cache.hpp>
#include <metagrad/core/broadcast.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/core/storage.hpp>
#include <metagrad/core/type_name.hpp>
#include <metagrad/error.hpp>

namespace mg::detail {

/// The most dimensions a kernel's index space may have.
inline constexpr int max_rank = 8;

/// The index space of one kernel: row-major extents.
struct nd_space {
  int rank = 0;
  std::int64_t extents[max_rank] = {};
  std::int64_t numel = 1;
};

/// One operand of a kernel: the address of element (0,...,0) and its strides (in elements) in
/// the kernel's index space (0 along broadcast dimensions). A null data pointer: not wanted.
struct nd_operand {
  void* data = nullptr;
  std::int64_t strides[max_rank] = {};
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

/// One operand of a batched matrix product: element (i, j) of matrix b is at
/// data + b * batch_stride + (transposed ? i + j * ld : i * ld + j), in elements. ld is at least
/// the row length of the layout (columns, or rows when transposed), and at least 1.
struct gemm_matrix {
  const void* data = nullptr;
  bool transposed = false;
  std::int64_t ld = 1;
  std::int64_t batch_stride = 0;
};

/// What every backend provides besides the per-op kernels. Every kernel writes its output;
/// operands are of one dtype except in `copy`, which converts.
struct backend {
  const char* name;
  // Memory of the selected device (select_device); release names the device it came from.
  void* (*allocate)(std::size_t nbytes);
  void (*release)(void* p, std::size_t nbytes, int device);  // nbytes: as allocated
  void (*to_host)(void* dst, const void* src, std::size_t nbytes);
  void (*from_host)(void* dst, const void* src, std::size_t nbytes);
  void (*fill)(void* dst, dtype d, std::int64_t n, double value);
  // out[i] = convert(in[i]) over `space`
  void (*copy)(const nd_space& space, dtype out_t, const nd_operand& out, dtype in_t,
               const nd_operand& in);
  // out (contiguous over the dimensions of `space` not in reduced_mask) = the sum of x over the
  // dimensions in reduced_mask (bit d set: dimension d is summed). Accurate in f32: sums and
  // products are accumulated in double. max and min propagate NaN, as torch's.
  using reduction = void (*)(dtype d, const nd_space& space, const nd_operand& x,
                             std::uint32_t reduced_mask, void* out);
  reduction sum;
  reduction prod;
  reduction max;
  reduction min;
  // c[b] (m x n, contiguous, batch stride m*n) = a[b] (m x k) times b[b] (k x n), for b in
  // [0, batch), f32 or f64, accumulated in the element type (as BLAS). Null in the CPU's table: the
  // runtime calls BLAS itself there (backend/blas.hpp).
  using gemm_fn = void (*)(dtype d, std::int64_t batch, std::int64_t m, std::int64_t k,
                           std::int64_t n, const gemm_matrix& a, const gemm_matrix& b, void* c);
  gemm_fn gemm = nullptr;
  // The caching allocator's statistics and cache of one device (Note [Caching allocator] in
  // block_cache.hpp).
  cache_stats (*memory_stats)(int device) = nullptr;
  void (*empty_cache)(int device) = nullptr;
  void (*reset_peak)(int device) = nullptr;
  // Note [Devices]: a backend serves every device of its type. The runtime selects a tensor's
  // device (select_device) before it calls the table for it, and every call acts on the selected
  // device of the calling thread. select_device fails with an mg::error naming `what` when the
  // device does not exist. Null in the CPU's table: one device, index 0.
  int (*device_count)() = nullptr;
  int (*current_device)() = nullptr;
  void (*select_device)(int index, const char* what) = nullptr;
};

/// An elementwise op's kernels on one backend. `value` is the dtype the op computes in; inputs
/// and output are of that dtype (the output is bool for comparisons).
struct elementwise_kernels {
  // out = op(in[0], ..., in[N-1])
  void (*forward)(const void* op, dtype value, const nd_space& space, const nd_operand& out,
                  const nd_operand* in);
  // grads[k] = component k of op.backward(in..., y, g), for every k whose data is not null;
  // in[k] (all k) and y are read only when the op saves them.
  void (*backward)(const void* op, dtype value, const nd_space& space, const nd_operand* in,
                   const nd_operand& y, const nd_operand& g, const nd_operand* grads);
};

template <class Shape>
void check_rank(const Shape& shape, const char* op) {
  if (shape.size() > static_cast<std::size_t>(max_rank))
    fail(op, ": a tensor of shape ", shape_string(shape), " has ", shape.size(),
         " dimensions; metagrad's kernels take at most ", max_rank, " (reshape it)");
}

}  // namespace mg::detail

// Matrix products of the runtime engine through BLAS (the library target links OpenBLAS, never
// Debian's reference BLAS, which is 16x slower on an MLP step). Fortran ABI: column-major, every
// argument by pointer.
//
// Note [Row-major gemm]: our tensors are row-major. A row-major (m,k) matrix is, read
// column-major, its transpose, so C = A B is computed as C^T = B^T A^T: gemm with the operands
// swapped and m, n exchanged. A transposed view (strides (1, rows)) is already column-major and
// is passed with op 'T' instead of being copied.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <metagrad/backend/tensor_kernels.hpp>
#include <metagrad/core/gemm.hpp>
#include <metagrad/core/tensor_impl.hpp>

namespace mg::detail {

// How a row-major (r,c) operand is handed to column-major gemm: op 'N' with ld for a row-major
// layout, op 'T' for a transposed view; anything else is copied first. See Note [Row-major gemm].
struct gemm_operand {
  impl_ptr keep;  // the contiguous copy, when one was needed
  const tensor_impl* t;
  char op;
  int ld;
};

inline gemm_operand as_gemm_operand(const tensor_impl& x) {
  const std::int64_t r = x.shape[0], c = x.shape[1];
  if (x.strides[1] == 1 && (x.strides[0] == c || r <= 1))
    return {nullptr, &x, 'N', static_cast<int>(std::max<std::int64_t>(c, 1))};
  if (x.strides[0] == 1 && (x.strides[1] == r || c <= 1))
    return {nullptr, &x, 'T', static_cast<int>(std::max<std::int64_t>(r, 1))};
  auto copy = copy_kernel(x, x.dtype(), x.shape);
  const tensor_impl* p = copy.get();
  return {std::move(copy), p, 'N', static_cast<int>(std::max<std::int64_t>(c, 1))};
}

// (m,k) x (k,n) -> (m,n); a and b are 2-D CPU tensors with the same floating dtype.
template <int = 0>
impl_ptr matmul_kernel(const tensor_impl& a, const tensor_impl& b) {
  const std::int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  auto out = fill_kernel({m, n}, 0.0, a.dtype(), device::cpu);
  if (m == 0 || n == 0 || k == 0) return out;
  const gemm_operand A = as_gemm_operand(a), B = as_gemm_operand(b);
  dispatch_floating(a.dtype(), [&]<class T>(std::type_identity<T>) {
    // C^T (n,m) = B^T (n,k) A^T (k,m), all column-major
    gemm(&B.op, &A.op, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
         B.t->template data<T>(), B.ld, A.t->template data<T>(), A.ld, out->data<T>(),
         static_cast<int>(n));
  });
  return out;
}

// The same products on a device, by its backend's gemm: 2-D operands as they are laid out (a
// transposed view included), or `batch` contiguous (m,k) and (k,n) matrices into `shape`.
template <int = 0>
impl_ptr device_matmul_kernel(const tensor_impl& a, const tensor_impl& b, std::int64_t batch = 1,
                              const shape_t* result_shape = nullptr) {
  const std::size_t r = a.shape.size();
  const std::int64_t m = a.shape[r - 2], k = a.shape[r - 1], n = b.shape[b.shape.size() - 1];
  const shape_t shape = result_shape ? *result_shape : shape_t{m, n};
  const backend& be = backend_of(a.device(), "matmul");
  if (m == 0 || n == 0 || k == 0 || batch == 0)
    return fill_kernel(shape, 0.0, a.dtype(), a.device());
  auto out = make_impl(shape, a.dtype(), a.device());
  const auto matrix = [&](const gemm_operand& g, std::int64_t rows, std::int64_t cols) {
    const auto* base = static_cast<const unsigned char*>(g.t->store->data) +
                       g.t->offset * static_cast<std::int64_t>(element_size(g.t->dtype()));
    return gemm_matrix{base, g.op == 'T', g.ld, batch > 1 ? rows * cols : 0};
  };
  if (batch == 1) {
    const gemm_operand A = as_gemm_operand(a), B = as_gemm_operand(b);
    be.gemm(a.dtype(), 1, m, k, n, matrix(A, m, k), matrix(B, k, n), out->store->data);
  } else {  // contiguous batches: each matrix row-major
    const gemm_operand A{nullptr, &a, 'N', static_cast<int>(k)},
        B{nullptr, &b, 'N', static_cast<int>(n)};
    be.gemm(a.dtype(), batch, m, k, n, matrix(A, m, k), matrix(B, k, n), out->store->data);
  }
  return out;
}

}  // namespace mg::detail

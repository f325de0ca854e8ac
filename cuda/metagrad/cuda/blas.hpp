// Matrix products on device cuda: the Thrust backend's gemm (backend.hpp's `gemm_fn`).
//
// On a GPU: cuBLAS (shipped with the CUDA toolkit; metagrad::cuda links it), one
// cublasGemmStridedBatchedEx per product on the current stream, with a handle per thread. Our
// matrices are row-major, cuBLAS's column-major: a row-major C = A B is, read column-major,
// C^T = B^T A^T, so the operands are swapped and a transposed view is passed with op T instead of
// being copied (Note [Row-major gemm] in <metagrad/backend/blas.hpp>).
//
// TF32: off by default, so f32 products are exact to f32 rounding as on the CPU. With
// mg::cuda::set_allow_tf32(true), cuBLAS may round f32 operands to TF32's 10-bit mantissa on the
// tensor cores of Ampere and later GPUs (faster; relative errors near 1e-3).
//
// On the CPP and OMP device systems: one Thrust loop over the output elements, each a dot product
// accumulated in the element type.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include <metagrad/backend/backend.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/core/storage.hpp>
#include <metagrad/cuda/memory.hpp>
#include <metagrad/cuda/stream.hpp>
#include <metagrad/error.hpp>

#if MG_CUDA_DEVICE
#include <cublas_v2.h>
#endif

namespace mg::cuda {

namespace detail {
inline std::atomic<bool>& tf32_allowed() {
  static std::atomic<bool> allowed{false};
  return allowed;
}
}  // namespace detail

/// Whether cuBLAS may use TF32 tensor cores for f32 matrix products (default: false).
inline bool allow_tf32() { return detail::tf32_allowed().load(std::memory_order_relaxed); }
/// Lets cuBLAS use TF32 for f32 matrix products (faster, about 1e-3 relative error), or not.
inline void set_allow_tf32(bool allowed) {
  detail::tf32_allowed().store(allowed, std::memory_order_relaxed);
}

namespace detail {

using mg::detail::gemm_matrix;

#if MG_CUDA_DEVICE

inline void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    mg::detail::fail("matmul: ", what, " failed: cuBLAS status ", static_cast<int>(s), " (",
                     cublasGetStatusString(s), ")");
}

// One handle per thread and device (cuBLAS handles are not to be shared between threads that
// use them at once, and a handle belongs to the device current when it was made). Never
// destroyed: a thread may end after the CUDA context is gone.
inline cublasHandle_t blas_handle() {
  thread_local std::vector<cublasHandle_t> handles;  // by device
  const auto d = static_cast<std::size_t>(current_device());
  if (handles.size() <= d) handles.resize(d + 1, nullptr);
  if (!handles[d]) check_blas(cublasCreate(&handles[d]), "cublasCreate");
  return handles[d];
}

inline int as_blas_int(std::int64_t v) {
  if (v > std::numeric_limits<int>::max())
    mg::detail::fail("matmul: a dimension or leading dimension of ", v,
                     " is beyond cuBLAS's 32-bit sizes; split the product");
  return static_cast<int>(v);
}

inline void gemm(mg::dtype d, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                 const gemm_matrix& a, const gemm_matrix& b, void* c) {
  if (!mg::detail::is_floating(d))
    mg::detail::fail("matmul: expected f32 or f64 operands, got ", mg::detail::dtype_name(d));
  const cublasHandle_t h = blas_handle();
  check_blas(cublasSetStream(h, current_stream().native_handle()), "cublasSetStream");
  const bool f64 = d == mg::dtype::f64;
  const cudaDataType_t type = f64 ? CUDA_R_64F : CUDA_R_32F;
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F : (allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  // C^T (n x m, ld n) = op(B) op(A) in column-major terms: see the top of this header.
  check_blas(
      cublasGemmStridedBatchedEx(
          h, b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
          as_blas_int(n), as_blas_int(m), as_blas_int(k), alpha, b.data, type, as_blas_int(b.ld),
          b.batch_stride, a.data, type, as_blas_int(a.ld), a.batch_stride, beta, c, type,
          as_blas_int(n), m * n, as_blas_int(batch), compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

#else

template <class T>
struct gemm_element_fn {
  std::int64_t m, k, n;
  gemm_matrix a, b;
  T* c;
  MG_HD static std::int64_t at(const gemm_matrix& x, std::int64_t i, std::int64_t j) {
    return x.transposed ? i + j * x.ld : i * x.ld + j;
  }
  MG_HD void operator()(std::int64_t idx) const {
    const std::int64_t j = idx % n, i = idx / n % m, batch = idx / (m * n);
    const T* pa = static_cast<const T*>(a.data) + batch * a.batch_stride;
    const T* pb = static_cast<const T*>(b.data) + batch * b.batch_stride;
    T sum(0);
    for (std::int64_t p = 0; p < k; ++p) sum += pa[at(a, i, p)] * pb[at(b, p, j)];
    c[idx] = sum;
  }
};

inline void gemm(mg::dtype d, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                 const gemm_matrix& a, const gemm_matrix& b, void* c) {
  mg::detail::dispatch_floating(d, [&]<class T>(std::type_identity<T>) {
    thrust::for_each(policy(), thrust::counting_iterator<std::int64_t>(0),
                     thrust::counting_iterator<std::int64_t>(batch * m * n),
                     gemm_element_fn<T>{m, k, n, a, b, static_cast<T*>(c)});
  });
}

#endif

}  // namespace detail

}  // namespace mg::cuda

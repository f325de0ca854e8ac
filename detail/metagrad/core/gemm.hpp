// The BLAS binding, and nothing else: gemm and gemv through the Fortran ABI (column-major, every
// argument by pointer). The library target links OpenBLAS (never the reference BLAS silently).
// Used by the runtime engine (blas.hpp) and the xtensor evaluator (xt/algebra.hpp).
#pragma once

#include <algorithm>
#include <cstdint>

extern "C" {
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc);
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
            const float* beta, float* c, const int* ldc);
void dgemv_(const char* trans, const int* m, const int* n, const double* alpha, const double* a,
            const int* lda, const double* x, const int* incx, const double* beta, double* y,
            const int* incy);
void sgemv_(const char* trans, const int* m, const int* n, const float* alpha, const float* a,
            const int* lda, const float* x, const int* incx, const float* beta, float* y,
            const int* incy);
}

namespace mg::detail {

// C = op(A) op(B) by a plain loop, in the same column-major terms, for products too small for
// BLAS's packing and scaling to pay: an inner dimension of at most 4 (a batch of [1000, 2] x
// [2, 2]) over at most 4096 results, or at most 512 multiply-adds. False: call BLAS.
template <class T>
bool small_gemm(char ta, char tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                T* c, int ldc) {
  const std::int64_t results = std::int64_t{m} * n;
  if (!((k <= 4 && results <= 4096) || results * k <= 512)) return false;
  const std::int64_t ai = ta == 'N' ? 1 : lda, ap = ta == 'N' ? lda : 1;
  const std::int64_t bp = tb == 'N' ? 1 : ldb, bj = tb == 'N' ? ldb : 1;
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) {
      T acc(0);
      for (std::int64_t p = 0; p < k; ++p) acc += a[i * ai + p * ap] * b[p * bp + j * bj];
      c[i + j * ldc] = acc;
    }
  return true;
}

inline void gemm(const char* ta, const char* tb, int m, int n, int k, const double* a, int lda,
                 const double* b, int ldb, double* c, int ldc) {
  if (small_gemm(*ta, *tb, m, n, k, a, lda, b, ldb, c, ldc)) return;
  const double one = 1, zero = 0;
  dgemm_(ta, tb, &m, &n, &k, &one, a, &lda, b, &ldb, &zero, c, &ldc);
}
inline void gemm(const char* ta, const char* tb, int m, int n, int k, const float* a, int lda,
                 const float* b, int ldb, float* c, int ldc) {
  if (small_gemm(*ta, *tb, m, n, k, a, lda, b, ldb, c, ldc)) return;
  const float one = 1, zero = 0;
  sgemm_(ta, tb, &m, &n, &k, &one, a, &lda, b, &ldb, &zero, c, &ldc);
}

// y = op(a) x for the column-major (m,n) matrix a: op 'N' (y has m elements) or 'T' (n).
inline void gemv(char t, int m, int n, const double* a, int lda, const double* x, int incx,
                 double* y) {
  const double one = 1, zero = 0;
  const int incy = 1;
  dgemv_(&t, &m, &n, &one, a, &lda, x, &incx, &zero, y, &incy);
}
inline void gemv(char t, int m, int n, const float* a, int lda, const float* x, int incx,
                 float* y) {
  const float one = 1, zero = 0;
  const int incy = 1;
  sgemv_(&t, &m, &n, &one, a, &lda, x, &incx, &zero, y, &incy);
}

// c[i] = a[i] b[i] for i < batch, every operand contiguous and row-major: a (batch, m, k), b
// (batch, k, n), c (batch, m, n). See Note [Row-major gemm] in blas.hpp.
template <class T>
void batched_gemm(const T* a, const T* b, T* c, std::int64_t batch, std::int64_t m, std::int64_t k,
                  std::int64_t n) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + batch * m * n, T(0));
    return;
  }
  const int im = static_cast<int>(m), ik = static_cast<int>(k), in = static_cast<int>(n);
  for (std::int64_t i = 0; i < batch; ++i)
    gemm("N", "N", in, im, ik, b + i * k * n, in, a + i * m * k, ik, c + i * m * n, in);
}

}  // namespace mg::detail

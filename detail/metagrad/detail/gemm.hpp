// The BLAS binding, and nothing else: gemm through the Fortran ABI (column-major, every
// argument by pointer). The library target links OpenBLAS (never the reference BLAS silently).
// Used by the runtime engine (blas.hpp) and the xtensor evaluator (xt_algebra.hpp).
#pragma once

extern "C" {
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc);
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
            const float* beta, float* c, const int* ldc);
}

namespace mg::detail {

inline void gemm(const char* ta, const char* tb, int m, int n, int k, const double* a, int lda,
                 const double* b, int ldb, double* c, int ldc) {
  const double one = 1, zero = 0;
  dgemm_(ta, tb, &m, &n, &k, &one, a, &lda, b, &ldb, &zero, c, &ldc);
}
inline void gemm(const char* ta, const char* tb, int m, int n, int k, const float* a, int lda,
                 const float* b, int ldb, float* c, int ldc) {
  const float one = 1, zero = 0;
  sgemm_(ta, tb, &m, &n, &k, &one, a, &lda, b, &ldb, &zero, c, &ldc);
}

}  // namespace mg::detail

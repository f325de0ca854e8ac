# Explicit header lists (no GLOB): every header is installed and compiled on its own in CI.
set(METAGRAD_PUBLIC_HEADERS
  include/metagrad/concepts.hpp
  include/metagrad/error.hpp
  include/metagrad/grads.hpp
  include/metagrad/ops/elementwise.hpp
  include/metagrad/ops/shaped.hpp
  include/metagrad/fuse.hpp
  include/metagrad/metagrad.hpp
  include/metagrad/static.hpp
  include/metagrad/xtensor.hpp
)
set(METAGRAD_DETAIL_HEADERS
  detail/metagrad/detail/broadcast.hpp
  detail/metagrad/detail/config.hpp
  detail/metagrad/detail/expr.hpp
  detail/metagrad/detail/gemm.hpp
  detail/metagrad/detail/plan.hpp
  detail/metagrad/detail/simd.hpp
  detail/metagrad/detail/sweep.hpp
  detail/metagrad/detail/xt_algebra.hpp
  detail/metagrad/detail/xt_region.hpp
)
set(METAGRAD_CUDA_HEADERS
  cuda/metagrad/cuda.hpp
  cuda/metagrad/cuda/kernels.hpp
  cuda/metagrad/cuda/tensor_backend.hpp
  cuda/metagrad/cuda/transforms.hpp
)
# The runtime engine (mg::tensor).
list(APPEND METAGRAD_PUBLIC_HEADERS
  include/metagrad/autograd.hpp
  include/metagrad/function.hpp
  include/metagrad/tensor.hpp
)
list(APPEND METAGRAD_DETAIL_HEADERS
  detail/metagrad/detail/blas.hpp
  detail/metagrad/detail/device.hpp
  detail/metagrad/detail/engine.hpp
  detail/metagrad/detail/graph.hpp
  detail/metagrad/detail/kernels.hpp
  detail/metagrad/detail/nodes.hpp
  detail/metagrad/detail/storage.hpp
  detail/metagrad/detail/tensor_core.hpp
  detail/metagrad/detail/tensor_ops.hpp
)

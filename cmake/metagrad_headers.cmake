# Explicit header lists (no GLOB): every header is installed and compiled on its own in CI.
set(METAGRAD_PUBLIC_HEADERS
  include/metagrad/autograd.hpp
  include/metagrad/call_site.hpp
  include/metagrad/concepts.hpp
  include/metagrad/context.hpp
  include/metagrad/error.hpp
  include/metagrad/expr.hpp
  include/metagrad/forward_ad.hpp
  include/metagrad/function.hpp
  include/metagrad/functional.hpp
  include/metagrad/fuse.hpp
  include/metagrad/gradcheck.hpp
  include/metagrad/graph_dot.hpp
  include/metagrad/grads.hpp
  include/metagrad/metagrad.hpp
  include/metagrad/ops.hpp
  include/metagrad/ops/arithmetic.hpp
  include/metagrad/ops/comparison.hpp
  include/metagrad/ops/conversion.hpp
  include/metagrad/ops/indexing.hpp
  include/metagrad/ops/linalg.hpp
  include/metagrad/ops/list.hpp
  include/metagrad/ops/math.hpp
  include/metagrad/ops/nn.hpp
  include/metagrad/ops/reductions.hpp
  include/metagrad/ops/shape.hpp
  include/metagrad/ops/split.hpp
  include/metagrad/profiler.hpp
  include/metagrad/repeat.hpp
  include/metagrad/saved_tensors.hpp
  include/metagrad/static.hpp
  include/metagrad/tensor.hpp
  include/metagrad/tensor_class.hpp
  include/metagrad/tensor_xtensor.hpp
  include/metagrad/to_string.hpp
  include/metagrad/types.hpp
  include/metagrad/version.hpp
  include/metagrad/xtensor.hpp
)
set(METAGRAD_DETAIL_HEADERS
  # machinery shared by the engines
  detail/metagrad/detail/algebra.hpp
  detail/metagrad/detail/broadcast.hpp
  detail/metagrad/detail/config.hpp
  detail/metagrad/detail/dispatch.hpp
  detail/metagrad/detail/element_math.hpp
  detail/metagrad/detail/gemm.hpp
  detail/metagrad/detail/instances.hpp
  detail/metagrad/detail/isa.hpp
  detail/metagrad/detail/simd.hpp
  detail/metagrad/detail/tuple.hpp
  detail/metagrad/detail/type_list.hpp
  detail/metagrad/detail/type_name.hpp
  # the static engine
  detail/metagrad/detail/plan.hpp
  detail/metagrad/detail/scan.hpp
  detail/metagrad/detail/sweep.hpp
  detail/metagrad/detail/xt_algebra.hpp
  detail/metagrad/detail/xt_dual.hpp
  detail/metagrad/detail/xt_fused.hpp
  detail/metagrad/detail/xt_region.hpp
  detail/metagrad/detail/xt_pool.hpp
  detail/metagrad/detail/xt_transforms.hpp
  # the runtime engine and its backends
  detail/metagrad/detail/anomaly.hpp
  detail/metagrad/detail/backend.hpp
  detail/metagrad/detail/blas.hpp
  detail/metagrad/detail/cpu_backend.hpp
  detail/metagrad/detail/element_kernels.hpp
  detail/metagrad/detail/engine.hpp
  detail/metagrad/detail/forward_ad.hpp
  detail/metagrad/detail/functional.hpp
  detail/metagrad/detail/gradcheck.hpp
  detail/metagrad/detail/graph.hpp
  detail/metagrad/detail/hooks.hpp
  detail/metagrad/detail/nodes.hpp
  detail/metagrad/detail/profiler.hpp
  detail/metagrad/detail/profiler_report.hpp
  detail/metagrad/detail/registry.hpp
  detail/metagrad/detail/runtime.hpp
  detail/metagrad/detail/runtime_ops.hpp
  detail/metagrad/detail/saved.hpp
  detail/metagrad/detail/shape_rules.hpp
  detail/metagrad/detail/storage.hpp
  detail/metagrad/detail/tensor_kernels.hpp
  detail/metagrad/detail/tensor_inline.hpp
  detail/metagrad/detail/tensor_members.hpp
  detail/metagrad/detail/tensor_print.hpp
)
set(METAGRAD_CUDA_HEADERS
  cuda/metagrad/cuda.hpp
  cuda/metagrad/cuda/backend.hpp
  cuda/metagrad/cuda/functors.hpp
  cuda/metagrad/cuda/transforms.hpp
)

# A header missing from these lists would be missing from an installed metagrad: the top-level
# build fails at configure time if the lists and the folders differ.
if(PROJECT_IS_TOP_LEVEL)
  file(GLOB_RECURSE metagrad_headers_on_disk RELATIVE "${PROJECT_SOURCE_DIR}"
       "${PROJECT_SOURCE_DIR}/include/*.hpp" "${PROJECT_SOURCE_DIR}/detail/*.hpp"
       "${PROJECT_SOURCE_DIR}/cuda/*.hpp")
  set(metagrad_headers_listed ${METAGRAD_PUBLIC_HEADERS} ${METAGRAD_DETAIL_HEADERS}
                              ${METAGRAD_CUDA_HEADERS})
  list(REMOVE_ITEM metagrad_headers_on_disk ${metagrad_headers_listed})
  if(metagrad_headers_on_disk)
    message(FATAL_ERROR "metagrad: headers not listed in cmake/metagrad_headers.cmake (so not "
                        "installed): ${metagrad_headers_on_disk}")
  endif()
endif()

# Explicit header lists (no GLOB): every header is installed and compiled on its own in CI.
set(METAGRAD_PUBLIC_HEADERS
  include/metagrad/autograd.hpp
  include/metagrad/call_site.hpp
  include/metagrad/concepts.hpp
  include/metagrad/context.hpp
  include/metagrad/cpu.hpp
  include/metagrad/device.hpp
  include/metagrad/dual_array.hpp
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
  include/metagrad/node.hpp
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
  include/metagrad/ops/selection.hpp
  include/metagrad/ops/shape.hpp
  include/metagrad/ops/split.hpp
  include/metagrad/profiler.hpp
  include/metagrad/repeat.hpp
  include/metagrad/saved_tensors.hpp
  include/metagrad/shape.hpp
  include/metagrad/static.hpp
  include/metagrad/tensor.hpp
  include/metagrad/tensor_class.hpp
  include/metagrad/tensor_xtensor.hpp
  include/metagrad/to_string.hpp
  include/metagrad/types.hpp
  include/metagrad/unroll.hpp
  include/metagrad/version.hpp
  include/metagrad/xtensor.hpp
)
set(METAGRAD_DETAIL_HEADERS
  # core: storage, shapes, dtypes, dispatch, type lists (no op family)
  detail/metagrad/core/algebra.hpp
  detail/metagrad/core/broadcast.hpp
  detail/metagrad/core/config.hpp
  detail/metagrad/core/dispatch.hpp
  detail/metagrad/core/element_math.hpp
  detail/metagrad/core/extents.hpp
  detail/metagrad/core/gemm.hpp
  detail/metagrad/core/isa.hpp
  detail/metagrad/core/lent_results.hpp
  detail/metagrad/core/object_pool.hpp
  detail/metagrad/core/selection.hpp
  detail/metagrad/core/shape_rules.hpp
  detail/metagrad/core/slot_cell.hpp
  detail/metagrad/core/simd.hpp
  detail/metagrad/core/storage.hpp
  detail/metagrad/core/tensor_impl.hpp
  detail/metagrad/core/tuple.hpp
  detail/metagrad/core/type_list.hpp
  detail/metagrad/core/type_name.hpp
  # backend: the backend interface, the registry, the CPU backend, kernels made from op structs
  detail/metagrad/backend/backend.hpp
  detail/metagrad/backend/blas.hpp
  detail/metagrad/backend/block_cache.hpp
  detail/metagrad/backend/cpu.hpp
  detail/metagrad/backend/element_kernels.hpp
  detail/metagrad/backend/host_cache.hpp
  detail/metagrad/backend/parallel.hpp
  detail/metagrad/backend/registry.hpp
  detail/metagrad/backend/tensor_kernels.hpp
  # static: tracing, planning, sweeps, the evaluators on numbers
  detail/metagrad/static/evaluator.hpp
  detail/metagrad/static/family.hpp
  detail/metagrad/static/number_family.hpp
  detail/metagrad/static/plan.hpp
  detail/metagrad/static/scan.hpp
  detail/metagrad/static/scan_body.hpp
  detail/metagrad/static/scan_hoist.hpp
  detail/metagrad/static/scan_rows.hpp
  detail/metagrad/static/sweep.hpp
  # xt: the xtensor evaluator
  detail/metagrad/xt/algebra.hpp
  detail/metagrad/xt/array_family.hpp
  detail/metagrad/xt/boundaries.hpp
  detail/metagrad/xt/dual_blocks.hpp
  detail/metagrad/xt/dual_family.hpp
  detail/metagrad/xt/dual_tangents.hpp
  detail/metagrad/xt/element_loop.hpp
  detail/metagrad/xt/extents.hpp
  detail/metagrad/xt/fused.hpp
  detail/metagrad/xt/fused_paths.hpp
  detail/metagrad/xt/general.hpp
  detail/metagrad/xt/pool.hpp
  detail/metagrad/xt/region.hpp
  detail/metagrad/xt/transforms.hpp
  # runtime: graph, nodes, engine, hooks, saved tensors, profiler
  detail/metagrad/runtime/anomaly.hpp
  detail/metagrad/runtime/apply.hpp
  detail/metagrad/runtime/definitions.hpp
  detail/metagrad/runtime/engine.hpp
  detail/metagrad/runtime/forward_ad.hpp
  detail/metagrad/runtime/graph.hpp
  detail/metagrad/runtime/hooks.hpp
  detail/metagrad/runtime/in_place.hpp
  detail/metagrad/runtime/lazy.hpp
  detail/metagrad/runtime/instances.hpp
  detail/metagrad/runtime/nodes.hpp
  detail/metagrad/runtime/profiler.hpp
  detail/metagrad/runtime/profiler_report.hpp
  detail/metagrad/runtime/saved.hpp
  detail/metagrad/runtime/saves.hpp
  detail/metagrad/runtime/tensor_inline.hpp
  detail/metagrad/runtime/tensor_members.hpp
  detail/metagrad/runtime/tensor_print.hpp
  # api: the functional API and gradcheck behind their public headers
  detail/metagrad/api/functional.hpp
  detail/metagrad/api/fused.hpp
  detail/metagrad/api/gradcheck.hpp
  detail/metagrad/api/tensor_family.hpp
)
set(METAGRAD_CUDA_HEADERS
  cuda/metagrad/cuda.hpp
  cuda/metagrad/cuda/backend.hpp
  cuda/metagrad/cuda/blas.hpp
  cuda/metagrad/cuda/functors.hpp
  cuda/metagrad/cuda/graph.hpp
  cuda/metagrad/cuda/memory.hpp
  cuda/metagrad/cuda/stream.hpp
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

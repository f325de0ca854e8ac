# Explicit header lists (no GLOB): every header is installed and compiled on its own in CI.
set(METAGRAD_PUBLIC_HEADERS
  include/metagrad/concepts.hpp
  include/metagrad/error.hpp
  include/metagrad/grads.hpp
  include/metagrad/ops/elementwise.hpp
  include/metagrad/ops/shaped.hpp
  include/metagrad/static.hpp
)
set(METAGRAD_DETAIL_HEADERS
  detail/metagrad/detail/config.hpp
  detail/metagrad/detail/expr.hpp
  detail/metagrad/detail/plan.hpp
  detail/metagrad/detail/sweep.hpp
)
set(METAGRAD_CUDA_HEADERS
)

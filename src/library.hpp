// What every source of the library includes: the runtime engine's definitions. Each source then
// instantiates one section of <metagrad/detail/instances.hpp> (Note [Compiled core] in
// detail/config.hpp).
#pragma once

#define METAGRAD_BUILDING 1  // the library's own sources: no extern template (runtime.hpp)

#include <metagrad/autograd.hpp>
#include <metagrad/detail/anomaly.hpp>
#include <metagrad/detail/config.hpp>
#include <metagrad/detail/engine.hpp>
#include <metagrad/detail/runtime_ops.hpp>
#include <metagrad/detail/tensor_members.hpp>
#include <metagrad/forward_ad.hpp>
#include <metagrad/ops.hpp>

#if MG_HEADER_ONLY
#error "metagrad: the library is not built in header-only mode (METAGRAD_HEADER_ONLY is defined)"
#endif

#define MG_INSTANCE template

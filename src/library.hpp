// What every source of the library includes: the runtime engine's definitions. Each source then
// instantiates one section of <metagrad/runtime/instances.hpp> (Note [Compiled core] in
// core/config.hpp).
#pragma once

#define METAGRAD_BUILDING \
  1  // the library's own sources: no extern template (runtime/definitions.hpp)

#include <metagrad/autograd.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/forward_ad.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/runtime/anomaly.hpp>
#include <metagrad/runtime/apply.hpp>
#include <metagrad/runtime/engine.hpp>
#include <metagrad/runtime/tensor_members.hpp>

#if MG_HEADER_ONLY
#error "metagrad: the library is not built in header-only mode (METAGRAD_HEADER_ONLY is defined)"
#endif

#define MG_INSTANCE template

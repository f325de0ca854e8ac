// The library's runtime core: mg::tensor's members, the factories and the engine's entry points,
// compiled once (Note [Compiled core] in detail/config.hpp). The one source that defines
// METAGRAD_EMIT_API, so the one that compiles the definitions of the MG_API functions.
#define METAGRAD_EMIT_API 1
#include "library.hpp"

#define MG_INSTANCES_CORE 1
#include <metagrad/detail/instances.hpp>

// The library's runtime core: mg::tensor's members, the factories and the engine's entry points,
// compiled once (Note [Compiled core] in core/config.hpp). The one source that defines
// METAGRAD_EMIT_API, so the one that compiles the definitions of the MG_API functions.
#define METAGRAD_EMIT_API 1
#include "library.hpp"

#define MG_INSTANCES_CORE 1
#include <metagrad/runtime/instances.hpp>

// the public headers' own functions that are templates in name only
namespace mg {
namespace autograd {
template tensor_list grad<0>(const tensor_list&, const tensor_list&, const tensor_list&,
                             const grad_options&);
template void backward<0>(const tensor_list&, const tensor_list&, const backward_options&);
template void increment_version<0>(const tensor&);
}  // namespace autograd
namespace forward_ad {
template tensor make_dual<0>(const tensor&, const tensor&);
template unpacked_dual unpack_dual<0>(const tensor&);
}  // namespace forward_ad
}  // namespace mg

// The runtime engine's definitions: what the public headers whose templates run on the caller's
// types (custom Functions, mg::fuse, the functional API, gradcheck...) instantiate. In compiled
// mode (Note [Compiled core] in config.hpp) the functions the library compiles are declared
// `extern template` here, so a file that includes this header parses the engine but compiles
// none of it.
#pragma once

#include <metagrad/core/config.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/runtime/anomaly.hpp>
#include <metagrad/runtime/apply.hpp>
#include <metagrad/runtime/engine.hpp>
#include <metagrad/runtime/tensor_members.hpp>

#if !MG_HEADER_ONLY && !defined(METAGRAD_BUILDING)  // src/library.hpp defines it
#define MG_INSTANCE extern template
#include <metagrad/runtime/instances.hpp>
#undef MG_INSTANCE
#endif

// The runtime engine's definitions: what the public headers whose templates run on the caller's
// types (custom Functions, mg::fuse, the functional API, gradcheck...) instantiate. In compiled
// mode (Note [Compiled core] in config.hpp) the functions the library compiles are declared
// `extern template` here, so a file that includes this header parses the engine but compiles
// none of it.
#pragma once

#include <metagrad/detail/anomaly.hpp>
#include <metagrad/detail/config.hpp>
#include <metagrad/detail/engine.hpp>
#include <metagrad/detail/runtime_ops.hpp>
#include <metagrad/detail/tensor_members.hpp>
#include <metagrad/ops.hpp>

#if !MG_HEADER_ONLY && !defined(METAGRAD_BUILDING)  // src/library.hpp defines it
#define MG_INSTANCE extern template
#include <metagrad/detail/instances.hpp>
#undef MG_INSTANCE
#endif

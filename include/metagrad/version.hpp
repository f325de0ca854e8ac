// The version of metagrad. CMakeLists.txt reads it from here (one place to change), and
// find_package(metagrad 0.2) compares against it.
//
// Compatibility: while the major version is 0, a minor version (0.2 -> 0.3) may change the API; a
// patch version (0.2.0 -> 0.2.1) does not. find_package(metagrad 0.2) accepts 0.2.x only.
#pragma once

#define METAGRAD_VERSION_MAJOR 0
#define METAGRAD_VERSION_MINOR 3
#define METAGRAD_VERSION_PATCH 0
#define METAGRAD_VERSION_STRING "0.3.0"

namespace mg {
/// The version as a number: major * 10000 + minor * 100 + patch (0.2.0: 200).
inline constexpr int version =
    METAGRAD_VERSION_MAJOR * 10000 + METAGRAD_VERSION_MINOR * 100 + METAGRAD_VERSION_PATCH;
}  // namespace mg

// The name an op shows in errors and in grad_fn()->name(): its `name` member, or, for a user's
// struct without one, its demangled type name.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <typeinfo>

#if defined(__GNUC__) || defined(__clang__)
#include <cxxabi.h>
#endif

namespace mg::detail {

template <class T>
const std::string& demangled_name() {
  static const std::string name = [] {
    const char* raw = typeid(T).name();
#if defined(__GNUC__) || defined(__clang__)
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(raw, nullptr, nullptr, &status),
                                             std::free);
    if (status == 0 && d) return std::string(d.get());
#endif
    return std::string(raw);
  }();
  return name;
}

template <class Op>
const char* op_name() {
  if constexpr (requires { Op::name; }) {
    return Op::name;
  } else {
    return demangled_name<Op>().c_str();
  }
}

}  // namespace mg::detail

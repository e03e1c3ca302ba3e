// magpy's single error policy: every library reports failure by throwing
// magpy::Error; each app catches it once in main() and prints it.
//
// A message says what went wrong, where (file, offset, access path, source
// line), and what the user can do about it, in that order.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

namespace magpy {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// An app's main() runs its work through this, the one place errors are
// reported: a magpy::Error, a libtorch error (its C++ backtrace dropped) or
// any other exception prints "tool: error: message" on stderr and gives
// exit status 2; running out of memory says so. No exception escapes.
int runReportingErrors(const char* tool, const std::function<int()>& body);

// An exception's message for people: libtorch's C++ backtrace dropped.
std::string messageOf(const std::exception& e);

}  // namespace magpy

#include "magpy/support/error.h"

#include <iostream>
#include <new>

namespace magpy {

// libtorch appends the C++ backtrace to its messages; users need the message.
std::string messageOf(const std::exception& e) {
  std::string message = e.what();
  size_t at = message.find("\nException raised from ");
  if (at != std::string::npos) message.resize(at);
  return message;
}

int runReportingErrors(const char* tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::cerr << tool << ": error: " << e.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << tool << ": error: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << tool << ": error: " << messageOf(e) << "\n";
  } catch (...) {
    std::cerr << tool << ": error: an unknown exception\n";
  }
  return 2;
}

}  // namespace magpy

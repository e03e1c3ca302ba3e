// magpy's single error policy: every library reports failure by throwing
// magpy::Error; each app catches it once in main() and prints it.
//
// A message says what went wrong, where (file, offset, access path, source
// line), and what the user can do about it, in that order.
#pragma once

#include <stdexcept>
#include <string>

namespace magpy {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A guard that did not hold when a record was asked to run. Carries the
// failing check so callers can explain the miss without parsing text.
class GuardFailure : public Error {
 public:
  GuardFailure(std::string path, std::string expected, std::string actual)
      : Error(path + ": expected " + expected + ", got " + actual),
        path_(std::move(path)),
        expected_(std::move(expected)),
        actual_(std::move(actual)) {}
  const std::string& path() const { return path_; }
  const std::string& expected() const { return expected_; }
  const std::string& actual() const { return actual_; }

 private:
  std::string path_, expected_, actual_;
};

}  // namespace magpy

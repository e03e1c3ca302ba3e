// Running magpy's tools as a user would, from a scratch directory.
#pragma once

#include <string>

namespace magpy::e2e {

struct Result {
  int status = -1;
  std::string out, err;
};

// A fresh directory for one test, removed when the object goes.
class Scratch {
 public:
  explicit Scratch(const std::string& name);
  ~Scratch();
  const std::string& dir() const { return dir_; }
  std::string path(const std::string& file) const { return dir_ + "/" + file; }
  void write(const std::string& file, const std::string& text) const;
  std::string read(const std::string& file) const;
  bool exists(const std::string& file) const;

  // Runs a shell command in this directory; the tools are on PATH.
  Result run(const std::string& command) const;

 private:
  std::string dir_;
};

std::string sourceDir();
std::string example(const std::string& name);  // absolute path of examples/<name>

// The expected text of tests/golden/<name>, or (with MAGPY_UPDATE_GOLDEN=1)
// writes `actual` there and returns it.
std::string golden(const std::string& name, const std::string& actual);

// Digits replaced by '#', for messages whose numbers (sizes) follow the
// record's contents rather than the behaviour under test.
std::string withoutNumbers(std::string text);

}  // namespace magpy::e2e

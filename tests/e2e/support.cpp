#include "support.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace magpy::e2e {
namespace fs = std::filesystem;

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

Scratch::Scratch(const std::string& name) {
  dir_ = (fs::temp_directory_path() / ("magpy_e2e_" + name + "_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir_);
  fs::create_directories(dir_);
}

Scratch::~Scratch() {
  if (!std::getenv("MAGPY_KEEP_SCRATCH")) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

void Scratch::write(const std::string& file, const std::string& text) const { std::ofstream(path(file)) << text; }
std::string Scratch::read(const std::string& file) const { return slurp(path(file)); }
bool Scratch::exists(const std::string& file) const { return fs::exists(path(file)); }

Result Scratch::run(const std::string& command) const {
  // The command may change directory itself: its output goes to this
  // scratch directory wherever it runs.
  std::string full = "cd '" + dir_ + "' && export PATH='" MAGPY_BIN_DIR "':\"$PATH\" && ( " + command + " ) > '" +
                     dir_ + "/.out' 2> '" + dir_ + "/.err'";
  Result r;
  int raw = std::system(full.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = read(".out");
  r.err = read(".err");
  return r;
}

std::string sourceDir() { return MAGPY_SOURCE_DIR; }
std::string example(const std::string& name) { return sourceDir() + "/examples/" + name; }

std::string golden(const std::string& name, const std::string& actual) {
  std::string file = sourceDir() + "/tests/golden/" + name;
  if (const char* update = std::getenv("MAGPY_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    std::ofstream(file, std::ios::binary) << actual;
    return actual;
  }
  return slurp(file);
}

std::string withoutNumbers(std::string text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (out.empty() || out.back() != '#') out += '#';
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace magpy::e2e

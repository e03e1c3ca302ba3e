#include "magpy/record/path.h"

#include <cctype>
#include <cstdlib>
#include <tuple>

#include "magpy/support/error.h"
#include "magpy/support/strings.h"

namespace magpy::record {

PathStep PathStep::keyedBy(AccessPath keyPath) {
  PathStep s;
  s.kind = Kind::ObjectKey;
  s.keyOf.push_back(std::move(keyPath));
  return s;
}

bool PathStep::operator==(const PathStep& o) const {
  return kind == o.kind && name == o.name && index == o.index && key == o.key && keyOf == o.keyOf;
}

namespace {

template <class T>
int compareAll(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t k = 0; k < a.size() && k < b.size(); ++k)
    if (int c = a[k].compare(b[k])) return c;
  return a.size() == b.size() ? 0 : a.size() < b.size() ? -1 : 1;
}

}  // namespace

// Three-way, field by field in the order kind, index, name, key, keyOf
// (see Atom::compare for why).
int PathStep::compare(const PathStep& o) const {
  if (kind != o.kind) return kind < o.kind ? -1 : 1;
  if (index != o.index) return index < o.index ? -1 : 1;
  if (int c = name.compare(o.name)) return c;
  if (int c = key.compare(o.key)) return c;
  return compareAll(keyOf, o.keyOf);
}

AccessPath AccessPath::global(std::string module, std::string key) {
  AccessPath p;
  p.root = Root::Global;
  p.name = std::move(module);
  return p.key(std::move(key));
}

AccessPath AccessPath::attr(std::string n) const {
  AccessPath p = *this;
  p.steps.push_back(PathStep::attr(std::move(n)));
  return p;
}
AccessPath AccessPath::item(int64_t i) const {
  AccessPath p = *this;
  p.steps.push_back(PathStep::at(i));
  return p;
}
AccessPath AccessPath::key(Atom k) const {
  AccessPath p = *this;
  p.steps.push_back(PathStep::keyed(std::move(k)));
  return p;
}

AccessPath AccessPath::keyedBy(AccessPath keyPath) const {
  AccessPath p = *this;
  p.steps.push_back(PathStep::keyedBy(std::move(keyPath)));
  return p;
}

bool AccessPath::isPrefixOf(const AccessPath& other) const {
  if (root != other.root || index != other.index || name != other.name || steps.size() > other.steps.size())
    return false;
  for (size_t i = 0; i < steps.size(); ++i)
    if (!(steps[i] == other.steps[i])) return false;
  return true;
}

int AccessPath::compare(const AccessPath& o) const {
  if (root != o.root) return root < o.root ? -1 : 1;
  if (index != o.index) return index < o.index ? -1 : 1;
  if (int c = name.compare(o.name)) return c;
  return compareAll(steps, o.steps);
}

namespace {

bool isIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '_') return false;
  return true;
}

class PathParser {
 public:
  explicit PathParser(const std::string& text) : t_(text) {}

  // `nested`: a key's path inside "[@...]", which ends at its closing ']'.
  AccessPath parse(bool nested = false) {
    if (++depth_ > kMaxKeyNesting) fail("a key path nested at most " + std::to_string(kMaxKeyNesting) + " deep");
    AccessPath p;
    if (eat("self")) {
      p.root = AccessPath::Root::Self;
    } else if (eat("args[")) {
      p.root = AccessPath::Root::Arg;
      p.index = integer();
      expect(']');
    } else if (eat("kwargs[")) {
      p.root = AccessPath::Root::Kwarg;
      p.name = string();
      expect(']');
    } else if (eat("args")) {
      p = AccessPath::allArgs();
    } else if (eat("kwargs")) {
      p = AccessPath::allKwargs();
    } else if (eat("G(")) {
      p.root = AccessPath::Root::Global;
      size_t end = t_.find(')', pos_);
      if (end == std::string::npos) fail("a ')' closing the module name");
      p.name = t_.substr(pos_, end - pos_);
      pos_ = end + 1;
    } else if (eat("G")) {
      p.root = AccessPath::Root::Global;
    } else if (eat("runtime.")) {
      p.root = AccessPath::Root::Runtime;
      p.name = identifier();
    } else {
      fail("self, args[i], kwargs['k'], G['k'], G(module)['k'] or runtime.name");
    }
    while (pos_ < t_.size() && !(nested && peek() == ']')) {
      if (eat(".")) {
        p.steps.push_back(PathStep::attr(peek() == '\'' ? string() : identifier()));
      } else if (eat("[")) {
        if (eat("@")) p.steps.push_back(PathStep::keyedBy(parse(true)));
        else if (eat("#")) p.steps.push_back(PathStep::keyed(Atom::integer(integer())));
        else if (peek() == '-' || std::isdigit(static_cast<unsigned char>(peek()))) p.steps.push_back(PathStep::at(integer()));
        else p.steps.push_back(PathStep::keyed(atom()));
        expect(']');
      } else {
        fail("'.' or '['");
      }
    }
    --depth_;
    return p;
  }

 private:
  char peek() const { return pos_ < t_.size() ? t_[pos_] : '\0'; }
  bool eat(const char* lit) {
    size_t n = std::char_traits<char>::length(lit);
    if (t_.compare(pos_, n, lit) != 0) return false;
    pos_ += n;
    return true;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("'") + c + "'");
    ++pos_;
  }
  int64_t integer() {
    size_t start = pos_;
    if (peek() == '-') ++pos_;
    while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
    if (start == pos_ || (pos_ == start + 1 && t_[start] == '-')) fail("a number");
    return std::stoll(t_.substr(start, pos_ - start));
  }
  // A key: 'str', a tuple of keys, None, True, False, or a number.
  Atom atom() {
    if (peek() == '\'') return Atom::string(string());
    if (eat("(")) {
      std::vector<Atom> items;
      while (!eat(")")) {
        items.push_back(atom());
        if (!eat(", ") && !eat(",") && peek() != ')') fail("',' or ')' in a tuple");
      }
      return Atom::tuple(std::move(items));
    }
    if (eat("None")) return Atom::none();
    if (eat("True")) return Atom::boolean(true);
    if (eat("False")) return Atom::boolean(false);
    // A number: an int, or a float as formatDouble writes it (2.0, 1e-05, inf, nan).
    size_t start = pos_;
    while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '-' || peek() == '.' || peek() == '+'))
      ++pos_;
    std::string number = t_.substr(start, pos_ - start);
    char* end = nullptr;
    if (number.find_first_of(".enaif") == std::string::npos) {
      long long v = std::strtoll(number.c_str(), &end, 10);
      if (!number.empty() && *end == '\0') return Atom::integer(v);
    } else {
      double v = std::strtod(number.c_str(), &end);
      if (*end == '\0') return Atom::floating(v);
    }
    pos_ = start;
    fail("a key: 'str', #int, or a tuple such as ('disp', 0)");
  }
  std::string identifier() {
    size_t start = pos_;
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_') ++pos_;
    if (start == pos_) fail("a name");
    return t_.substr(start, pos_ - start);
  }
  std::string string() {
    expect('\'');
    std::string out;
    while (peek() != '\'') {
      if (pos_ >= t_.size()) fail("a closing quote");
      char c = t_[pos_++];
      if (c == '\\') {
        char e = t_[pos_++];
        if (e == 'n') out += '\n';
        else if (e == 't') out += '\t';
        else if (e == 'r') out += '\r';
        else if (e == 'x') {
          out += char(std::stoi(t_.substr(pos_, 2), nullptr, 16));
          pos_ += 2;
        } else out += e;
      } else {
        out += c;
      }
    }
    ++pos_;
    return out;
  }
  [[noreturn]] void fail(const std::string& wanted) const {
    throw Error("cannot read access path '" + t_ + "': expected " + wanted + " at character " + std::to_string(pos_ + 1));
  }

  static constexpr int kMaxKeyNesting = 16;
  const std::string& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::string toString(const AccessPath& p) {
  std::string out;
  switch (p.root) {
    case AccessPath::Root::Self: out = "self"; break;
    case AccessPath::Root::Arg: out = p.index < 0 ? "args" : "args[" + std::to_string(p.index) + "]"; break;
    case AccessPath::Root::Kwarg: out = p.name.empty() ? "kwargs" : "kwargs[" + quote(p.name) + "]"; break;
    case AccessPath::Root::Global: out = p.name.empty() ? "G" : "G(" + p.name + ")"; break;
    case AccessPath::Root::Runtime: out = "runtime." + p.name; break;
  }
  for (auto& s : p.steps) {
    switch (s.kind) {
      case PathStep::Kind::Attr: out += "." + (isIdentifier(s.name) ? s.name : quote(s.name)); break;
      case PathStep::Kind::Index: out += "[" + std::to_string(s.index) + "]"; break;
      // An int key is "#3", so it does not read as a sequence position.
      case PathStep::Kind::Key:
        out += "[" + (s.key.kind == Atom::Kind::Int ? "#" + std::to_string(s.key.i) : toString(s.key)) + "]";
        break;
      case PathStep::Kind::ObjectKey: out += "[@" + (s.keyOf.empty() ? std::string("?") : toString(s.keyOf[0])) + "]"; break;
    }
  }
  return out;
}

AccessPath parsePath(const std::string& text) { return PathParser(text).parse(); }

bool isRuntimeState(const std::string& name) {
  return name == "grad_enabled" || name == "default_dtype" || name == "deterministic_algorithms" ||
         name == "inference_mode" || name == "num_threads" || name == "anomaly_mode" || name == "autocast" ||
         name == "autocast_cpu" || name == "dist_world_size" || name == "dist_backend" || name == "torch_modes" ||
         name == "autocast_dtype" || name == "autocast_cpu_dtype";
}

bool isModuleDict(const std::string& attr) {
  return attr == kModuleParameters || attr == kModuleBuffers || attr == kModuleSubmodules;
}

bool isInstanceDictKey(const AccessPath& p, size_t k) {
  return k + 1 < p.steps.size() && p.steps[k].kind == PathStep::Kind::Attr && p.steps[k].name == "__dict__" &&
         p.steps[k + 1].kind == PathStep::Kind::Key && p.steps[k + 1].key.kind == Atom::Kind::Str;
}

AccessPath withInstanceAttributes(AccessPath p) {
  std::vector<PathStep> steps;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    if (isInstanceDictKey(p, k)) {
      steps.push_back(PathStep::attr(p.steps[++k].key.s));
    } else {
      steps.push_back(std::move(p.steps[k]));
    }
  }
  p.steps = std::move(steps);
  return p;
}

}  // namespace magpy::record

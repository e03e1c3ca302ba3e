#include "magpy/record/annotations.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "magpy/record/path.h"
#include "magpy/support/error.h"
#include "magpy/support/hash.h"

namespace magpy::record {
namespace {

class Loader {
 public:
  // file: where to read; shownAs: how errors and origins name it.
  Loader(std::string file, std::string shownAs) : path_(std::move(file)), file_(std::move(shownAs)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
    throw Error(file_ + ":" + std::to_string(at.Mark().line + 1) + ": " + what);
  }

  void onlyKeys(const YAML::Node& map, std::initializer_list<const char*> known, const char* what) const {
    if (!map.IsMap()) fail(map, std::string(what) + " must be a mapping");
    for (auto it = map.begin(); it != map.end(); ++it) {
      auto key = it->first.as<std::string>();
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
        std::string list;
        for (auto* k : known) list += std::string(list.empty() ? "" : ", ") + k;
        fail(it->first, "unknown key '" + key + "' in " + what + " (known keys: " + list + ")");
      }
    }
  }

  bool flag(const YAML::Node& map, const char* key, bool fallback) const {
    auto n = map[key];
    if (!n) return fallback;
    try {
      return n.as<bool>();
    } catch (const YAML::Exception&) {
      fail(n, std::string("'") + key + "' must be true or false" +
                  (std::string(key) == "value_read" ? " (or metadata, state or identity)" : ""));
    }
  }

  int index(const YAML::Node& n, const char* what) const {
    if (n.IsScalar() && n.Scalar() == "output") return -1;
    try {
      int v = n.as<int>();
      if (v < 0) fail(n, std::string(what) + " must be an input index (0, 1, ...) or 'output'");
      return v;
    } catch (const YAML::Exception&) {
      fail(n, std::string(what) + " must be an input index (0, 1, ...) or 'output'");
    }
  }

  InputAnnotation input(const YAML::Node& n, InputAnnotation base) const {
    onlyKeys(n, {"value_read", "in_place"}, "an input");
    std::string mode = n["value_read"] && n["value_read"].IsScalar() ? n["value_read"].Scalar() : "";
    if (mode == "metadata" || mode == "state" || mode == "identity") {
      base.value_read = true;
      base.metadata_only = mode == "metadata";
      base.object_state = mode == "state";
      base.identity_only = mode == "identity";
    } else if (n["value_read"]) {
      base.value_read = flag(n, "value_read", base.value_read);
      base.metadata_only = base.object_state = base.identity_only = false;
    }
    base.in_place = flag(n, "in_place", base.in_place);
    return base;
  }

  RelationAnnotation relation(const YAML::Node& n) const {
    onlyKeys(n, {"kind", "from", "to", "name", "name_from", "mode"}, "a relation");
    RelationAnnotation r;
    auto kind = n["kind"] ? n["kind"].as<std::string>() : "";
    if (kind == "attr") r.kind = RelationAnnotation::Kind::Attr;
    else if (kind == "item") r.kind = RelationAnnotation::Kind::Item;
    else fail(n, "a relation's kind must be 'attr' or 'item'");
    auto mode = n["mode"] ? n["mode"].as<std::string>() : "read";
    if (mode == "read") r.mode = RelationAnnotation::Mode::Read;
    else if (mode == "write") r.mode = RelationAnnotation::Mode::Write;
    else if (mode == "exists") r.mode = RelationAnnotation::Mode::Exists;
    else if (mode == "delete") r.mode = RelationAnnotation::Mode::Delete;
    else fail(n, "a relation's mode must be 'read', 'write', 'exists' or 'delete'");
    if (!n["from"]) fail(n, "a relation needs 'from'");
    r.from = index(n["from"], "'from'");
    if (r.from < 0) fail(n, "a relation's 'from' must be an input");
    r.to = n["to"] ? index(n["to"], "'to'") : -1;
    if (n["name"]) r.name = n["name"].as<std::string>();
    if (n["name_from"]) {
      r.name_from = index(n["name_from"], "'name_from'");
      if (r.name_from < 0) fail(n, "'name_from' must be an input");
    }
    if (r.name.empty() && r.name_from < 0) fail(n, "a relation needs 'name' or 'name_from'");
    return r;
  }

  std::vector<FunctionAnnotation> entry(const YAML::Node& n, const FunctionAnnotation& defaults) const {
    onlyKeys(n, {"name", "names", "op", "pure", "reason", "constant", "module", "inputs", "rest", "output", "relations",
                 "runtime"},
             "a function entry");
    std::vector<std::string> names;
    if (n["name"]) names.push_back(n["name"].as<std::string>());
    if (n["names"]) {
      if (!n["names"].IsSequence()) fail(n["names"], "'names' must be a list");
      for (auto x : n["names"]) names.push_back(x.as<std::string>());
    }
    if (names.empty()) fail(n, "a function entry needs 'name' or 'names'");

    FunctionAnnotation a = defaults;
    a.origin = file_ + ":" + std::to_string(n.Mark().line + 1);
    a.op = flag(n, "op", a.op);
    a.pure = flag(n, "pure", a.pure);
    if (n["reason"]) {
      if (!n["reason"].IsScalar() || a.pure) fail(n["reason"], "'reason' is a sentence, for an entry with pure: false");
      a.reason = n["reason"].Scalar();
    }
    a.constant = flag(n, "constant", a.constant);
    a.module = flag(n, "module", a.module);
    if (n["rest"]) a.rest = input(n["rest"], a.rest);
    if (n["inputs"]) {
      if (!n["inputs"].IsSequence()) fail(n["inputs"], "'inputs' must be a list");
      for (auto x : n["inputs"]) a.inputs.push_back(input(x, a.rest));
    }
    if (n["output"]) {
      onlyKeys(n["output"], {"in_place"}, "an output");
      a.output_in_place = flag(n["output"], "in_place", false);
    }
    if (n["relations"]) {
      if (!n["relations"].IsSequence()) fail(n["relations"], "'relations' must be a list");
      for (auto x : n["relations"]) a.relations.push_back(relation(x));
    }
    if (n["runtime"]) {
      auto rt = n["runtime"];
      onlyKeys(rt, {"read", "write", "from"}, "a runtime entry");
      if (rt["read"]) a.runtime_read = rt["read"].as<std::string>();
      if (rt["write"]) a.runtime_write = rt["write"].as<std::string>();
      if (rt["from"]) a.runtime_from = index(rt["from"], "'from'");
      if (!a.runtime_write.empty() && a.runtime_from < 0) fail(rt, "a runtime write needs 'from'");
      for (const std::string* name : {&a.runtime_read, &a.runtime_write})
        if (!name->empty() && !isRuntimeState(*name))
          fail(rt, "unknown interpreter state '" + *name +
                       "' (grad_enabled, default_dtype, deterministic_algorithms, inference_mode, num_threads, anomaly_mode, "
                       "autocast or autocast_cpu)");
    }
    std::vector<FunctionAnnotation> out;
    for (auto& name : names) {
      if (name.empty() || name.find(' ') != std::string::npos) fail(n, "'" + name + "' is not a qualified name");
      FunctionAnnotation copy = a;
      copy.name = name;
      out.push_back(std::move(copy));
    }
    return out;
  }

  std::vector<FunctionAnnotation> file() const {
    YAML::Node root;
    try {
      root = YAML::LoadFile(path_);
    } catch (const YAML::ParserException& e) {
      throw Error(file_ + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
    } catch (const YAML::BadFile&) {
      throw Error(file_ + ": cannot be read");
    }
    if (!root || !root.IsMap()) throw Error(file_ + ": an annotation file must be a mapping with 'version' and 'functions'");
    onlyKeys(root, {"version", "defaults", "functions"}, "an annotation file");
    if (!root["version"] || root["version"].as<std::string>() != "1")
      fail(root, "unsupported annotation format version (this magpy reads version: 1)");
    FunctionAnnotation defaults;
    if (root["defaults"]) {
      onlyKeys(root["defaults"], {"op", "pure", "rest"}, "defaults");
      defaults.op = flag(root["defaults"], "op", false);
      defaults.pure = flag(root["defaults"], "pure", true);
      if (root["defaults"]["rest"]) defaults.rest = input(root["defaults"]["rest"], defaults.rest);
    }
    std::vector<FunctionAnnotation> out;
    if (!root["functions"] || !root["functions"].IsSequence()) fail(root, "'functions' must be a list");
    for (auto n : root["functions"])
      for (auto& a : entry(n, defaults)) out.push_back(std::move(a));
    return out;
  }

 private:
  std::string path_;
  std::string file_;
};

}  // namespace

void AnnotationSet::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".yaml") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw Error(path + ": no *.yaml annotation files in this directory");
    fs::path dir = fs::path(path).lexically_normal();
    std::string dirName = (dir.has_filename() ? dir : dir.parent_path()).filename().string();
    for (auto& f : files) loadFile(f.string(), dirName + "/" + f.filename().string());
  } else if (fs::exists(path, ec)) {
    loadFile(path, path);
  } else {
    throw Error(path + ": no such annotation file or directory");
  }
}

void AnnotationSet::loadFile(const std::string& file, const std::string& shownAs) {
  for (auto& a : Loader(file, shownAs).file()) add(std::move(a));
}

void AnnotationSet::add(FunctionAnnotation a) {
  bool isPrefix = a.name.size() > 2 && a.name.compare(a.name.size() - 2, 2, ".*") == 0;
  auto& table = isPrefix ? prefix_ : exact_;
  std::string key = isPrefix ? a.name.substr(0, a.name.size() - 2) : a.name;
  auto [it, inserted] = table.emplace(key, a);
  if (!inserted)
    throw Error(a.origin + ": " + a.name + " is already annotated at " + it->second.origin +
                "; keep one entry per name");
}

const FunctionAnnotation* AnnotationSet::find(const std::string& qualname) const {
  if (auto it = exact_.find(qualname); it != exact_.end()) return &it->second;
  // "ns.*" covers the callables directly in ns, not those of nested
  // namespaces: torch.* covers torch.relu, not torch.nn.Module.__call__.
  size_t dot = qualname.rfind('.');
  if (dot == std::string::npos) return nullptr;
  if (auto it = prefix_.find(qualname.substr(0, dot)); it != prefix_.end()) return &it->second;
  return nullptr;
}

uint64_t AnnotationSet::hash() const {
  Hasher h;
  auto one = [&](const FunctionAnnotation& a) {
    h.text(a.name).u64(a.op).u64(a.pure).u64(a.constant).u64(a.module).u64(a.inputs.size());
    for (auto& i : a.inputs)
      h.u64(i.value_read).u64(i.metadata_only).u64(i.in_place).u64(i.object_state).u64(i.identity_only);
    h.u64(a.rest.value_read).u64(a.rest.metadata_only).u64(a.rest.in_place).u64(a.rest.object_state).u64(a.rest.identity_only);
    h.u64(a.output_in_place).u64(a.relations.size());
    for (auto& r : a.relations)
      h.u64(uint64_t(r.kind)).u64(uint64_t(r.mode)).u64(uint64_t(r.from)).u64(uint64_t(r.to))
          .u64(uint64_t(r.name_from)).text(r.name);
    h.text(a.runtime_read).text(a.runtime_write).u64(uint64_t(a.runtime_from)).text(a.reason);
  };
  for (auto& [_, a] : exact_) one(a);
  for (auto& [_, a] : prefix_) one(a);
  return h.digest();
}

}  // namespace magpy::record

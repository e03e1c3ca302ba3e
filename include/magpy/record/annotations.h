// Annotations: what magpy needs to know about a callable that it does not
// trace into (the MagPy paper's AsOpNode, PureClosure, ValueRead, InPlace and
// Relation). They are data, loaded from YAML files and validated; the hash
// of the loaded set goes into every record.
//
// File format (annotations/*.yaml):
//
//   version: 1
//   defaults: {pure: true}              # optional, applies to this file
//   functions:
//     - names: [torch.relu, torch.sigmoid]   # or name: builtins.len
//       op: true                 # AsOpNode: the ATen ops it dispatches become graph nodes
//       constant: true           # makes a tensor from Python data (torch.tensor): kept by value
//       module: true             # an nn layer's forward: reads the layer's parameters, buffers
//                                # and plain attributes (with op: true, its body is not traced)
//       pure: true               # PureClosure: same inputs give the same result, no hidden effects
//       reason: "draws ..."      # with pure: false, why (the graph break says it)
//       inputs:                  # per position; input 0 is `self` for methods
//         - {value_read: true, in_place: false}
//           (value_read: metadata: of a tensor, only shape, dtype and device:
//            len(t) is t.shape[0]; other values are read whole;
//            value_read: state: also the attributes of objects, natively,
//            not through special methods magpy traces: copy.deepcopy;
//            value_read: identity: its hash, which for a tensor is its
//            identity, not its contents: set.add)
//       rest: {value_read: true} # inputs past the list
//       output: {in_place: false}
//       relations:               # reference edges the call reads or creates
//         - {kind: attr, from: 0, name_from: 1, to: output, mode: read}
//           (mode: read | write | exists | delete; to: output | an input index)
//       runtime: {read: NAME} | {write: NAME, from: 0}   (NAME: record::isRuntimeState)
//
// Names are qualified names of callables as Python reports them
// ("builtins.len", "builtins.list.append", "torch.Tensor.view"); a name
// ending in ".*" covers the callables directly in that namespace
// ("torch.*" covers torch.relu but not torch.nn.functional.relu), and an
// exact name wins over a pattern.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace magpy::record {

struct InputAnnotation {
  bool value_read = true;  // the callee looks at the value (not just its reference)
  bool metadata_only = false;  // of a tensor, it reads only shape, dtype and device
  bool in_place = false;   // the callee may modify the object
  bool object_state = false;  // it reads objects' attributes natively (value_read: state)
  bool identity_only = false;  // it hashes the value (value_read: identity): a tensor's
                               // hash is its identity, not its contents
};

struct RelationAnnotation {
  enum class Kind : uint8_t { Attr, Item };
  // Read: the call reads the element; Write: it stores one; Exists: the
  // result depends only on whether the element exists (hasattr); Delete:
  // it removes the element (delattr).
  enum class Mode : uint8_t { Read, Write, Exists, Delete };
  Kind kind = Kind::Attr;
  Mode mode = Mode::Read;
  int from = 0;           // input index of the container/object
  int to = -1;            // input index of the element/attribute value; -1 = the output
  int name_from = -1;     // input index holding the attribute name or key
  std::string name;       // a fixed attribute name (when name_from is -1)
};

struct FunctionAnnotation {
  std::string name;
  bool op = false;
  bool pure = true;
  std::string reason;      // why it is not pure (pure: false), for the graph break's message
  bool constant = false;   // the result is a tensor made from Python data: recorded by value
  bool module = false;     // a standard nn layer's forward: it reads input 0's parameters,
                           // buffers and plain attributes (what its guards cover)
  std::vector<InputAnnotation> inputs;
  InputAnnotation rest;
  bool output_in_place = false;
  std::vector<RelationAnnotation> relations;
  std::string runtime_read;   // name of interpreter state the call reads (isRuntimeState)
  std::string runtime_write;  // name of interpreter state the call writes
  int runtime_from = -1;      // input holding the written value
  std::string origin;         // "annotations/torch.yaml:12", for messages

  const InputAnnotation& input(size_t i) const { return i < inputs.size() ? inputs[i] : rest; }
  // "X is dynamic (annotated pure: false at F:L)", or X's reason.
  std::string whyDynamic(const std::string& callee) const {
    return callee + " " + (reason.empty() ? "is dynamic" : reason) + " (annotated pure: false at " + origin + ")";
  }
};

class AnnotationSet {
 public:
  // Loads every *.yaml file in a directory, in name order, or a single file.
  // Later entries for the same name are an error: annotations never
  // silently override each other. An entry's origin names a file of a
  // directory as the directory's own name and the file's
  // ("annotations/torch.yaml:99"), so records that quote it are the same
  // bytes wherever the directory lies.
  void load(const std::string& path);
  void add(FunctionAnnotation a);

  // The most specific annotation for a callable's qualified name, or null.
  const FunctionAnnotation* find(const std::string& qualname) const;

  size_t size() const { return exact_.size() + prefix_.size(); }
  // Hash of the loaded content (not of the files' text): stable under
  // reformatting, changes with any property.
  uint64_t hash() const;

 private:
  void loadFile(const std::string& file, const std::string& shownAs);
  std::map<std::string, FunctionAnnotation> exact_;
  std::map<std::string, FunctionAnnotation> prefix_;  // key: prefix without ".*"
};

}  // namespace magpy::record

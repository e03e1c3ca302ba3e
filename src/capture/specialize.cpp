#include "capture/specialize.h"

#include "magpy/record/generalize.h"
#include "magpy/replay/passes.h"

namespace magpy::capture {
namespace {

using record::Check;

// A guard of a record that lifts a number covers the guard an earlier
// record kept on its value.
bool covers(const record::Guard& mine, const record::Guard& theirs) {
  if (mine == theirs) return true;
  if (mine.check.kind != Check::Kind::Number || theirs.check.kind != Check::Kind::Equals || mine.path != theirs.path)
    return false;
  auto kind = mine.check.number == record::NumberType::Int ? record::Atom::Kind::Int : record::Atom::Kind::Float;
  return theirs.check.atom.kind == kind;
}

// The same operators with the same result sizes: a record's size checks
// pass for the other's values too.
bool sameOperators(const record::Graph& a, const record::Graph& b) {
  std::vector<const record::Node*> x, y;
  // Branch markers count, with the sides they saw: records of other paths
  // are no cover for each other.
  auto counted = [](const record::Node& n) { return n.isOp() || record::isIfMarker(n.target); };
  for (auto& n : a.nodes)
    if (counted(n)) x.push_back(&n);
  for (auto& n : b.nodes)
    if (counted(n)) y.push_back(&n);
  if (x.size() != y.size()) return false;
  for (size_t k = 0; k < x.size(); ++k) {
    bool branch = x[k]->target == record::kIf;
    if (x[k]->opName() != y[k]->opName() || x[k]->outputs != y[k]->outputs ||
        (branch && !(x[k]->args[1] == y[k]->args[1] && x[k]->args[2] == y[k]->args[2])))
      return false;
  }
  return true;
}

std::string listed(const std::string& list, const std::string& item) { return list + (list.empty() ? "" : ", ") + item; }

}  // namespace

bool RecordSetPolicy::isStateNumber(const record::Guard& g) {
  return g.check.kind == Check::Kind::Equals && g.path.root != record::AccessPath::Root::Runtime &&
         (g.check.atom.kind == record::Atom::Kind::Int || g.check.atom.kind == record::Atom::Kind::Float);
}

std::vector<std::string> RecordSetPolicy::learnFromMiss(const record::Record& r, const std::vector<size_t>& missed,
                                                        const std::vector<std::optional<record::Atom>>& now) {
  std::vector<std::string> notes;
  if (!dynamic_) return notes;
  for (size_t k = 0; k < missed.size(); ++k) {
    const record::Guard& g = r.guards[missed[k]];
    if (!isStateNumber(g) || !now[k] || now[k]->kind != g.check.atom.kind) return notes;
  }
  for (size_t k = 0; k < missed.size(); ++k) {
    const record::Guard& g = r.guards[missed[k]];
    if (!sizing_.count(g.path) && varying_.insert(g.path).second)
      notes.push_back(record::toString(g.path) + " changes between calls (was " + record::toString(g.check.atom) +
                      ", now " + record::toString(*now[k]) + "): lifting it into the graph");
  }
  return notes;
}

// A record whose lifted numbers may vary serves every call an earlier
// record that differs only in their values serves: it replaces the latest
// such record. A record made for classes or code since changed serves
// other calls, and is kept.
size_t RecordSetPolicy::coveredByNumbers(const std::vector<RecordInUse>& inUse, const record::Record& made) const {
  if (!made.breaks.empty()) return SIZE_MAX;
  for (size_t i = inUse.size(); i-- > 0;) {
    const RecordInUse& e = inUse[i];
    const record::Record& earlier = *e.record;
    if (!e.runsGraph || e.retired || e.definitionsChanged || earlier.guards.size() != made.guards.size() ||
        !sameOperators(earlier.graph, made.graph))
      continue;
    bool all = true, relaxed = false;
    for (size_t k = 0; all && k < made.guards.size(); ++k) {
      all = covers(made.guards[k], earlier.guards[k]);
      relaxed = relaxed || !(made.guards[k] == earlier.guards[k]);
    }
    if (all && relaxed) return i;
  }
  return SIZE_MAX;
}

// Over-specialization (MagPy 6.1): `made` may differ from an earlier
// record only in argument sizes; then it becomes one dynamic record for
// both. It replaces the earlier one when it also serves the earlier call's
// sizes. Records whose runs used sizes, or whose graphs write their inputs
// in place or draw random numbers, stay as they are: a dynamic record
// checks its results' sizes while it runs, and a run stopped half-way must
// have changed nothing.
size_t RecordSetPolicy::generalizeInto(const std::vector<RecordInUse>& inUse, record::Record& made,
                                       std::vector<std::string>& notes) const {
  if (!dynamic_ || !replay::stopsCleanly(made.graph)) return SIZE_MAX;
  for (size_t i = inUse.size(); i-- > 0;) {
    if (!inUse[i].runsGraph || inUse[i].readSizes) continue;
    record::Generalized g = record::generalize(*inUse[i].record, made);
    if (!g.record) {
      notes.push_back("record " + std::to_string(i) + " stays apart: " + g.why);
      continue;
    }
    std::string origin = made.origin + "; sizes made dynamic with record " + std::to_string(i);
    made = std::move(*g.record);
    made.origin = std::move(origin);
    notes.push_back("record " + std::to_string(i) + " and this call differ only in argument sizes: " +
                    (g.coversEarlier ? "one dynamic record replaces it" : "a dynamic record serves sizes from 2 up"));
    return g.coversEarlier ? i : SIZE_MAX;
  }
  return SIZE_MAX;
}

Placement RecordSetPolicy::place(const std::vector<RecordInUse>& inUse, record::Record& made, bool madeReadSizes,
                                 const std::set<record::AccessPath>& liftedWith, const std::string& numberUse) const {
  Placement out;
  out.replaces = coveredByNumbers(inUse, made);
  std::string lifted, kept;
  for (auto& g : made.guards)
    if (liftedWith.count(g.path)) {
      std::string& list = g.check.kind == Check::Kind::Number ? lifted : kept;
      list = listed(list, record::toString(g.path));
    }
  if (!lifted.empty())
    out.notes.push_back("this record computes with " + lifted + " in its graph, for any value" +
                        (out.replaces == SIZE_MAX ? "" : "; it replaces record " + std::to_string(out.replaces)));
  if (!kept.empty())
    out.notes.push_back("this record keeps the value of " +
                        (numberUse.empty() ? kept + ": the run may stop half-way (it writes its inputs in place or draws "
                                                    "random numbers)"
                                           : numberUse));
  if (out.replaces == SIZE_MAX && made.breaks.empty() && !madeReadSizes)
    out.replaces = generalizeInto(inUse, made, out.notes);
  return out;
}

// Graphs keep the sizes seen at capture, so numbers that changed them stay
// guarded from now on, and the JIT stops trying the record (it stays in
// the file: it served the calls before, and replay checks its sizes too).
std::optional<std::string> RecordSetPolicy::retire(const record::Record& r) {
  std::string paths;
  for (auto& g : r.guards)
    if (g.check.kind == Check::Kind::Number && varying_.erase(g.path)) {
      sizing_.insert(g.path);
      paths = listed(paths, record::toString(g.path));
    }
  if (paths.empty()) return std::nullopt;
  return "computes other sizes for other values of " + paths + ": they stay guarded from now on";
}

}  // namespace magpy::capture

// What the record fuzzers do with one input: a record *body* (format.h),
// wrapped into a file with a right header and hash so mutations reach the
// grammar, the validator and replay instead of stopping at the hash, goes
// through everything a record from someone else reaches: the reader, the
// text and JSON views, diff, session creation (plans, operator policy,
// state) and the logged calls (guards, graph, mock), under a small memory
// budget. Refusals are magpy::Error and libtorch's c10::Error (an operator
// rejecting its arguments: magpy-run reports both as one line and exit
// status 2); any other exception is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <c10/util/Exception.h>

#include "magpy/record/diff.h"
#include "magpy/record/format.h"
#include "magpy/record/text.h"
#include "magpy/replay/session.h"

namespace magpy::fuzz {

inline void replayLoggedCalls(replay::Session& session) {
  const auto& calls = session.file().calls;
  for (size_t i = 0; i < calls.size() && i < 4; ++i) {
    try {
      session.applyLoggedUpdates(i);
      auto out = session.call(calls[i].function, session.loggedArgs(i), session.loggedKwargs(i));
      replay::compare(out.result, session.loggedResult(i), {}, "result");
    } catch (const replay::NoMatchingRecord&) {
    }
  }
}

inline void replayBody(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  try {
    record::RecordFile file = record::decode(record::wrapBody(body), "fuzz.mgp");
    using record::Section;
    record::ViewOptions view;
    view.sections = {Section::Environment, Section::State, Section::Guards, Section::Graph, Section::Mock,
                     Section::Breaks, Section::RefGraph, Section::Calls, Section::Blobs};
    record::printView(file, view);
    view.json = true;
    record::printView(file, view);
    record::printChanges(record::diffRecords(file, file), false);
    replay::SessionOptions options = replay::SessionOptions::untrusted();
    options.memoryBudget = 64 << 20;
    options.timeBudget = 5;
    replay::Session session(std::move(file), options);
    replayLoggedCalls(session);
  } catch (const Error&) {
    // A clean refusal is the expected outcome for most inputs.
  } catch (const c10::Error&) {
    // libtorch refused an operator's arguments: as clean as magpy-run's exit 2.
  }
}

}  // namespace magpy::fuzz

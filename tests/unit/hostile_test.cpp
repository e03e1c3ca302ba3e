// Hostile records (tests/hostile): each is refused with its own message, or
// replays without crashing, hanging or exhausting memory.
#include <gtest/gtest.h>

#include "../hostile/hostile_records.h"
#include "magpy/record/format.h"
#include "magpy/replay/session.h"

using namespace magpy;

namespace {

// What magpy-run does with the record's logged calls: 0 replayed, 1 no
// record matched, 2 an error (with its message).
std::pair<int, std::string> replayLoggedCalls(const std::string& bytes) {
  try {
    replay::Session s(record::decode(bytes, "hostile.mgp"));
    for (size_t i = 0; i < s.file().calls.size(); ++i) {
      s.applyLoggedUpdates(i);
      auto out = s.call(s.file().calls[i].function, s.loggedArgs(i), s.loggedKwargs(i));
      auto cmp = replay::compare(out.result, s.loggedResult(i), {}, "result");
      if (!cmp.equal()) return {1, cmp.difference};
    }
    return {0, ""};
  } catch (const replay::NoMatchingRecord& e) {
    return {1, e.misses().empty() ? "the function has no records" : e.what()};
  } catch (const Error& e) {
    return {2, e.what()};
  }
}

}  // namespace

TEST(HostileRecords, EachGivesItsOwnOutcome) {
  for (const auto& c : hostile::cases()) {
    SCOPED_TRACE(c.name);
    if (!c.loads) {
      try {
        record::decode(c.bytes, "hostile.mgp");
        ADD_FAILURE() << "loaded";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
      }
      continue;
    }
    auto [status, message] = replayLoggedCalls(c.bytes);
    EXPECT_EQ(status, c.runStatus) << message;
    if (status != 0) {
      EXPECT_NE(message.find(c.expect), std::string::npos) << message;
    }
  }
}

TEST(HostileRecords, TrustedRecordsMayUseOperatorsOutsideThePolicy) {
  for (const auto& c : hostile::cases()) {
    if (c.name != "from_file") continue;
    replay::SessionOptions options;
    options.trustRecord = true;
    EXPECT_NO_THROW(replay::Session(record::decode(c.bytes), options));
  }
}

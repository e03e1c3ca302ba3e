// libFuzzer target for plan building and the kernels' argument checks,
// with a structure-aware mutator: where an input decodes as a record, a
// mutation edits one operator node (an argument made extreme, a list
// entry, a reference to another node or to none, an argument dropped or
// added, or the operator renamed to another one the policy admits) and
// writes the body again, so inputs stay records and reach plan building
// and the operators instead of stopping at the reader. Other inputs get
// libFuzzer's byte mutations. Each input then goes where record_fuzzer's
// go (replay_body.h).
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "magpy/record/op_policy.h"
#include "replay_body.h"

namespace {

using magpy::record::Arg;
using magpy::record::Node;

int64_t extremeInt(std::mt19937_64& rng) {
  static const int64_t values[] = {-1, 0, 1, 2, 3, 7, 64, 1 << 16, std::numeric_limits<int32_t>::max(),
                                   int64_t(1) << 31, int64_t(1) << 40, std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min(), -(int64_t(1) << 40)};
  return values[rng() % std::size(values)];
}

double extremeFloat(std::mt19937_64& rng) {
  static const double values[] = {std::nan(""), HUGE_VAL, -HUGE_VAL, 1e308, -0.0, 0.5, 1e-320};
  return values[rng() % std::size(values)];
}

// The operators the policy admits, with their overloads.
const std::vector<std::pair<std::string, std::string>>& admittedOperators() {
  static const std::vector<std::pair<std::string, std::string>> ops = [] {
    std::vector<std::pair<std::string, std::string>> all;
    for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames())
      if (magpy::record::outsidePolicy(op.name, op.overload_name).empty()) all.emplace_back(op.name, op.overload_name);
    std::sort(all.begin(), all.end());  // the dispatcher's order varies between runs
    return all;
  }();
  return ops;
}

void mutateArg(Arg& a, size_t nodes, std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0: a = Arg::integer(extremeInt(rng)); break;
    case 1: a = Arg::node(int64_t(rng() % (nodes + 2)) - 1); break;  // any node, or one just outside
    case 2: a = Arg::none(); break;
    case 3: a = Arg::floating(extremeFloat(rng)); break;
    case 4: {
      Arg list;
      list.kind = Arg::Kind::IntList;
      for (size_t k = rng() % 5; k > 0; --k) list.ints.push_back(extremeInt(rng));
      a = std::move(list);
      break;
    }
    default:
      if (!a.ints.empty()) a.ints[rng() % a.ints.size()] = extremeInt(rng);
      else a = Arg::boolean(rng() & 1);
  }
}

// Edits one operator node of the file; false when it has none.
bool mutateOperator(magpy::record::RecordFile& file, std::mt19937_64& rng) {
  std::vector<std::pair<magpy::record::Graph*, size_t>> ops;
  for (auto& fn : file.functions)
    for (auto& rec : fn.records)
      for (size_t i = 0; i < rec.graph.nodes.size(); ++i)
        if (rec.graph.nodes[i].isOp()) ops.emplace_back(&rec.graph, i);
  if (ops.empty()) return false;
  auto [graph, index] = ops[rng() % ops.size()];
  Node& n = graph->nodes[index];
  switch (rng() % 5) {
    case 4:
      n.grad = magpy::record::GradMode(rng() % 3);
      break;
    case 0: {
      const auto& admitted = admittedOperators();
      if (admitted.empty()) return false;
      std::tie(n.target, n.overload) = admitted[rng() % admitted.size()];
      break;
    }
    case 1:
      if (n.args.empty()) n.args.push_back(Arg::none());
      mutateArg(n.args[rng() % n.args.size()], graph->nodes.size(), rng);
      break;
    case 2:
      if (!n.args.empty() && (rng() & 1)) n.args.pop_back();
      else n.args.push_back(Arg::node(int64_t(rng() % graph->nodes.size())));
      break;
    default:
      if (!n.args.empty()) std::swap(n.args[rng() % n.args.size()], n.args[rng() % n.args.size()]);
  }
  return true;
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize, unsigned int seed) {
  std::mt19937_64 rng(seed);
  if (rng() % 4 != 0) {  // mostly edits of the structure
    try {
      auto file = magpy::record::decode(magpy::record::wrapBody(std::string(reinterpret_cast<char*>(data), size)));
      if (mutateOperator(file, rng)) {
        std::string body = magpy::record::encodeBody(file);
        if (body.size() <= maxSize) {
          std::memcpy(data, body.data(), body.size());
          return body.size();
        }
      }
    } catch (const magpy::Error&) {
    }
  }
  return LLVMFuzzerMutate(data, size, maxSize);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  magpy::fuzz::replayBody(data, size);
  return 0;
}

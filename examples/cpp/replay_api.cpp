// Using magpy's replay library from a C++ program: load a record captured
// by magpy-capture, call its function on new inputs, read the result, and
// handle a call no record accepts.
//
//   magpy-capture examples/mlp.py          # writes mlp.mgp
//   build/bin/magpy-replay-example mlp.mgp
#include <ATen/ops/randn.h>

#include <iostream>

#include "magpy/replay/session.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: magpy-replay-example RECORD.mgp (a capture of examples/mlp.py)\n";
    return 2;
  }
  using namespace magpy::replay;
  try {
    Session session = Session::open(argv[1]);
    size_t mlp = session.findFunction("MLP");

    // A call with an input of the shape the record was captured with.
    CallOutcome out = session.call(mlp, {Value::ofTensor(at::randn({1, 16}))});
    std::cout << "record " << out.record << " ran: result " << describe(out.result) << "\n";

    // The state the function reads lives in the session.
    Value* scale = session.self(mlp).heap->attr("scale");
    std::cout << "self.scale = " << describe(*scale) << "\n";

    // A shape no record was captured for: replay refuses, saying why.
    try {
      session.call(mlp, {Value::ofTensor(at::randn({4, 16}))});
    } catch (const NoMatchingRecord& e) {
      for (auto& miss : e.misses()) std::cout << "refused: " << miss.text() << "\n";
    }
    return 0;
  } catch (const magpy::Error& e) {
    std::cerr << "magpy-replay-example: error: " << e.what() << "\n";
    return 2;
  }
}

// Times a TorchScript module (torch.jit.trace + freeze, saved by
// bench/export_torchscript.py) run from C++ with torch::jit::load, the way a
// C++ service would deploy it. Prints one JSON line.
//
//   magpy-bench-torchscript MODEL.pt INPUTS.pt CALLS THREADS
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: magpy-bench-torchscript MODEL.pt INPUTS.pt CALLS THREADS\n";
    return 2;
  }
  try {
    at::set_num_threads(std::stoi(argv[4]));
    torch::jit::Module module = torch::jit::load(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    c10::IValue saved = torch::jit::pickle_load(bytes);
    std::vector<c10::IValue> inputs = saved.toTupleRef().elements().vec();
    int calls = std::stoi(argv[3]);
    torch::NoGradGuard noGrad;
    for (int i = 0; i < std::max(3, calls / 10); ++i) module.forward(inputs);
    std::vector<double> us;
    for (int i = 0; i < calls; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      module.forward(inputs);
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("{\"median_us\": %.3f, \"min_us\": %.3f, \"peak_mb\": %.1f}\n", us[us.size() / 2], us.front(),
                usage.ru_maxrss / 1024.0);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "magpy-bench-torchscript: error: " << e.what() << "\n";
    return 2;
  }
}

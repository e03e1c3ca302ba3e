#include "replay/cuda_graph.h"

#include "magpy/replay/passes.h"

#ifdef MAGPY_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace magpy::replay {

#ifdef MAGPY_WITH_CUDA
namespace {

class Runner : public CudaGraphRunner {
 public:
  explicit Runner(const Plan& plan) : plan_(plan) {
    for (auto& p : plan.inputPaths())
      perCall_.push_back(p.root == record::AccessPath::Root::Arg || p.root == record::AccessPath::Root::Kwarg);
  }

  std::vector<c10::IValue> run(std::vector<c10::IValue> inputs) override {
    // Warm up first (libraries create handles, the allocator fills its pools).
    if (++runs_ <= kWarmup) return plan_.runWith(std::move(inputs));
    if (!captured_ || !sameState(inputs)) capture(inputs);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (perCall_[i]) staticIn_[i].toTensor().copy_(inputs[i].toTensor(), /*non_blocking=*/true);
    graph_->replay();
    // The graph overwrites its outputs on the next replay: callers get copies.
    std::vector<c10::IValue> out;
    for (auto& v : staticOut_) out.push_back(v.isTensor() ? c10::IValue(v.toTensor().clone()) : v);
    return out;
  }

 private:
  static constexpr int kWarmup = 2;

  // State tensors are captured in place: the graph is valid while they are
  // the same tensors at the same version.
  bool sameState(const std::vector<c10::IValue>& inputs) const {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (perCall_[i]) continue;
      const auto* impl = inputs[i].toTensor().unsafeGetTensorImpl();
      if (impl != staticIn_[i].toTensor().unsafeGetTensorImpl() || impl->version_counter().current_version() != versions_[i])
        return false;
    }
    return true;
  }

  void capture(const std::vector<c10::IValue>& inputs) {
    staticIn_.clear();
    versions_.clear();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& t = inputs[i].toTensor();
      staticIn_.push_back(perCall_[i] ? c10::IValue(t.clone()) : inputs[i]);
      versions_.push_back(t.unsafeGetTensorImpl()->version_counter().current_version());
    }
    graph_ = std::make_unique<at::cuda::CUDAGraph>();
    c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
    {
      c10::cuda::CUDAStreamGuard guard(stream);
      graph_->capture_begin();
      staticOut_ = plan_.runWith(staticIn_);
      graph_->capture_end();
    }
    c10::cuda::getCurrentCUDAStream().synchronize();
    captured_ = true;
  }

  const Plan& plan_;
  std::vector<bool> perCall_;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  std::vector<c10::IValue> staticIn_, staticOut_;
  std::vector<uint32_t> versions_;
  int runs_ = 0;
  bool captured_ = false;
};

}  // namespace

std::unique_ptr<CudaGraphRunner> CudaGraphRunner::make(const Plan& plan, const record::Graph& graph) {
  for (auto& n : graph.nodes)
    if ((n.isOp() && (writesArguments(n) || isRandom(n))) || record::isCheck(n.target) || record::readsItem(n))
      return nullptr;  // item() waits for the device, which a captured CUDA graph cannot
  return std::make_unique<Runner>(plan);
}
#else
std::unique_ptr<CudaGraphRunner> CudaGraphRunner::make(const Plan&, const record::Graph&) { return nullptr; }
#endif

}  // namespace magpy::replay

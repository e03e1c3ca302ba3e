#include "magpy/record/op_policy.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace magpy::record {
namespace {

struct Rule {
  const char* name;  // operator name without namespace
  const char* reason;
};

const Rule kForbidden[] = {
    {"from_file", "reads and writes files"},
    {"save", "writes files"},
    {"load", "reads files"},
    {"set_", "rebinds a tensor to another storage"},
    {"set", "rebinds a tensor to another storage"},
    {"set_data", "rebinds a tensor to another storage"},
    {"manual_seed", "changes the process's random generator"},
    {"seed", "changes the process's random generator"},
    {"set_grad_enabled", "changes the process's grad mode"},
    {"_cufft_set_plan_cache_max_size", "changes a process-wide cache"},
    {"_cufft_clear_plan_cache", "changes a process-wide cache"},
    {"_cudnn_init_dropout_state", "changes process-wide state"},
    {"record_stream", "changes how CUDA memory is reclaimed"},
    {"backward", "runs autograd on state outside the graph"},
    {"_backward", "runs autograd on state outside the graph"},
    {"retain_grad", "changes autograd state"},
    {"requires_grad_", "changes autograd state"},
    {"_sparse_coo_tensor_with_dims_and_tensors", "builds a sparse tensor without checking its indices"},
    {"_nested_tensor_from_tensor_list", "builds a nested tensor, which replay does not support"},
};

// Private operators (a leading underscore) are refused unless listed here:
// each was reviewed to check its own arguments against its inputs' sizes
// (libtorch's private helpers often trust their callers instead: the
// cummax helper's outputs, the Sobol engine's dimension, CTC's lengths).
// Records of Python programs name public operators almost always; these
// are the private ones real models reach at the top level.
const char* const kReviewedPrivate[] = {
    "_convolution",         "_log_softmax",          "_softmax",
    "_masked_softmax",      "_native_multi_head_attention", "_transformer_encoder_layer_fwd",
    "_weight_norm",         "_weight_norm_interface", "_pack_padded_sequence",
    "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa", "_reshape_alias",  // geometry checked by replay
    "_to_copy",             "_unsafe_view",          "_conj",
    "_neg_view",            "_shape_as_tensor",
    "_unique",              "_unique2",              // torch.unique: one input and flags; sizes from contents
};

// Operators that hand out another tensor's internals as a tensor of its
// own (a sparse tensor's indices and values): a write through one breaks
// the invariants the owner's kernels trust.
const char* const kInternalsAliases[] = {"indices", "values", "crow_indices", "col_indices", "ccol_indices",
                                         "row_indices"};

const char* const kGeometry[] = {"as_strided", "as_strided_", "as_strided_copy", "as_strided_scatter", "_reshape_alias"};
const char* const kGeometryChanging[] = {"t_", "transpose_", "swapaxes_", "swapdims_", "squeeze_", "unsqueeze_",
                                         "resize_", "resize_as_", "as_strided_", "_resize_output_", "set_"};
const char* const kDataDependentSizes[] = {"nonzero", "masked_select", "unique", "_unique", "_unique2", "unique_dim",
                                           "unique_consecutive", "unique_dim_consecutive", "argwhere", "bincount",
                                           "nonzero_numpy", "_unique_dim",
                                           "one_hot"};  // its class count defaults to its input's largest value

bool named(const std::string& target, const char* const* begin, const char* const* end) {
  if (target.compare(0, 6, "aten::") != 0) return false;
  return std::any_of(begin, end, [&](const char* name) { return target.compare(6, std::string::npos, name) == 0; });
}

bool endsWith(const std::string& s, const char* tail) {
  size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

}  // namespace

bool reviewedPrivate(const std::string& name) {
  return std::any_of(std::begin(kReviewedPrivate), std::end(kReviewedPrivate), [&](const char* n) { return name == n; });
}

std::string outsidePolicy(const std::string& target, const std::string& overload) {
  size_t sep = target.find("::");
  if (sep == std::string::npos) return "names no operator namespace";
  std::string ns = target.substr(0, sep), name = target.substr(sep + 2);
  if (ns != "aten" && ns != "quantized") return "is outside the ATen and quantized operator sets";
  for (const Rule& r : kForbidden)
    if (name == r.name) return r.reason;
  if (endsWith(name, "_unsafe")) return "builds a tensor without checking its arguments";
  if (name.find("sparse") != std::string::npos) return "makes or changes sparse tensors, whose indices the record chooses";
  if (named("aten::" + name, std::begin(kInternalsAliases), std::end(kInternalsAliases)))
    return "hands out a sparse tensor's internals, which a write through them would corrupt";
  if (name.find("backward") != std::string::npos)
    return "is a backward kernel, which trusts that its inputs came from its forward";
  if (name == "segment_reduce") return "may read past its input when told its lengths are safe (unsafe=True)";
  if (!name.empty() && name[0] == '_' && !reviewedPrivate(name))
    return "is a private helper not on the reviewed list (it may trust its caller's arguments)";
  if (overload.find("Storage") != std::string::npos) return "takes a raw storage";
  return "";
}

bool checksGeometry(const std::string& target) {
  return named(target, std::begin(kGeometry), std::end(kGeometry));
}

bool changesGeometry(const std::string& target) {
  return named(target, std::begin(kGeometryChanging), std::end(kGeometryChanging));
}

bool mayHaveDataDependentSizes(const std::string& target, const std::string& overload) {
  if (named(target, std::begin(kDataDependentSizes), std::end(kDataDependentSizes))) return true;
  // Repeats given as a tensor.
  if (target == "aten::repeat_interleave" && (overload == "Tensor" || overload == "self_Tensor")) return true;
  if (target == "aten::where" && overload.empty()) return true;  // where(cond) is nonzero
  return target == "aten::index";                                   // a bool mask selects
}

}  // namespace magpy::record

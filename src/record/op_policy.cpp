#include "magpy/record/op_policy.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <unordered_set>

#include "magpy/record/graph.h"

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
    // Public kernels found to trust an argument the record chooses.
    {"ctc_loss", "indexes its log-probabilities with target labels it does not check"},
    {"native_batch_norm", "trusts that its weight and bias match the input's channels"},
    {"native_channel_shuffle", "trusts that the groups divide the channels"},
    {"linalg_ldl_solve", "trusts the pivots it is given"},
};

// The reviewed operators: a record from others may make magpy-run call
// these and nothing else. Each is a public ATen operator that checks its
// own arguments against its inputs (sizes, indices, lengths: probed with
// far indices and mismatched sizes where the kernel takes them), or
// allocates what its arguments ask under the memory budget. Left out, with
// the reasons above or as families:
//   - TorchScript's builtins on Python values (strings, lists, dicts,
//     math.*), RRefs and futures, process-state getters, named tensors;
//   - quantized tensors, and kernels of one backend (cudnn_*, miopen_*,
//     mkldnn_*, fbgemm_*, slow_conv*): records name the generic operator;
//   - sparse and nested tensors and their internals;
//   - native_* and *_forward helpers, which trust their public wrapper's
//     checks, and SyncBatchNorm's CUDA helpers;
//   - fractional max pooling and rrelu_with_noise, which take random
//     positions or noise as tensors (not reviewed).
// Adding a name here is a review: check the kernel validates every index,
// length and size it takes from its arguments.
const char* const kReviewedPublic[] = {
    "abs", "abs_", "absolute", "absolute_", "acos", "acos_", "acosh", "acosh_", "adaptive_avg_pool1d",
    "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "add", "add_", "addbmm", "addbmm_", "addcdiv", "addcdiv_", "addcmul", "addcmul_", "addmm", "addmm_", "addmv",
    "addmv_", "addr", "addr_", "adjoint", "affine_grid_generator", "alias", "alias_copy", "all", "allclose",
    "alpha_dropout", "alpha_dropout_", "amax", "amin", "aminmax", "angle", "any", "arange", "arccos", "arccos_",
    "arccosh", "arccosh_", "arcsin", "arcsin_", "arcsinh", "arcsinh_", "arctan", "arctan2", "arctan2_", "arctan_",
    "arctanh", "arctanh_", "argmax", "argmin", "argsort", "argwhere", "as_strided", "as_strided_", "as_strided_copy",
    "as_strided_scatter", "asin", "asin_", "asinh", "asinh_", "atan", "atan2", "atan2_", "atan_", "atanh", "atanh_",
    "atleast_1d", "atleast_2d", "atleast_3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "baddbmm", "baddbmm_",
    "bartlett_window", "batch_norm", "bernoulli", "bernoulli_", "bilinear", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "bincount", "binomial", "bitwise_and", "bitwise_and_", "bitwise_left_shift",
    "bitwise_left_shift_", "bitwise_not", "bitwise_not_", "bitwise_or", "bitwise_or_", "bitwise_right_shift",
    "bitwise_right_shift_", "bitwise_xor", "bitwise_xor_", "blackman_window", "block_diag", "bmm",
    "broadcast_tensors", "broadcast_to", "bucketize", "can_cast", "cartesian_prod", "cat", "cauchy", "cauchy_",
    "cdist", "ceil", "ceil_", "celu", "celu_", "chain_matmul", "chalf", "channel_shuffle", "cholesky",
    "cholesky_inverse", "cholesky_solve", "chunk", "clamp", "clamp_", "clamp_max", "clamp_max_", "clamp_min",
    "clamp_min_", "clip", "clip_", "clone", "col2im", "column_stack", "combinations", "complex", "concat",
    "concatenate", "conj", "conj_physical", "conj_physical_", "constant_pad_nd", "contiguous", "conv1d", "conv2d",
    "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution", "copy", "copy_",
    "copysign", "copysign_", "corrcoef", "cos", "cos_", "cosh", "cosh_", "cosine_embedding_loss", "cosine_similarity",
    "count_nonzero", "cov", "cross", "cross_entropy_loss", "cummax", "cummin", "cumprod", "cumprod_", "cumsum",
    "cumsum_", "cumulative_trapezoid", "data", "deg2rad", "deg2rad_", "det", "detach", "detach_", "detach_copy",
    "diag", "diag_embed", "diagflat", "diagonal", "diagonal_copy", "diagonal_scatter", "diff", "digamma", "digamma_",
    "dist", "div", "div_", "divide", "divide_", "dot", "dropout", "dropout_", "dsplit", "dstack", "einsum", "elu",
    "elu_", "embedding", "embedding_bag", "embedding_renorm", "embedding_renorm_", "empty", "empty_like",
    "empty_strided", "eq", "eq_", "equal", "erf", "erf_", "erfc", "erfc_", "erfinv", "erfinv_", "exp", "exp2",
    "exp2_", "exp_", "expand", "expand_as", "expand_copy", "expm1", "expm1_", "exponential", "exponential_", "eye",
    "feature_alpha_dropout", "feature_alpha_dropout_", "feature_dropout", "feature_dropout_", "fft_fft", "fft_fft2",
    "fft_fftfreq", "fft_fftn", "fft_fftshift", "fft_hfft", "fft_hfft2", "fft_hfftn", "fft_ifft", "fft_ifft2",
    "fft_ifftn", "fft_ifftshift", "fft_ihfft", "fft_ihfft2", "fft_ihfftn", "fft_irfft", "fft_irfft2", "fft_irfftn",
    "fft_rfft", "fft_rfft2", "fft_rfftfreq", "fft_rfftn", "fill", "fill_", "fill_diagonal_", "fix", "fix_", "flatten",
    "flip", "fliplr", "flipud", "float_power", "float_power_", "floor", "floor_", "floor_divide", "floor_divide_",
    "fmax", "fmin", "fmod", "fmod_", "frac", "frac_", "frexp", "frobenius_norm", "full", "full_like", "gather", "gcd",
    "gcd_", "ge", "ge_", "gelu", "gelu_", "geometric", "geometric_", "geqrf", "ger", "glu", "gradient", "greater",
    "greater_", "greater_equal", "greater_equal_", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "group_norm",
    "gru", "gru_cell", "gt", "gt_", "hamming_window", "hann_window", "hardshrink", "hardsigmoid", "hardsigmoid_",
    "hardswish", "hardswish_", "hardtanh", "hardtanh_", "heaviside", "heaviside_", "hinge_embedding_loss", "histc",
    "histogram", "histogramdd", "hsplit", "hstack", "huber_loss", "hypot", "hypot_", "i0", "i0_", "igamma", "igamma_",
    "igammac", "igammac_", "im2col", "imag", "index", "index_add", "index_add_", "index_copy", "index_copy_",
    "index_fill", "index_fill_", "index_put", "index_put_", "index_reduce", "index_reduce_", "index_select", "inner",
    "instance_norm", "inverse", "is_complex", "is_conj", "is_floating_point", "is_inference", "is_leaf", "is_neg",
    "is_nonzero", "is_pinned", "is_same_size", "is_set_to", "is_signed", "isclose", "isfinite", "isin", "isinf",
    "isnan", "isneginf", "isposinf", "isreal", "istft", "item", "kaiser_window", "kl_div", "kron", "kthvalue",
    "l1_loss", "layer_norm", "lcm", "lcm_", "ldexp", "ldexp_", "le", "le_", "leaky_relu", "leaky_relu_", "lerp",
    "lerp_", "less", "less_", "less_equal", "less_equal_", "lgamma", "lgamma_", "lift", "lift_fresh",
    "lift_fresh_copy", "linalg_cholesky", "linalg_cholesky_ex", "linalg_cond", "linalg_cross", "linalg_det",
    "linalg_diagonal", "linalg_eig", "linalg_eigh", "linalg_eigvals", "linalg_eigvalsh", "linalg_householder_product",
    "linalg_inv", "linalg_inv_ex", "linalg_ldl_factor", "linalg_ldl_factor_ex", "linalg_lstsq", "linalg_lu",
    "linalg_lu_factor", "linalg_lu_factor_ex", "linalg_lu_solve", "linalg_matmul", "linalg_matrix_exp",
    "linalg_matrix_norm", "linalg_matrix_power", "linalg_matrix_rank", "linalg_multi_dot", "linalg_norm",
    "linalg_pinv", "linalg_qr", "linalg_slogdet", "linalg_solve", "linalg_solve_ex", "linalg_solve_triangular",
    "linalg_svd", "linalg_svdvals", "linalg_tensorinv", "linalg_tensorsolve", "linalg_vander", "linalg_vecdot",
    "linalg_vector_norm", "linear", "linspace", "log", "log10", "log10_", "log1p", "log1p_", "log2", "log2_", "log_",
    "log_normal", "log_normal_", "log_sigmoid", "log_softmax", "logaddexp", "logaddexp2", "logcumsumexp", "logdet",
    "logical_and", "logical_and_", "logical_not", "logical_not_", "logical_or", "logical_or_", "logical_xor",
    "logical_xor_", "logit", "logit_", "logspace", "logsumexp", "lstm", "lstm_cell", "lt", "lt_", "lu_solve",
    "lu_unpack", "mH", "mT", "margin_ranking_loss", "masked_fill", "masked_fill_", "masked_scatter",
    "masked_scatter_", "masked_select", "matmul", "matrix_H", "matrix_exp", "matrix_power", "max", "max_pool1d",
    "max_pool1d_with_indices", "max_pool2d", "max_pool2d_with_indices", "max_pool3d", "max_pool3d_with_indices",
    "max_unpool2d", "max_unpool3d", "maximum", "mean", "median", "meshgrid", "min", "minimum", "mish", "mish_", "mm",
    "mode", "moveaxis", "movedim", "mse_loss", "msort", "mul", "mul_", "multi_margin_loss", "multilabel_margin_loss",
    "multinomial", "multiply", "multiply_", "mv", "mvlgamma", "mvlgamma_", "nan_to_num", "nan_to_num_", "nanmean",
    "nanmedian", "nanquantile", "nansum", "narrow", "narrow_copy", "ne", "ne_", "neg", "neg_", "negative",
    "negative_", "new_empty", "new_empty_strided", "new_full", "new_ones", "new_zeros", "nextafter", "nextafter_",
    "nll_loss", "nll_loss2d", "nll_loss_nd", "nonzero", "nonzero_numpy", "norm", "norm_except_dim", "normal",
    "normal_", "not_equal", "not_equal_", "nuclear_norm", "numpy_T", "one_hot", "ones", "ones_like", "orgqr", "ormqr",
    "outer", "output_nr", "pad", "pad_sequence", "pairwise_distance", "pdist", "permute", "permute_copy",
    "pin_memory", "pinverse", "pixel_shuffle", "pixel_unshuffle", "poisson", "poisson_nll_loss", "polar", "polygamma",
    "polygamma_", "positive", "pow", "pow_", "prelu", "prod", "promote_types", "put", "put_", "qr", "quantile",
    "rad2deg", "rad2deg_", "rand", "rand_like", "randint", "randint_like", "randn", "randn_like", "random", "random_",
    "randperm", "range", "ravel", "real", "reciprocal", "reciprocal_", "reflection_pad1d", "reflection_pad2d",
    "reflection_pad3d", "relu", "relu6", "relu6_", "relu_", "remainder", "remainder_", "renorm", "renorm_", "repeat",
    "repeat_interleave", "replication_pad1d", "replication_pad2d", "replication_pad3d", "reshape", "reshape_as",
    "resize", "resize_", "resize_as", "resize_as_", "resolve_conj", "resolve_neg", "result_type", "retains_grad",
    "rnn_relu", "rnn_relu_cell", "rnn_tanh", "rnn_tanh_cell", "roll", "rot90", "round", "round_", "row_stack",
    "rrelu", "rrelu_", "rsqrt", "rsqrt_", "rsub", "scalar_tensor", "scatter", "scatter_", "scatter_add",
    "scatter_add_", "scatter_reduce", "scatter_reduce_", "searchsorted", "select", "select_copy", "select_scatter",
    "selu", "selu_", "sgn", "sgn_", "sigmoid", "sigmoid_", "sign", "sign_", "signbit", "silu", "silu_", "sin", "sin_",
    "sinc", "sinc_", "sinh", "sinh_", "size", "slice", "slice_copy", "slice_scatter", "slogdet", "smooth_l1_loss",
    "soft_margin_loss", "softmax", "softplus", "softshrink", "sort", "special_airy_ai", "special_bessel_j0",
    "special_bessel_j1", "special_bessel_y0", "special_bessel_y1", "special_chebyshev_polynomial_t",
    "special_chebyshev_polynomial_u", "special_chebyshev_polynomial_v", "special_chebyshev_polynomial_w",
    "special_digamma", "special_entr", "special_erf", "special_erfc", "special_erfcx", "special_erfinv",
    "special_exp2", "special_expit", "special_expm1", "special_gammainc", "special_gammaincc", "special_gammaln",
    "special_hermite_polynomial_h", "special_hermite_polynomial_he", "special_i0", "special_i0e", "special_i1",
    "special_i1e", "special_laguerre_polynomial_l", "special_legendre_polynomial_p", "special_log1p",
    "special_log_ndtr", "special_log_softmax", "special_logit", "special_logsumexp", "special_modified_bessel_i0",
    "special_modified_bessel_i1", "special_modified_bessel_k0", "special_modified_bessel_k1", "special_multigammaln",
    "special_ndtr", "special_ndtri", "special_polygamma", "special_psi", "special_round",
    "special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k1",
    "special_shifted_chebyshev_polynomial_t", "special_shifted_chebyshev_polynomial_u",
    "special_shifted_chebyshev_polynomial_v", "special_shifted_chebyshev_polynomial_w", "special_sinc",
    "special_softmax", "special_spherical_bessel_j0", "special_xlog1py", "special_xlogy", "special_zeta", "split",
    "split_copy", "split_with_sizes", "split_with_sizes_copy", "sqrt", "sqrt_", "square", "square_", "squeeze",
    "squeeze_", "squeeze_copy", "stack", "std", "std_mean", "stft", "stride", "sub", "sub_", "subtract", "subtract_",
    "sum", "sum_to_size", "svd", "swapaxes", "swapaxes_", "swapdims", "swapdims_", "symeig", "t", "t_", "t_copy",
    "take", "take_along_dim", "tan", "tan_", "tanh", "tanh_", "tensor_split", "tensordot", "threshold", "threshold_",
    "tile", "to", "to_dense", "topk", "trace", "transpose", "transpose_", "transpose_copy", "trapezoid", "trapz",
    "triangular_solve", "tril", "tril_", "tril_indices", "triplet_margin_loss", "triu", "triu_", "triu_indices",
    "true_divide", "true_divide_", "trunc", "trunc_", "type_as", "unbind", "unbind_copy", "unflatten", "unfold",
    "unfold_copy", "uniform", "uniform_", "unique_consecutive", "unique_dim", "unique_dim_consecutive",
    "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes", "unsqueeze", "unsqueeze_", "unsqueeze_copy",
    "upsample_bicubic2d", "upsample_bilinear2d", "upsample_linear1d", "upsample_nearest1d", "upsample_nearest2d",
    "upsample_nearest3d", "upsample_trilinear3d", "vander", "var", "var_mean", "vdot", "view", "view_as",
    "view_as_complex", "view_as_complex_copy", "view_as_real", "view_as_real_copy", "view_copy", "vsplit", "vstack",
    "where", "xlogy", "xlogy_", "zero", "zero_", "zeros", "zeros_like",
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
    "_pad_packed_sequence",  // batch sizes checked by replay
    "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa", "_reshape_alias",  // geometry checked by replay
    "_to_copy",             "_unsafe_view",          "_conj",
    "_neg_view",            "_shape_as_tensor",
    "_unique",              "_unique2",              // torch.unique: one input and flags; sizes from contents
    // Python's & | ^ on tensors (conditions: `if a & b:`): bitwise_and/or/xor, whose TensorIterator checks
    // the operands' sizes and dtypes.
    "__and__", "__or__", "__xor__", "__iand__", "__ior__", "__ixor__",
    // The foreach arithmetic torch.optim's foreach paths run: each checks that its lists are non-empty and of
    // one length (tensors and scalars), then runs the public operator per tensor (which checks sizes and
    // dtypes), or a fused kernel only where every tensor's size, stride, dtype and device agree.
    "_foreach_add", "_foreach_add_", "_foreach_sub", "_foreach_sub_", "_foreach_mul", "_foreach_mul_",
    "_foreach_div", "_foreach_div_", "_foreach_addcmul", "_foreach_addcmul_", "_foreach_addcdiv",
    "_foreach_addcdiv_", "_foreach_sqrt", "_foreach_sqrt_", "_foreach_neg", "_foreach_neg_",
    "_foreach_reciprocal", "_foreach_reciprocal_", "_foreach_maximum", "_foreach_maximum_", "_foreach_zero_",
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

bool reviewed(const std::string& name) {
  static const std::vector<std::string> list = reviewedOperators();
  static const std::unordered_set<std::string> names(list.begin(), list.end());
  return names.count(name) != 0;
}

std::vector<std::string> reviewedOperators() {
  std::vector<std::string> all(std::begin(kReviewedPublic), std::end(kReviewedPublic));
  all.insert(all.end(), std::begin(kReviewedPrivate), std::end(kReviewedPrivate));
  return all;
}

std::string outsidePolicy(const std::string& target, const std::string& overload) {
  size_t sep = target.find("::");
  if (sep == std::string::npos) return "names no operator namespace";
  std::string ns = target.substr(0, sep), name = target.substr(sep + 2);
  // The collectives (graph.h) check their tensor lists and root rank; the
  // ranks replay the same records (replay::formGroup), so their sizes agree.
  if (ns == "c10d") return isCollective(target) && overload.empty() ? "" : "is a torch.distributed operator magpy does not replay";
  if (ns != "aten") return "is outside the ATen operator set";
  // What a refused operator does, where it is known, says more than that
  // it is missing from the list.
  for (const Rule& r : kForbidden)
    if (name == r.name) return r.reason;
  if (endsWith(name, "_unsafe")) return "builds a tensor without checking its arguments";
  if (name.find("sparse") != std::string::npos) return "makes or changes sparse tensors, whose indices the record chooses";
  if (named("aten::" + name, std::begin(kInternalsAliases), std::end(kInternalsAliases)))
    return "hands out a sparse tensor's internals, which a write through them would corrupt";
  if (name.find("backward") != std::string::npos)
    return "is a backward kernel, which trusts that its inputs came from its forward";
  if (name == "segment_reduce") return "may read past its input when told its lengths are safe (unsafe=True)";
  if (overload.find("Storage") != std::string::npos) return "takes a raw storage";
  if (!reviewed(name)) {
    if (name[0] == '_') return "is a private helper not on the reviewed list (it may trust its caller's arguments)";
    return "is not on the reviewed operator list (it may trust arguments the record chooses)";
  }
  return "";
}

const char* trustedArgument(const std::string& target) {
  // searchsorted's sorter indexes the sorted sequence unchecked.
  if (target == "aten::searchsorted") return "sorter";
  return nullptr;
}

ArgumentCheck checksArguments(const std::string& target) {
  if (named(target, std::begin(kGeometry), std::end(kGeometry))) return ArgumentCheck::Geometry;
  return target == "aten::_pad_packed_sequence" ? ArgumentCheck::BatchSizes : ArgumentCheck::None;
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

// The operator policy against every schema libtorch registers: what it
// admits is public and forward-only, or reviewed; what records from
// others were found to abuse is refused.
#include <gtest/gtest.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <set>

#include "magpy/record/op_policy.h"

using magpy::record::outsidePolicy;

TEST(OpPolicy, AdmitsOnlyPublicForwardOperatorsOrReviewedOnes) {
  size_t admitted = 0, schemas = 0;
  std::set<std::string> privateSeen;
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
    ++schemas;
    std::string why = outsidePolicy(op.name, op.overload_name);
    std::string name = op.name.substr(op.name.find("::") + 2);
    if (op.name.rfind("aten::_", 0) == 0) privateSeen.insert(name);
    if (!why.empty()) continue;
    ++admitted;
    EXPECT_EQ(name.find("backward"), std::string::npos) << op.name;
    EXPECT_EQ(name.find("sparse"), std::string::npos) << op.name;
    EXPECT_TRUE(name[0] != '_' || magpy::record::reviewedPrivate(name)) << op.name << " admitted without review";
  }
  EXPECT_GT(schemas, 2000u);  // the walk saw libtorch's registry
  EXPECT_GT(admitted, 500u);  // and the policy still admits the operators models use
  // Every reviewed private operator exists (no typo, none renamed away).
  for (const char* name : {"_convolution", "_log_softmax", "_softmax", "_masked_softmax", "_native_multi_head_attention",
                           "_transformer_encoder_layer_fwd", "_weight_norm", "_weight_norm_interface",
                           "_pack_padded_sequence", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa",
                           "_reshape_alias", "_to_copy", "_unsafe_view", "_conj", "_neg_view", "_shape_as_tensor"}) {
    EXPECT_TRUE(magpy::record::reviewedPrivate(name)) << name;
    EXPECT_TRUE(privateSeen.count(name)) << name << " is not a libtorch operator";
  }
}

TEST(OpPolicy, RefusesTheOperatorsHostileRecordsUsed) {
  const char* hostile[][2] = {
      {"aten::max_pool2d_with_indices_backward", ""}, {"aten::adaptive_max_pool2d_backward", ""},
      {"aten::max_pool3d_with_indices_backward", ""}, {"aten::_cummax_helper", ""},
      {"aten::_sobol_engine_initialize_state_", ""},  {"aten::_sobol_engine_draw", ""},
      {"aten::_sobol_engine_ff_", ""},                {"aten::segment_reduce", ""},
      {"aten::_reshape_alias_copy", ""},              {"aten::to_sparse", ""},
      {"aten::to_sparse_csr", ""},                    {"aten::_indices", ""},
      {"aten::col_indices", ""},                      {"aten::values", ""},
      {"aten::_ctc_loss_backward", ""},               {"aten::from_file", ""},
      {"aten::_empty_affine_quantized", ""},          {"aten::set_", "source_Storage"},
  };
  for (auto& [op, overload] : hostile) EXPECT_NE(outsidePolicy(op, overload), "") << op;
  for (const char* op : {"aten::linear", "aten::conv2d", "aten::add", "aten::softmax", "aten::layer_norm", "aten::to_dense",
                         "aten::index_select", "aten::embedding", "aten::_native_multi_head_attention"})
    EXPECT_EQ(outsidePolicy(op, ""), "") << op;
}

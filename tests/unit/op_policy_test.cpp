// The operator policy against every schema libtorch registers: what it
// admits is public and forward-only, or reviewed; what records from
// others were found to abuse is refused.
#include <gtest/gtest.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <set>

#include "magpy/record/graph.h"
#include "magpy/record/op_policy.h"

using magpy::record::outsidePolicy;

TEST(OpPolicy, AdmitsOnlyReviewedOperators) {
  size_t admitted = 0, schemas = 0;
  std::set<std::string> atenNames;
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
    ++schemas;
    std::string why = outsidePolicy(op.name, op.overload_name);
    std::string name = op.name.substr(op.name.find("::") + 2);
    if (op.name.rfind("aten::", 0) == 0) atenNames.insert(name);
    if (!why.empty()) continue;
    ++admitted;
    if (magpy::record::isCollective(op.name)) continue;  // c10d's, reviewed with their own checks (graph.h)
    EXPECT_EQ(op.name.rfind("aten::", 0), 0u) << op.name;
    EXPECT_TRUE(magpy::record::reviewed(name)) << op.name << " admitted without review";
    EXPECT_EQ(name.find("backward"), std::string::npos) << op.name;
    EXPECT_EQ(name.find("sparse"), std::string::npos) << op.name;
  }
  EXPECT_GT(schemas, 2000u);  // the walk saw libtorch's registry
  EXPECT_GT(admitted, 500u);  // and the policy still admits the operators models use
  // Every reviewed name is an operator of this libtorch (no typo, none
  // renamed away) and outside the families the policy refuses.
  for (const std::string& name : magpy::record::reviewedOperators()) {
    EXPECT_TRUE(atenNames.count(name)) << name << " is not a libtorch operator";
    EXPECT_EQ(outsidePolicy("aten::" + name, ""), "") << name;
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
      {"aten::ctc_loss", "IntList"},                  {"aten::native_batch_norm", ""},
      {"aten::linalg_ldl_solve", ""},                 {"aten::cudnn_convolution", ""},
      {"aten::mkldnn_reorder_conv2d_weight", ""},     {"aten::fbgemm_pack_quantized_matrix", ""},
      {"quantized::relu6", ""},                       {"aten::native_channel_shuffle", ""},
  };
  for (auto& [op, overload] : hostile) EXPECT_NE(outsidePolicy(op, overload), "") << op;
  for (const char* op : {"aten::linear", "aten::conv2d", "aten::add", "aten::softmax", "aten::layer_norm", "aten::to_dense",
                         "aten::index_select", "aten::embedding", "aten::_native_multi_head_attention",
                         "aten::searchsorted", "aten::lstm", "aten::group_norm"})
    EXPECT_EQ(outsidePolicy(op, ""), "") << op;
}

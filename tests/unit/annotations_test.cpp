#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "magpy/record/annotations.h"
#include "magpy/support/error.h"

using namespace magpy;
using namespace magpy::record;

namespace {

std::string write(const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("magpy_ann_" + std::to_string(std::hash<std::string>()(text)) + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

std::string loadError(const std::string& text) {
  AnnotationSet set;
  try {
    set.load(write(text));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Annotations, ShippedFilesLoadAndCoverTheBasics) {
  AnnotationSet set;
  set.load(std::string(MAGPY_SOURCE_DIR) + "/annotations");
  ASSERT_NE(set.find("builtins.len"), nullptr);
  EXPECT_TRUE(set.find("builtins.len")->pure);
  EXPECT_FALSE(set.find("builtins.print")->pure);
  ASSERT_NE(set.find("torch.relu"), nullptr);
  EXPECT_TRUE(set.find("torch.relu")->op);
  EXPECT_TRUE(set.find("torch.Tensor.view")->op);
  EXPECT_FALSE(set.find("torch.Tensor.item")->op);  // an exact entry wins over torch.Tensor.*
  EXPECT_EQ(set.find("torch.nn.modules.module.Module._call_impl"), nullptr);  // patterns cover one level only
  const auto* getattr = set.find("builtins.getattr");
  ASSERT_EQ(getattr->relations.size(), 1u);
  EXPECT_EQ(getattr->relations[0].name_from, 1);
}

TEST(Annotations, HashFollowsContentNotFormatting) {
  AnnotationSet a, b, c;
  a.load(write("version: 1\nfunctions:\n  - name: m.f\n    pure: false\n"));
  b.load(write("# a comment\nversion: 1\nfunctions: [{name: m.f, pure: false}]\n"));
  c.load(write("version: 1\nfunctions:\n  - name: m.f\n"));
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a.hash(), c.hash());
}

TEST(Annotations, ErrorsNameTheFileLineAndProblem) {
  std::string e = loadError("version: 1\nfunctions:\n  - name: m.f\n    valu_read: true\n");
  EXPECT_NE(e.find(":4: unknown key 'valu_read'"), std::string::npos) << e;
  e = loadError("version: 2\nfunctions: []\n");
  EXPECT_NE(e.find("unsupported annotation format version"), std::string::npos) << e;
  e = loadError("version: 1\nfunctions:\n  - name: m.f\n    pure: maybe\n");
  EXPECT_NE(e.find("'pure' must be true or false"), std::string::npos) << e;
  e = loadError("version: 1\nfunctions:\n  - name: m.f\n  - name: m.f\n");
  EXPECT_NE(e.find("m.f is already annotated"), std::string::npos) << e;
  e = loadError("version: 1\nfunctions:\n  - name: m.f\n    relations: [{kind: slot, from: 0, name: x}]\n");
  EXPECT_NE(e.find("kind must be 'attr' or 'item'"), std::string::npos) << e;
  e = loadError("version: 1\nfunctions: [\n");
  EXPECT_NE(e.find("not valid YAML"), std::string::npos) << e;
}

TEST(Annotations, MetadataReadsAndReasons) {
  AnnotationSet set;
  set.load(write("version: 1\nfunctions:\n"
                 "  - name: m.length\n    inputs: [{value_read: metadata}, {value_read: false}]\n"
                 "  - name: m.draw\n    pure: false\n    reason: draws random numbers\n"));
  const auto* length = set.find("m.length");
  ASSERT_NE(length, nullptr);
  EXPECT_TRUE(length->input(0).value_read && length->input(0).metadata_only);
  EXPECT_FALSE(length->input(1).value_read || length->input(1).metadata_only);
  EXPECT_FALSE(length->input(2).metadata_only);  // rest: read whole
  EXPECT_EQ(set.find("m.draw")->whyDynamic("m.draw").rfind("m.draw draws random numbers (annotated pure: false at ", 0), 0u);
  AnnotationSet plain;
  plain.load(write("version: 1\nfunctions:\n  - name: m.length\n    inputs: [{value_read: true}, {value_read: false}]\n"
                   "  - name: m.draw\n    pure: false\n    reason: draws random numbers\n"));
  EXPECT_NE(set.hash(), plain.hash());  // metadata is part of the content

  std::string e = loadError("version: 1\nfunctions:\n  - name: m.f\n    reason: why\n");
  EXPECT_NE(e.find(":4: 'reason' is a sentence, for an entry with pure: false"), std::string::npos) << e;
  e = loadError("version: 1\nfunctions:\n  - name: m.f\n    inputs: [{value_read: shape}]\n");
  EXPECT_NE(e.find("'value_read' must be true or false (or metadata, state or identity)"), std::string::npos) << e;

  // identity: of a tensor, its hash (set membership), not its contents.
  AnnotationSet hashed;
  hashed.load(write("version: 1\nfunctions:\n  - name: m.add\n    inputs: [{in_place: true}]\n"
                    "    rest: {value_read: identity}\n"));
  const auto* add = hashed.find("m.add");
  ASSERT_NE(add, nullptr);
  EXPECT_TRUE(add->input(1).value_read && add->input(1).identity_only && !add->input(1).object_state);
  EXPECT_TRUE(add->input(0).in_place);  // listed inputs start from rest
}

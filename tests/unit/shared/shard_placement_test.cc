// shard_placement.h: the text of a placement reads back as it was written, text that is
// not one is refused, and a placement that cannot describe its part is said to be so.
#include "tensorscope/shared/shard_placement.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tensorscope {
namespace {

TEST(ShardPlacement, TextReadsBackAsWritten) {
  const std::vector<std::vector<MeshDim>> cases = {
      {},
      {{MeshPlacement::kShard, 0, 1, 4}},
      {{MeshPlacement::kReplicate, 0, 0, 2}, {MeshPlacement::kShard, 1, 3, 4}},
      {{MeshPlacement::kPartial, 0, 7, 8}},
      {{MeshPlacement::kShard, 0, 0, 1},
       {MeshPlacement::kShard, 2, 1, 2},
       {MeshPlacement::kReplicate, 0, 4, 5},
       {MeshPlacement::kShard, 255, 4294967294u, 4294967295u}},
  };
  for (const auto& dims : cases) {
    const std::string text = shard_text(dims);
    std::vector<MeshDim> back = {{MeshPlacement::kShard, 9, 9, 10}};
    ASSERT_TRUE(parse_shard_text(text, &back)) << text;
    EXPECT_EQ(back, dims) << text;
  }
  EXPECT_EQ(shard_text({{MeshPlacement::kReplicate, 0, 0, 2}, {MeshPlacement::kShard, 1, 3, 4}}), "R@0/2|S1@3/4");
}

TEST(ShardPlacement, TextThatIsNotOneIsRefused) {
  std::vector<MeshDim> dims;
  for (const char* bad : {"S", "S0", "S0@1", "S0@1/", "S0@2/2", "S0@0/0", "X@0/1", "S0@0/1|", "|S0@0/1", "S0@0/1S0@0/1",
                          "S256@0/1", "S0@-1/2", "S0@0/1 ", "R@0/1|R@0/1|R@0/1|R@0/1|R@0/1", "S0@0/99999999999"}) {
    EXPECT_FALSE(parse_shard_text(bad, &dims)) << bad;
  }
}

TEST(ShardPlacement, APlacementThatCannotBeIsSaidToBe) {
  ShardPlacement p;
  EXPECT_EQ(shard_refusal(p, 10), "");
  p.whole_numel = 10;
  EXPECT_NE(shard_refusal(p, 10), "") << "a whole count without a mesh";
  p.dims = {{MeshPlacement::kShard, 0, 1, 2}};
  EXPECT_EQ(shard_refusal(p, 5), "");
  EXPECT_NE(shard_refusal(p, 11), "") << "a part larger than its whole";
  p.dims[0].coordinate = 2;
  EXPECT_NE(shard_refusal(p, 5), "");
  p.dims[0] = MeshDim{static_cast<MeshPlacement>(9), 0, 0, 1};
  EXPECT_NE(shard_refusal(p, 5), "");
  p.dims.assign(kMaxMeshDims + 1, MeshDim{MeshPlacement::kReplicate, 0, 0, 1});
  EXPECT_NE(shard_refusal(p, 5), "");
}

}  // namespace
}  // namespace tensorscope

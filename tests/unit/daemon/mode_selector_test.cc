// Which render mode a record gets: config rules, then the client's hint, then the
// configured mode; "auto" by shape.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "worker/mode_selector.h"

namespace tensorscope::daemon {
namespace {

// A header on the heap, handed out by reference (RecordHeader cannot be copied).
const wire::RecordHeader& header(const char* name, std::vector<int64_t> shape, uint8_t hint = 0) {
  static std::vector<std::unique_ptr<wire::RecordHeader>> keep;
  keep.push_back(std::make_unique<wire::RecordHeader>());
  wire::RecordHeader& h = *keep.back();
  std::snprintf(h.name, wire::kNameBytes, "%s", name);
  h.ndim = static_cast<uint8_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) h.shape[d] = shape[d];
  h.render_hint = hint;
  return h;
}

TEST(ModeSelector, AutoGoesByShape) {
  EXPECT_EQ(mode_by_shape(header("s", {})), RenderMode::kStats);
  EXPECT_EQ(mode_by_shape(header("s", {1, 1})), RenderMode::kStats);
  EXPECT_EQ(mode_by_shape(header("s", {10})), RenderMode::kLine);
  EXPECT_EQ(mode_by_shape(header("s", {0})), RenderMode::kLine);
  EXPECT_EQ(mode_by_shape(header("s", {3, 4})), RenderMode::kHeatmap);
  EXPECT_EQ(mode_by_shape(header("s", {2, 3, 4})), RenderMode::kHistogram);
}

TEST(ModeSelector, RulesThenHintThenConfiguredMode) {
  RenderConfig config;
  config.mode = RenderMode::kHistogram;
  config.stream_modes = {{"\\.attn$", RenderMode::kHeatmap}, {"^loss", RenderMode::kAuto}};
  ModeSelector selector(config);
  const auto hinted = static_cast<uint8_t>(wire::RenderHint::kPca);
  // A matching rule wins over the client's hint.
  EXPECT_EQ(selector.select(header("enc.0.attn", {4, 4}, hinted)), RenderMode::kHeatmap);
  // A rule that says auto resolves by shape.
  EXPECT_EQ(selector.select(header("loss", {})), RenderMode::kStats);
  // No rule: the client's hint.
  EXPECT_EQ(selector.select(header("enc.0.mlp", {4, 4}, hinted)), RenderMode::kPca);
  // No rule, no hint: the configured mode.
  EXPECT_EQ(selector.select(header("enc.0.mlp", {4, 4})), RenderMode::kHistogram);
  // Rules are searched anywhere in the name, cached answers stay right.
  EXPECT_EQ(selector.select(header("dec.attn", {2})), RenderMode::kHeatmap);
  EXPECT_EQ(selector.select(header("dec.attn", {2})), RenderMode::kHeatmap);
  EXPECT_EQ(selector.select(header("dec.attn.x", {2})), RenderMode::kHistogram);
}

TEST(ModeSelector, AutoHintResolvesByShape) {
  RenderConfig config;
  config.mode = RenderMode::kHistogram;
  ModeSelector selector(config);
  EXPECT_EQ(selector.select(header("v", {5}, static_cast<uint8_t>(wire::RenderHint::kAuto))), RenderMode::kLine);
}

}  // namespace
}  // namespace tensorscope::daemon

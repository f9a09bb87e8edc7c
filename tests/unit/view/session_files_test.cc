// session_files_test.cc — finished videos as the view sees them: index.json re-read when it
// changes, a step mapped to the frame of a finished video that shows it.
#include "session_files.h"

#include "tensorscope/recording/video_steps.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "temp_dir.h"

namespace tensorscope::view {
namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string steps_file(const std::string& stream, const std::vector<int64_t>& steps) {
  std::string s = std::string(recording::kStepsMagic) + "\n{\"stream\":\"" + stream +
      "\",\"kind\":\"output\",\"device\":\"cpu\",\"rank\":0,\"pid\":1,\"mode\":\"line\"}\n";
  for (int64_t v : steps) s += std::to_string(v) + "\n";
  return s;
}

std::string entry(const std::string& path, const std::string& stream, int64_t frames, int64_t first, int64_t last) {
  return "{\"path\":\"" + path + "\",\"stream\":\"" + stream +
      "\",\"kind\":\"output\",\"device\":\"cpu\",\"rank\":0,\"pid\":1,\"mode\":\"line\",\"frames\":" +
      std::to_string(frames) + ",\"first_step\":" + std::to_string(first) + ",\"last_step\":" + std::to_string(last) +
      "}";
}

TEST(SessionFilesTest, AStepMapsToTheFrameAtOrBeforeIt) {
  testing::TempDir dir("files");
  ::mkdir((dir.path() + "/steps").c_str(), 0755);
  write_file(dir.path() + "/steps/a0.mp4.steps", steps_file("a", {0, 2, 4, 6}));
  write_file(dir.path() + "/steps/a1.mp4.steps", steps_file("a", {10, 12}));
  write_file(dir.path() + "/index.json",
             "{\"files\":[" + entry("a1.mp4", "a", 2, 10, 12) + "," + entry("a0.mp4", "a", 4, 0, 6) + "]}");
  SessionFiles files(dir.path());
  EXPECT_TRUE(files.refresh());
  EXPECT_FALSE(files.refresh());  // unchanged
  EXPECT_TRUE(files.listed("a0.mp4"));
  EXPECT_FALSE(files.listed("index.json"));
  auto at5 = files.frame_at("a", "cpu", 0, "line", 5);
  ASSERT_TRUE(at5.has_value());
  EXPECT_EQ(at5->path, "a0.mp4");
  EXPECT_EQ(at5->frame, 2);
  EXPECT_EQ(at5->frames, 4);
  EXPECT_EQ(at5->step, 4);
  auto at11 = files.frame_at("a", "cpu", 0, "line", 11);
  ASSERT_TRUE(at11.has_value());
  EXPECT_EQ(at11->path, "a1.mp4");
  EXPECT_EQ(at11->frame, 0);
  EXPECT_EQ(files.frame_at("a", "cpu", 0, "line", 1000)->step, 12);
  EXPECT_FALSE(files.frame_at("a", "cpu", 0, "line", -1).has_value());
  EXPECT_FALSE(files.frame_at("a", "cpu", 1, "line", 5).has_value());
  EXPECT_FALSE(files.frame_at("b", "cpu", 0, "line", 5).has_value());
}

TEST(SessionFilesTest, AChangedIndexIsReadAgainAndACorruptOneKeepsTheLastGood) {
  testing::TempDir dir("files");
  SessionFiles files(dir.path());
  EXPECT_FALSE(files.refresh());  // no index yet
  EXPECT_TRUE(files.entries().empty());
  write_file(dir.path() + "/index.json", "{\"files\":[" + entry("a0.mp4", "a", 4, 0, 6) + "]}");
  EXPECT_TRUE(files.refresh());
  EXPECT_EQ(files.entries().size(), 1u);
  write_file(dir.path() + "/index.json", "{\"files\": [ {\"path\": \"../../etc/passwd\"");
  EXPECT_FALSE(files.refresh());
  EXPECT_FALSE(files.last_error().empty());
  EXPECT_EQ(files.entries().size(), 1u);
  // A video without its steps file cannot be placed at a step.
  EXPECT_FALSE(files.frame_at("a", "cpu", 0, "line", 3).has_value());
}

}  // namespace
}  // namespace tensorscope::view

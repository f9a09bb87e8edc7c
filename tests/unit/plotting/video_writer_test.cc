// VideoWriter round trips through cv::VideoCapture, never replaces an existing final
// file, and cleans up its temporary file when abandoned.
#include "tensorscope/plotting/video_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include "test_util.h"

namespace tensorscope::plotting {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

cv::Mat test_frame(int i, cv::Size size = {320, 240}) {
  cv::Mat m(size, CV_8UC3, cv::Scalar(40, 30, 20));
  cv::rectangle(m, cv::Rect(10 + 5 * i, 20, 60, 80), cv::Scalar(200, 150, 60), cv::FILLED);
  cv::putText(m, std::to_string(i), {150, 150}, cv::FONT_HERSHEY_SIMPLEX, 2, {255, 255, 255}, 3);
  return m;
}

// Frames decoded by cv::VideoCapture (and what the container claims).
struct Readback {
  bool opened = false;
  double claimed = -1;
  int decoded = 0;
  cv::Size size;
};
Readback read_back(const std::string& path) {
  Readback r;
  cv::VideoCapture capture(path);
  r.opened = capture.isOpened();
  if (!r.opened) return r;
  r.claimed = capture.get(cv::CAP_PROP_FRAME_COUNT);
  cv::Mat frame;
  while (capture.read(frame)) {
    r.size = frame.size();
    ++r.decoded;
  }
  return r;
}

std::string write_file(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class Codecs : public ::testing::TestWithParam<std::string> {};

TEST_P(Codecs, RoundTrip) {
  TempDir dir;
  const std::string final_path = dir.file("stream.mp4");
  const std::string temp_path = dir.file(".tmp-stream.mp4");
  VideoWriter writer;
  std::string error;
  ASSERT_TRUE(writer.open(final_path, temp_path, 320, 240, 10, GetParam(), &error)) << error;
  EXPECT_TRUE(writer.is_open());
  if (GetParam() == "auto") {
    EXPECT_TRUE(writer.codec() == "avc1" || writer.codec() == "mp4v") << writer.codec();
  } else {
    EXPECT_EQ(writer.codec(), GetParam());
  }
  const int kFrames = 17;
  for (int i = 0; i < kFrames; ++i) ASSERT_TRUE(writer.write(test_frame(i)));
  EXPECT_EQ(writer.frames(), kFrames);
  EXPECT_TRUE(fs::exists(temp_path));
  EXPECT_FALSE(fs::exists(final_path)) << "nothing under the final name before finalize";
  std::string used;
  ASSERT_TRUE(writer.finalize(&used, &error)) << error;
  EXPECT_EQ(used, final_path);
  EXPECT_FALSE(writer.is_open());
  EXPECT_FALSE(fs::exists(temp_path));
  const Readback r = read_back(final_path);
  ASSERT_TRUE(r.opened);
  EXPECT_EQ(r.claimed, kFrames);
  EXPECT_EQ(r.decoded, kFrames);
  EXPECT_EQ(r.size, cv::Size(320, 240));
}

INSTANTIATE_TEST_SUITE_P(VideoWriter, Codecs, ::testing::Values("auto", "avc1", "mp4v"));

TEST(VideoWriter, ConvertsAndResizesFrames) {
  TempDir dir;
  VideoWriter writer;
  std::string error;
  ASSERT_TRUE(writer.open(dir.file("v.mp4"), dir.file(".tmp-v.mp4"), 321, 241, 5, "auto", &error))
      << error;
  EXPECT_EQ(writer.frame_size(), cv::Size(320, 240)) << "odd sizes are rounded down to even";
  EXPECT_TRUE(writer.write(test_frame(0, {640, 480})));                 // larger
  EXPECT_TRUE(writer.write(cv::Mat(100, 100, CV_8UC1, cv::Scalar(128))));  // grey
  EXPECT_TRUE(writer.write(cv::Mat(240, 320, CV_8UC4, cv::Scalar(1, 2, 3, 4))));
  EXPECT_TRUE(writer.write(cv::Mat(240, 320, CV_32FC3, cv::Scalar(10, 20, 30))));
  EXPECT_FALSE(writer.write(cv::Mat()));
  EXPECT_EQ(writer.frames(), 4);
  std::string used;
  ASSERT_TRUE(writer.finalize(&used, &error)) << error;
  EXPECT_EQ(read_back(used).decoded, 4);
}

TEST(VideoWriter, FinalizeNeverReplacesAnExistingFile) {
  TempDir dir;
  const std::string final_path = dir.file("stream.seg0.mp4");
  write_file(final_path, "precious");
  write_file(dir.file("stream.seg0-1.mp4"), "also precious");
  std::string error, used;
  VideoWriter writer;
  ASSERT_TRUE(writer.open(final_path, dir.file(".tmp-a.mp4"), 64, 64, 5, "auto", &error)) << error;
  ASSERT_TRUE(writer.write(test_frame(1, {64, 64})));
  ASSERT_TRUE(writer.finalize(&used, &error)) << error;
  EXPECT_EQ(used, dir.file("stream.seg0-2.mp4"));
  EXPECT_EQ(read_file(final_path), "precious");
  EXPECT_EQ(read_file(dir.file("stream.seg0-1.mp4")), "also precious");
  EXPECT_EQ(read_back(used).decoded, 1);

  // A final name without an extension gets the suffix at its end.
  const std::string bare = write_file(dir.file("bare"), "x");
  VideoWriter second;
  ASSERT_TRUE(second.open(bare, dir.file(".tmp-b.mp4"), 64, 64, 5, "mp4v", &error)) << error;
  ASSERT_TRUE(second.write(test_frame(2, {64, 64})));
  ASSERT_TRUE(second.finalize(&used, &error)) << error;
  EXPECT_EQ(used, dir.file("bare-1"));
}

TEST(VideoWriter, AbandonAndDestructorDeleteTheTempFile) {
  TempDir dir;
  std::string error;
  const std::string temp = dir.file(".tmp-x.mp4");
  {
    VideoWriter writer;
    ASSERT_TRUE(writer.open(dir.file("x.mp4"), temp, 64, 64, 5, "auto", &error)) << error;
    ASSERT_TRUE(writer.write(test_frame(0, {64, 64})));
    EXPECT_TRUE(fs::exists(temp));
    writer.abandon();
    EXPECT_FALSE(fs::exists(temp));
    EXPECT_FALSE(writer.is_open());
    EXPECT_FALSE(writer.write(test_frame(0, {64, 64})));
  }
  {
    VideoWriter writer;
    ASSERT_TRUE(writer.open(dir.file("x.mp4"), temp, 64, 64, 5, "auto", &error)) << error;
    ASSERT_TRUE(writer.write(test_frame(0, {64, 64})));
    VideoWriter moved = std::move(writer);  // ownership moves with it
    EXPECT_TRUE(moved.is_open());
    EXPECT_FALSE(writer.is_open());
  }
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(dir.file("x.mp4")));
}

TEST(VideoWriter, FinalizeWithoutFramesFailsAndCleansUp) {
  TempDir dir;
  std::string error, used;
  VideoWriter writer;
  ASSERT_TRUE(writer.open(dir.file("e.mp4"), dir.file(".tmp-e.mp4"), 64, 64, 5, "auto", &error));
  EXPECT_FALSE(writer.finalize(&used, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(fs::exists(dir.file(".tmp-e.mp4")));
  EXPECT_FALSE(fs::exists(dir.file("e.mp4")));
}

TEST(VideoWriter, OpenRejectsBadArguments) {
  TempDir dir;
  std::string error;
  VideoWriter writer;
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file(".t.mp4"), 0, 64, 5, "auto", &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file(".t.mp4"), 64, 64, 0, "auto", &error));
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file(".t.mp4"), 64, 64, NAN, "auto", &error));
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file(".t.mp4"), 64, 64, 5, "h265-please", &error));
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file("a.mp4"), 64, 64, 5, "auto", &error));
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file("no/such/dir/.t.mp4"), 64, 64, 5, "auto", &error));
  EXPECT_FALSE(writer.is_open());
  std::string used;
  EXPECT_FALSE(writer.finalize(&used, &error));
  ASSERT_TRUE(writer.open(dir.file("a.mp4"), dir.file(".t.mp4"), 64, 64, 5, "auto", &error)) << error;
  EXPECT_FALSE(writer.open(dir.file("b.mp4"), dir.file(".u.mp4"), 64, 64, 5, "auto", &error))
      << "already open";
}

TEST(RenameNoReplace, RefusesExistingTarget) {
  TempDir dir;
  const std::string a = write_file(dir.file("a"), "A");
  const std::string b = write_file(dir.file("b"), "B");
  bool exists = false;
  std::string error;
  EXPECT_FALSE(rename_no_replace(a, b, &exists, &error));
  EXPECT_TRUE(exists);
  EXPECT_EQ(read_file(b), "B");
  EXPECT_TRUE(rename_no_replace(a, dir.file("c"), &exists, &error)) << error;
  EXPECT_FALSE(fs::exists(a));
  EXPECT_EQ(read_file(dir.file("c")), "A");
  EXPECT_FALSE(rename_no_replace(dir.file("missing"), dir.file("d"), &exists, &error));
  EXPECT_FALSE(exists);
}

}  // namespace
}  // namespace tensorscope::plotting

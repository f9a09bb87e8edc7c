// VideoWriter round trips through cv::VideoCapture, never replaces an existing final
// file, and cleans up its temporary file when abandoned.
#include "tensorscope/plotting/video_writer.h"

#include "tensorscope/plotting/fmp4_scan.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include "file_text.h"
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

using tensorscope::testing::read_text_file;
using tensorscope::testing::write_text_file;

class Codecs : public ::testing::TestWithParam<std::string> {};

TEST_P(Codecs, RoundTrip) {
  TempDir dir;
  const std::string final_path = dir.file("stream.mp4");
  const std::string temp_path = dir.file(".tmp-stream.mp4");
  VideoWriter writer;
  Status opened = writer.open(final_path, temp_path, 320, 240, 10, GetParam());
  ASSERT_TRUE(opened) << opened.message();
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
  StatusOr<std::string> used = writer.finalize();
  ASSERT_TRUE(used) << used.message();
  EXPECT_EQ(*used, final_path);
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
  Status opened = writer.open(dir.file("v.mp4"), dir.file(".tmp-v.mp4"), 321, 241, 5, "auto");
  ASSERT_TRUE(opened) << opened.message();
  EXPECT_EQ(writer.frame_size(), cv::Size(320, 240)) << "odd sizes are rounded down to even";
  EXPECT_TRUE(writer.write(test_frame(0, {640, 480})));                    // larger
  EXPECT_TRUE(writer.write(cv::Mat(100, 100, CV_8UC1, cv::Scalar(128))));  // grey
  EXPECT_TRUE(writer.write(cv::Mat(240, 320, CV_8UC4, cv::Scalar(1, 2, 3, 4))));
  EXPECT_TRUE(writer.write(cv::Mat(240, 320, CV_32FC3, cv::Scalar(10, 20, 30))));
  EXPECT_FALSE(writer.write(cv::Mat()));
  EXPECT_EQ(writer.frames(), 4);
  StatusOr<std::string> used = writer.finalize();
  ASSERT_TRUE(used) << used.message();
  EXPECT_EQ(read_back(*used).decoded, 4);
}

TEST(VideoWriter, FinalizeNeverReplacesAnExistingFile) {
  TempDir dir;
  const std::string final_path = dir.file("stream.seg0.mp4");
  write_text_file(final_path, "precious");
  write_text_file(dir.file("stream.seg0-1.mp4"), "also precious");
  VideoWriter writer;
  Status opened = writer.open(final_path, dir.file(".tmp-a.mp4"), 64, 64, 5, "auto");
  ASSERT_TRUE(opened) << opened.message();
  ASSERT_TRUE(writer.write(test_frame(1, {64, 64})));
  StatusOr<std::string> used = writer.finalize();
  ASSERT_TRUE(used) << used.message();
  EXPECT_EQ(*used, dir.file("stream.seg0-2.mp4"));
  EXPECT_EQ(read_text_file(final_path), "precious");
  EXPECT_EQ(read_text_file(dir.file("stream.seg0-1.mp4")), "also precious");
  EXPECT_EQ(read_back(*used).decoded, 1);

  // A final name without an extension gets the suffix at its end.
  const std::string bare = write_text_file(dir.file("bare"), "x");
  VideoWriter second;
  opened = second.open(bare, dir.file(".tmp-b.mp4"), 64, 64, 5, "mp4v");
  ASSERT_TRUE(opened) << opened.message();
  ASSERT_TRUE(second.write(test_frame(2, {64, 64})));
  used = second.finalize();
  ASSERT_TRUE(used) << used.message();
  EXPECT_EQ(*used, dir.file("bare-1"));
}

TEST(VideoWriter, AbandonAndDestructorDeleteTheTempFile) {
  TempDir dir;
  const std::string temp = dir.file(".tmp-x.mp4");
  {
    VideoWriter writer;
    Status opened = writer.open(dir.file("x.mp4"), temp, 64, 64, 5, "auto");
    ASSERT_TRUE(opened) << opened.message();
    ASSERT_TRUE(writer.write(test_frame(0, {64, 64})));
    EXPECT_TRUE(fs::exists(temp));
    writer.abandon();
    EXPECT_FALSE(fs::exists(temp));
    EXPECT_FALSE(writer.is_open());
    EXPECT_FALSE(writer.write(test_frame(0, {64, 64})));
  }
  {
    VideoWriter writer;
    Status opened = writer.open(dir.file("x.mp4"), temp, 64, 64, 5, "auto");
    ASSERT_TRUE(opened) << opened.message();
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
  VideoWriter writer;
  ASSERT_TRUE(writer.open(dir.file("e.mp4"), dir.file(".tmp-e.mp4"), 64, 64, 5, "auto"));
  StatusOr<std::string> used = writer.finalize();
  EXPECT_FALSE(used);
  EXPECT_FALSE(used.message().empty());
  EXPECT_FALSE(fs::exists(dir.file(".tmp-e.mp4")));
  EXPECT_FALSE(fs::exists(dir.file("e.mp4")));
}

TEST(VideoWriter, OpenRejectsBadArguments) {
  TempDir dir;
  VideoWriter writer;
  Status bad_size = writer.open(dir.file("a.mp4"), dir.file(".t.mp4"), 0, 64, 5, "auto");
  EXPECT_FALSE(bad_size);
  EXPECT_FALSE(bad_size.message().empty());
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file(".t.mp4"), 64, 64, 0, "auto"));
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file(".t.mp4"), 64, 64, NAN, "auto"));
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file(".t.mp4"), 64, 64, 5, "h265-please"));
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file("a.mp4"), 64, 64, 5, "auto"));
  EXPECT_FALSE(writer.open(dir.file("a.mp4"), dir.file("no/such/dir/.t.mp4"), 64, 64, 5, "auto"));
  EXPECT_FALSE(writer.is_open());
  EXPECT_FALSE(writer.finalize());
  Status opened = writer.open(dir.file("a.mp4"), dir.file(".t.mp4"), 64, 64, 5, "auto");
  ASSERT_TRUE(opened) << opened.message();
  EXPECT_FALSE(writer.open(dir.file("b.mp4"), dir.file(".u.mp4"), 64, 64, 5, "auto")) << "already open";
}

// The decoded frames of `path` in order.
std::vector<cv::Mat> decode_all(const std::string& path) {
  std::vector<cv::Mat> out;
  cv::VideoCapture capture(path);
  cv::Mat frame;
  while (capture.isOpened() && capture.read(frame)) out.push_back(frame.clone());
  return out;
}

// Mean absolute difference per pixel and channel.
double difference(const cv::Mat& a, const cv::Mat& b) {
  if (a.size() != b.size() || a.type() != b.type()) return 255;
  cv::Mat d;
  cv::absdiff(a, b, d);
  const cv::Scalar m = cv::mean(d);
  return (m[0] + m[1] + m[2]) / 3;
}

// Suspended (encoder and file closed) and resumed twice, a video is one file with every
// frame in order: each decoded frame is closest to the frame written at its position.
TEST_P(Codecs, SuspendAndResumeContinueTheSameFile) {
  TempDir dir;
  VideoWriter writer;
  Status opened = writer.open(dir.file("s.mp4"), dir.file(".tmp-s.mp4"), 320, 240, 10, GetParam());
  ASSERT_TRUE(opened) << opened.message();
  int written = 0;
  for (int part : {5, 4, 3}) {
    for (int i = 0; i < part; ++i) ASSERT_TRUE(writer.write(test_frame(written++))) << writer.last_error();
    writer.suspend();
    EXPECT_TRUE(writer.is_suspended());
    EXPECT_TRUE(writer.is_open());
  }
  StatusOr<std::string> used = writer.finalize();
  ASSERT_TRUE(used) << used.message();
  const std::vector<cv::Mat> frames = decode_all(*used);
  ASSERT_EQ(static_cast<int>(frames.size()), written);
  EXPECT_EQ(read_back(*used).claimed, written);
  for (int i = 0; i < written; ++i) {
    const double own = difference(frames[i], test_frame(i));
    EXPECT_LT(own, 6) << "frame " << i;
    if (i > 0) {
      EXPECT_LT(own, difference(frames[i], test_frame(i - 1))) << "frame " << i;
    }
  }
}

// A file cut anywhere (a worker killed mid-write) plays every frame whose fragment is
// whole: write() returns only once its frame's fragment is in the file.
TEST_P(Codecs, CutFilePlaysUpToItsLastWholeFrame) {
  TempDir dir;
  const std::string temp = dir.file(".tmp-c.mp4");
  VideoWriter writer;
  Status opened = writer.open(dir.file("c.mp4"), temp, 320, 240, 10, GetParam());
  ASSERT_TRUE(opened) << opened.message();
  std::vector<uintmax_t> ends = {fs::file_size(temp)};  // ends[i]: the file after i frames
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(writer.write(test_frame(i)));
    ends.push_back(fs::file_size(temp));
  }
  const std::string whole = read_text_file(temp);
  ASSERT_EQ(whole.size(), ends.back());
  for (size_t frames = 0; frames < ends.size(); ++frames) {
    for (uintmax_t cut :
         {ends[frames], frames + 1 < ends.size() ? (ends[frames] + ends[frames + 1]) / 2 : ends[frames]}) {
      SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(whole.size()));
      const std::string path = dir.file("cut.mp4");
      write_text_file(path, whole.substr(0, cut));
      const Fmp4Extent extent = scan_fmp4(path);
      EXPECT_TRUE(extent.valid);
      EXPECT_EQ(extent.frames, static_cast<int64_t>(frames));
      EXPECT_EQ(extent.whole_bytes, ends[frames]);
      fs::resize_file(path, extent.whole_bytes);  // what recovery does with a cut file
      EXPECT_EQ(static_cast<size_t>(read_back(path).decoded), frames);
    }
  }
}

// A full disk (here: the file size limit) fails write() with the reason; the frames
// written before stay whole.
TEST(VideoWriter, FullDiskFailsTheWriteAndKeepsEarlierFrames) {
  TempDir dir;
  const std::string temp = dir.file(".tmp-f.mp4");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{40000, 40000};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    VideoWriter writer;
    if (!writer.open(dir.file("f.mp4"), temp, 320, 240, 10, "mp4v")) ::_exit(101);
    int n = 0;
    while (n < 100 && writer.write(test_frame(n))) ++n;
    if (n == 100 || writer.last_error().find("too large") == std::string::npos) ::_exit(102);
    writer.suspend();  // keep the file (a destructor would delete it)
    std::string kept = temp + ".kept";
    ::rename(temp.c_str(), kept.c_str());
    ::_exit(n);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  const int written = WEXITSTATUS(status);
  ASSERT_GT(written, 0);
  ASSERT_LT(written, 100) << "exit code " << written;
  // The failed frame left nothing behind: the file ends with the last whole frame.
  const Fmp4Extent extent = scan_fmp4(temp + ".kept");
  EXPECT_EQ(extent.frames, written);
  EXPECT_EQ(extent.whole_bytes, extent.file_bytes) << extent.error;
  EXPECT_EQ(read_back(temp + ".kept").decoded, written);
}

// After a failed write (the disk was full for a moment) the next write continues the
// same file with a new encoder.
TEST(VideoWriter, WritesGoOnAfterAFailedOne) {
  TempDir dir;
  const std::string temp = dir.file(".tmp-g.mp4");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    VideoWriter writer;
    if (!writer.open(dir.file("g.mp4"), temp, 320, 240, 10, "auto")) ::_exit(101);
    for (int i = 0; i < 3; ++i) writer.write(test_frame(i));
    const rlimit tight{static_cast<rlim_t>(fs::file_size(temp)), RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &tight);
    if (writer.write(test_frame(3))) ::_exit(102);  // no room for it
    const rlimit loose{RLIM_INFINITY, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &loose);
    for (int i = 4; i < 7; ++i) {
      if (!writer.write(test_frame(i))) ::_exit(103);
    }
    if (writer.frames() != 6 || !writer.finalize()) ::_exit(104);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const std::vector<cv::Mat> frames = decode_all(dir.file("g.mp4"));
  ASSERT_EQ(frames.size(), 6u);
  for (int i : {0, 1, 2}) EXPECT_LT(difference(frames[i], test_frame(i)), 6) << i;
  for (int i : {4, 5, 6}) EXPECT_LT(difference(frames[i - 1], test_frame(i)), 6) << i;
}

}  // namespace
}  // namespace tensorscope::plotting

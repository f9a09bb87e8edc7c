// live_board_test.cc — the live board: frames written by a worker reach readers whole,
// a reader that falls a lap behind loses frames (counted) but never reads a torn one,
// corrupt boards are refused or skipped, a replaced board is noticed.
#include "tensorscope/view/live_board.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.h"

namespace tensorscope::view {
namespace {

LiveFrame meta_for(const std::string& stream, int64_t step) {
  LiveFrame m;
  m.stream = stream;
  m.kind = "output";
  m.device = "cpu";
  m.mode = "histogram";
  m.rank = 3;
  m.producer_pid = 1234;
  m.step = step;
  m.push_unix_ns = 99;
  m.frames_total = static_cast<uint64_t>(step) + 1;
  m.width = 640;
  m.height = 480;
  return m;
}

// An image whose bytes tell its step, so a torn copy would show.
std::string image_for(int64_t step, size_t bytes) {
  std::string s(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) s[i] = static_cast<char>((step * 31 + static_cast<int64_t>(i)) & 0xff);
  return s;
}

TEST(LiveBoardTest, FramesArriveWholeWithEveryField) {
  testing::TempDir dir("board");
  const std::string path = dir.path() + "/s.live.0";
  auto writer = LiveBoardWriter::create(path, kMinBoardCapacity, 0);
  ASSERT_TRUE(writer.is_ok()) << writer.message();
  auto reader = LiveBoardReader::open(path);
  ASSERT_TRUE(reader.is_ok()) << reader.message();
  for (int64_t step = 0; step < 5; ++step) {
    ASSERT_TRUE((*writer)->append(meta_for("layer.grad", step), image_for(step, 1000 + static_cast<size_t>(step))));
  }
  std::vector<LiveFrame> frames;
  (*reader)->poll(&frames);
  ASSERT_EQ(frames.size(), 5u);
  for (int64_t step = 0; step < 5; ++step) {
    const LiveFrame& f = frames[static_cast<size_t>(step)];
    EXPECT_EQ(f.stream, "layer.grad");
    EXPECT_EQ(f.kind, "output");
    EXPECT_EQ(f.device, "cpu");
    EXPECT_EQ(f.mode, "histogram");
    EXPECT_EQ(f.rank, 3);
    EXPECT_EQ(f.producer_pid, 1234);
    EXPECT_EQ(f.step, step);
    EXPECT_EQ(f.seq, static_cast<uint64_t>(step) + 1);
    EXPECT_EQ(f.push_unix_ns, 99u);
    EXPECT_GT(f.render_unix_ns, 0u);
    EXPECT_EQ(f.width, 640);
    EXPECT_EQ(f.height, 480);
    EXPECT_EQ(f.jpeg, image_for(step, 1000 + static_cast<size_t>(step)));
  }
  frames.clear();
  (*reader)->poll(&frames);
  EXPECT_TRUE(frames.empty());
  EXPECT_EQ((*reader)->writer_pid(), ::getpid());
}

TEST(LiveBoardTest, AFramesLegendArrivesWithItAndAnOversizedOneIsLeftOut) {
  testing::TempDir dir("board");
  const std::string path = dir.path() + "/s.live.0";
  auto writer = LiveBoardWriter::create(path, kMinBoardCapacity, 0);
  ASSERT_TRUE(writer.is_ok()) << writer.message();
  auto reader = LiveBoardReader::open(path);
  ASSERT_TRUE(reader.is_ok()) << reader.message();
  LiveFrame with = meta_for("enc.out", 1);
  with.legend = R"({"plot":[0.1,0.2,0.9,0.9],"classes":[{"name":"cat","color":[1,2,3],"box":[0,0,0.1,0.05]}]})";
  LiveFrame huge = meta_for("enc.out", 2);
  huge.legend = std::string(kMaxLegendBytes + 1, 'x');
  ASSERT_TRUE((*writer)->append(with, image_for(1, 500)));
  ASSERT_TRUE((*writer)->append(huge, image_for(2, 501)));
  ASSERT_TRUE((*writer)->append(meta_for("enc.out", 3), image_for(3, 502)));
  std::vector<LiveFrame> frames;
  (*reader)->poll(&frames);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].legend, with.legend);
  EXPECT_EQ(frames[0].jpeg, image_for(1, 500));
  EXPECT_EQ(frames[1].legend, "");  // the frame goes, without it
  EXPECT_EQ(frames[1].jpeg, image_for(2, 501));
  EXPECT_EQ(frames[2].legend, "");
}

TEST(LiveBoardTest, ANewReaderStartsAtTheOldestFrameStillThere) {
  testing::TempDir dir("board");
  const std::string path = dir.path() + "/s.live.1";
  auto writer = LiveBoardWriter::create(path, kMinBoardCapacity, 1);
  ASSERT_TRUE(writer.is_ok());
  // 3 KB frames in a 64 KB board: after 100 frames about 20 remain.
  for (int64_t step = 0; step < 100; ++step) ASSERT_TRUE((*writer)->append(meta_for("s", step), image_for(step, 3000)));
  auto reader = LiveBoardReader::open(path);
  ASSERT_TRUE(reader.is_ok());
  std::vector<LiveFrame> frames;
  (*reader)->poll(&frames);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back().step, 99);
  for (size_t i = 1; i < frames.size(); ++i) EXPECT_EQ(frames[i].step, frames[i - 1].step + 1);
  for (const auto& f : frames) EXPECT_EQ(f.jpeg, image_for(f.step, 3000));
  EXPECT_GT(frames.size(), 5u);
  EXPECT_LT(frames.size(), 22u);
}

TEST(LiveBoardTest, AReaderLappedLosesFramesButNeverReadsATornOne) {
  testing::TempDir dir("board");
  const std::string path = dir.path() + "/s.live.2";
  auto writer = LiveBoardWriter::create(path, kMinBoardCapacity, 2);
  ASSERT_TRUE(writer.is_ok());
  auto reader = LiveBoardReader::open(path);
  ASSERT_TRUE(reader.is_ok());
  std::atomic<bool> done{false};
  std::thread writing([&] {
    for (int64_t step = 0; step < 20000; ++step)
      (*writer)->append(meta_for("s", step), image_for(step, 500 + static_cast<size_t>(step % 2000)));
    done = true;
  });
  std::vector<LiveFrame> frames;
  size_t read = 0;
  int64_t last = -1;
  // Polls once more after the writer is done: it may finish before the first poll.
  for (bool finished = false; !finished;) {
    finished = done.load();
    frames.clear();
    (*reader)->poll(&frames, 7);
    for (const auto& f : frames) {
      ASSERT_EQ(f.jpeg, image_for(f.step, 500 + static_cast<size_t>(f.step % 2000))) << "torn frame at step " << f.step;
      ASSERT_GT(f.step, last);
      last = f.step;
    }
    read += frames.size();
  }
  writing.join();
  EXPECT_GT(read, 0u);
  EXPECT_EQ((*reader)->corrupt(), 0u);
}

TEST(LiveBoardTest, OversizedFramesAreRefusedAndCounted) {
  testing::TempDir dir("board");
  const std::string path = dir.path() + "/s.live.0";
  auto writer = LiveBoardWriter::create(path, kMinBoardCapacity, 0);
  ASSERT_TRUE(writer.is_ok());
  EXPECT_FALSE((*writer)->append(meta_for("s", 0), std::string(kMinBoardCapacity / 2, 'x')));
  EXPECT_TRUE((*writer)->append(meta_for("s", 1), "small"));
  auto reader = LiveBoardReader::open(path);
  std::vector<LiveFrame> frames;
  (*reader)->poll(&frames);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].step, 1);
}

TEST(LiveBoardTest, FilesThatAreNotBoardsAreRefused) {
  testing::TempDir dir("board");
  const std::string small = dir.path() + "/small";
  {
    int fd = ::open(small.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_EQ(::write(fd, "hello", 5), 5);
    ::close(fd);
  }
  EXPECT_FALSE(LiveBoardReader::open(small).is_ok());
  const std::string zeros = dir.path() + "/zeros";
  {
    int fd = ::open(zeros.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_EQ(::ftruncate(fd, kBoardHeaderBytes + kMinBoardCapacity), 0);
    ::close(fd);
  }
  auto r = LiveBoardReader::open(zeros);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("not a live board"), std::string::npos) << r.message();
  EXPECT_FALSE(LiveBoardReader::open(dir.path() + "/missing").is_ok());
}

TEST(LiveBoardTest, GarbageRecordsAreSkippedAndCounted) {
  testing::TempDir dir("board");
  const std::string path = dir.path() + "/s.live.0";
  auto writer = LiveBoardWriter::create(path, kMinBoardCapacity, 0);
  ASSERT_TRUE(writer.is_ok());
  ASSERT_TRUE((*writer)->append(meta_for("s", 0), "frame"));
  // Scribble over the record as a hostile process of the same user could.
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const std::string junk(64, '\xff');
  ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), kBoardHeaderBytes), static_cast<ssize_t>(junk.size()));
  ::close(fd);
  auto reader = LiveBoardReader::open(path);
  ASSERT_TRUE(reader.is_ok());
  std::vector<LiveFrame> frames;
  (*reader)->poll(&frames);
  EXPECT_TRUE(frames.empty());
  EXPECT_EQ((*reader)->corrupt(), 1u);
  ASSERT_TRUE((*writer)->append(meta_for("s", 1), "next"));
  (*reader)->poll(&frames);  // records after the bad one are read
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].step, 1);
}

TEST(LiveBoardTest, AReplacedBoardIsNoticed) {
  testing::TempDir dir("board");
  const std::string path = dir.path() + "/s.live.0";
  auto first = LiveBoardWriter::create(path, kMinBoardCapacity, 0);
  ASSERT_TRUE(first.is_ok());
  auto reader = LiveBoardReader::open(path);
  ASSERT_TRUE(reader.is_ok());
  EXPECT_FALSE((*reader)->replaced());
  auto second = LiveBoardWriter::create(path, kMinBoardCapacity, 0);  // a restarted worker
  ASSERT_TRUE(second.is_ok());
  EXPECT_TRUE((*reader)->replaced());
  (*second)->remove();
  EXPECT_TRUE((*reader)->replaced());
}

TEST(LiveBoardTest, BoardNamesBelongToTheirSession) {
  EXPECT_EQ(live_board_file_name("exp1", 3), "exp1.live.3");
  EXPECT_TRUE(is_live_board_file_name("exp1.live.3", "exp1"));
  EXPECT_TRUE(is_live_board_file_name("exp1.live.12", "exp1"));
  EXPECT_FALSE(is_live_board_file_name("exp1.live.", "exp1"));
  EXPECT_FALSE(is_live_board_file_name("exp1.live.3x", "exp1"));
  EXPECT_FALSE(is_live_board_file_name("exp10.live.3", "exp1"));
  EXPECT_FALSE(is_live_board_file_name(".exp1.live.3.creating.5", "exp1"));
  EXPECT_FALSE(is_live_board_file_name("exp1.4242.0.seg", "exp1"));
}

}  // namespace
}  // namespace tensorscope::view

// output_test.cc — end-to-end: a full output (a small tmpfs) is reported and outlived,
// a deleted session directory is made again, a session past its disk budget loses its
// oldest videos; no broken video is ever listed.
//
// Each test starts its own daemon(s) in a private temporary directory (runtime dir,
// session, output) and runs test_producer processes against them (integration_fixture.h).
#include <set>

#include "integration_fixture.h"
#include "small_tmpfs.h"

namespace tensorscope::itest {
namespace {

// Fills what is left of the file system of `dir` with one file; returns its path.
std::string fill_up(const std::string& dir) {
  const std::string filler = dir + "/filler";
  std::ofstream f(filler, std::ios::binary);
  const std::string block(64 << 10, 'x');
  while (f.write(block.data(), static_cast<std::streamsize>(block.size())) && f.flush()) {}
  return filler;
}

// 3b. The output fills up: videos are never published broken, the daemon says "output
// full" (in status, and in a log that does not flood), counts the frames it could not
// write, and goes on by itself once there is room again; every listed video plays.
TEST_F(IntegrationTest, AFullDiskIsReportedAndOutlived) {
  testing::SmallTmpfs disk(std::to_string(6 << 20));
  if (!disk.mounted()) GTEST_SKIP() << disk.why();
  const std::string out = disk.path();
  const std::string name = session("full");
  DaemonProcess* daemon = nullptr;
  ChildProcess* producer = nullptr;
  json last;
  ASSERT_NO_FATAL_FAILURE(start_writing(name, out, 2, &daemon, &producer, &last));
  const std::string filler = fill_up(out);
  ASSERT_TRUE(daemon->wait_status(
      [&](const json& s) {
        return s["output"].value("state", "") == "full" && s["output"].value("not_written", 0) > 20;
      },
      kSettleTimeout, &last))
      << "the daemon did not say the output is full:\n"
      << last.dump(2);
  const CommandResult text = run_cli({"status", "--session", name, "--runtime-dir", runtime_dir_});
  EXPECT_THAT(text.out, HasSubstr("OUTPUT FULL")) << text.out << text.err;
  std::this_thread::sleep_for(3s);  // full for a while: the log must not flood
  ::unlink(filler.c_str());
  ASSERT_TRUE(
      daemon->wait_status([&](const json& s) { return s["output"].value("state", "") == "ok"; }, kSettleTimeout, &last))
      << "the daemon did not recover:\n"
      << last.dump(2);
  const uint64_t files_before = last.value("files", 0);
  EXPECT_TRUE(
      daemon->wait_status([&](const json& s) { return s.value("files", 0ULL) > files_before; }, kSettleTimeout, &last))
      << "no video finished after the space came back";
  ASSERT_TRUE(producer->write_stdin("stop\n"));
  ASSERT_TRUE(final_line(producer).is_object());
  release_producer(producer);
  terminate_daemon(daemon);
  const std::string log = daemon->log();
  size_t lines = 0;
  for (size_t at = log.find("output"); at != std::string::npos; at = log.find("output", at + 1)) ++lines;
  EXPECT_LE(lines, 12u) << "the log floods:\n" << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
  if (std::getenv("TS_SHOW_LOG")) std::fprintf(stderr, "%s\n", log.c_str());
  EXPECT_THAT(log, HasSubstr("output full"));
  EXPECT_THAT(log, HasSubstr("output writable again"));
  const auto files = index_or_fail(daemon->session_dir());
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
}

// 3b'. Space comes back while nothing is being written (the producer paused): status says
// "ok" again within a few seconds, not at the next frame.
TEST_F(IntegrationTest, AnIdleDaemonSeesTheSpaceComeBack) {
  testing::SmallTmpfs disk(std::to_string(6 << 20));
  if (!disk.mounted()) GTEST_SKIP() << disk.why();
  const std::string out = disk.path();
  const std::string name = session("idlefull");
  DaemonProcess* daemon = nullptr;
  ChildProcess* producer = nullptr;
  json last;
  ASSERT_NO_FATAL_FAILURE(start_writing(name, out, 1, &daemon, &producer, &last));
  const std::string filler = fill_up(out);
  ASSERT_TRUE(daemon->wait_status([&](const json& s) { return s["output"].value("state", "") == "full"; },
                                  kSettleTimeout, &last))
      << last.dump(2);
  ASSERT_TRUE(producer->write_stdin("stop\n"));  // no more frames: nothing to try a write with
  ::unlink(filler.c_str());
  const auto freed = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      daemon->wait_status([&](const json& s) { return s["output"].value("state", "") == "ok"; }, kSettleTimeout, &last))
      << "still not ok:\n"
      << last.dump(2);
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - freed).count();
  std::fprintf(stderr, "[ figure ] output ok again %.1f s after the space came back, no frame written\n", seconds);
  EXPECT_LT(seconds, 10.0);  // a probe a second (heartbeats a tenth of a second); generous for a busy machine
  ASSERT_TRUE(final_line(producer).is_object());
  release_producer(producer);
  terminate_daemon(daemon);
}

// 3c. The session directory is deleted while videos are written: the daemon makes it
// again, index.json keeps only the files still there, and later videos are listed.
TEST_F(IntegrationTest, ADeletedOutputDirectoryIsMadeAgain) {
  const std::string name = session("gone");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("gone"), 1, write_config(20));
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer = start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "3000", "--streams", "2", "--report-ms", "100"});
  ASSERT_NE(producer, nullptr);
  json last;
  ASSERT_TRUE(daemon->wait_status([&](const json& s) { return s.value("files", 0) >= 2; }, kSettleTimeout, &last));
  // As `rm -rf` by a user: the daemon may add a file while the tree is removed, so retry.
  std::error_code ec;
  for (int tries = 0; tries < 100 && std::filesystem::exists(daemon->session_dir()); ++tries) {
    std::filesystem::remove_all(daemon->session_dir(), ec);
  }
  ASSERT_TRUE(wait_until(
      [&] {
        auto files = read_index(daemon->session_dir());
        return files.is_ok() && !files->empty();
      },
      kSettleTimeout))
      << "no index.json with new files after the directory was deleted";
  ASSERT_TRUE(producer->write_stdin("stop\n"));
  ASSERT_TRUE(final_line(producer).is_object());
  release_producer(producer);
  terminate_daemon(daemon);
  const auto files = index_or_fail(daemon->session_dir());
  EXPECT_FALSE(files.empty());
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
  EXPECT_THAT(daemon->log(), HasSubstr("was deleted; made it again"));
}

// Outputs are readable by other users by default (0644 files in 0755 directories);
// output_private: true makes every file of the session the user's only (and its
// directory 0700, even one that was there before).
TEST_F(IntegrationTest, PrivateOutputsAreTheUsersOnly) {
  for (const bool priv : {false, true}) {
    const std::string name = session(priv ? "private" : "shared");
    const std::string out = output_dir(priv ? "private" : "shared");
    std::filesystem::create_directories(out + "/" + name);
    ::chmod((out + "/" + name).c_str(), 0755);
    DaemonProcess* daemon =
        start_ready_daemon(name, out, 1, write_config(5, 45000, 160, 120, priv ? "output_private: true\n" : ""));
    ASSERT_NE(daemon, nullptr);
    ChildProcess* producer = start_producer(name, 0, {"--count", "12", "--streams", "1"});
    ASSERT_NE(producer, nullptr);
    ASSERT_TRUE(final_line(producer).is_object());
    release_producer(producer);
    json last;
    ASSERT_TRUE(daemon->wait_status([&](const json& s) { return s.value("files", 0) >= 2; }, kSettleTimeout, &last))
        << last.dump(2);
    terminate_daemon(daemon);
    struct stat st {};
    ASSERT_EQ(::stat(daemon->session_dir().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, priv ? 0u : 055u) << daemon->session_dir();
    size_t files = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(daemon->session_dir())) {
      if (!e.is_regular_file()) continue;
      ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
      if (priv) {
        EXPECT_EQ(st.st_mode & 077, 0u) << e.path();
      }
      ++files;
    }
    EXPECT_GE(files, 3u);  // videos, their steps, index.json
  }
}

// A session past output_budget_mb: its oldest videos are deleted and unlisted, the
// newest of each stream stay, and what is listed plays.
TEST_F(IntegrationTest, ASessionPastItsBudgetDeletesItsOldestVideos) {
  const std::string name = session("budget");
  DaemonProcess* daemon =
      start_ready_daemon(name, output_dir("budget"), 1, write_config(5, 45000, 320, 240, "output_budget_mb: 1\n"));
  ASSERT_NE(daemon, nullptr);
  ChildProcess* producer = start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "3000", "--streams", "4", "--report-ms", "100"});
  ASSERT_NE(producer, nullptr);
  json last;
  ASSERT_TRUE(daemon->wait_status([](const json& s) { return s["output"]["disk"].value("rotated_files", 0ULL) >= 8; },
                                  std::chrono::seconds(180), &last))
      << last.dump(2);
  const json disk = last["output"]["disk"];
  EXPECT_EQ(disk.value("budget", 0ULL), 1ULL << 20);
  EXPECT_GT(disk.value("rotated_bytes", 0ULL), 0ULL);
  EXPECT_LT(disk.value("bytes", 0ULL), 2ULL << 20) << disk.dump();
  ASSERT_TRUE(producer->write_stdin("stop\n"));
  ASSERT_TRUE(final_line(producer).is_object());
  release_producer(producer);
  terminate_daemon(daemon);
  EXPECT_THAT(daemon->log(), HasSubstr("oldest videos deleted"));
  const std::vector<json> files = index_or_fail(daemon->session_dir());
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
  std::set<std::string> streams;
  for (const auto& f : files) streams.insert(f.value("stream", ""));
  EXPECT_GE(streams.size(), 4u) << "each stream keeps its newest video";
}

}  // namespace
}  // namespace tensorscope::itest

// daemon_args_test.cc — tensorscoped's command line: each option reaches its config key,
// a wrong argument is named in the error, --check-config and --help are seen, and the
// supervisor's --worker-fd re-exec is told apart.
#include "daemon_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace tensorscope::daemon {
namespace {

using ::testing::HasSubstr;

StatusOr<DaemonArgs> parse(std::vector<std::string> args) {
  std::vector<const char*> argv = {"tensorscoped"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_daemon_args(static_cast<int>(argv.size()), argv.data());
}

TEST(DaemonArgs, EachOptionReachesItsConfigKey) {
  auto args =
      parse({"--output", "runs", "--session", "exp1", "--workers", "3", "--runtime-dir", "/tmp/rt", "--log-level",
             "debug", "--idle-exit-ms", "1500", "--view", "--autostarted", "--reference", "runs/fp32"});
  ASSERT_TRUE(args.is_ok()) << args.message();
  EXPECT_TRUE(args->autostarted);
  EXPECT_FALSE(args->detach);
  StatusOr<DaemonConfig> config = daemon_config_for(*args);
  ASSERT_TRUE(config.is_ok()) << config.message();
  EXPECT_EQ(config->output_dir, "runs");
  EXPECT_EQ(config->session, "exp1");
  EXPECT_EQ(config->workers, 3);
  EXPECT_EQ(config->runtime_dir, "/tmp/rt");
  EXPECT_EQ(config->log_level, LogLevel::kDebug);
  EXPECT_EQ(config->supervisor.idle_exit, std::chrono::milliseconds(1500));
  EXPECT_TRUE(config->live.serve);
  EXPECT_EQ(config->reference.session, "runs/fp32");
  // Nothing given: the defaults.
  auto none = parse({});
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(*daemon_config_for(*none), DaemonConfig::defaults());
}

TEST(DaemonArgs, OptionsOverrideTheConfigFile) {
  testing::TempDir dir("ts-args");
  const std::string path = dir.path() + "/c.yaml";
  std::ofstream(path) << "session: from-file\nworkers: 5\nvideo:\n  fps: 20\n";
  auto args = parse({"--config", path, "--workers", "2"});
  ASSERT_TRUE(args.is_ok()) << args.message();
  StatusOr<DaemonConfig> config = daemon_config_for(*args);
  ASSERT_TRUE(config.is_ok()) << config.message();
  EXPECT_EQ(config->session, "from-file");
  EXPECT_EQ(config->workers, 2);
  EXPECT_EQ(config->video.fps, 20);
}

TEST(DaemonArgs, AWrongArgumentIsNamed) {
  EXPECT_THAT(parse({"--fast"}).message(), HasSubstr("--fast"));
  EXPECT_THAT(parse({"--workers", "many"}).message(), HasSubstr("--workers: expected an integer, got 'many'"));
  EXPECT_THAT(parse({"--idle-exit-ms", "-5"}).message(), HasSubstr("--idle-exit-ms: expected an integer >= 0"));
  EXPECT_THAT(parse({"--log-level", "loud"}).message(),
              HasSubstr("--log-level: expected one of trace, debug, info, warn, error, off, got 'loud'"));
  EXPECT_THAT(parse({"--session"}).message(), HasSubstr("session"));   // a missing value
  EXPECT_THAT(parse({"--sess", "x"}).message(), HasSubstr("--sess"));  // no guessing of abbreviations
  EXPECT_THAT(parse({"stray"}).message(), HasSubstr("stray"));
  // Values the command line takes but the config refuses are the config's errors.
  auto zero = parse({"--workers", "0"});
  ASSERT_TRUE(zero.is_ok());
  EXPECT_THAT(daemon_config_for(*zero).message(), HasSubstr("workers: expected an integer between 1 and 64, got 0"));
  auto bad_file = parse({"--config", "/no/such/file.yaml"});
  ASSERT_TRUE(bad_file.is_ok());
  EXPECT_THAT(daemon_config_for(*bad_file).message(), HasSubstr("/no/such/file.yaml"));
}

TEST(DaemonArgs, HelpCheckConfigAndTheWorkersReexecAreSeen) {
  EXPECT_TRUE(parse({"--help"})->help);
  EXPECT_TRUE(parse({"-h"})->help);
  EXPECT_TRUE(parse({"--check-config", "--config", "x.yaml"})->check_config);
  EXPECT_TRUE(parse({"--detach", "--session", "s"})->detach);
  auto worker = parse({"--worker-fd", "7"});
  ASSERT_TRUE(worker.is_ok());
  EXPECT_EQ(worker->worker_fd, 7);
  EXPECT_FALSE(parse({"--worker-fd", "x"}).is_ok());
  for (const char* option :
       {"--config", "--output", "--session", "--workers", "--runtime-dir", "--log-level", "--idle-exit-ms",
        "--reference", "--view", "--check-config", "--detach", "--autostarted"}) {
    EXPECT_THAT(daemon_usage(), HasSubstr(option));
  }
}

}  // namespace
}  // namespace tensorscope::daemon

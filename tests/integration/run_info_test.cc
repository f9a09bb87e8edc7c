// run_info_test.cc — end to end: a producer started with RANK=3 in a dirty git checkout
// registers with tensorscoped, which writes run_info/rank3_pid<pid>.json and .patch.
//
// Real processes (tensorscoped, test_producer) in a private temporary directory; waits
// poll with deadlines; every process is killed (whole process group) on the way out.
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "temp_dir.h"

namespace tensorscope::itest {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

int shell(const std::string& command) {
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string real_path(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

TEST(RunInfoIntegration, ProducerInADirtyCheckoutGetsRunInfoAndPatch) {
  testing::TempDir tmp("ts-itest-runinfo");
  ASSERT_FALSE(tmp.path().empty());
  const std::string root = real_path(tmp.path());
  const std::string logs = root + "/logs";
  ASSERT_EQ(::mkdir(logs.c_str(), 0700), 0);

  // The training program's checkout: one commit, then an uncommitted change.
  const std::string repo = root + "/repo";
  const std::string git = "git -C " + repo + " -c user.name=t -c user.email=t@example.invalid ";
  ASSERT_EQ(shell("mkdir -p " + repo + " && git -C " + repo + " init -q -b main && printf 'lr = 0.1\\n' > " + repo +
                  "/train.py && " + git + "add -A && " + git + "commit -q -m first && printf 'lr = 0.2\\n' > " + repo +
                  "/train.py"),
            0);
  const std::string head_file = root + "/head";
  ASSERT_EQ(shell("git -C " + repo + " rev-parse HEAD > " + head_file), 0);
  std::string head = read_text(head_file);
  while (!head.empty() && head.back() == '\n') head.pop_back();
  ASSERT_EQ(head.size(), 40u);

  const std::string config = root + "/config.yaml";
  {
    std::ofstream out(config);
    out << "log_level: info\nvideo:\n  width: 160\n  height: 120\n  fps: 10\n  max_frames: 50\n"
        << "supervisor:\n  heartbeat_interval_ms: 100\n  heartbeat_timeout_ms: 10000\n";
  }
  DaemonSpec spec;
  spec.executable = TENSORSCOPED_PATH;
  spec.config_path = config;
  spec.runtime_dir = root + "/run";
  spec.session = "runinfo-" + std::to_string(::getpid());
  spec.output_dir = root + "/out";
  spec.workers = 1;
  spec.log_path = logs + "/daemon.log";
  std::string error;
  auto daemon = DaemonProcess::start(spec, &error);
  ASSERT_NE(daemon, nullptr) << error;
  Status ready = daemon->wait_ready(30s);
  ASSERT_TRUE(ready.is_ok()) << ready.message();

  // The producer runs in the checkout (its cwd is inherited across fork and exec).
  ChildProcess::Options options;
  options.argv = {
      TEST_PRODUCER_PATH, "--session", spec.session,        "--runtime-dir", spec.runtime_dir, "--rank", "3",
      "--count",          "5",         "--wait-connect-ms", "30000"};
  options.env = {"RANK=3", "WORLD_SIZE=4", "AWS_SECRET_ACCESS_KEY=do-not-leak", "OMP_NUM_THREADS=1"};
  options.stderr_path = logs + "/producer.err";
  char old_cwd[PATH_MAX];
  ASSERT_NE(::getcwd(old_cwd, sizeof(old_cwd)), nullptr);
  ASSERT_EQ(::chdir(repo.c_str()), 0);
  auto producer = ChildProcess::start(options, &error);
  ASSERT_EQ(::chdir(old_cwd), 0);
  ASSERT_NE(producer, nullptr) << error;

  const std::string dir = daemon->session_dir() + "/run_info";
  const std::string base = "rank3_pid" + std::to_string(producer->pid());
  json doc;
  const bool written = wait_until(
      [&] {
        const std::string text = read_text(dir + "/" + base + ".json");
        if (text.empty()) return false;
        doc = json::parse(text, nullptr, false);
        return doc.is_object() && doc.contains("git") && !(doc["git"].is_object() && doc["git"].contains("pending"));
      },
      60s, 20ms);
  ASSERT_TRUE(written) << "no final " << dir << "/" << base << ".json; last: " << doc.dump() << "\ndaemon log:\n"
                       << daemon->log() << "\nproducer:\n"
                       << producer->stderr_text();

  EXPECT_EQ(doc["rank"], 3);
  EXPECT_EQ(doc["pid"], producer->pid());
  EXPECT_EQ(doc["session"], spec.session);
  EXPECT_EQ(doc["cwd"], repo);
  EXPECT_EQ(doc["env"]["RANK"], "3");
  EXPECT_EQ(doc["env"]["WORLD_SIZE"], "4");
  EXPECT_FALSE(doc["env"].contains("AWS_SECRET_ACCESS_KEY"));
  ASSERT_TRUE(doc["argv"].is_array());
  EXPECT_EQ(doc["argv"][0], TEST_PRODUCER_PATH);
  EXPECT_EQ(doc["executable"], real_path(TEST_PRODUCER_PATH));
  EXPECT_FALSE(doc["versions"].value("libtorch", "").empty());
  EXPECT_FALSE(doc["versions"].value("tensorscope", "").empty());
  EXPECT_FALSE(doc["daemon"].value("opencv", "").empty());
  ASSERT_TRUE(doc["git"].is_object()) << doc.dump(2);
  EXPECT_EQ(doc["git"]["commit"], head);
  EXPECT_EQ(doc["git"]["branch"], "main");
  EXPECT_EQ(doc["git"]["dirty"], true);
  ASSERT_EQ(doc["git"]["patch"], base + ".patch");
  const std::string all = read_text(dir + "/" + base + ".json");
  EXPECT_EQ(all.find("do-not-leak"), std::string::npos);

  const std::string patch = dir + "/" + base + ".patch";
  EXPECT_NE(read_text(patch).find("+lr = 0.2"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(patch.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string clone = root + "/clone";
  ASSERT_EQ(shell("git clone -q " + repo + " " + clone), 0);
  EXPECT_EQ(shell("git -C " + clone + " apply --check " + patch), 0);

  auto exit = producer->wait_exit(120s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->exited && exit->code == 0) << exit->describe() << "\n" << producer->stderr_text();
  // The supervisor is unaffected: it answers and shuts down cleanly.
  EXPECT_TRUE(daemon->status().is_ok());
  EXPECT_TRUE(daemon->process().send_signal(SIGTERM));
  auto daemon_exit = daemon->process().wait_exit(60s);
  ASSERT_TRUE(daemon_exit.has_value());
  EXPECT_TRUE(daemon_exit->exited && daemon_exit->code == 0) << daemon_exit->describe() << "\n" << daemon->log();
}

}  // namespace
}  // namespace tensorscope::itest

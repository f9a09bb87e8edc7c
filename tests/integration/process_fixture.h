// process_fixture.h — the base of the integration tests' fixtures: a private temporary
// directory (runtime directory, logs), the daemons and test_producer processes a test
// starts, and what a failed test prints about them.
//
// Used by the integration tests (one test thread). Every process started here is killed
// (whole process group) and reaped when the test ends, even after a failed assertion;
// processes are destroyed before the directory that holds their files.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "temp_dir.h"

#ifndef TENSORSCOPED_PATH
#error "TENSORSCOPED_PATH must be defined by the build"
#endif

namespace tensorscope::itest {

class ProcessFixture : public ::testing::Test {
 protected:
  explicit ProcessFixture(const std::string& tag) : tmp_(tag) {}

  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty()) << "mkdtemp failed";
    runtime_dir_ = tmp_.path() + "/run";
    logs_ = tmp_.path() + "/logs";
    ASSERT_EQ(::mkdir(logs_.c_str(), 0700), 0);
  }

  void TearDown() override {
    if (HasFailure()) {
      for (const auto& d : daemons_) dump_log("tensorscoped " + d->spec().session, d->log());
      for (const auto& p : producers_) {
        p->pump_stdout();
        std::string out;
        for (const auto& line : p->all_lines()) out += line + "\n";
        dump_log("producer pid " + std::to_string(p->pid()) + " stdout", out);
        dump_log("producer pid " + std::to_string(p->pid()) + " stderr", p->stderr_text());
      }
    }
    producers_.clear();  // SIGKILL process groups and reap
    daemons_.clear();
  }

  static void dump_log(const std::string& title, const std::string& text) {
    constexpr size_t kTail = 6000;
    const std::string shown = text.size() > kTail ? "...\n" + text.substr(text.size() - kTail) : text;
    std::fprintf(stderr, "----- %s -----\n%s\n", title.c_str(), shown.c_str());
  }

  // A session name unique to this test (and this test process).
  std::string session(const std::string& tag) const { return tag + "-" + std::to_string(::getpid()); }

  // Starts tensorscoped (its executable and log file filled in when empty).
  DaemonProcess* start_daemon(DaemonSpec spec) {
    if (spec.executable.empty()) spec.executable = TENSORSCOPED_PATH;
    if (spec.log_path.empty()) spec.log_path = logs_ + "/daemon-" + std::to_string(daemons_.size()) + ".log";
    std::string error;
    auto daemon = DaemonProcess::start(spec, &error);
    EXPECT_NE(daemon, nullptr) << error;
    if (!daemon) return nullptr;
    daemons_.push_back(std::move(daemon));
    return daemons_.back().get();
  }

  // Starts a daemon and waits until it answers status.
  DaemonProcess* start_ready_daemon(const DaemonSpec& spec, Millis timeout) {
    DaemonProcess* d = start_daemon(spec);
    if (d == nullptr) return nullptr;
    Status ready = d->wait_ready(timeout);
    EXPECT_TRUE(ready.is_ok()) << ready.message();
    return ready.is_ok() ? d : nullptr;
  }

  // Starts test_producer with `args` (stdin and stdout piped), one thread for the math
  // libraries, and `env` added to the environment.
  ChildProcess* start_producer(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    ChildProcess::Options options;
    options.argv = {TEST_PRODUCER_PATH};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env = {"OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1"};
    options.env.insert(options.env.end(), env.begin(), env.end());
    options.stderr_path = logs_ + "/producer-" + std::to_string(producers_.size()) + ".err";
    options.pipe_stdin = true;
    options.pipe_stdout = true;
    std::string error;
    auto child = ChildProcess::start(options, &error);
    EXPECT_NE(child, nullptr) << error;
    if (!child) return nullptr;
    producers_.push_back(std::move(child));
    return producers_.back().get();
  }

  // The producer's last line ("final": true), or null at the deadline.
  static nlohmann::json final_line(ChildProcess* p, Millis timeout) {
    return wait_json_line(
        *p, [](const nlohmann::json& j) { return j.value("final", false); }, timeout);
  }

  // Closes the producer's stdin (it stops pushing, or exits after its --count) and expects
  // a clean exit.
  static void release_producer(ChildProcess* p, Millis timeout = std::chrono::seconds(60)) {
    p->close_stdin();
    auto exit = p->wait_exit(timeout);
    ASSERT_TRUE(exit.has_value()) << "producer " << p->pid() << " did not exit after its stdin closed";
    EXPECT_TRUE(exit->exited && exit->code == 0) << "producer " << p->pid() << ": " << exit->describe();
  }

  testing::TempDir tmp_;
  std::string runtime_dir_;
  std::string logs_;
  // Declared after tmp_, destroyed before it: processes die before their files go.
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  std::vector<std::unique_ptr<ChildProcess>> producers_;
};

}  // namespace tensorscope::itest

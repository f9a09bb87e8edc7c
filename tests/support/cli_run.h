// cli_run.h — runs a program as a child process with its stdout and stderr in files, for
// tests of the project's command-line tools (exit codes and messages).
//
// Used by the compare tests. Thread safety: call from the test thread; each call has its
// own temporary directory.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.h"

namespace tensorscope::testing {

struct CliRun {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs argv[0] with `argv`; kills it and fails the test when it does not exit within 60 s.
// `in_child` (optional) runs in the child before exec; false makes the child exit 126.
inline CliRun run_program(std::vector<std::string> argv_text, const std::function<bool()>& in_child = {}) {
  TempDir io("cliio");
  const std::string out = io.path() + "/out", err = io.path() + "/err";
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) ::_exit(127);
    if (in_child && !in_child()) ::_exit(126);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  CliRun run;
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return run;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << argv_text[0] << " did not exit within the deadline";
      return run;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = slurp(out);
  run.err = slurp(err);
  return run;
}

}  // namespace tensorscope::testing

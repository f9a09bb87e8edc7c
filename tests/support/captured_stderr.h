// captured_stderr.h — runs a piece of code with the process's stderr (fd 2) sent to a
// file and returns what it wrote, for tests of what reaches a user's terminal.
//
// Used by unit tests. Thread safety: none; stderr is process-wide, so nothing else may
// write to it meanwhile.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "temp_dir.h"

namespace tensorscope::testing {

template <typename Body>
std::string captured_stderr(Body body) {
  TempDir dir("ts-stderr");
  const std::string path = dir.path() + "/stderr.txt";
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(fd, 2);
  ::close(fd);
  body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace tensorscope::testing

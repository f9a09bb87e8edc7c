// hdf5_sink_test_support.h — what the Hdf5Sink tests share (hdf5_sink_test.cc,
// hdf5_sink_recovery_test.cc, hdf5_sink_h5py_test.cc, hdf5_sink_flush_test.cc): the
// dtypes, listing a sink's final and partial files, ASSERT_OK, opening a sink, the
// writer lock as another process sees it, bytes to and from vectors, whether h5py is there.
#pragma once

#include "tensorscope/recording/hdf5_sink.h"

#include <dirent.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dir_listing.h"
#include "hdf5_test_files.h"
#include "temp_dir.h"

namespace tensorscope::recording::sink_testing {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::TempDir;
using wire::DType;

inline const std::vector<DType> kAllDTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                              DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,
                                              DType::kUInt8,   DType::kBool};

using testing::default_options;
using testing::H5File;
using testing::list_dir;
using testing::make_bytes;
using testing::make_readable_partial;
using testing::make_record;
using testing::write_file;

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Names in `dir` that are final sink files ("<base>.<n>.h5", not hidden).
inline std::vector<std::string> final_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& n : list_dir(dir)) {
    if (n[0] != '.' && ends_with(n, ".h5")) out.push_back(n);
  }
  return out;
}

inline size_t count_partial(const std::string& dir) {
  size_t n = 0;
  for (const auto& name : list_dir(dir)) n += ends_with(name, ".partial") ? 1 : 0;
  return n;
}

// An ok Status, or a failure showing its message.
inline ::testing::AssertionResult is_ok(const Status& s) {
  if (s.is_ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.message();
}
#define ASSERT_OK(expr) ASSERT_TRUE(is_ok(expr))

inline const std::string kOne("\1\0\0\0", 4);  // int32 1
inline const std::string kTwo("\2\0\0\0", 4);  // int32 2

inline std::unique_ptr<Hdf5Sink> open_sink(const std::string& dir, Hdf5SinkOptions options,
                                           const std::string& base = "values") {
  auto sink = Hdf5Sink::open(dir, base, std::move(options));
  EXPECT_TRUE(sink.is_ok()) << sink.message();
  return sink.is_ok() ? std::move(sink).value() : nullptr;
}

// Takes an OFD write lock on the whole file open as `fd`: 0 or the errno.
inline int try_ofd_lock(int fd) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  return ::fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : errno;
}

// Opens `path` and tries the OFD lock on it (then closes it): 0 or the errno.
inline int lock_errno(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return -errno;
  const int err = try_ofd_lock(fd);
  ::close(fd);
  return err;
}

inline bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The elements of `bytes` as T, and back.
template <typename T>
std::vector<T> as_vector(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
std::string to_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Whether /usr/bin/python3 has h5py and numpy (the tests that read files with them skip
// otherwise).
inline bool h5py_available() {
  static const bool available = std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") == 0;
  return available;
}

}  // namespace tensorscope::recording::sink_testing

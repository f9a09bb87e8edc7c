// hdf5_reader_process.h — reads HDF5 recordings in a child process, with a deadline on
// every request, so a corrupt file cannot hang or crash the program that reads it.
//
// Used by `tensorscope compare` (compare/hdf5_source.h). libhdf5 trusts the file's
// internal structure: a corrupt global heap makes H5Aread loop forever (fuzz/README.md
// keeps such a file), other damage can crash it. So every libhdf5 call for a
// comparison runs in a forked child (hdf5_recording.h's functions); the caller waits
// at most `timeout` per request, then kills the child and gets an error naming the
// file. The next request starts a new child. A child that crashes is an error naming
// the file and its signal. Requests and replies travel over a Unix socket pair.
// The child closes every inherited descriptor except the socket and its standard
// streams, dies with the thread that started it (PR_SET_PDEATHSIG), and exits when
// the socket closes.
// Thread safety: one request at a time (an internal mutex serializes callers).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "compare/hdf5_recording.h"
#include "tensorscope/base/status.h"

namespace tensorscope::compare {

inline constexpr std::chrono::milliseconds kDefaultHdf5Timeout{30000};

class Hdf5ReaderProcess {
 public:
  explicit Hdf5ReaderProcess(std::chrono::milliseconds timeout = kDefaultHdf5Timeout);
  ~Hdf5ReaderProcess();  // kills and reaps the child
  Hdf5ReaderProcess(const Hdf5ReaderProcess&) = delete;
  Hdf5ReaderProcess& operator=(const Hdf5ReaderProcess&) = delete;

  // The one every `tensorscope compare` reading goes through (never destroyed; its
  // child exits when the process does).
  static Hdf5ReaderProcess& shared();

  void set_timeout(std::chrono::milliseconds timeout);

  // list_recording(file) in the child. Errors: its errors, and "libhdf5 did not
  // finish reading <file> in N s" / "the HDF5 reader stopped (...) while reading
  // <file>" / the child could not be started.
  StatusOr<std::vector<Hdf5Tensor>> list(const std::string& file);
  // Hdf5RowReader::read in the child; `out` receives exactly the bytes asked for.
  Status read(const Hdf5Tensor& tensor, uint64_t first, uint64_t count, unsigned char* out, size_t out_bytes);

  // The running child's pid, 0 when none (for tests).
  pid_t child_pid() const;

 private:
  Status start();
  void stop();
  // Sends `request`, waits for the reply; on failure stops the child.
  StatusOr<std::string> call(const std::string& request, const std::string& file);

  mutable std::mutex mutex_;
  std::chrono::milliseconds timeout_;
  pid_t pid_ = 0;
  int fd_ = -1;  // the parent's end of the socket pair
};

}  // namespace tensorscope::compare

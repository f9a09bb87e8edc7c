// parallel_chunks.h — internal: runs fn(begin, end) over [0, n) split into contiguous
// chunks, one per thread (the calling thread takes the first chunk).
//
// Used by the t-SNE code in the daemon's worker processes. Results must be written to
// per-index slots, never reduced across chunks, so they do not depend on the thread
// count. An exception from fn (e.g. bad_alloc) is rethrown on the calling thread after
// every chunk has finished; a thread that cannot be started runs its chunk inline.
// Thread safety: reentrant; fn must be safe to call concurrently on disjoint ranges.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace tensorscope::plotting::internal {

template <typename Fn>
void parallel_chunks(int64_t n, int threads, Fn&& fn) {
  if (n <= 0) return;
  const int64_t t = std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, n));
  if (t == 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&](int64_t begin, int64_t end) {
    try {
      fn(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(t - 1));
  for (int64_t c = 1; c < t; ++c) {
    const int64_t begin = n * c / t;
    const int64_t end = n * (c + 1) / t;
    try {
      workers.emplace_back(run, begin, end);
    } catch (const std::system_error&) {
      run(begin, end);
    }
  }
  run(0, n / t);
  for (auto& w : workers) w.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace tensorscope::plotting::internal

// summary_threads.h — the client's helper threads for the summary of a large CPU tensor:
// its elements cut into ranges that the process's cores read at once, so that a tensor of
// millions of elements costs the training thread a fraction of one pass over its memory.
//
// Used by tensor_summary.cc (summarize_cpu and the update ratio) inside the training
// process. The threads start at the first large tensor (none for a model of small
// tensors), are as many as the cores this process may run on (its affinity mask, at most
// kMaxThreads, the caller included), and sleep between runs. A forked child (a DataLoader
// worker) starts its own. Thread safety: run() may be called from any thread; while one
// run is going on, another caller does all its tasks itself rather than wait.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace tensorscope {

class SummaryThreads {
 public:
  static constexpr size_t kMaxThreads = 8;

  // How many tasks a run does at once: the calling thread and the helpers.
  virtual size_t threads() const = 0;
  // Runs task(i) for each i in [0, n), on the calling thread and the helpers, and returns
  // once every one has run. `task` must not throw.
  virtual void run(size_t n, const std::function<void(size_t)>& task) = 0;

 protected:
  ~SummaryThreads() = default;
};

// The process's threads (kept for the life of the process).
SummaryThreads& summary_threads();

// Cuts [0, n) into at most `parts` ranges of about equal length, each beginning on a whole
// block of `block` elements, and at most n / smallest of them (one when n < 2 * smallest):
// where range i begins, for i in [0, ranges], the last being n.
std::vector<size_t> split_ranges(size_t n, size_t parts, size_t smallest, size_t block);

}  // namespace tensorscope

// summary_intake.cc — see summary_intake.h.
#include "worker/summary_intake.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "tensorscope/base/logging.h"
#include "tensorscope/base/posix_file.h"
#include "tensorscope/recording/summary_table.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope::daemon {
namespace {

// Writes the compaction of the first `bytes` bytes of `from` into `to`.
Status compact_once(const std::string& from, uint64_t bytes, const std::string& to, uint64_t target,
                    const std::set<int64_t>& keep, recording::CompactedTable* result) {
  UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!in.valid()) return Status::from_errno("cannot open " + from, errno);
  void* map = bytes > 0 ? ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, in.get(), 0) : nullptr;
  if (map == MAP_FAILED) return Status::from_errno("cannot map " + from, errno);
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!out.valid()) {
    if (map != nullptr) ::munmap(map, bytes);
    return Status::from_errno("cannot create " + to, errno);
  }
  Status written;
  *result = recording::compact_summary_table(std::string_view(static_cast<const char*>(map), bytes), keep, target,
                                             [&](std::string_view piece) {
                                               if (written)
                                                 written = write_all(out.get(), piece.data(), piece.size(), to);
                                             });
  if (map != nullptr) ::munmap(map, bytes);
  return written;
}

// The first `upto` bytes of `path` compacted into `temp`, aiming at `target` bytes; again
// (at most 4 passes in all) while a pass's estimate fell short of it.
Status compact_into(const std::string& path, uint64_t upto, const std::string& temp, uint64_t target,
                    const std::set<int64_t>& keep, recording::CompactedTable* result) {
  Status st = compact_once(path, upto, temp, target, keep, result);
  const std::string again = temp + ".again";
  for (int pass = 1; st && pass < 4 && result->bytes_out > target; ++pass) {
    recording::CompactedTable next;
    st = compact_once(temp, result->bytes_out, again, target, keep, &next);
    if (st && ::rename(again.c_str(), temp.c_str()) != 0) st = Status::from_errno("cannot rename " + again, errno);
    if (st) {
      next.lines_in = result->lines_in;
      next.skipped += result->skipped;
      *result = next;
    }
  }
  ::unlink(again.c_str());
  return st;
}

}  // namespace

SummaryIntake::~SummaryIntake() {
  for (auto& [id, p] : producers_) {
    if (p.compaction) finish_compaction(id, p);
  }
}

bool SummaryIntake::take(uint64_t id, int64_t pid, const RecordView& view, std::vector<TensorSummary>* summaries,
                         std::vector<Anomaly>* anomalies, std::string* why) {
  auto parsed = parse_summaries(
      std::string_view(reinterpret_cast<const char*>(view.payload), static_cast<size_t>(view.header.payload_bytes)));
  if (!parsed) {
    *why = parsed.message();
    return false;
  }
  const std::string track(view.header.name, ::strnlen(view.header.name, wire::kNameBytes));
  const int rank = view.header.rank;
  Producer& p = producers_.try_emplace(id, config_).first->second;
  if (!p.table) {
    const std::string path = recording::summary_table_path(session_dir_, rank, pid);
    auto file = recording::AppendFile::open(path, recording::kSummaryTableHeader, "summary table");
    if (file) {
      p.table.emplace(std::move(*file));
      struct stat st {};
      p.table_bytes = ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    } else if (!p.table_failed) {
      p.table_failed = true;
      TS_LOG_ERROR("producer {}: no summary table (tried again with each record): {}", id, file.message());
    }
  }
  if (p.table) {
    // A full disk: this record's lines are lost (said once), later ones written when it
    // has room again.
    const std::string lines = recording::summary_table_lines(view.header.step, rank, track, *parsed);
    if (Status st = p.table->append(lines); !st && !p.table_failed) {
      p.table_failed = true;
      TS_LOG_ERROR("producer {}: {}", id, st.message());
    } else if (st) {
      p.table_bytes += lines.size();
    }
  }
  *anomalies = p.detector.observe(track, view.header.step, rank, pid, *parsed);
  for (const Anomaly& a : *anomalies) {
    if (p.anomaly_steps.size() < 100000) p.anomaly_steps.insert(a.step);
  }
  // Records faster than compactions (a daemon that cannot keep up): past twice the limit
  // this record waits for one, and the ring holds the next (the client holds summaries).
  maybe_compact(id, p, /*wait=*/p.table_bytes > 2 * static_cast<uint64_t>(table_max_bytes_));
  *summaries = std::move(*parsed);
  return true;
}

void SummaryIntake::finish_producer(uint64_t id) {
  auto it = producers_.find(id);
  if (it == producers_.end()) return;
  Producer& p = it->second;
  if (p.compaction) finish_compaction(id, p);
  // The table is left within its limit: compacted once more, now, when records came
  // faster than a compaction ran.
  p.next_compaction_bytes = 0;
  maybe_compact(id, p, /*wait=*/true);
  producers_.erase(it);
}

void SummaryIntake::maybe_compact(uint64_t id, Producer& p, bool wait) {
  if (p.compaction && (wait || p.compaction->done.load(std::memory_order_acquire))) finish_compaction(id, p);
  if (p.compaction) return;  // still running
  if (!p.table || p.table_bytes <= static_cast<uint64_t>(table_max_bytes_) || p.table_bytes < p.next_compaction_bytes) {
    return;
  }
  auto c = std::make_unique<Compaction>();
  c->upto = p.table_bytes;
  c->temp = p.table->path() + ".compacting";
  Compaction* raw = c.get();
  const uint64_t target = static_cast<uint64_t>(table_max_bytes_) / 5 * 3;
  c->thread = std::thread([raw, path = p.table->path(), target, keep = p.anomaly_steps] {
    raw->status = compact_into(path, raw->upto, raw->temp, target, keep, &raw->result);
    raw->done.store(true, std::memory_order_release);
  });
  p.compaction = std::move(c);
  if (wait) finish_compaction(id, p);
}

void SummaryIntake::finish_compaction(uint64_t id, Producer& p) {
  std::unique_ptr<Compaction> c = std::move(p.compaction);
  c->thread.join();
  const std::string path = p.table->path();
  // Tried again once the table grew by another quarter of its limit, whatever happens.
  p.next_compaction_bytes = p.table_bytes + static_cast<uint64_t>(table_max_bytes_) / 4;
  Status st = c->status;
  uint64_t size = 0;
  if (st) {
    // What was appended while it ran goes after the compacted copy; then the copy
    // replaces the table (new lines go to it from now on).
    UniqueFd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    UniqueFd out(::open(c->temp.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW));
    struct stat st_in {};
    if (!in.valid() || !out.valid() || ::fstat(in.get(), &st_in) != 0) {
      st = Status::from_errno("cannot reopen " + path + " or " + c->temp, errno);
    } else {
      const uint64_t end = static_cast<uint64_t>(st_in.st_size);
      std::string tail(end > c->upto ? end - c->upto : 0, '\0');
      st = pread_exact(in.get(), tail.data(), tail.size(), c->upto, path);
      if (st) st = write_all(out.get(), tail.data(), tail.size(), c->temp);
      if (st && ::fsync(out.get()) != 0) st = Status::from_errno("cannot sync " + c->temp, errno);
      size = c->result.bytes_out + tail.size();
    }
  }
  if (st && ::rename(c->temp.c_str(), path.c_str()) != 0) st = Status::from_errno("cannot rename " + c->temp, errno);
  if (!st) {
    ::unlink(c->temp.c_str());
    TS_LOG_ERROR("producer {}: the summary table {} was not compacted: {}", id, path, st.message());
    return;
  }
  auto reopened = recording::AppendFile::open(path, recording::kSummaryTableHeader, "summary table");
  if (!reopened) {
    p.table.reset();
    TS_LOG_ERROR("producer {}: {}", id, reopened.message());
    return;
  }
  p.table.emplace(std::move(*reopened));
  TS_LOG_INFO(
      "producer {}: summary table {} compacted from {} to {} bytes (record.summary_table_max_bytes): {} lines to {}, "
      "steps before {} merged in blocks of {}, {} findings kept whole",
      id, path, c->upto, c->result.bytes_out, c->result.lines_in, c->result.lines_out, c->result.merged_before,
      c->result.block_steps, c->result.kept);
  p.table_bytes = size;
  // A table of findings alone hardly shrinks: not tried again before it grew by a quarter.
  p.next_compaction_bytes =
      c->result.bytes_out * 10 > c->upto * 9 ? size + static_cast<uint64_t>(table_max_bytes_) / 4 : 0;
}

}  // namespace tensorscope::daemon

// summary_intake.cc — see summary_intake.h.
#include "worker/summary_intake.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tensorscope/base/logging.h"
#include "tensorscope/base/text_input.h"
#include "tensorscope/recording/summary_table.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope::daemon {
namespace {

constexpr size_t kMaxAnomalySteps = 100000;  // kept whole per producer (anomalies are few)

// Writes the compaction of the first `bytes` bytes of the file `in` (named `from`) into `to`.
Status compact_once(int in, const std::string& from, uint64_t bytes, const std::string& to, uint64_t target,
                    const std::set<int64_t>& keep, recording::CompactedTable* result) {
  void* map = bytes > 0 ? ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, in, 0) : nullptr;
  if (map == MAP_FAILED) return Status::from_errno("cannot map " + from, errno);
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!out.valid()) {
    if (map != nullptr) ::munmap(map, bytes);
    return Status::from_errno("cannot create " + to, errno);
  }
  Status written;
  try {
    *result = recording::compact_summary_table(std::string_view(static_cast<const char*>(map), bytes), keep, target,
                                               [&](std::string_view piece) {
                                                 if (written)
                                                   written = write_all(out.get(), piece.data(), piece.size(), to);
                                               });
  } catch (const std::exception& e) {  // out of memory
    written = Status::error("compacting " + from + ": " + e.what());
  }
  if (map != nullptr) ::munmap(map, bytes);
  return written;
}

// The first `upto` bytes of the table open as `in` compacted into `temp`, aiming at
// `target` bytes; again (at most 4 passes in all) while a pass's estimate fell short.
Status compact_into(int in, const std::string& path, uint64_t upto, const std::string& temp, uint64_t target,
                    const std::set<int64_t>& keep, recording::CompactedTable* result) {
  Status st = compact_once(in, path, upto, temp, target, keep, result);
  const std::string again = temp + ".again";
  for (int pass = 1; st && pass < 4 && result->bytes_out > target; ++pass) {
    recording::CompactedTable next;
    UniqueFd copy(::open(temp.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!copy.valid()) return Status::from_errno("cannot open " + temp, errno);
    st = compact_once(copy.get(), temp, result->bytes_out, again, target, keep, &next);
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

// What anomalies.jsonl (at most its last 16 MiB) says of process `pid` (rank `rank`),
// reported by this daemon or an earlier one: the steps of its reports, and whether one
// was its divergence from the reference.
struct Reported {
  std::set<int64_t> steps;
  bool divergence = false;
};
Reported reported_before(const std::string& session_dir, int rank, int64_t pid) {
  Reported out;
  bool missing = false;
  auto text = read_text_tail(session_dir + "/anomalies.jsonl", 16u << 20, "anomaly log", &missing);
  if (!text) return out;
  std::string_view rest(*text);
  for (size_t nl = rest.find('\n'); nl != std::string_view::npos && out.steps.size() < kMaxAnomalySteps;
       nl = rest.find('\n')) {
    const nlohmann::json a = nlohmann::json::parse(rest.substr(0, nl), nullptr, false);
    rest.remove_prefix(nl + 1);
    if (a.is_object() && a.value("rank", -1) == rank && a.value("pid", int64_t{-1}) == pid && a.contains("step") &&
        a["step"].is_number_integer()) {
      out.steps.insert(a["step"].get<int64_t>());
      if (a.value("type", std::string()) == "divergence") out.divergence = true;
    }
  }
  return out;
}

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

SummaryIntake::~SummaryIntake() {
  for (auto& [id, p] : producers_) {
    if (p.compaction) finish_compaction(id, p);
  }
  finish_ended(/*wait=*/true);
}

void SummaryIntake::open_table(uint64_t id, Producer& p, const std::string& path) {
  const uint64_t ino = inode_of(path);
  if (p.table && ino == p.table_ino && ino != 0) return;
  auto file = recording::AppendFile::open(path, recording::kSummaryTableHeader, "summary table");
  if (!file) {
    p.table.reset();
    if (!p.table_failed) {
      p.table_failed = true;
      TS_LOG_ERROR("producer {}: no summary table (tried again with each record): {}", id, file.message());
    }
    return;
  }
  p.table.emplace(std::move(*file));
  struct stat st {};
  p.table_bytes = ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  p.table_ino = static_cast<uint64_t>(st.st_ino);
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
  auto [at, first] = producers_.try_emplace(id, config_);
  Producer& p = at->second;
  if (first) {
    Reported before = reported_before(session_dir_, rank, pid);
    p.anomaly_steps = std::move(before.steps);
    const auto ref = references_.find(id);
    if (ref != references_.end()) {
      p.watch = std::make_unique<DivergenceWatch>(ref->second, rank, pid, reference_, before.divergence);
      references_.erase(ref);
    }
  }
  open_table(id, p, recording::summary_table_path(session_dir_, rank, pid));
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
  if (p.watch) {
    for (Anomaly& a : p.watch->observe(track, view.header.step, *parsed, steady_ms())) {
      anomalies->push_back(std::move(a));
    }
  }
  for (const Anomaly& a : *anomalies) {
    if (p.anomaly_steps.size() < kMaxAnomalySteps) p.anomaly_steps.insert(a.step);
  }
  finish_ended(/*wait=*/false);
  // Records faster than compactions (a daemon that cannot keep up): past twice the limit
  // this record waits for one, and the ring holds the next (the client holds summaries).
  maybe_compact(id, p, /*wait=*/p.table_bytes > 2 * static_cast<uint64_t>(table_max_bytes_));
  *summaries = std::move(*parsed);
  return true;
}

void SummaryIntake::set_reference(uint64_t id, std::string reference) {
  if (references_.size() < 65536) references_[id] = std::move(reference);
}

std::vector<Anomaly> SummaryIntake::poll() {
  std::vector<Anomaly> out;
  const int64_t now = steady_ms();
  for (auto& [id, p] : producers_) {
    if (!p.watch || !p.watch->waiting()) continue;
    for (Anomaly& a : p.watch->poll(now)) {
      if (p.anomaly_steps.size() < kMaxAnomalySteps) p.anomaly_steps.insert(a.step);
      out.push_back(std::move(a));
    }
  }
  return out;
}

nlohmann::json SummaryIntake::reference_status() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [id, p] : producers_) {
    if (!p.watch) continue;
    nlohmann::json s = p.watch->status();
    s["producer"] = id;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Anomaly> SummaryIntake::finish_producer(uint64_t id) {
  references_.erase(id);
  auto it = producers_.find(id);
  if (it == producers_.end()) return {};
  Producer& p = it->second;
  std::vector<Anomaly> last;
  if (p.watch) {
    try {  // the producer ends whatever happens here
      last = p.watch->finish(steady_ms());
      const nlohmann::json s = p.watch->status();
      TS_LOG_INFO(
          "producer {} against the reference {}: {} tensors compared, {} outside tolerance{}", id,
          s["reference"].get<std::string>(), s["compared"].get<uint64_t>(), s["out_of_tolerance"].get<uint64_t>(),
          s["first_divergence"].is_null() ? std::string() : " (first at step " + s["first_divergence"].dump() + ")");
    } catch (const std::exception& e) {
      TS_LOG_ERROR("producer {}: the comparison with the reference ended early: {}", id, e.what());
    }
  }
  // Finished in the background: a large table must not hold up the other producers.
  if (!p.compaction && p.table && p.table_bytes > static_cast<uint64_t>(table_max_bytes_)) {
    p.compaction = start_compaction(p.table->path(), p.anomaly_steps);
  }
  if (p.compaction) ended_.push_back(std::move(p.compaction));
  producers_.erase(it);
  return last;
}

void SummaryIntake::maybe_compact(uint64_t id, Producer& p, bool wait) {
  if (p.compaction && (wait || p.compaction->done.load(std::memory_order_acquire))) finish_compaction(id, p);
  if (p.compaction) return;  // still running
  if (!p.table || p.table_bytes <= static_cast<uint64_t>(table_max_bytes_) || p.table_bytes < p.next_compaction_bytes) {
    return;
  }
  p.compaction = start_compaction(p.table->path(), p.anomaly_steps);
  if (!p.compaction) {
    p.next_compaction_bytes = p.table_bytes + static_cast<uint64_t>(table_max_bytes_) / 4;
    return;
  }
  if (wait) finish_compaction(id, p);
}

std::unique_ptr<SummaryIntake::Compaction> SummaryIntake::start_compaction(const std::string& path,
                                                                           const std::set<int64_t>& keep) {
  for (const auto& other : ended_) {
    if (other->path == path) return nullptr;  // one compaction of a table at a time
  }
  auto c = std::make_unique<Compaction>();
  c->path = path;
  static std::atomic<uint64_t> serial{0};  // two intakes (workers) may compact one table
  c->temp = path + ".compacting-" + std::to_string(::getpid()) + "-" + std::to_string(++serial);
  c->fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (!c->fd.valid() || ::fstat(c->fd.get(), &st) != 0) return nullptr;
  c->ino = static_cast<uint64_t>(st.st_ino);
  c->upto = static_cast<uint64_t>(st.st_size);  // whole lines: each record is one write()
  const uint64_t target = static_cast<uint64_t>(table_max_bytes_) / 5 * 3;
  Compaction* raw = c.get();
  try {
    c->thread = std::thread([raw, target, keep] {
      try {
        raw->status = compact_into(raw->fd.get(), raw->path, raw->upto, raw->temp, target, keep, &raw->result);
      } catch (const std::exception& e) {
        raw->status = Status::error(std::string("compaction failed: ") + e.what());
      }
      raw->done.store(true, std::memory_order_release);
    });
  } catch (const std::exception& e) {  // no thread to be had
    TS_LOG_WARN("summary table {} not compacted now: {}", path, e.what());
    return nullptr;
  }
  return c;
}

StatusOr<std::optional<uint64_t>> SummaryIntake::finish(Compaction& c) {
  c.thread.join();
  Status st = c.status;
  uint64_t size = c.result.bytes_out;
  if (st) {
    // What was appended while it ran (to the same file) goes after the compacted copy,
    // in pieces; then the copy replaces the table, unless the table was replaced meanwhile.
    UniqueFd out(::open(c.temp.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW));
    struct stat in {};
    if (!out.valid() || ::fstat(c.fd.get(), &in) != 0) {
      st = Status::from_errno("cannot reopen " + c.temp, errno);
    } else {
      std::string piece(1u << 20, '\0');
      for (uint64_t at = c.upto, end = static_cast<uint64_t>(in.st_size); st && at < end;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(piece.size(), end - at));
        st = pread_exact(c.fd.get(), piece.data(), n, at, c.path);
        if (st) st = write_all(out.get(), piece.data(), n, c.temp);
        at += n;
        size += n;
      }
      if (st && ::fsync(out.get()) != 0) st = Status::from_errno("cannot sync " + c.temp, errno);
    }
  }
  if (st && inode_of(c.path) != c.ino) {  // by another producer's compaction: given up
    ::unlink(c.temp.c_str());
    TS_LOG_INFO("summary table {}: replaced by another compaction meanwhile; this one given up", c.path);
    return std::optional<uint64_t>();
  }
  if (st && ::rename(c.temp.c_str(), c.path.c_str()) != 0) st = Status::from_errno("cannot rename " + c.temp, errno);
  if (!st) {
    ::unlink(c.temp.c_str());
    return st;
  }
  TS_LOG_INFO(
      "summary table {} compacted from {} to {} bytes (record.summary_table_max_bytes): {} lines to {}, steps before "
      "{} merged in blocks of {}, {} findings kept whole",
      c.path, c.upto, c.result.bytes_out, c.result.lines_in, c.result.lines_out, c.result.merged_before,
      c.result.block_steps, c.result.kept);
  return std::optional<uint64_t>(size);
}

void SummaryIntake::finish_compaction(uint64_t id, Producer& p) {
  std::unique_ptr<Compaction> c = std::move(p.compaction);
  // Tried again once the table grew by another quarter of its limit, whatever happens.
  p.next_compaction_bytes = p.table_bytes + static_cast<uint64_t>(table_max_bytes_) / 4;
  StatusOr<std::optional<uint64_t>> size = finish(*c);
  if (!size) {
    TS_LOG_ERROR("producer {}: the summary table {} was not compacted: {}", id, c->path, size.message());
    return;
  }
  open_table(id, p, c->path);  // the copy (or the other one's), from now on
  if (!size->has_value()) return;
  // A table of findings alone hardly shrinks: not tried again before it grew by a quarter.
  if (c->result.bytes_out * 10 <= c->upto * 9) p.next_compaction_bytes = 0;
}

void SummaryIntake::finish_ended(bool wait) {
  for (auto it = ended_.begin(); it != ended_.end();) {
    if (!wait && !(*it)->done.load(std::memory_order_acquire)) {
      ++it;
      continue;
    }
    StatusOr<std::optional<uint64_t>> size = finish(**it);
    if (!size) TS_LOG_ERROR("the summary table {} was not compacted: {}", (*it)->path, size.message());
    it = ended_.erase(it);
  }
}

}  // namespace tensorscope::daemon

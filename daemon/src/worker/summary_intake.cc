// summary_intake.cc — see summary_intake.h.
#include "worker/summary_intake.h"

#include <cstring>
#include <string_view>

#include "tensorscope/base/logging.h"
#include "tensorscope/recording/summary_table.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope::daemon {

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
    auto file = recording::AppendFile::open(recording::summary_table_path(session_dir_, rank, pid),
                                            recording::kSummaryTableHeader, "summary table");
    if (file) {
      p.table.emplace(std::move(*file));
    } else if (!p.table_failed) {
      p.table_failed = true;
      TS_LOG_ERROR("producer {}: no summary table (tried again with each record): {}", id, file.message());
    }
  }
  if (p.table) {
    // A full disk: this record's lines are lost (said once), later ones written when it
    // has room again.
    if (Status st = p.table->append(recording::summary_table_lines(view.header.step, rank, track, *parsed));
        !st && !p.table_failed) {
      p.table_failed = true;
      TS_LOG_ERROR("producer {}: {}", id, st.message());
    }
  }
  *anomalies = p.detector.observe(track, view.header.step, rank, pid, *parsed);
  *summaries = std::move(*parsed);
  return true;
}

}  // namespace tensorscope::daemon

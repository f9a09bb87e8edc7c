// summary_table.cc — see summary_table.h.
#include "tensorscope/recording/summary_table.h"

#include <limits>

#include "tensorscope/recording/csv_text.h"

namespace tensorscope::recording {

std::string summary_table_lines(int64_t step, int rank, const std::string& track,
                                const std::vector<TensorSummary>& summaries) {
  std::string out;
  out.reserve(summaries.size() * 160);
  const std::string prefix = std::to_string(step) + "," + std::to_string(rank) + "," + csv_field(track) + ",";
  for (size_t i = 0; i < summaries.size(); ++i) {
    const TensorSummary& s = summaries[i];
    out += prefix;
    out += std::to_string(i) + "," + csv_field(s.name) + "," + wire::tensor_kind_name(s.kind) + "," +
           std::to_string(s.numel);
    for (const double v : {s.l2, s.max_abs, s.mean, s.std}) out += "," + csv_number(v);
    out += "," + std::to_string(s.nan_count) + "," + std::to_string(s.inf_count) + "," +
           csv_number(s.numel > 0 ? s.zero_fraction() : std::numeric_limits<double>::quiet_NaN()) + "," +
           (s.has_update_ratio ? csv_number(s.update_ratio) : std::string()) + "\n";
  }
  return out;
}

std::string summary_table_path(const std::string& session_dir, int rank, int64_t pid) {
  return session_dir + "/summaries/rank" + std::to_string(rank) + "_pid" + std::to_string(pid) + ".csv";
}

}  // namespace tensorscope::recording

// summary_table.cc — see summary_table.h.
#include "tensorscope/recording/summary_table.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensorscope/base/text_input.h"
#include "tensorscope/recording/csv_text.h"

namespace tensorscope::recording {

namespace {

// A line's cells from `step` to `update_ratio`, then `steps`.
void append_line(std::string* out, int64_t step, int rank, const std::string& track_cell, int64_t order,
                 const TensorSummary& s, int64_t steps) {
  *out += std::to_string(step) + "," + std::to_string(rank) + "," + track_cell + "," + std::to_string(order) + "," +
      csv_field(s.name) + "," + wire::tensor_kind_name(s.kind) + "," + std::to_string(s.numel);
  for (const double v : {s.l2, s.max_abs, s.mean, s.std}) *out += "," + csv_number(v);
  *out += "," + std::to_string(s.nan_count) + "," + std::to_string(s.inf_count) + "," +
      csv_number(s.numel > 0 ? s.zero_fraction() : std::numeric_limits<double>::quiet_NaN()) + "," +
      (s.has_update_ratio ? csv_number(s.update_ratio) : std::string()) + "," + std::to_string(steps) + "\n";
}

}  // namespace

std::string summary_table_lines(int64_t step, int rank, const std::string& track,
                                const std::vector<TensorSummary>& summaries) {
  std::string out;
  out.reserve(summaries.size() * 160);
  const std::string track_cell = csv_field(track);
  for (size_t i = 0; i < summaries.size(); ++i) {
    append_line(&out, step, rank, track_cell, static_cast<int64_t>(i), summaries[i], 1);
  }
  return out;
}

std::string summary_table_line(const SummaryTableRow& row) {
  std::string out;
  append_line(&out, row.step, row.rank, csv_field(row.track), row.order, row.summary, row.steps);
  return out;
}

namespace {

// The cells of one CSV line (RFC 4180 quoting); false when a quote is not closed.
bool split_csv(std::string_view line, std::vector<std::string>* cells) {
  cells->clear();
  std::string cell;
  size_t i = 0;
  for (;;) {
    cell.clear();
    if (i < line.size() && line[i] == '"') {
      for (++i;; ++i) {
        if (i >= line.size()) return false;
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            cell += '"';
            ++i;
          } else {
            ++i;
            break;
          }
        } else {
          cell += line[i];
        }
      }
    } else {
      while (i < line.size() && line[i] != ',') cell += line[i++];
    }
    cells->push_back(cell);
    if (i >= line.size()) return true;
    if (line[i] != ',') return false;
    ++i;
  }
}

template <class T>
bool read_number(const std::string& text, T* out) {
  if constexpr (std::is_floating_point_v<T>) {
    if (text.empty()) {
      *out = std::numeric_limits<T>::quiet_NaN();
      return true;
    }
  }
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

bool parse_summary_table_line(std::string_view line, SummaryTableRow* row) {
  std::vector<std::string> c;
  if (!split_csv(line, &c) || (c.size() != 15 && c.size() != 16)) return false;
  TensorSummary& s = row->summary;
  double zero_fraction = 0;
  row->steps = 1;
  if (c.size() == 16 && (!read_number(c[15], &row->steps) || row->steps < 1)) return false;
  if (!read_number(c[0], &row->step) || !read_number(c[1], &row->rank) || !read_number(c[3], &row->order) ||
      !read_number(c[6], &s.numel) || !read_number(c[7], &s.l2) || !read_number(c[8], &s.max_abs) ||
      !read_number(c[9], &s.mean) || !read_number(c[10], &s.std) || !read_number(c[11], &s.nan_count) ||
      !read_number(c[12], &s.inf_count) || !read_number(c[13], &zero_fraction) ||
      !read_number(c[14], &s.update_ratio)) {
    return false;
  }
  s.kind = wire::tensor_kind_from_name(c[5]);
  if (s.kind == wire::TensorKind::kInvalid || c[4].empty()) return false;
  row->track = std::move(c[2]);
  s.name = std::move(c[4]);
  s.zero_count =
      std::isnan(zero_fraction) ? 0 : static_cast<uint64_t>(std::llround(zero_fraction * static_cast<double>(s.numel)));
  s.has_update_ratio = !std::isnan(s.update_ratio);
  if (!s.has_update_ratio) s.update_ratio = 0;
  return true;
}

uint64_t for_each_summary_table_row(std::string_view text, const std::function<void(const SummaryTableRow&)>& row) {
  uint64_t skipped = 0;
  SummaryTableRow r;
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n')) {
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (line == kSummaryTableHeader || line == kSummaryTableHeaderV1) continue;
    if (parse_summary_table_line(line, &r)) {
      row(r);
    } else {
      ++skipped;
    }
  }
  return skipped;
}

StatusOr<uint64_t> read_summary_table(const std::string& path, uint64_t max_bytes,
                                      const std::function<void(const SummaryTableRow&)>& row) {
  StatusOr<std::string> text = read_text_tail(path, static_cast<size_t>(max_bytes), "summary table");
  if (!text) return text.status();
  return for_each_summary_table_row(*text, row);
}

std::string summary_table_path(const std::string& session_dir, int rank, int64_t pid) {
  return session_dir + "/summaries/rank" + std::to_string(rank) + "_pid" + std::to_string(pid) + ".csv";
}

}  // namespace tensorscope::recording

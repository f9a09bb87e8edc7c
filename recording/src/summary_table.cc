// summary_table.cc — see summary_table.h.
#include "tensorscope/recording/summary_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "tensorscope/base/text_input.h"
#include "tensorscope/recording/csv_text.h"
#include "tensorscope/shared/output_dir.h"

namespace tensorscope::recording {

namespace {

// The header's cells, and how many a line of each version has.
constexpr size_t kCellsV1 = 15, kCellsV2 = 16, kCellsV3 = 20, kCellsV4 = 22, kCells = 23;

// A line's cells from `step` to `update_ratio`, then `steps`, the numerics, the shard, the dtype.
void append_line(std::string* out, int64_t step, int rank, const std::string& track_cell, int64_t order,
                 const TensorSummary& s, int64_t steps) {
  const double none = std::numeric_limits<double>::quiet_NaN();
  *out += std::to_string(step) + "," + std::to_string(rank) + "," + track_cell + "," + std::to_string(order) + "," +
      csv_field(s.name) + "," + wire::tensor_kind_name(s.kind) + "," + std::to_string(s.numel);
  for (const double v : {s.l2, s.max_abs, s.mean, s.std}) *out += "," + csv_number(v);
  *out += "," + std::to_string(s.nan_count) + "," + std::to_string(s.inf_count) + "," +
      csv_number(s.numel > 0 ? s.zero_fraction() : std::numeric_limits<double>::quiet_NaN()) + "," +
      (s.has_update_ratio ? csv_number(s.update_ratio) : std::string()) + "," + std::to_string(steps) + ",";
  if (s.has_numerics()) {
    *out += std::string(cast_format_name(s.cast_format)) + "," + csv_number(s.dynamic_range()) + "," +
        csv_number(s.numel > 0 ? s.underflow_fraction() : none) + "," +
        csv_number(s.numel > 0 ? s.overflow_fraction() : none);
  } else {
    *out += ",,,";
  }
  *out += "," + shard_text(s.shard.dims) + "," +
      (s.shard.sharded() ? std::to_string(s.shard.whole_numel) : std::string()) + "," +
      (s.dtype == wire::DType::kInvalid ? std::string() : std::string(wire::dtype_name(s.dtype))) + "\n";
}

}  // namespace

uint64_t count_of_fraction(double fraction, uint64_t numel) {
  return std::isnan(fraction) ? 0 : static_cast<uint64_t>(std::llround(fraction * static_cast<double>(numel)));
}

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

bool is_summary_table_header(std::string_view line) {
  const std::string_view header = kSummaryTableHeader;
  if (line == header) return true;
  if (line.size() >= header.size() || header.substr(0, line.size()) != line || header[line.size()] != ',') return false;
  const auto cells = static_cast<size_t>(std::count(line.begin(), line.end(), ',')) + 1;
  return cells == kCellsV1 || cells == kCellsV2 || cells == kCellsV3 || cells == kCellsV4;
}

bool parse_summary_table_line(std::string_view line, SummaryTableRow* row) {
  std::vector<std::string> c;
  if (!split_csv(line, &c) ||
      (c.size() != kCellsV1 && c.size() != kCellsV2 && c.size() != kCellsV3 && c.size() != kCellsV4 &&
       c.size() != kCells)) {
    return false;
  }
  TensorSummary& s = row->summary;
  double zero_fraction = 0;
  row->steps = 1;
  if (c.size() >= kCellsV2 && (!read_number(c[15], &row->steps) || row->steps < 1)) return false;
  s.cast_format = CastFormat::kNone;
  s.underflow_count = s.overflow_count = 0;
  s.min_abs_nonzero = 0;
  double range = 0, under = 0, over = 0;
  s.shard = ShardPlacement{};
  if (c.size() >= kCellsV4) {
    if (!parse_shard_text(c[20], &s.shard.dims)) return false;
    if (s.shard.sharded() && !read_number(c[21], &s.shard.whole_numel)) return false;
  }
  s.dtype = wire::DType::kInvalid;
  if (c.size() >= kCells && !c[22].empty()) {
    s.dtype = wire::dtype_from_name(c[22]);
    if (s.dtype == wire::DType::kInvalid) return false;
  }
  if (c.size() >= kCellsV3 && !c[16].empty()) {
    const std::optional<CastFormat> cast = cast_format_from_name(c[16]);
    if (!cast || !read_number(c[17], &range) || !read_number(c[18], &under) || !read_number(c[19], &over)) {
      return false;
    }
    s.cast_format = *cast;
  }
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
  s.zero_count = count_of_fraction(zero_fraction, s.numel);
  s.has_update_ratio = !std::isnan(s.update_ratio);
  if (!s.has_update_ratio) s.update_ratio = 0;
  if (s.has_numerics()) {
    s.underflow_count = count_of_fraction(under, s.numel);
    s.overflow_count = count_of_fraction(over, s.numel);
    s.min_abs_nonzero = std::isnan(range) || !(s.max_abs > 0) ? 0.0 : std::exp2(std::log2(s.max_abs) - range);
  }
  return true;
}

uint64_t for_each_summary_table_row(std::string_view text, const std::function<void(const SummaryTableRow&)>& row) {
  uint64_t skipped = 0;
  SummaryTableRow r;
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n')) {
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (is_summary_table_header(line)) continue;
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
  return session_dir + "/summaries/" + run_info_base_name(rank, static_cast<long>(pid)) + ".csv";
}

bool parse_summary_table_name(const std::string& name, int* rank, int64_t* pid) {
  long long r = -1, p = -1;
  int end = 0;
  if (std::sscanf(name.c_str(), "rank%lld_pid%lld.csv%n", &r, &p, &end) != 2 ||
      static_cast<size_t>(end) != name.size() || r < 0 || r > 1000000 || p < 0) {
    return false;
  }
  *rank = static_cast<int>(r);
  *pid = p;
  return true;
}

}  // namespace tensorscope::recording

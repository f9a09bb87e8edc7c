// summary_compaction.cc — see summary_compaction.h.
#include "tensorscope/recording/summary_compaction.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensorscope/recording/summary_table.h"

namespace tensorscope::recording {
namespace {

// NaN (no value) gives way to a value.
double larger(double a, double b) { return std::fmax(a, b); }

SummaryTableRow merged(const SummaryTableRow& a, const SummaryTableRow& b) {
  SummaryTableRow r = a;
  TensorSummary& s = r.summary;
  const TensorSummary &x = a.summary, &y = b.summary;
  r.steps = a.steps + b.steps;
  s.numel = std::max(x.numel, y.numel);
  s.l2 = larger(x.l2, y.l2);
  s.max_abs = larger(x.max_abs, y.max_abs);
  s.std = larger(x.std, y.std);
  if (std::isnan(x.mean) || std::isnan(y.mean)) {
    s.mean = std::isnan(x.mean) ? y.mean : x.mean;
  } else {
    s.mean =
        (x.mean * static_cast<double>(a.steps) + y.mean * static_cast<double>(b.steps)) / static_cast<double>(r.steps);
  }
  s.nan_count = x.nan_count + y.nan_count;
  s.inf_count = x.inf_count + y.inf_count;
  const double zeros = std::max(x.zero_fraction(), y.zero_fraction());
  s.zero_count = count_of_fraction(zeros, s.numel);
  s.has_update_ratio = x.has_update_ratio || y.has_update_ratio;
  s.update_ratio = !x.has_update_ratio ? y.update_ratio
      : !y.has_update_ratio            ? x.update_ratio
                                       : larger(x.update_ratio, y.update_ratio);
  // The numerics: the magnitudes of the steps together (their dynamic range), the largest
  // fractions lost.
  if (x.has_numerics() || y.has_numerics()) {
    s.cast_format = x.has_numerics() ? x.cast_format : y.cast_format;
    const auto smallest = [](double a, double b) { return a > 0 && (a < b || !(b > 0)) ? a : b; };
    s.min_abs_nonzero = smallest(x.has_numerics() ? x.min_abs_nonzero : 0, y.has_numerics() ? y.min_abs_nonzero : 0);
    s.underflow_count = count_of_fraction(std::max(x.underflow_fraction(), y.underflow_fraction()), s.numel);
    s.overflow_count = count_of_fraction(std::max(x.overflow_fraction(), y.overflow_fraction()), s.numel);
  }
  return r;
}

}  // namespace

CompactedTable compact_summary_table(std::string_view text, const std::set<int64_t>& keep_steps, uint64_t target_bytes,
                                     const std::function<void(std::string_view)>& sink) {
  CompactedTable out;
  // Calls `each(line, row)` for every line of the table, in order (row: null when the
  // line does not parse).
  auto for_each_line = [&text](auto&& each) {
    std::string_view rest = text;
    SummaryTableRow row;
    for (size_t nl = rest.find('\n'); nl != std::string_view::npos; nl = rest.find('\n')) {
      const std::string_view bare = rest.substr(0, nl);
      rest.remove_prefix(nl + 1);
      if (is_summary_table_header(bare)) continue;
      each(parse_summary_table_line(bare, &row) ? &row : nullptr);
    }
  };
  auto key_of = [](const SummaryTableRow& r) { return r.track + '\n' + r.summary.name; };

  // First pass: the lines, each tensor's first line with a NaN or Inf, and what the
  // older part (all but the newest quarter of the lines) spans.
  std::unordered_map<std::string, uint64_t> first_bad;
  for_each_line([&](const SummaryTableRow* row) {
    if (row == nullptr) {
      ++out.skipped;
      return;
    }
    if (!row->summary.finite()) first_bad.try_emplace(key_of(*row), out.lines_in);
    ++out.lines_in;
  });
  const uint64_t cut = out.lines_in - out.lines_in / 4;
  auto finding = [&](const SummaryTableRow& row, uint64_t i, const std::string& key) {
    auto bad = first_bad.find(key);
    return (bad != first_bad.end() && bad->second == i) || keep_steps.count(row.step) != 0;
  };
  int64_t first_step = INT64_MAX, last_step = INT64_MIN, widest = 1;
  uint64_t findings = 0;
  std::unordered_map<std::string, char> tensors;
  {
    uint64_t i = 0;
    for_each_line([&](const SummaryTableRow* row) {
      if (row == nullptr || i >= cut) {
        i += row != nullptr ? 1 : 0;
        return;
      }
      const std::string key = key_of(*row);
      if (finding(*row, i, key)) {
        ++findings;
      } else {
        first_step = std::min(first_step, row->step);
        last_step = std::max(last_step, row->step + row->steps - 1);
        widest = std::max(widest, row->steps);
        tensors.emplace(key, 0);
      }
      ++i;
    });
  }
  // The block: the narrowest power of two (at least twice a line, at least the widest
  // line there) whose lines, with the rest, fit the target; the older part is made at
  // most four times smaller at once (when the newest quarter alone passes the target, the
  // next compaction goes on from there).
  const double line_bytes = out.lines_in > 0 ? static_cast<double>(text.size()) / static_cast<double>(out.lines_in) : 1;
  const double span = last_step >= first_step ? static_cast<double>(last_step - first_step + 1) : 0;
  const double older_lines = static_cast<double>(cut - findings);
  const double room =
      std::max(static_cast<double>(target_bytes) / line_bytes - static_cast<double>(out.lines_in - cut + findings),
               older_lines / 4);
  int64_t block = 2;
  while (block < widest) block *= 2;
  while (block < (int64_t{1} << 40) &&
         static_cast<double>(tensors.size()) * (span / static_cast<double>(block) + 1) > room) {
    block *= 2;
  }
  out.block_steps = block;

  std::string buffer;
  auto emit = [&](const std::string& piece) {
    buffer.append(piece);
    out.bytes_out += piece.size();
    ++out.lines_out;
    if (buffer.size() >= (1u << 20)) {
      sink(buffer);
      buffer.clear();
    }
  };
  buffer.append(kSummaryTableHeader).push_back('\n');
  out.bytes_out = buffer.size();
  // Second pass: in the older part, each tensor's lines of one block of steps (steps
  // floor(step / block) alike) merged into one, written when the tensor's next block
  // begins; findings as they were.
  std::unordered_map<std::string, SummaryTableRow> open;  // by tensor: its block's line so far
  auto close_all = [&] {
    std::vector<const SummaryTableRow*> rows;
    for (const auto& [key, r] : open) rows.push_back(&r);
    std::sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
      return a->step != b->step ? a->step < b->step : a->order < b->order;
    });
    for (const auto* r : rows) emit(summary_table_line(*r));
    open.clear();
  };
  uint64_t index = 0;
  for_each_line([&](const SummaryTableRow* row) {
    if (row == nullptr) return;
    const uint64_t i = index++;
    if (i == cut) {
      close_all();
      out.merged_before = row->step;
    }
    if (i >= cut) {
      emit(summary_table_line(*row));  // a table written before the steps column gets it
      return;
    }
    const std::string key = key_of(*row);
    if (finding(*row, i, key)) {
      emit(summary_table_line(*row));
      ++out.kept;
      return;
    }
    auto [at, first] = open.try_emplace(key, *row);
    if (first) return;
    if (at->second.step / block == row->step / block) {
      at->second = merged(at->second, *row);
    } else {
      emit(summary_table_line(at->second));
      at->second = *row;
    }
  });
  close_all();  // a table of the older part alone (fewer than 4 lines)
  if (!buffer.empty()) sink(buffer);
  return out;
}

}  // namespace tensorscope::recording

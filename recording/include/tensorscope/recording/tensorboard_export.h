// tensorboard_export.h — what the daemon writes to TensorBoard (tensorboard_events.h)
// when `export.tensorboard` is on: the vocabulary of exportable summary metrics
// (kExportMetrics: the summary table's numeric columns, by the same names), the scalar
// tags of one record, and an anomaly as text with a link to the live page at its stream,
// rank and step.
//
// Tags: "<metric>/<stream>" (TensorBoard groups its charts by the part before the first
// '/': one section per metric, a chart per tensor; runs are the processes, rank<r>_pid<p>).
// Anomalies: tag "tensorscope/anomalies" of run "anomalies", at the anomaly's step.
// Used by the worker's summary intake and the supervisor's anomaly log. Thread safety:
// pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorscope/shared/summary_format.h"

namespace tensorscope::recording {

// X(name): the summary metrics that can be exported, named as the summary table's columns.
// clang-format off
#define TENSORSCOPE_EXPORT_METRICS(X) \
  X(l2)                               \
  X(max_abs)                          \
  X(mean)                             \
  X(std)                              \
  X(nan_count)                        \
  X(inf_count)                        \
  X(zero_fraction)                    \
  X(update_ratio)                     \
  X(dynamic_range)                    \
  X(underflow_fraction)               \
  X(overflow_fraction)
// clang-format on

inline constexpr std::array kExportMetrics = {
#define TENSORSCOPE_EXPORT_METRIC_NAME(name) #name,
    TENSORSCOPE_EXPORT_METRICS(TENSORSCOPE_EXPORT_METRIC_NAME)
#undef TENSORSCOPE_EXPORT_METRIC_NAME
};

// Metric `i` of kExportMetrics of one summary; NaN where it has none (no update ratio at a
// parameter's first step, no numerics without a cast format, no l2, max |x|, mean or std
// of a tensor none of whose elements is finite).
double export_metric(size_t i, const TensorSummary& s);

// The scalars of one record: for each summary whose stream `streams` matches (whole
// match) and each metric `metrics` matches, ("<metric>/<stream>", value); NaN values
// left out.
std::vector<std::pair<std::string, float>> export_scalars(const std::vector<TensorSummary>& summaries,
                                                          const std::regex& metrics, const std::regex& streams);

inline constexpr char kAnomalyRun[] = "anomalies";
inline constexpr char kAnomalyTag[] = "tensorscope/anomalies";

// The live page at `stream`, `rank` and `step`: `live_url` (the page's address, without
// its #t= token: a page opened before keeps it) with the fragment the page reads
// (view/web/state.js: q = the stream as an exact regular expression, rank, step,
// page=tiles), percent-encoded. "" without a live_url.
std::string live_page_link(const std::string& live_url, const std::string& stream, int rank, int64_t step);

// An anomaly report (worker/anomaly_detector.h's JSON) as Markdown: its type, step,
// rank, stream and kind, its message, and the link to the live page (or, without a
// live_url, the command that opens it for `session`).
std::string anomaly_markdown(const nlohmann::json& anomaly, const std::string& live_url, const std::string& session);

}  // namespace tensorscope::recording

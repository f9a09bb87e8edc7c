// tensorboard_export.cc — see tensorboard_export.h.
#include "tensorscope/recording/tensorboard_export.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string_view>

namespace tensorscope::recording {
namespace {

// `text` with the characters a regular expression gives a meaning escaped (as the page's
// escapeRegExp, view/web/format.js).
std::string regex_literal(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view(".*+?^${}()|[]\\").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// `text` percent-encoded for a URL fragment's value (unreserved characters kept).
std::string percent_encoded(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

std::string text_of(const nlohmann::json& a, const char* key) {
  const auto it = a.find(key);
  return it != a.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

double export_metric(size_t i, const TensorSummary& s) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Over the finite elements; a tensor without one has none of these (a 0 would draw a
  // norm that fell to nothing where it became NaN).
  const bool none_finite = s.numel > 0 && s.nan_count + s.inf_count >= s.numel;
  switch (i) {
    case 0: return none_finite ? nan : s.l2;
    case 1: return none_finite ? nan : s.max_abs;
    case 2: return none_finite ? nan : s.mean;
    case 3: return none_finite ? nan : s.std;
    case 4: return static_cast<double>(s.nan_count);
    case 5: return static_cast<double>(s.inf_count);
    case 6: return s.zero_fraction();
    case 7: return s.has_update_ratio ? s.update_ratio : nan;
    case 8: return s.has_numerics() ? s.dynamic_range() : nan;
    case 9: return s.has_numerics() ? s.underflow_fraction() : nan;
    case 10: return s.has_numerics() ? s.overflow_fraction() : nan;
    default: return nan;
  }
}
// export_metric's cases follow kExportMetrics' order.
static_assert(kExportMetrics.size() == 11 && std::string_view(kExportMetrics[0]) == "l2" &&
              std::string_view(kExportMetrics[4]) == "nan_count" &&
              std::string_view(kExportMetrics[7]) == "update_ratio" &&
              std::string_view(kExportMetrics[10]) == "overflow_fraction");

std::vector<std::pair<std::string, float>> export_scalars(const std::vector<TensorSummary>& summaries,
                                                          const std::regex& metrics, const std::regex& streams) {
  std::vector<size_t> chosen;
  for (size_t i = 0; i < kExportMetrics.size(); ++i) {
    if (std::regex_match(kExportMetrics[i], metrics)) chosen.push_back(i);
  }
  std::vector<std::pair<std::string, float>> out;
  for (const TensorSummary& s : summaries) {
    if (chosen.empty() || !std::regex_match(s.name, streams)) continue;
    for (size_t i : chosen) {
      const double v = export_metric(i, s);
      if (!std::isnan(v)) out.emplace_back(std::string(kExportMetrics[i]) + "/" + s.name, static_cast<float>(v));
    }
  }
  return out;
}

std::string live_page_link(const std::string& live_url, const std::string& stream, int rank, int64_t step) {
  if (live_url.empty()) return "";
  const std::string base = live_url.substr(0, live_url.find('#'));
  return base + "#q=" + percent_encoded("^" + regex_literal(stream) + "$") + "&rank=" + std::to_string(rank) +
      "&step=" + std::to_string(step) + "&page=tiles";
}

std::string anomaly_markdown(const nlohmann::json& a, const std::string& live_url, const std::string& session) {
  const std::string stream = text_of(a, "stream");
  const int rank = a.value("rank", 0);
  const int64_t step = a.value("step", int64_t{0});
  std::string md = "**" + text_of(a, "type") + "** at step " + std::to_string(step) + ", rank " + std::to_string(rank) +
      ": `" + stream + "` (" + text_of(a, "kind") + ")  \n" + text_of(a, "message") + "  \n";
  const std::string link = live_page_link(live_url, stream, rank, step);
  if (!link.empty()) return md + "[open it in the live page](" + link + ")";
  return md + "open it in the live page: `tensorscope view --session " + session + "`, stream `" + stream + "`, rank " +
      std::to_string(rank) + ", step " + std::to_string(step);
}

}  // namespace tensorscope::recording

// daemon_config.h — DaemonConfig: every setting of tensorscoped, with its default.
//
// Used by the daemon. The supervisor loads the YAML file (load_daemon_config), applies
// command-line overrides, re-checks them (validate_daemon_config) and hands the resolved
// config to each worker process as JSON (to_json → daemon_config_from_json, an exact
// round trip). configs/default.yaml documents every key; loading it yields defaults().
// Thread safety: plain value types and free functions without shared state; safe to
// call from any thread. No function here throws: failures come back as a Status whose
// message names the file, the dotted key (e.g. "video.width") and what was expected.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorscope/base/named_enum.h"
#include "tensorscope/base/status.h"
#include "tensorscope/shared/output_dir.h"
#include "tensorscope/shared/render_modes.h"

namespace tensorscope {

// The enumerated keys, each an enum and its YAML/JSON spelling (lower case), indexed by
// value, from one X-macro list (base/named_enum.h: a value without its spelling cannot be
// written): the one definition the readers, the writer and the messages ("expected one
// of ...") derive from. choice_names() finds a type's spelling; "" marks a value no config
// may name. A new value: one line in its list, and the switches over the enum (the build
// fails on one that misses it).
#define TENSORSCOPE_LOG_LEVELS(X) \
  X(kTrace, "trace") X(kDebug, "debug") X(kInfo, "info") X(kWarn, "warn") X(kError, "error") X(kOff, "off")
TENSORSCOPE_NAMED_ENUM(LogLevel, uint8_t, kLogLevels, TENSORSCOPE_LOG_LEVELS);
// auto: avc1 when this FFmpeg has libx264
#define TENSORSCOPE_VIDEO_CODECS(X) X(kAuto, "auto") X(kAvc1, "avc1") X(kMp4v, "mp4v")
TENSORSCOPE_NAMED_ENUM(VideoCodec, uint8_t, kVideoCodecs, TENSORSCOPE_VIDEO_CODECS);
// A render mode is the wire's (tensorscope/shared/render_modes.h, kRenderModeNames).
using RenderMode = wire::RenderHint;
// Histogram value axis (auto: symlog when the body spans orders of magnitude) and count
// axis (auto: log when most bars would be too small to see).
#define TENSORSCOPE_VALUE_AXES(X) X(kAuto, "auto") X(kLinear, "linear") X(kSymlog, "symlog")
TENSORSCOPE_NAMED_ENUM(ValueAxis, uint8_t, kValueAxes, TENSORSCOPE_VALUE_AXES);
#define TENSORSCOPE_COUNT_SCALES(X) X(kAuto, "auto") X(kLinear, "linear") X(kLog, "log")
TENSORSCOPE_NAMED_ENUM(CountScale, uint8_t, kCountScales, TENSORSCOPE_COUNT_SCALES);
#define TENSORSCOPE_HEATMAP_REDUCTIONS(X) X(kMean, "mean") X(kMaxAbs, "max_abs")
TENSORSCOPE_NAMED_ENUM(HeatmapReduction, uint8_t, kHeatmapReductions, TENSORSCOPE_HEATMAP_REDUCTIONS);
#define TENSORSCOPE_PCA_LAYOUTS(X) X(kFirstDim, "first_dim") X(kFirstTwoDims, "first_two_dims")
TENSORSCOPE_NAMED_ENUM(PcaLayout, uint8_t, kPcaLayouts, TENSORSCOPE_PCA_LAYOUTS);
#define TENSORSCOPE_HDF5_DTYPES(X) X(kKeep, "keep") X(kFloat32, "float32") X(kFloat16, "float16") X(kFloat64, "float64")
TENSORSCOPE_NAMED_ENUM(Hdf5Dtype, uint8_t, kHdf5Dtypes, TENSORSCOPE_HDF5_DTYPES);
inline constexpr std::array<std::string_view, 2> kBooleans = {"false", "true"};  // a bool's spelling
static_assert(named_and_distinct(kLogLevels) && named_and_distinct(kVideoCodecs) && named_and_distinct(kValueAxes) &&
              named_and_distinct(kCountScales) && named_and_distinct(kHeatmapReductions) &&
              named_and_distinct(kPcaLayouts) && named_and_distinct(kHdf5Dtypes));

constexpr std::span<const std::string_view> choice_names(LogLevel) { return kLogLevels; }
constexpr std::span<const std::string_view> choice_names(VideoCodec) { return kVideoCodecs; }
constexpr std::span<const std::string_view> choice_names(RenderMode) { return wire::kRenderModeNames; }
constexpr std::span<const std::string_view> choice_names(ValueAxis) { return kValueAxes; }
constexpr std::span<const std::string_view> choice_names(CountScale) { return kCountScales; }
constexpr std::span<const std::string_view> choice_names(HeatmapReduction) { return kHeatmapReductions; }
constexpr std::span<const std::string_view> choice_names(PcaLayout) { return kPcaLayouts; }
constexpr std::span<const std::string_view> choice_names(Hdf5Dtype) { return kHdf5Dtypes; }
constexpr std::span<const std::string_view> choice_names(bool) { return kBooleans; }

// The spelling of `value` ("" for a value without one).
template <typename E>
constexpr std::string_view choice_name(E value) {
  const auto names = choice_names(E{});
  const auto index = static_cast<size_t>(value);
  return index < names.size() ? names[index] : std::string_view();
}

// The value spelled `name`; nullopt for "" and any other text.
template <typename E>
constexpr std::optional<E> choice_from_name(std::string_view name) {
  const auto names = choice_names(E{});
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i].empty() && names[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

// A colour, written "#rrggbb" in the config.
struct Rgb {
  uint8_t r = 0;
  uint8_t g = 0;
  uint8_t b = 0;
  bool operator==(const Rgb&) const = default;
};

// "#rrggbb" (lower case).
std::string to_string(Rgb color);
// The colour "#rrggbb" (either case) names; nullopt for any other text.
std::optional<Rgb> parse_rgb(std::string_view text);

// A config file larger than this is refused (protects against /dev/zero and the like).
inline constexpr std::size_t kMaxConfigFileBytes = 1 << 20;

struct VideoConfig {
  int width = 640;        // pixels, 160..7680
  int height = 480;       // pixels, 120..4320
  double fps = 10.0;      // frames per second, > 0 and <= 240
  int max_frames = 1000;  // frames per video file before a new segment starts, 1..10^7
  VideoCodec codec = VideoCodec::kAuto;
  bool operator==(const VideoConfig&) const = default;
};

// A per-stream setting: streams whose name matches `match` (ECMAScript regex, searched
// anywhere in the name) get `value` (spelled "mode" in the config). The first matching
// rule wins.
template <typename T>
struct StreamRule {
  std::string match;
  T value{};
  bool operator==(const StreamRule&) const = default;
};
using ModeRule = StreamRule<RenderMode>;

// The first of `rules` (StreamRule, RangeRule, ToleranceRule) whose regex `match` is found
// in `stream`; nullptr when none is (or one cannot compile: the loader checked them all).
template <typename Rule>
const Rule* first_match(const std::vector<Rule>& rules, const std::string& stream) {
  for (const Rule& rule : rules) {
    try {
      if (std::regex_search(stream, std::regex(rule.match, std::regex::ECMAScript))) return &rule;
    } catch (const std::regex_error&) {}
  }
  return nullptr;
}

// A fixed histogram range for streams whose name matches `match` (instead of the range
// chosen from the stream's first frame). Like every rule of two numbers, it names them
// (kNumbers: their keys in the config, kFields: where they go) for the config readers.
struct RangeRule {
  std::string match;
  double lo = 0;
  double hi = 1;
  bool operator==(const RangeRule&) const = default;
  static constexpr std::array<const char*, 2> kNumbers = {"lo", "hi"};
  static constexpr std::array<double RangeRule::*, 2> kFields = {&RangeRule::lo, &RangeRule::hi};
};

// The tolerance of a comparison with the reference run (recording/reference_diff.h) for
// streams whose name matches `match`, instead of the element types' default.
struct ToleranceRule {
  std::string match;
  double rtol = 0;
  double atol = 0;
  bool operator==(const ToleranceRule&) const = default;
  static constexpr std::array<const char*, 2> kNumbers = {"rtol", "atol"};
  static constexpr std::array<double ToleranceRule::*, 2> kFields = {&ToleranceRule::rtol, &ToleranceRule::atol};
};

struct RenderConfig {
  RenderMode mode = RenderMode::kAuto;      // never kDefault
  std::vector<ModeRule> stream_modes;       // per-stream overrides, before the client's hint
  std::vector<RangeRule> histogram_ranges;  // per-stream fixed histogram ranges
  int histogram_bins = 64;                  // 2..4096
  double histogram_margin = 0.1;            // 0..1: fraction of the body's width added each side
  ValueAxis histogram_axis = ValueAxis::kAuto;
  std::vector<StreamRule<ValueAxis>> histogram_axis_streams;  // per stream
  CountScale histogram_scale = CountScale::kAuto;
  std::vector<StreamRule<CountScale>> histogram_scale_streams;  // per stream
  int histogram_rerange_frames = 10;                            // 1..100000: frames between two range changes
  HeatmapReduction heatmap_reduction = HeatmapReduction::kMean;
  PcaLayout pca_layout = PcaLayout::kFirstDim;  // what a row is
  double tsne_perplexity = 30;                  // 2..100
  int tsne_iterations = 750;                    // 50..10000, a stream's first frame
  int tsne_warm_iterations = 150;               // 10..10000, later frames (warm-started)
  int tsne_max_rows = 10000;                    // 10..1000000: rows above are subsampled
  int64_t tsne_seed = 0;                        // >= 0
  bool operator==(const RenderConfig&) const = default;
};

// What is kept of each stream besides (or instead of) its video. Each sink records the
// streams whose name matches its regex (ECMAScript, searched anywhere in the name; ""
// records none). Files go under <output_dir>/<session>/:
//   stats/rank<r>_pid<p>.csv                 one statistics row per tensor
//   dumps/step_<n>/<stream>_rank<r>.npy      one .npy file per tensor
//   hdf5/rank<r>_pid<p>.<k>.h5              HDF5 datasets per stream, files rotated
struct RecordConfig {
  std::string video = ".*";  // streams rendered to videos
  std::string stats = "";
  std::string npy = "";
  std::string hdf5 = "";
  std::string tree = ".*";                          // tracks (by name) whose module tree log is written
  Hdf5Dtype hdf5_dtype = Hdf5Dtype::kKeep;          // stored element type
  int hdf5_gzip = 4;                                // 0 (none) .. 9
  bool hdf5_change_detection = true;                // skip repeated values
  int64_t hdf5_rotate_bytes = 268435456;            // >= 1048576: finalize a file after this
  std::chrono::seconds hdf5_rotate_interval{60};    // 1..86400 s: ... or after this long
  std::chrono::seconds hdf5_flush_interval{5};      // 0..3600 s: flush the open file this often
                                                    // (0: only before closing it)
  int64_t hdf5_change_detection_bytes = 268435456;  // >= 0: cap on the copies change
                                                    // detection keeps, per worker (0: none;
                                                    // values without one are stored)
  int64_t summary_table_max_bytes = 1073741824;     // >= 1048576: a process's summary table past
                                                    // this is compacted (summary_compaction.h)
  int64_t queue_bytes = 268435456;                  // >= 1048576: payloads waiting to be written;
                                                    // beyond, records are dropped from the
                                                    // sinks (counted; videos are unaffected)
  bool operator==(const RecordConfig&) const = default;
};

struct LimitsConfig {
  int64_t max_record_bytes = 1073741824;    // >= 1: larger records are dropped and counted
  int64_t max_streams_per_worker = 4096;    // >= 1
  int64_t max_open_videos_per_worker = 64;  // 1..4096: encoders (and files) open at once
  bool operator==(const LimitsConfig&) const = default;
};

// Frame colours.
struct StyleConfig {
  Rgb background{0x1c, 0x1e, 0x22};
  Rgb foreground{0xe6, 0xe8, 0xeb};
  Rgb bar{0x48, 0x9c, 0xde};
  Rgb grid{0x38, 0x3b, 0x40};
  Rgb accent{0xff, 0xac, 0x40};
  bool operator==(const StyleConfig&) const = default;
};

struct SupervisorConfig {
  std::chrono::milliseconds heartbeat_interval{200};       // 10..60000 ms
  std::chrono::milliseconds heartbeat_timeout{5000};       // > heartbeat_interval
  std::chrono::milliseconds restart_backoff_initial{100};  // 1..60000 ms
  std::chrono::milliseconds restart_backoff_max{5000};     // >= restart_backoff_initial
  std::chrono::milliseconds shutdown_timeout{30000};       // 100..600000 ms: to finalize videos on SIGTERM
  std::chrono::milliseconds idle_exit{0};                  // 0 = never; else exit once no producer this long
  bool operator==(const SupervisorConfig&) const = default;
};

// The live view (tensorscope/view): workers publish the newest frame of each stream, at
// most max_fps a second, as a JPEG on a shared-memory board of board_mb per worker
// (never in the output directory); `serve` makes the daemon itself serve the page.
struct LiveConfig {
  double max_fps = 4;                 // 0..60 frames a second per stream (0: no live frames)
  int board_mb = 8;                   // 1..4096: each worker's board (at most 1/16 of free shm)
  int jpeg_quality = 80;              // 10..100
  int width = 320;                    // 0..7680: frames wider are scaled down to this (0: never)
  bool serve = false;                 // serve the page (tensorscoped --view)
  std::string address = "127.0.0.1";  // where it listens
  bool allow_remote = false;          // required for a non-loopback address
  int port = 0;                       // 0..65535 (0: a free port, printed)
  int history_mb = 64;                // 1..65536: frames the page's step cursor can go back to
  bool operator==(const LiveConfig&) const = default;
};

// What the workers flag in the per-step summaries (anomalies.jsonl, the log, status):
// the first non-finite value always; an explosion when a tensor's L2 norm exceeds
// explosion_factor times the median of its last explosion_window summarised steps (once
// half of them are known) and its RMS (L2 / sqrt(numel)) is at least explosion_min_rms;
// dead units when an activation's fraction of exact zeros stays >= dead_fraction for
// dead_steps summarised steps in a row.
struct AnomaliesConfig {
  double explosion_factor = 50;  // > 1
  int explosion_window = 100;    // 4..100000 steps (the median needs half of them)
  double explosion_min_rms = 1;  // >= 0: tiny values that grow (a gradient near 0) are no explosion
  double dead_fraction = 0.99;   // 0 < x <= 1
  int dead_steps = 50;           // 1..1000000
  bool operator==(const AnomaliesConfig&) const = default;
};

// Findings in the user's dashboard (recording/tensorboard_export.h): with tensorboard on,
// <session>/tensorboard/ gets an event file per process (run rank<r>_pid<p>: scalars
// "<metric>/<stream>" of the metrics tensorboard_metrics matches, for the streams
// tensorboard_streams matches, every summarised step) and the run "anomalies" (each
// report as text, with a link to the live page at live_url: the address a viewer serves,
// e.g. http://node7:8080/; "" : the page this daemon serves (live.serve), else no link
// but the command that opens it).
struct ExportConfig {
  bool tensorboard = false;
  std::string tensorboard_metrics = "l2|max_abs|update_ratio|nan_count";  // whole match, kExportMetrics
  std::string tensorboard_streams = ".*";                                 // whole match
  std::string live_url;
  bool operator==(const ExportConfig&) const = default;
};

// The run each training process is compared with as it trains (worker/divergence_watch.h):
// its summaries, rank by rank, against the reference's of the same step, tensor and rank
// (recording/reference_diff.h); the first tensor that leaves tolerance is reported as the
// anomaly "divergence". `session`: a session folder (or a folder with one per node), or
// the name of a session under output_dir; "" : none, unless the client names one
// (Client(reference=...)), which wins. `tolerances`: per stream, the first matching rule
// instead of the element types' default. Summaries that reach their step before a
// still-running reference does wait, at most pending_mb of them per process.
struct ReferenceConfig {
  std::string session;
  std::vector<ToleranceRule> tolerances;
  int pending_mb = 64;  // 1..4096
  bool operator==(const ReferenceConfig&) const = default;
};

// The overview of each rank (recording/overview_history.h): a video per metric while
// training, a frame each time frame_every more steps were summarised (at most one per
// min_frame_interval_ms), showing the last window_steps summarised steps; a PNG of the
// whole run when the producer ends. frame_every 0: neither.
struct OverviewConfig {
  int window_steps = 200;                             // 10..100000 columns of the video's frames
  int frame_every = 10;                               // 0..1000000 summarised steps between frames (0: off)
  std::chrono::milliseconds min_frame_interval{250};  // 0..600000 ms
  bool operator==(const OverviewConfig&) const = default;
};

struct DaemonConfig {
  std::string session = "default";             // see validate_session_name()
  std::string output_dir = kDefaultOutputDir;  // non-empty
  bool output_private = false;                 // outputs 0600 in 0700
  int64_t output_budget_mb = 20480;            // >= 0: the session's disk budget (0: none)
  std::string runtime_dir;                     // "" = automatic ($TENSORSCOPE_RUNTIME_DIR,
                                               // else /dev/shm/tensorscope-<uid>)
  int workers = 2;                             // 1..64
  int render_threads = 0;                      // per worker, 0..64; 0 = one per CPU it may use, <= 8
  LogLevel log_level = LogLevel::kInfo;
  VideoConfig video;
  RenderConfig render;
  StyleConfig style;
  RecordConfig record;
  LimitsConfig limits;
  SupervisorConfig supervisor;
  LiveConfig live;
  AnomaliesConfig anomalies;
  OverviewConfig overview;
  ExportConfig export_;  // "export" (a C++ keyword)
  ReferenceConfig reference;

  static DaemonConfig defaults() { return DaemonConfig{}; }
  bool operator==(const DaemonConfig&) const = default;
};

// Reads and parses a YAML config file (at most kMaxConfigFileBytes). Every key is
// optional; an empty file, or one with only comments, yields defaults(). Unknown keys,
// duplicate keys, wrong node types, out-of-range values and YAML syntax errors are errors
// of the form "<path>: video.width: expected an integer between 160 and 7680, got "abc"
// (line 3, column 10)".
StatusOr<DaemonConfig> load_daemon_config(const std::string& path);

// Same as load_daemon_config on text already in memory; `source_name` prefixes messages.
StatusOr<DaemonConfig> parse_daemon_config(const std::string& yaml_text, const std::string& source_name);

// Checks every field against the rules above (e.g. after command-line overrides).
// Messages name the dotted key: "workers: expected an integer between 1 and 64, got 0".
Status validate_daemon_config(const DaemonConfig& config);

// JSON form for supervisor → worker hand-over: the same nesting as the YAML, every key
// present. daemon_config_from_json(to_json(c)) == c exactly (also through dump/parse).
// daemon_config_from_json requires every key, rejects unknown ones and validates values.
// Strings in a valid config are valid UTF-8, so dump() of to_json() does not throw.
nlohmann::json to_json(const DaemonConfig& config);
StatusOr<DaemonConfig> daemon_config_from_json(const nlohmann::json& json);

}  // namespace tensorscope

// daemon_config_test.cc — DaemonConfig: defaults, configs/default.yaml, YAML errors,
// JSON round trip, and the session-name rule.
#include "config/daemon_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "tensorscope/shared/session_name.h"

#ifndef TENSORSCOPE_SOURCE_DIR
#error "TENSORSCOPE_SOURCE_DIR (the repository root, as a string literal) must be defined"
#endif

namespace tensorscope {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

StatusOr<DaemonConfig> parse(const std::string& text) { return parse_daemon_config(text, "test.yaml"); }

// Parses `text`, expects failure, returns the message.
std::string error_of(const std::string& text) {
  StatusOr<DaemonConfig> r = parse(text);
  EXPECT_FALSE(r.is_ok()) << "expected an error for:\n" << text;
  return r.is_ok() ? std::string() : r.message();
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "ts_config_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    const char* made = ::mkdtemp(buf.data());
    if (made == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = made != nullptr ? made : "/nonexistent";
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& content) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  std::string path_;
};

TEST(DaemonConfigTest, DefaultsMatchTheDocumentedValues) {
  const DaemonConfig c = DaemonConfig::defaults();
  EXPECT_EQ(c.session, "default");
  EXPECT_EQ(c.output_dir, "tensorscope_runs");
  EXPECT_EQ(c.runtime_dir, "");
  EXPECT_EQ(c.workers, 2);
  EXPECT_EQ(c.log_level, LogLevel::kInfo);
  EXPECT_EQ(c.video.width, 640);
  EXPECT_EQ(c.video.height, 480);
  EXPECT_EQ(c.video.fps, 10.0);
  EXPECT_EQ(c.video.max_frames, 1000);
  EXPECT_EQ(c.video.codec, VideoCodec::kAuto);
  EXPECT_EQ(c.render.mode, RenderMode::kAuto);
  EXPECT_EQ(c.render.histogram_bins, 64);
  EXPECT_EQ(c.render.histogram_margin, 0.1);
  EXPECT_EQ(c.limits.max_record_bytes, 1073741824);
  EXPECT_EQ(c.limits.max_streams_per_worker, 4096);
  EXPECT_EQ(c.limits.max_open_videos_per_worker, 64);
  EXPECT_EQ(c.supervisor.heartbeat_interval.count(), 200);
  EXPECT_EQ(c.supervisor.heartbeat_timeout.count(), 5000);
  EXPECT_EQ(c.supervisor.restart_backoff_initial.count(), 100);
  EXPECT_EQ(c.supervisor.restart_backoff_max.count(), 5000);
  EXPECT_EQ(c.supervisor.shutdown_timeout.count(), 30000);
  EXPECT_TRUE(validate_daemon_config(c).is_ok());
}

TEST(DaemonConfigTest, DefaultYamlEqualsDefaults) {
  const std::string path = std::string(TENSORSCOPE_SOURCE_DIR) + "/configs/default.yaml";
  StatusOr<DaemonConfig> c = load_daemon_config(path);
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(*c, DaemonConfig::defaults());
}

TEST(DaemonConfigTest, DefaultYamlMentionsEveryKey) {
  // Every key of the JSON form (which has them all) appears in configs/default.yaml.
  std::ifstream in(std::string(TENSORSCOPE_SOURCE_DIR) + "/configs/default.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json j = to_json(DaemonConfig::defaults());
  for (const auto& [key, value] : j.items()) {
    EXPECT_THAT(text, HasSubstr("\n" + key + ":")) << key;
    if (value.is_object()) {
      for (const auto& [sub, unused] : value.items()) EXPECT_THAT(text, HasSubstr("  " + sub + ":")) << sub;
    }
  }
}

TEST(DaemonConfigTest, EmptyTextAndCommentsGiveDefaults) {
  for (const std::string& text :
       std::vector<std::string>{"", "\n\n", "# only a comment\n  # another\n", "---\n", "---\n...\n"}) {
    StatusOr<DaemonConfig> c = parse(text);
    ASSERT_TRUE(c.is_ok()) << c.message();
    EXPECT_EQ(*c, DaemonConfig::defaults());
  }
}

TEST(DaemonConfigTest, EmptyFileGivesDefaults) {
  TempDir dir;
  StatusOr<DaemonConfig> c = load_daemon_config(dir.write("empty.yaml", ""));
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(*c, DaemonConfig::defaults());
}

TEST(DaemonConfigTest, ReadsEveryKey) {
  StatusOr<DaemonConfig> c = parse(R"(
session: run-7.b_2
output_dir: /tmp/out
runtime_dir: /tmp/rt
workers: 64
log_level: debug
video:
  width: 7680
  height: 120
  fps: 29.97
  max_frames: 10000000
  codec: mp4v
render:
  mode: histogram
  histogram_bins: 2
  histogram_margin: 0
limits:
  max_record_bytes: 9000000000
  max_streams_per_worker: 1
  max_open_videos_per_worker: 4096
supervisor:
  heartbeat_interval_ms: 10
  heartbeat_timeout_ms: 11
  restart_backoff_initial_ms: 60000
  restart_backoff_max_ms: 60000
  shutdown_timeout_ms: 600000
)");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->session, "run-7.b_2");
  EXPECT_EQ(c->output_dir, "/tmp/out");
  EXPECT_EQ(c->runtime_dir, "/tmp/rt");
  EXPECT_EQ(c->workers, 64);
  EXPECT_EQ(c->log_level, LogLevel::kDebug);
  EXPECT_EQ(c->video.width, 7680);
  EXPECT_EQ(c->video.height, 120);
  EXPECT_EQ(c->video.fps, 29.97);
  EXPECT_EQ(c->video.max_frames, 10000000);
  EXPECT_EQ(c->video.codec, VideoCodec::kMp4v);
  EXPECT_EQ(c->render.mode, RenderMode::kHistogram);
  EXPECT_EQ(c->render.histogram_bins, 2);
  EXPECT_EQ(c->render.histogram_margin, 0.0);
  EXPECT_EQ(c->limits.max_record_bytes, 9000000000LL);
  EXPECT_EQ(c->limits.max_streams_per_worker, 1);
  EXPECT_EQ(c->limits.max_open_videos_per_worker, 4096);
  EXPECT_EQ(c->supervisor.heartbeat_interval.count(), 10);
  EXPECT_EQ(c->supervisor.heartbeat_timeout.count(), 11);
  EXPECT_EQ(c->supervisor.restart_backoff_initial.count(), 60000);
  EXPECT_EQ(c->supervisor.restart_backoff_max.count(), 60000);
  EXPECT_EQ(c->supervisor.shutdown_timeout.count(), 600000);
}

TEST(DaemonConfigTest, PartialSectionKeepsOtherDefaults) {
  StatusOr<DaemonConfig> c = parse("video:\n  width: 800\nrender:\n");
  ASSERT_TRUE(c.is_ok()) << c.message();
  DaemonConfig expected;
  expected.video.width = 800;
  EXPECT_EQ(*c, expected);
}

TEST(DaemonConfigTest, ErrorNamesFileKeyValueAndLine) {
  const std::string m = error_of("workers: 2\nvideo:\n  width: abc\n");
  EXPECT_THAT(m, StartsWith("test.yaml: video.width: expected an integer between 160 and 7680, got \"abc\""));
  EXPECT_THAT(m, HasSubstr("line 3"));
}

struct RangeCase {
  std::string yaml;
  std::string key;
};

TEST(DaemonConfigTest, EveryRangeErrorNamesItsKey) {
  const std::vector<RangeCase> cases = {
      {"session: \"\"", "session"},
      {"session: .hidden", "session"},
      {"session: a/b", "session"},
      {"session: " + std::string(65, 'a'), "session"},
      {"output_dir: \"\"", "output_dir"},
      {"output_dir: \"a\\0b\"", "output_dir"},
      {"workers: 0", "workers"},
      {"workers: 65", "workers"},
      {"workers: 2.5", "workers"},
      {"workers: 99999999999999999999999", "workers"},
      {"log_level: verbose", "log_level"},
      {"log_level: INFO", "log_level"},
      {"video: {width: 159}", "video.width"},
      {"video: {width: 7681}", "video.width"},
      {"video: {height: 119}", "video.height"},
      {"video: {height: 4321}", "video.height"},
      {"video: {fps: 0}", "video.fps"},
      {"video: {fps: -1}", "video.fps"},
      {"video: {fps: 240.5}", "video.fps"},
      {"video: {fps: .nan}", "video.fps"},
      {"video: {fps: nan}", "video.fps"},
      {"video: {fps: inf}", "video.fps"},
      {"video: {fps: ten}", "video.fps"},
      {"video: {max_frames: 0}", "video.max_frames"},
      {"video: {max_frames: 10000001}", "video.max_frames"},
      {"video: {codec: h265}", "video.codec"},
      {"render: {mode: sparkles}", "render.mode"},
      {"render: {histogram_bins: 1}", "render.histogram_bins"},
      {"render: {histogram_bins: 4097}", "render.histogram_bins"},
      {"render: {histogram_margin: -0.1}", "render.histogram_margin"},
      {"render: {histogram_margin: 1.5}", "render.histogram_margin"},
      {"render: {histogram_axis: log}", "render.histogram_axis"},
      {"render: {histogram_scale: sqrt}", "render.histogram_scale"},
      {"render: {histogram_rerange_frames: 0}", "render.histogram_rerange_frames"},
      {"limits: {max_record_bytes: 0}", "limits.max_record_bytes"},
      {"limits: {max_record_bytes: 1e9}", "limits.max_record_bytes"},
      {"limits: {max_streams_per_worker: -3}", "limits.max_streams_per_worker"},
      {"limits: {max_open_videos_per_worker: 0}", "limits.max_open_videos_per_worker"},
      {"limits: {max_open_videos_per_worker: 4097}", "limits.max_open_videos_per_worker"},
      {"supervisor: {heartbeat_interval_ms: 9}", "supervisor.heartbeat_interval_ms"},
      {"supervisor: {heartbeat_interval_ms: 60001}", "supervisor.heartbeat_interval_ms"},
      {"supervisor: {heartbeat_timeout_ms: 200}", "supervisor.heartbeat_timeout_ms"},
      {"supervisor: {heartbeat_interval_ms: 6000}", "supervisor.heartbeat_timeout_ms"},
      {"supervisor: {heartbeat_timeout_ms: 3000000000}", "supervisor.heartbeat_timeout_ms"},
      {"supervisor: {restart_backoff_initial_ms: 0}", "supervisor.restart_backoff_initial_ms"},
      {"supervisor: {restart_backoff_initial_ms: 60001}", "supervisor.restart_backoff_initial_ms"},
      {"supervisor: {restart_backoff_max_ms: 99}", "supervisor.restart_backoff_max_ms"},
      {"supervisor: {restart_backoff_initial_ms: 6000}", "supervisor.restart_backoff_max_ms"},
      {"supervisor: {shutdown_timeout_ms: 99}", "supervisor.shutdown_timeout_ms"},
      {"supervisor: {shutdown_timeout_ms: 600001}", "supervisor.shutdown_timeout_ms"},
  };
  for (const RangeCase& c : cases) {
    const std::string m = error_of(c.yaml);
    EXPECT_THAT(m, StartsWith("test.yaml: " + c.key + ": ")) << c.yaml;
    const std::string leaf = c.key.substr(c.key.find('.') + 1);
    if (c.yaml.find(leaf) != std::string::npos) {
      EXPECT_THAT(m, HasSubstr("line 1")) << c.yaml;
    } else {
      EXPECT_THAT(m, HasSubstr("its default value")) << c.yaml;
    }
  }
}

TEST(DaemonConfigTest, ChoiceErrorsListAcceptedValues) {
  EXPECT_THAT(error_of("render:\n  mode: sparkles\n"),
              HasSubstr("render.mode: expected one of auto, line, histogram, heatmap, force2d, "
                        "pca, tsne, stats, got \"sparkles\""));
  EXPECT_THAT(error_of("log_level: loud"), HasSubstr("expected one of trace, debug, info, warn, error, off"));
  EXPECT_THAT(error_of("video: {codec: x264}"), HasSubstr("expected one of auto, avc1, mp4v"));
}

TEST(DaemonConfigTest, CrossFieldRulesNameTheOtherKey) {
  EXPECT_THAT(error_of("supervisor:\n  heartbeat_interval_ms: 1000\n  heartbeat_timeout_ms: 1000\n"),
              HasSubstr("supervisor.heartbeat_timeout_ms: expected an integer greater than "
                        "supervisor.heartbeat_interval_ms (1000), got \"1000\""));
  EXPECT_THAT(error_of("supervisor:\n  restart_backoff_max_ms: 50\n"),
              HasSubstr("supervisor.restart_backoff_max_ms: expected an integer >= "
                        "supervisor.restart_backoff_initial_ms (100), got \"50\""));
}

TEST(DaemonConfigTest, UnknownKeysAreErrors) {
  EXPECT_THAT(error_of("video:\n  widht: 800\n"),
              StartsWith("test.yaml: video.widht: unknown key (known keys: width, height, fps, "
                         "max_frames, codec)"));
  EXPECT_THAT(error_of("video:\n  widht: 800\n"), HasSubstr("did you mean \"video.width\""));
  EXPECT_THAT(
      error_of("wokers: 3\n"),
      StartsWith(
          "test.yaml: wokers: unknown key (known keys: session, output_dir, "
          "output_private, output_budget_mb, runtime_dir, workers, render_threads, log_level, video, render, style, record, limits, supervisor, live, anomalies, overview, export, reference)"));
  // A key in the wrong section points at the right one.
  EXPECT_THAT(error_of("width: 800\n"), HasSubstr("did you mean \"video.width\""));
  EXPECT_THAT(error_of("video:\n  workers: 3\n"),
              AllOf(StartsWith("test.yaml: video.workers: unknown key"), HasSubstr("\"workers\"")));
  EXPECT_THAT(error_of("limits:\n  max_bytes: 3\n"), StartsWith("test.yaml: limits.max_bytes: unknown key"));
}

TEST(DaemonConfigTest, DuplicateKeysAreErrors) {
  EXPECT_THAT(error_of("workers: 2\nworkers: 3\n"), StartsWith("test.yaml: workers: duplicate key"));
  EXPECT_THAT(error_of("video:\n  width: 800\n  width: 900\n"),
              AllOf(StartsWith("test.yaml: video.width: duplicate key"), HasSubstr("line 3")));
}

TEST(DaemonConfigTest, WrongNodeTypesAreErrors) {
  EXPECT_THAT(error_of("workers: {a: 1}"),
              StartsWith("test.yaml: workers: expected an integer between 1 and 64, got a mapping"));
  EXPECT_THAT(error_of("workers: [1, 2]"), HasSubstr("workers: expected an integer between 1 and 64, got a list"));
  EXPECT_THAT(error_of("workers:"), HasSubstr("workers: expected an integer between 1 and 64, got an empty value"));
  EXPECT_THAT(error_of("session: [a]"), HasSubstr("session: expected a string, got a list"));
  EXPECT_THAT(error_of("output_dir: ~"), HasSubstr("output_dir: expected a string, got an empty value"));
  EXPECT_THAT(error_of("video: 5"),
              HasSubstr("video: expected a mapping with keys width, height, fps, max_frames, codec, got \"5\""));
  EXPECT_THAT(error_of("video: [1, 2]"), HasSubstr("video: expected a mapping"));
  EXPECT_THAT(error_of("render: {mode: [histogram]}"), HasSubstr("render.mode: expected one of"));
  EXPECT_THAT(error_of("video: {fps: {x: 1}}"), HasSubstr("video.fps: expected a number"));
  EXPECT_THAT(error_of("- a\n- b\n"), HasSubstr("test.yaml: expected a mapping of config keys at the top level"));
  EXPECT_THAT(error_of("just a string"), HasSubstr("expected a mapping of config keys"));
  EXPECT_THAT(error_of("? [a, b]\n: 1\n"), HasSubstr("expected a key name, got a list"));
  EXPECT_THAT(error_of("video:\n  ? {a: 1}\n  : 1\n"), HasSubstr("video: expected a key name, got a mapping"));
}

TEST(DaemonConfigTest, ScalarsThatAreStringsInYamlStillWorkForStrings) {
  StatusOr<DaemonConfig> c = parse("session: 123\noutput_dir: yes\nruntime_dir: \"\"\nworkers: \"4\"\n");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->session, "123");
  EXPECT_EQ(c->output_dir, "yes");
  EXPECT_EQ(c->workers, 4);
  StatusOr<DaemonConfig> d = parse("workers: +3\nvideo: {fps: 1e1}\nrender: {histogram_margin: .25}\n");
  ASSERT_TRUE(d.is_ok()) << d.message();
  EXPECT_EQ(d->workers, 3);
  EXPECT_EQ(d->video.fps, 10.0);
  EXPECT_EQ(d->render.histogram_margin, 0.25);
}

TEST(DaemonConfigTest, SyntaxErrorsGiveLineAndColumn) {
  const std::string m = error_of("workers: 2\nvideo:\n  width: [1, 2\n");
  EXPECT_THAT(m, StartsWith("test.yaml: YAML syntax error at line"));
  const std::string m2 = error_of("workers: 2\n  bad indent: 3\n");
  EXPECT_THAT(m2, StartsWith("test.yaml: YAML syntax error at line 2"));
  EXPECT_THAT(error_of("video: {width: 800\n"), HasSubstr("YAML syntax error"));
  EXPECT_THAT(error_of("workers: 2\n\tvideo: 3\n"), HasSubstr("YAML syntax error"));
  EXPECT_THAT(error_of("workers: *nope\n"), HasSubstr("test.yaml: "));
}

TEST(DaemonConfigTest, MultipleDocumentsAreRefused) {
  EXPECT_THAT(error_of("workers: 2\n---\nworkers: 3\n"),
              AllOf(HasSubstr("more than one YAML document"), HasSubstr("line 2")));
  // Empty documents around the real one are fine.
  StatusOr<DaemonConfig> c = parse("---\n---\nworkers: 3\n...\n");
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->workers, 3);
}

TEST(DaemonConfigTest, StrayFlowIndicatorIsASyntaxError) {
  // yaml-cpp 0.7 loops forever in LoadAll on these, and Load silently returns nothing.
  EXPECT_THAT(error_of(","), StartsWith("test.yaml: YAML syntax error at line 1, column 1: unexpected \",\""));
  EXPECT_THAT(error_of(",\nworkers: 3\n"), HasSubstr("YAML syntax error at line 1"));
  EXPECT_THAT(error_of(",a"), HasSubstr("YAML syntax error"));
  EXPECT_THAT(error_of("workers: 3\n...\n,\n"), HasSubstr("YAML syntax error at line 3, column 1"));
  EXPECT_THAT(error_of("# comment\n,,\n"), HasSubstr("YAML syntax error at line 2"));
}

TEST(DaemonConfigTest, HostileInputGivesErrorsNotCrashes) {
  // Deep nesting (yaml-cpp's depth guard), binary junk, NUL bytes, huge keys.
  EXPECT_FALSE(parse(std::string(100000, '[')).is_ok());
  EXPECT_FALSE(parse(std::string(100000, '{')).is_ok());
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += "- ";
  EXPECT_FALSE(parse(deep + "x\n").is_ok());
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk += static_cast<char>((i * 7919) & 0xff);
  EXPECT_FALSE(parse(junk).is_ok());
  EXPECT_FALSE(parse(std::string("workers: 2\0\x01\x02", 13)).is_ok());
  const std::string m = error_of(std::string(5000, 'k') + ": 1\n");
  EXPECT_LT(m.size(), 1000u);
  EXPECT_THAT(error_of("\"\\x01\\e\": 1\n"), HasSubstr("\"\\x01\\x1b\": unknown key"));
  // Anchors and aliases are fine where the values fit.
  StatusOr<DaemonConfig> c = parse("video: &v {width: 800}\nrender: {histogram_bins: 8}\n");
  EXPECT_TRUE(c.is_ok()) << c.message();
}

TEST(DaemonConfigTest, LoadReportsFileProblems) {
  TempDir dir;
  StatusOr<DaemonConfig> missing = load_daemon_config(dir.path() + "/nope.yaml");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_THAT(missing.message(), HasSubstr("nope.yaml: cannot open config file: No such file"));

  StatusOr<DaemonConfig> directory = load_daemon_config(dir.path());
  ASSERT_FALSE(directory.is_ok());
  EXPECT_THAT(directory.message(), HasSubstr("is a directory"));

  EXPECT_THAT(load_daemon_config("").message(), HasSubstr("no config file path"));

  const std::string big = dir.write("big.yaml", "# " + std::string(kMaxConfigFileBytes, 'x') + "\n");
  EXPECT_THAT(load_daemon_config(big).message(), HasSubstr("larger than"));

  if (::geteuid() != 0) {  // root reads anything
    const std::string locked = dir.write("locked.yaml", "workers: 3\n");
    ::chmod(locked.c_str(), 0);
    EXPECT_THAT(load_daemon_config(locked).message(), HasSubstr("Permission denied"));
  }

  const std::string bad = dir.write("bad.yaml", "workers: 2\nvideo:\n  width: abc\n");
  EXPECT_THAT(load_daemon_config(bad).message(),
              StartsWith(bad + ": video.width: expected an integer between 160 and 7680, got \"abc\""));

  const std::string good = dir.write("good.yaml", "workers: 5\n");
  StatusOr<DaemonConfig> ok = load_daemon_config(good);
  ASSERT_TRUE(ok.is_ok()) << ok.message();
  EXPECT_EQ(ok->workers, 5);
}

DaemonConfig non_default_config() {
  DaemonConfig c;
  c.session = "s-1.x";
  c.output_dir = "/data/out dir/ü";
  c.output_private = true;
  c.runtime_dir = "/run/ts";
  c.workers = 7;
  c.log_level = LogLevel::kTrace;
  c.video = {1920, 1080, 29.97, 123, VideoCodec::kAvc1};
  c.render.mode = RenderMode::kHistogram;
  c.render.stream_modes = {{"^enc\\.", RenderMode::kHistogram}, {"loss", RenderMode::kAuto}};
  c.render.histogram_bins = 17;
  c.render.histogram_margin = 0.123456789012345678;
  c.render.histogram_scale = CountScale::kLog;
  c.render.histogram_axis = ValueAxis::kSymlog;
  c.render.histogram_axis_streams = {{"\\.weight$", ValueAxis::kLinear}};
  c.render.histogram_scale_streams = {{"grad", CountScale::kAuto}, {"x", CountScale::kLinear}};
  c.render.histogram_rerange_frames = 33;
  c.render.heatmap_reduction = HeatmapReduction::kMaxAbs;
  c.render.pca_layout = PcaLayout::kFirstTwoDims;
  c.render.tsne_perplexity = 12.5;
  c.render.tsne_iterations = 321;
  c.render.tsne_warm_iterations = 45;
  c.render.tsne_max_rows = 777;
  c.render.tsne_seed = 99;
  c.render.histogram_ranges = {{"^probs", 0, 1}, {"logits$", -10.5, 10.25}};
  c.reference = {"runs/fp32", {{"attn", 1e-3, 0}, {"^head$", 0.5, 1e-6}}, 17};
  c.style.background = Rgb{0, 0, 0};
  c.style.accent = *parse_rgb("#FFaa00");
  c.limits = {9000000000LL, 3};
  using std::chrono::milliseconds;
  c.supervisor = {milliseconds(11), milliseconds(12), milliseconds(13), milliseconds(14), milliseconds(15000)};
  return c;
}

TEST(DaemonConfigTest, JsonRoundTripIsExact) {
  for (const DaemonConfig& c : {DaemonConfig::defaults(), non_default_config()}) {
    const nlohmann::json j = to_json(c);
    StatusOr<DaemonConfig> back = daemon_config_from_json(j);
    ASSERT_TRUE(back.is_ok()) << back.message();
    EXPECT_EQ(*back, c);
    // Through text, as it travels to the workers.
    StatusOr<DaemonConfig> via_text = daemon_config_from_json(nlohmann::json::parse(j.dump()));
    ASSERT_TRUE(via_text.is_ok()) << via_text.message();
    EXPECT_EQ(*via_text, c);
  }
  const nlohmann::json j = to_json(DaemonConfig::defaults());
  EXPECT_EQ(j["video"]["width"], 640);
  EXPECT_EQ(j["supervisor"]["heartbeat_interval_ms"], 200);
}

TEST(DaemonConfigTest, JsonInputIsValidated) {
  const nlohmann::json good = to_json(DaemonConfig::defaults());
  auto error_for = [](const nlohmann::json& j) {
    StatusOr<DaemonConfig> r = daemon_config_from_json(j);
    EXPECT_FALSE(r.is_ok()) << j.dump();
    return r.is_ok() ? std::string() : r.message();
  };
  nlohmann::json j = good;
  j["video"]["width"] = "640";
  EXPECT_THAT(error_for(j), HasSubstr("video.width: expected an integer between 160 and 7680, got \"640\""));
  j = good;
  j["video"]["width"] = 640.0;
  EXPECT_THAT(error_for(j), HasSubstr("video.width: expected an integer"));
  j = good;
  j["workers"] = 100;
  EXPECT_THAT(error_for(j), HasSubstr("workers: expected an integer between 1 and 64, got 100"));
  j = good;
  j["limits"]["max_record_bytes"] = 18446744073709551615ULL;
  EXPECT_THAT(error_for(j), HasSubstr("limits.max_record_bytes"));
  j = good;
  j["video"].erase("fps");
  EXPECT_THAT(error_for(j), HasSubstr("video.fps: missing"));
  j = good;
  j["extra"] = 1;
  EXPECT_THAT(error_for(j), HasSubstr("extra: unknown key"));
  j = good;
  j["render"]["bins"] = 1;
  EXPECT_THAT(error_for(j), HasSubstr("render.bins: unknown key"));
  j = good;
  j["session"] = "../x";
  EXPECT_THAT(error_for(j), HasSubstr("session: invalid session name"));
  j = good;
  j["video"] = 3;
  EXPECT_THAT(error_for(j), HasSubstr("video: expected an object"));
  EXPECT_THAT(error_for(nlohmann::json::array()), HasSubstr("expected an object"));
  EXPECT_THAT(error_for(nlohmann::json()), HasSubstr("expected an object"));
}

TEST(DaemonConfigTest, ValidateCatchesOverrides) {
  DaemonConfig c;
  EXPECT_TRUE(validate_daemon_config(c).is_ok());
  c.workers = 0;
  EXPECT_EQ(validate_daemon_config(c).message(), "workers: expected an integer between 1 and 64, got 0");
  c = DaemonConfig{};
  c.session = "bad/name";
  EXPECT_THAT(validate_daemon_config(c).message(), StartsWith("session: invalid session name"));
  c = DaemonConfig{};
  c.video.fps = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(validate_daemon_config(c).message(), StartsWith("video.fps: expected a number greater than 0"));
  c = DaemonConfig{};
  c.output_dir = "\xff\xfe";
  EXPECT_THAT(validate_daemon_config(c).message(), StartsWith("output_dir: must be valid UTF-8"));
  c = DaemonConfig{};
  c.supervisor.heartbeat_interval = std::chrono::milliseconds(std::numeric_limits<int>::max());  // no overflow in rule
  EXPECT_FALSE(validate_daemon_config(c).is_ok());
}

TEST(SessionNameTest, AcceptsTheAllowedAlphabet) {
  for (const std::string& name :
       std::vector<std::string>{"default", "a", "run-1", "A_b.c-d", "0", std::string(64, 'z'), "a..b", "-x"}) {
    EXPECT_TRUE(validate_session_name(name).is_ok()) << name;
  }
}

TEST(SessionNameTest, RejectionsSayWhy) {
  EXPECT_THAT(validate_session_name("").message(), HasSubstr("empty"));
  EXPECT_THAT(validate_session_name(std::string(65, 'a')).message(), HasSubstr("65 characters long; at most 64"));
  EXPECT_THAT(validate_session_name(".x").message(), HasSubstr("must not start with '.'"));
  EXPECT_THAT(validate_session_name("..").message(), HasSubstr("must not start with '.'"));
  EXPECT_THAT(validate_session_name("a/b").message(), HasSubstr("'/' at position 1 is not allowed"));
  EXPECT_THAT(validate_session_name("a b").message(), HasSubstr("' ' at position 1"));
  EXPECT_THAT(validate_session_name(std::string("a\0b", 3)).message(), HasSubstr("byte 0x00 at position 1"));
  EXPECT_THAT(validate_session_name("caf\xc3\xa9").message(), HasSubstr("byte 0xc3 at position 3"));
  EXPECT_THAT(validate_session_name("a/b").message(), HasSubstr("\"a/b\""));
}

}  // namespace
}  // namespace tensorscope

namespace tensorscope {
namespace {

TEST(DaemonConfigTest, StreamModesParseAndRefuseBadRules) {
  auto ok = parse_daemon_config(
      "render:\n  stream_modes:\n    - {match: \"\\\\.attn$\", mode: histogram}\n"
      "    - match: loss\n      mode: auto\n",
      "t.yaml");
  ASSERT_TRUE(ok.is_ok()) << ok.message();
  ASSERT_EQ(ok->render.stream_modes.size(), 2u);
  EXPECT_EQ(ok->render.stream_modes[0].match, "\\.attn$");
  EXPECT_EQ(ok->render.stream_modes[1].value, RenderMode::kAuto);

  auto bad_regex = parse_daemon_config("render:\n  stream_modes:\n    - {match: \"(\", mode: auto}\n", "t.yaml");
  ASSERT_FALSE(bad_regex.is_ok());
  EXPECT_NE(bad_regex.message().find("render.stream_modes[0]"), std::string::npos) << bad_regex.message();
  EXPECT_NE(bad_regex.message().find("regular expression"), std::string::npos) << bad_regex.message();

  auto bad_mode = parse_daemon_config("render:\n  stream_modes:\n    - {match: x, mode: sparkles}\n", "t.yaml");
  ASSERT_FALSE(bad_mode.is_ok());
  EXPECT_NE(bad_mode.message().find("sparkles"), std::string::npos) << bad_mode.message();

  auto not_list = parse_daemon_config("render:\n  stream_modes: heatmap\n", "t.yaml");
  ASSERT_FALSE(not_list.is_ok());
  EXPECT_NE(not_list.message().find("expected a list"), std::string::npos) << not_list.message();

  auto extra_key =
      parse_daemon_config("render:\n  stream_modes:\n    - {match: x, mode: auto, color: red}\n", "t.yaml");
  EXPECT_FALSE(extra_key.is_ok());
}

TEST(DaemonConfigTest, HistogramAxesPerStream) {
  const DaemonConfig d;
  EXPECT_EQ(d.render.histogram_axis, ValueAxis::kAuto);
  EXPECT_EQ(d.render.histogram_scale, CountScale::kAuto);
  EXPECT_EQ(d.render.histogram_rerange_frames, 10);
  auto ok = parse_daemon_config(
      "render:\n  histogram_axis: linear\n  histogram_axis_streams:\n    - {match: \"weight$\", mode: symlog}\n"
      "  histogram_scale_streams:\n    - {match: grad, mode: log}\n  histogram_rerange_frames: 25\n",
      "t.yaml");
  ASSERT_TRUE(ok.is_ok()) << ok.message();
  EXPECT_EQ(ok->render.histogram_axis, ValueAxis::kLinear);
  ASSERT_EQ(ok->render.histogram_axis_streams.size(), 1u);
  EXPECT_EQ(ok->render.histogram_axis_streams[0].value, ValueAxis::kSymlog);
  ASSERT_EQ(ok->render.histogram_scale_streams.size(), 1u);
  EXPECT_EQ(ok->render.histogram_scale_streams[0].match, "grad");
  EXPECT_EQ(ok->render.histogram_rerange_frames, 25);
  // Each list takes its own vocabulary.
  auto axis = parse_daemon_config("render: {histogram_axis_streams: [{match: x, mode: log}]}", "t.yaml");
  ASSERT_FALSE(axis.is_ok());
  EXPECT_NE(axis.message().find("render.histogram_axis_streams[0]"), std::string::npos) << axis.message();
  EXPECT_NE(axis.message().find("auto, linear, symlog"), std::string::npos) << axis.message();
  auto scale = parse_daemon_config("render: {histogram_scale_streams: [{match: x, mode: symlog}]}", "t.yaml");
  ASSERT_FALSE(scale.is_ok());
  EXPECT_NE(scale.message().find("render.histogram_scale_streams[0]"), std::string::npos) << scale.message();
}

}  // namespace
}  // namespace tensorscope

namespace tensorscope {
namespace {

TEST(DaemonConfigTest, HistogramRangesAndColors) {
  auto ok = parse_daemon_config(
      "render:\n  histogram_ranges:\n    - {match: \"^probs\", lo: 0, hi: 1}\n"
      "style:\n  bar: \"#102030\"\n",
      "t.yaml");
  ASSERT_TRUE(ok.is_ok()) << ok.message();
  ASSERT_EQ(ok->render.histogram_ranges.size(), 1u);
  EXPECT_EQ(ok->render.histogram_ranges[0].hi, 1.0);
  EXPECT_EQ(ok->style.bar, (Rgb{0x10, 0x20, 0x30}));
  EXPECT_EQ(to_string(ok->style.bar), "#102030");

  auto inverted = parse_daemon_config("render:\n  histogram_ranges:\n    - {match: x, lo: 2, hi: 1}\n", "t.yaml");
  ASSERT_FALSE(inverted.is_ok());
  EXPECT_NE(inverted.message().find("render.histogram_ranges[0]"), std::string::npos) << inverted.message();
  EXPECT_NE(inverted.message().find("lo < hi"), std::string::npos) << inverted.message();

  auto bad_color = parse_daemon_config("style:\n  grid: red\n", "t.yaml");
  ASSERT_FALSE(bad_color.is_ok());
  EXPECT_NE(bad_color.message().find("style.grid"), std::string::npos) << bad_color.message();
  EXPECT_NE(bad_color.message().find("#rrggbb"), std::string::npos) << bad_color.message();
}

TEST(DaemonConfigTest, AReferenceWithToleranceRulesReadsAndBadRulesAreNamed) {
  auto ok = parse_daemon_config(
      "reference:\n  session: runs/fp32\n  tolerances:\n    - {match: \"\\\\.attn\\\\.\", rtol: 1e-3, atol: 0}\n"
      "  pending_mb: 8\n",
      "t.yaml");
  ASSERT_TRUE(ok.is_ok()) << ok.message();
  EXPECT_EQ(ok->reference.session, "runs/fp32");
  ASSERT_EQ(ok->reference.tolerances.size(), 1u);
  EXPECT_EQ(ok->reference.tolerances[0], (ToleranceRule{"\\.attn\\.", 1e-3, 0}));
  EXPECT_EQ(ok->reference.pending_mb, 8);

  for (const char* bad :
       {"{match: x, rtol: -1, atol: 0}", "{match: x, rtol: .nan, atol: 0}", "{match: \"(\", rtol: 1, atol: 0}"}) {
    auto refused = parse_daemon_config(std::string("reference:\n  tolerances:\n    - ") + bad + "\n", "t.yaml");
    ASSERT_FALSE(refused.is_ok()) << bad;
    EXPECT_NE(refused.message().find("reference.tolerances[0]"), std::string::npos) << refused.message();
  }
  auto shape = parse_daemon_config("reference:\n  tolerances:\n    - {match: x, lo: 0, hi: 1}\n", "t.yaml");
  ASSERT_FALSE(shape.is_ok());
  EXPECT_NE(shape.message().find("{match: REGEX, rtol: NUMBER, atol: NUMBER}"), std::string::npos) << shape.message();
}

TEST(DaemonConfigTest, RecordSinksTakeRegexesAndCheckThem) {
  auto ok = parse_daemon_config(
      "record:\n  stats: \".*\"\n  npy: \"\\\\.grad$\"\n  video: \"\"\n"
      "  hdf5: \"^net\"\n  hdf5_dtype: float16\n  hdf5_gzip: 0\n"
      "  hdf5_change_detection: false\n  hdf5_rotate_seconds: 5\n  tree: \"^net$\"\n",
      "t.yaml");
  ASSERT_TRUE(ok.is_ok()) << ok.message();
  EXPECT_EQ(ok->record.stats, ".*");
  EXPECT_EQ(ok->record.npy, "\\.grad$");
  EXPECT_EQ(ok->record.video, "");
  EXPECT_EQ(ok->record.hdf5_dtype, Hdf5Dtype::kFloat16);
  EXPECT_EQ(ok->record.hdf5_gzip, 0);
  EXPECT_FALSE(ok->record.hdf5_change_detection);
  EXPECT_EQ(ok->record.hdf5_rotate_interval, std::chrono::seconds(5));
  EXPECT_EQ(ok->record.tree, "^net$");
  EXPECT_EQ(parse_daemon_config("record:\n  npy: x\n", "t.yaml")->record.tree, ".*");
  auto round = daemon_config_from_json(to_json(*ok));
  ASSERT_TRUE(round.is_ok()) << round.message();
  EXPECT_EQ(*round, *ok);

  auto bad_regex = parse_daemon_config("record:\n  npy: \"(unclosed\"\n", "t.yaml");
  ASSERT_FALSE(bad_regex.is_ok());
  EXPECT_NE(bad_regex.message().find("record.npy: expected a regular expression"), std::string::npos)
      << bad_regex.message();
  auto bad_tree = parse_daemon_config("record:\n  tree: \"[\"\n", "t.yaml");
  ASSERT_FALSE(bad_tree.is_ok());
  EXPECT_NE(bad_tree.message().find("record.tree"), std::string::npos) << bad_tree.message();
  auto bad_gzip = parse_daemon_config("record:\n  hdf5_gzip: 10\n", "t.yaml");
  ASSERT_FALSE(bad_gzip.is_ok());
  EXPECT_NE(bad_gzip.message().find("record.hdf5_gzip"), std::string::npos) << bad_gzip.message();
  auto bad_bool = parse_daemon_config("record:\n  hdf5_change_detection: maybe\n", "t.yaml");
  ASSERT_FALSE(bad_bool.is_ok());
  EXPECT_NE(bad_bool.message().find("one of false, true"), std::string::npos) << bad_bool.message();
}

TEST(DaemonConfigTest, Hdf5ChangeDetectionBytesIsACapOfAtLeastZero) {
  EXPECT_EQ(DaemonConfig::defaults().record.hdf5_change_detection_bytes, 268435456);
  for (const int64_t bytes : {int64_t{0}, int64_t{1}, int64_t{1} << 40}) {
    auto ok = parse_daemon_config("record:\n  hdf5_change_detection_bytes: " + std::to_string(bytes) + "\n", "t.yaml");
    ASSERT_TRUE(ok.is_ok()) << bytes << ": " << ok.message();
    EXPECT_EQ(ok->record.hdf5_change_detection_bytes, bytes);
    auto round = daemon_config_from_json(to_json(*ok));
    ASSERT_TRUE(round.is_ok()) << round.message();
    EXPECT_EQ(round->record.hdf5_change_detection_bytes, bytes);
  }
  for (const char* bad : {"-1", "lots", "1.5"}) {
    auto refused = parse_daemon_config(std::string("record:\n  hdf5_change_detection_bytes: ") + bad + "\n", "t.yaml");
    ASSERT_FALSE(refused.is_ok()) << bad;
    EXPECT_NE(refused.message().find("record.hdf5_change_detection_bytes"), std::string::npos) << refused.message();
  }
  DaemonConfig negative = DaemonConfig::defaults();
  negative.record.hdf5_change_detection_bytes = -5;
  EXPECT_FALSE(validate_daemon_config(negative).is_ok());
}

TEST(DaemonConfigTest, Hdf5FlushSecondsIsZeroToAnHour) {
  EXPECT_EQ(DaemonConfig::defaults().record.hdf5_flush_interval, std::chrono::seconds(5));
  for (const int seconds : {0, 1, 3600}) {
    auto ok = parse_daemon_config("record:\n  hdf5_flush_seconds: " + std::to_string(seconds) + "\n", "t.yaml");
    ASSERT_TRUE(ok.is_ok()) << seconds << ": " << ok.message();
    EXPECT_EQ(ok->record.hdf5_flush_interval.count(), seconds);
    auto round = daemon_config_from_json(to_json(*ok));
    ASSERT_TRUE(round.is_ok()) << round.message();
    EXPECT_EQ(round->record.hdf5_flush_interval.count(), seconds);
  }
  for (const char* bad : {"-1", "3601", "often", "2.5"}) {
    auto refused = parse_daemon_config(std::string("record:\n  hdf5_flush_seconds: ") + bad + "\n", "t.yaml");
    ASSERT_FALSE(refused.is_ok()) << bad;
    EXPECT_NE(refused.message().find("record.hdf5_flush_seconds"), std::string::npos) << refused.message();
  }
  DaemonConfig too_long = DaemonConfig::defaults();
  too_long.record.hdf5_flush_interval = std::chrono::seconds(7200);
  EXPECT_FALSE(validate_daemon_config(too_long).is_ok());
}

}  // namespace
}  // namespace tensorscope

namespace tensorscope {
namespace {

// Each enumerated key's spelling reads back as the value it names, and only that one.
template <typename E>
void expect_spelled_once() {
  const auto names = choice_names(E{});
  std::set<std::string_view> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) continue;
    EXPECT_TRUE(seen.insert(names[i]).second) << names[i];
    EXPECT_EQ(choice_from_name<E>(names[i]), static_cast<E>(i)) << names[i];
    EXPECT_EQ(choice_name(static_cast<E>(i)), names[i]);
  }
  EXPECT_FALSE(choice_from_name<E>("").has_value());
  EXPECT_FALSE(choice_from_name<E>("no such value").has_value());
  EXPECT_EQ(choice_name(static_cast<E>(names.size())), "");
}

TEST(DaemonConfigTest, EveryChoiceIsSpelledOnceAndReadBack) {
  expect_spelled_once<LogLevel>();
  expect_spelled_once<VideoCodec>();
  expect_spelled_once<RenderMode>();
  expect_spelled_once<ValueAxis>();
  expect_spelled_once<CountScale>();
  expect_spelled_once<HeatmapReduction>();
  expect_spelled_once<PcaLayout>();
  expect_spelled_once<Hdf5Dtype>();
  EXPECT_EQ(choice_from_name<bool>("true"), true);
  EXPECT_EQ(choice_from_name<bool>("false"), false);
  EXPECT_FALSE(choice_from_name<bool>("yes").has_value());
  EXPECT_FALSE(choice_from_name<RenderMode>("default").has_value());  // kDefault has no name
}

// The render modes come from the wire's one list: every named mode is a render.mode.
TEST(DaemonConfigTest, EveryRenderModeOfTheWireIsAConfigMode) {
  for (const std::string_view name : wire::kNamedRenderModes) {
    auto ok = parse_daemon_config("render:\n  mode: " + std::string(name) + "\n", "t.yaml");
    ASSERT_TRUE(ok.is_ok()) << ok.message();
    EXPECT_EQ(wire::render_mode_name(ok->render.mode), name);
  }
}

TEST(DaemonConfigTest, ColorsReadInEitherCaseAndPrintInLowerCase) {
  EXPECT_EQ(parse_rgb("#FFaa00"), (Rgb{0xff, 0xaa, 0x00}));
  EXPECT_EQ(to_string(Rgb{0xff, 0xaa, 0x00}), "#ffaa00");
  EXPECT_EQ(to_string(Rgb{1, 2, 3}), "#010203");
  for (const char* bad : {"", "#", "#12345", "#1234567", "123456#", "#12345g", "red", " #123456"}) {
    EXPECT_FALSE(parse_rgb(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace tensorscope

// config_fields.h — every key of the daemon config, once: its dotted path, its place in
// DaemonConfig and its rule (visit_fields), and the key tree derived from it (layout).
//
// Internal to daemon/src/config/. The YAML reader, the JSON reader and writer, the
// validator and the list of known keys are visitors over visit_fields(), so a new key
// cannot be forgotten by one of them: add it here (and to DaemonConfig and
// configs/default.yaml). A visitor has the members text, integer (a template over the
// field's type), number, choice (a template over the field's enum, or bool, spelled as
// its choice_names()), colour, rules (a template over the rule's value type) and ranges,
// called with the dotted path, the field and, where it has one, its rule.
// Thread safety: visit_fields touches only its arguments; layout() is built once
// (thread-safe static initialisation) and read-only afterwards.
#pragma once

#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/config_rules.h"
#include "config/daemon_config.h"

namespace tensorscope::config_detail {

// Every key, its place in DaemonConfig and its rule. Visitors stop doing work after
// their first error, so a rule may rely on the keys visited before it being valid.
template <typename V>
void visit_fields(V& v, DaemonConfig& c) {
  v.text("session", c.session, StringRule::kSessionName);
  v.text("output_dir", c.output_dir, StringRule::kNonEmpty);
  v.choice("output_private", c.output_private);
  v.integer("output_budget_mb", c.output_budget_mb, at_least(0));
  v.text("runtime_dir", c.runtime_dir, StringRule::kAny);
  v.integer("workers", c.workers, between(1, 64));
  v.integer("render_threads", c.render_threads, between(0, 64));
  v.choice("log_level", c.log_level);

  v.integer("video.width", c.video.width, between(160, 7680));
  v.integer("video.height", c.video.height, between(120, 4320));
  v.number("video.fps", c.video.fps, NumberRule{0, false, 240, true});
  v.integer("video.max_frames", c.video.max_frames, between(1, 10000000));
  v.choice("video.codec", c.video.codec);

  v.choice("render.mode", c.render.mode);
  v.rules("render.stream_modes", c.render.stream_modes);
  v.number_rules("render.histogram_ranges", c.render.histogram_ranges);
  v.integer("render.histogram_bins", c.render.histogram_bins, between(2, 4096));
  v.number("render.histogram_margin", c.render.histogram_margin, NumberRule{0, true, 1, true});
  v.choice("render.histogram_axis", c.render.histogram_axis);
  v.rules("render.histogram_axis_streams", c.render.histogram_axis_streams);
  v.choice("render.histogram_scale", c.render.histogram_scale);
  v.rules("render.histogram_scale_streams", c.render.histogram_scale_streams);
  v.integer("render.histogram_rerange_frames", c.render.histogram_rerange_frames, between(1, 100000));
  v.choice("render.heatmap_reduction", c.render.heatmap_reduction);
  v.choice("render.pca_layout", c.render.pca_layout);
  v.number("render.tsne_perplexity", c.render.tsne_perplexity, NumberRule{2, true, 100, true});
  v.integer("render.tsne_iterations", c.render.tsne_iterations, between(50, 10000));
  v.integer("render.tsne_warm_iterations", c.render.tsne_warm_iterations, between(10, 10000));
  v.integer("render.tsne_max_rows", c.render.tsne_max_rows, between(10, 1000000));
  v.integer("render.tsne_seed", c.render.tsne_seed, at_least(0));

  v.color("style.background", c.style.background);
  v.color("style.foreground", c.style.foreground);
  v.color("style.bar", c.style.bar);
  v.color("style.grid", c.style.grid);
  v.color("style.accent", c.style.accent);

  RecordConfig& r = c.record;
  v.text("record.video", r.video, StringRule::kRegex);
  v.text("record.stats", r.stats, StringRule::kRegex);
  v.text("record.npy", r.npy, StringRule::kRegex);
  v.text("record.hdf5", r.hdf5, StringRule::kRegex);
  v.text("record.tree", r.tree, StringRule::kRegex);
  v.choice("record.hdf5_dtype", r.hdf5_dtype);
  v.integer("record.hdf5_gzip", r.hdf5_gzip, between(0, 9));
  v.choice("record.hdf5_change_detection", r.hdf5_change_detection);
  v.integer("record.hdf5_rotate_bytes", r.hdf5_rotate_bytes, at_least(1048576));
  v.integer("record.hdf5_rotate_seconds", r.hdf5_rotate_interval, between(1, 86400));
  v.integer("record.hdf5_flush_seconds", r.hdf5_flush_interval, between(0, 3600));
  v.integer("record.hdf5_change_detection_bytes", r.hdf5_change_detection_bytes, at_least(0));
  v.integer("record.summary_table_max_bytes", r.summary_table_max_bytes, at_least(1048576));
  v.integer("record.queue_bytes", r.queue_bytes, at_least(1048576));

  v.integer("limits.max_record_bytes", c.limits.max_record_bytes, at_least(1));
  v.integer("limits.max_streams_per_worker", c.limits.max_streams_per_worker, at_least(1));
  v.integer("limits.max_open_videos_per_worker", c.limits.max_open_videos_per_worker, between(1, 4096));

  SupervisorConfig& s = c.supervisor;
  v.integer("supervisor.heartbeat_interval_ms", s.heartbeat_interval, between(10, 60000));
  const int64_t interval = s.heartbeat_interval.count();
  v.integer("supervisor.heartbeat_timeout_ms", s.heartbeat_timeout,
            IntRule{interval + 1, std::numeric_limits<int>::max(),
                    "an integer greater than supervisor.heartbeat_interval_ms (" + std::to_string(interval) + ")"});
  v.integer("supervisor.restart_backoff_initial_ms", s.restart_backoff_initial, between(1, 60000));
  const int64_t initial = s.restart_backoff_initial.count();
  v.integer("supervisor.restart_backoff_max_ms", s.restart_backoff_max,
            IntRule{initial, std::numeric_limits<int>::max(),
                    "an integer >= supervisor.restart_backoff_initial_ms (" + std::to_string(initial) + ")"});
  v.integer("supervisor.shutdown_timeout_ms", s.shutdown_timeout, between(100, 600000));
  v.integer("supervisor.idle_exit_ms", s.idle_exit, at_least(0));

  LiveConfig& l = c.live;
  v.number("live.max_fps", l.max_fps, NumberRule{0, true, 60, true});
  v.integer("live.board_mb", l.board_mb, between(1, 4096));
  v.integer("live.jpeg_quality", l.jpeg_quality, between(10, 100));
  v.integer("live.width", l.width, between(0, 7680));
  v.choice("live.serve", l.serve);
  v.text("live.address", l.address, StringRule::kNonEmpty);
  v.choice("live.allow_remote", l.allow_remote);
  v.integer("live.port", l.port, between(0, 65535));
  v.integer("live.history_mb", l.history_mb, between(1, 65536));
  AnomaliesConfig& a = c.anomalies;
  v.number("anomalies.explosion_factor", a.explosion_factor, NumberRule{1, false, 1e12, true});
  v.integer("anomalies.explosion_window", a.explosion_window, between(4, 100000));
  v.number("anomalies.explosion_min_rms", a.explosion_min_rms, NumberRule{0, true, 1e12, true});
  v.number("anomalies.dead_fraction", a.dead_fraction, NumberRule{0, false, 1, true});
  v.integer("anomalies.dead_steps", a.dead_steps, between(1, 1000000));
  OverviewConfig& o = c.overview;
  v.integer("overview.window_steps", o.window_steps, between(10, 100000));
  v.integer("overview.frame_every", o.frame_every, between(0, 1000000));
  v.integer("overview.min_frame_interval_ms", o.min_frame_interval, between(0, 600000));
  ExportConfig& e = c.export_;
  v.choice("export.tensorboard", e.tensorboard);
  v.text("export.tensorboard_metrics", e.tensorboard_metrics, StringRule::kRegex);
  v.text("export.tensorboard_streams", e.tensorboard_streams, StringRule::kRegex);
  v.text("export.live_url", e.live_url, StringRule::kAny);
  ReferenceConfig& ref = c.reference;
  v.text("reference.session", ref.session, StringRule::kAny);
  v.number_rules("reference.tolerances", ref.tolerances);
  v.integer("reference.pending_mb", ref.pending_mb, between(1, 4096));
}

// The key tree, derived from visit_fields().
struct Layout {
  std::vector<std::string> paths;                            // every dotted path, in visit order
  std::vector<std::string> top_keys;                         // top-level names: fields and sections, in order
  std::set<std::string> top_fields;                          // top-level names that are values
  std::map<std::string, std::vector<std::string>> sections;  // section -> its keys

  bool is_top_field(const std::string& k) const { return top_fields.count(k) != 0; }
  const std::vector<std::string>* section_keys(const std::string& k) const {
    const auto it = sections.find(k);
    return it == sections.end() ? nullptr : &it->second;
  }
};

const Layout& layout();

// A hint for an unknown key (`section` "" for the top level): "; did you mean
// \"<path>\"?" naming the same name in another section, or a near spelling; "" when
// none.
std::string suggestion(const std::string& section, const std::string& key);

}  // namespace tensorscope::config_detail

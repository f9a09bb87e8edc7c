// status_command.cc — `tensorscope status [--session NAME] [--runtime-dir DIR] [--json]`.
//
// Asks the session's daemon over its Unix socket (control_protocol.h: a status request)
// for producers, streams, frames, drops and worker restarts, and prints a table or the
// JSON document. Exit 0 when a daemon answered, 1 when none runs for the session (or it
// did not answer), 2 on bad usage.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "tensorscope/recording/anomaly_firsts.h"
#include "tensorscope/shared/status_query.h"
#include "tensorscope/shared/session_name.h"

namespace tensorscope::tools {
namespace {

void status_usage(FILE* out) {
  std::fprintf(out,
               "usage: tensorscope status [--session NAME] [--runtime-dir DIR] [--json]\n"
               "Shows what the session's daemon is doing. Exit 1 when no daemon runs.\n");
}

void print_table(const nlohmann::json& s) {
  std::printf("session %s (daemon pid %lld, up %.1f s), output %s, %llu finished files\n",
              s.value("session", "").c_str(), s.value("pid", 0LL), s.value("uptime_ms", 0LL) / 1000.0,
              s.value("output_dir", "").c_str(), s.value("files", 0ULL));
  const nlohmann::json output = s.value("output", nlohmann::json::object());
  if (output.value("state", std::string("ok")) != "ok") {
    std::printf("OUTPUT %s: %s; %llu frames not written so far (retrying every second)\n",
                output.value("state", std::string()) == "full" ? "FULL" : "UNWRITABLE",
                output.value("error", std::string()).c_str(), output.value("not_written", 0ULL));
  } else if (output.value("not_written", 0ULL) > 0) {
    std::printf("output ok again; %llu frames were not written while it was full or unwritable\n",
                output.value("not_written", 0ULL));
  }
  const nlohmann::json disk = output.value("disk", nlohmann::json::object());
  if (disk.is_object() && disk.value("bytes", 0ULL) > 0) {
    const auto mb = [](unsigned long long b) { return static_cast<double>(b) / 1048576.0; };
    const unsigned long long budget = disk.value("budget", 0ULL);
    std::printf("disk: %.1f MB%s (videos %.1f MB, summary tables %.1f MB, recordings %.1f MB)",
                mb(disk.value("bytes", 0ULL)),
                budget > 0 ? (" of a " + std::to_string(budget >> 20) + " MB budget").c_str() : "",
                mb(disk.value("videos", 0ULL)), mb(disk.value("summaries", 0ULL)), mb(disk.value("recordings", 0ULL)));
    if (disk.value("rotated_files", 0ULL) > 0) {
      std::printf("; %llu old videos deleted for it (%.1f MB)", disk.value("rotated_files", 0ULL),
                  mb(disk.value("rotated_bytes", 0ULL)));
    }
    std::printf("\n");
  }
  const long long idle_exit_ms = s.value("idle_exit_ms", 0LL);
  if (s.value("autostarted", false)) {
    std::printf("autostarted by a client; exits after %.1f s without producers\n", idle_exit_ms / 1000.0);
  } else if (idle_exit_ms > 0) {
    std::printf("exits after %.1f s without producers\n", idle_exit_ms / 1000.0);
  }
  // Where to look first: what the summaries showed (anomaly_log.h).
  const nlohmann::json anomalies = s.value("anomalies", nlohmann::json::object());
  if (anomalies.is_object() && anomalies.value("count", 0ULL) > 0) {
    std::printf("\n%llu anomal%s (anomalies.jsonl)\n", anomalies.value("count", 0ULL),
                anomalies.value("count", 0ULL) == 1 ? "y" : "ies");
    // The first of each type (the earliest step, lowest rank), then the latest others.
    const nlohmann::json firsts = anomalies.value("first", nlohmann::json::object());
    std::vector<nlohmann::json> named;
    for (const char* type : recording::kAnomalyTypes) {
      if (firsts.is_object() && firsts.contains(type) && firsts[type].is_object()) named.push_back(firsts[type]);
    }
    for (const auto& a : named) std::printf("  FIRST %s\n", a.value("message", std::string()).c_str());
    for (const auto& a : anomalies.value("recent", nlohmann::json::array())) {
      if (std::find(named.begin(), named.end(), a) == named.end()) {
        std::printf("  %s\n", a.value("message", std::string()).c_str());
      }
    }
  }
  std::printf("\nworkers\n  %-5s %-8s %-6s %-9s %-10s %-8s %-8s %-8s %s\n", "index", "pid", "alive", "restarts",
              "records", "invalid", "errors", "starved", "drawn per render thread");
  bool starved_now = false;
  for (const auto& w : s.value("workers", nlohmann::json::array())) {
    const auto st = w.value("stats", nlohmann::json::object());
    std::string drawn;
    for (const auto& n : st.value("render_jobs", nlohmann::json::array())) {
      drawn += (drawn.empty() ? "" : " / ") + std::to_string(n.get<uint64_t>());
    }
    std::printf("  %-5d %-8lld %-6s %-9llu %-10llu %-8llu %-8llu %-8llu %s%s\n", w.value("index", 0),
                w.value("pid", 0LL), w.value("alive", false) ? "yes" : "NO", w.value("restarts", 0ULL),
                st.value("records", 0ULL), st.value("invalid", 0ULL), st.value("render_errors", 0ULL),
                w.value("starved_episodes", 0ULL), drawn.c_str(), w.value("starved", false) ? "  (STARVED now)" : "");
    starved_now = starved_now || w.value("starved", false);
  }
  if (starved_now) {
    std::printf(
        "a worker is silent but runnable or working: the machine is busy (not restarted; its\n"
        "streams fall behind and drops are counted)\n");
  }
  std::printf("\nproducers\n  %-4s %-8s %-5s %-7s %-10s %-10s %-12s %-8s %-8s %-12s %s\n", "id", "pid", "rank",
              "worker", "pushed", "received", "dropped_full", "invalid", "refused", "not_drawn", "sends");
  for (const auto& p : s.value("producers", nlohmann::json::array())) {
    // Pacing (the client's, while the daemon is behind) in words.
    const double stride = p.value("pace_stride", 1.0);
    char sends[64] = "every call";
    if (stride > 1) std::snprintf(sends, sizeof sends, "1 call in %.3g (daemon-limited)", stride);
    std::printf("  %-4llu %-8lld %-5d %-7d %-10llu %-10llu %-12llu %-8llu %-8llu %-12llu %s%s\n", p.value("id", 0ULL),
                p.value("pid", 0LL), p.value("rank", 0), p.value("worker", 0), p.value("pushed", 0ULL),
                p.value("received", 0ULL), p.value("dropped_full", 0ULL), p.value("dropped_invalid", 0ULL),
                p.value("refused", 0ULL), p.value("dropped_by_daemon", 0ULL), sends,
                p.value("connected", true) ? "" : "  (draining)");
  }
  // Producers compared with a reference run (divergence_watch.h's counts).
  bool reference_title = false;
  for (const auto& w : s.value("workers", nlohmann::json::array())) {
    const auto st = w.value("stats", nlohmann::json::object());
    for (const auto& r : st.value("reference", nlohmann::json::array())) {
      if (!r.is_object()) continue;
      if (!reference_title) std::printf("\nreference runs (tensors compared with the same step of the reference)\n");
      reference_title = true;
      const nlohmann::json first = r.value("first_divergence", nlohmann::json());
      const nlohmann::json at = r.value("reference_step", nlohmann::json());
      std::printf("  producer %llu: %llu compared, %llu outside tolerance%s; %llu waiting, reference at step %s: %s\n",
                  r.value("producer", 0ULL), r.value("compared", 0ULL), r.value("out_of_tolerance", 0ULL),
                  first.is_number_integer() ? (" (first at step " + first.dump() + ")").c_str() : "",
                  r.value("waiting", 0ULL), at.is_number_integer() ? at.dump().c_str() : "-",
                  r.value("table", std::string()).empty()
                      ? (r.value("reference", std::string()) + " (no table yet)").c_str()
                      : r.value("table", std::string()).c_str());
    }
  }
  std::printf("\nstreams\n  %-40s %-8s %-5s %-10s %-8s %-10s\n", "stream", "device", "rank", "mode", "frames",
              "last_step");
  for (const auto& w : s.value("workers", nlohmann::json::array())) {
    const auto st = w.value("stats", nlohmann::json::object());
    for (const auto& t : st.value("streams", nlohmann::json::array())) {
      std::printf("  %-40s %-8s %-5d %-10s %-8llu %-10lld\n", t.value("stream", "").c_str(),
                  t.value("device", "").c_str(), t.value("rank", 0), t.value("mode", "").c_str(),
                  t.value("frames", 0ULL), t.value("last_step", 0LL));
    }
  }
}

}  // namespace

int run_status_command(int argc, char** argv) {
  std::string session = "default", runtime_dir;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      status_usage(stdout);
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if ((arg == "--session" || arg == "--runtime-dir") && i + 1 < argc) {
      (arg == "--session" ? session : runtime_dir) = argv[++i];
    } else {
      std::fprintf(stderr, "tensorscope status: unknown or incomplete argument '%s'\n", arg.c_str());
      status_usage(stderr);
      return 2;
    }
  }
  Status valid = validate_session_name(session);
  if (!valid) {
    std::fprintf(stderr, "tensorscope status: %s\n", valid.message().c_str());
    return 2;
  }
  auto reply = query_daemon_status(runtime_dir, session, 5000);
  if (!reply) {
    std::fprintf(stderr, "tensorscope status: %s\n", reply.message().c_str());
    return 1;
  }
  if (json) {
    std::printf("%s\n", reply->dump(2).c_str());
  } else {
    print_table(*reply);
  }
  return 0;
}

}  // namespace tensorscope::tools

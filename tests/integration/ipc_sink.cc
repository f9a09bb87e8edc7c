// ipc_sink — a daemon stand-in in its own process for the CUDA tests and benchmarks:
// accepts registrations on the session socket, reads every ring, fetches CUDA IPC
// payloads with the daemon's DevicePayloadReader, and (with a log path) appends every
// record to a record log. Runs until SIGINT/SIGTERM; prints "ready" on stdout once it
// listens.
//
//   ipc_sink RUNTIME_DIR SESSION [LOG_FILE|-] [--host-only]
//
// --host-only: tell clients that CUDA IPC is unavailable (they use pinned host memory).
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "fake_daemon.h"
#include "worker/device_payload_reader.h"
#include "record_log.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: ipc_sink RUNTIME_DIR SESSION [LOG_FILE|-] [--host-only]\n");
    return 2;
  }
  const std::string runtime_dir = argv[1], session = argv[2];
  const std::string log_path = argc > 3 ? argv[3] : "-";
  const bool host_only = argc > 4 && std::strcmp(argv[4], "--host-only") == 0;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  std::FILE* log = log_path == "-" ? nullptr : std::fopen(log_path.c_str(), "ab");
  if (log_path != "-" && log == nullptr) {
    std::fprintf(stderr, "ipc_sink: cannot open %s: %s\n", log_path.c_str(), std::strerror(errno));
    return 1;
  }
  tensorscope::daemon::DevicePayloadReader device_reader;
  tensorscope::testing::FakeDaemon::FetchDevice fetch;
  if (!host_only) {
    fetch = [&device_reader](uint64_t producer, const tensorscope::SharedSegment& segment,
                             tensorscope::RecordView* view) {
      std::string why;
      const auto result = device_reader.fetch(producer, segment, view, std::chrono::seconds(5), &why);
      if (result == tensorscope::daemon::DevicePayloadReader::Result::kCopied) {
        return tensorscope::Status::ok();
      }
      if (result == tensorscope::daemon::DevicePayloadReader::Result::kPending) {
        why = "the producer's copy did not complete within 5 s";
      }
      return tensorscope::Status::error(why);
    };
  }
  tensorscope::testing::FakeDaemon sink(
      runtime_dir, session,
      [log](const tensorscope::RecordView& v) {
        if (log != nullptr && !tensorscope::itest::append_record(log, v)) {
          std::fprintf(stderr, "ipc_sink: writing the log failed\n");
        }
      },
      fetch);
  tensorscope::Status started = sink.start();
  if (!started) {
    std::fprintf(stderr, "ipc_sink: %s\n", started.message().c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  while (g_stop == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  sink.stop();
  std::fprintf(stderr, "ipc_sink: received %llu, dropped %llu\n", static_cast<unsigned long long>(sink.received()),
               static_cast<unsigned long long>(sink.dropped()));
  if (log != nullptr) std::fclose(log);
  return 0;
}

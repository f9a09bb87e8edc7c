// The recording sinks end to end: a producer process pushes known values of every dtype
// through the real daemon, configured to keep them as .npy dumps, HDF5 files and a
// statistics table (and a video of one stream only); the test reads everything back and
// compares it with the values recomputed here. The harness never includes torch.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon_process.h"
#include "tensorscope/recording/npy_file.h"
#include "temp_dir.h"

namespace tensorscope::itest {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr int kSteps = 6;
// The dtypes test_producer --pattern pushes, as "p.<torch name>".
const std::vector<std::pair<std::string, wire::DType>> kPatternStreams = {
    {"p.Float", wire::DType::kFloat32},     {"p.Double", wire::DType::kFloat64}, {"p.Half", wire::DType::kFloat16},
    {"p.BFloat16", wire::DType::kBFloat16}, {"p.Char", wire::DType::kInt8},      {"p.Short", wire::DType::kInt16},
    {"p.Int", wire::DType::kInt32},         {"p.Long", wire::DType::kInt64},     {"p.Byte", wire::DType::kUInt8},
    {"p.Bool", wire::DType::kBool}};

// Element k of the pattern at `step` (see test_producer --pattern).
double pattern_value(int step, int k, wire::DType dtype) {
  return dtype == wire::DType::kBool ? k % 2 : (7 * step + k) % 100;
}

// The bytes of the pattern tensor in `dtype` (little-endian, as the wire carries it).
std::vector<uint8_t> pattern_bytes(int step, wire::DType dtype) {
  std::vector<uint8_t> out;
  for (int k = 0; k < 15; ++k) {
    const double v = pattern_value(step, k, dtype);
    uint8_t b[8] = {};
    size_t n = wire::dtype_size(dtype);
    switch (dtype) {
      case wire::DType::kFloat32: {
        const float f = static_cast<float>(v);
        std::memcpy(b, &f, 4);
        break;
      }
      case wire::DType::kFloat64: std::memcpy(b, &v, 8); break;
      case wire::DType::kFloat16: {  // small integers: exact; sign 0, biased exponent 15
        const int i = static_cast<int>(v);
        uint16_t h = 0;
        if (i != 0) {
          int e = 0;
          while ((i >> (e + 1)) != 0) ++e;
          const uint16_t mantissa = static_cast<uint16_t>(((i << 10) >> e) & 0x3ff);
          h = static_cast<uint16_t>(((e + 15) << 10) | mantissa);
        }
        std::memcpy(b, &h, 2);
        break;
      }
      case wire::DType::kBFloat16: {
        const float f = static_cast<float>(v);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        const uint16_t top = static_cast<uint16_t>(bits >> 16);  // exact for small integers
        std::memcpy(b, &top, 2);
        break;
      }
      case wire::DType::kInt8: b[0] = static_cast<uint8_t>(static_cast<int8_t>(v)); break;
      case wire::DType::kInt16: {
        const int16_t x = static_cast<int16_t>(v);
        std::memcpy(b, &x, 2);
        break;
      }
      case wire::DType::kInt32: {
        const int32_t x = static_cast<int32_t>(v);
        std::memcpy(b, &x, 4);
        break;
      }
      case wire::DType::kInt64: {
        const int64_t x = static_cast<int64_t>(v);
        std::memcpy(b, &x, 8);
        break;
      }
      case wire::DType::kUInt8: b[0] = static_cast<uint8_t>(v); break;
      case wire::DType::kBool: b[0] = v != 0 ? 1 : 0; break;
      case wire::DType::kInvalid: n = 0; break;
    }
    out.insert(out.end(), b, b + n);
  }
  return out;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool python_has(const std::string& modules) {
  return std::system(("/usr/bin/python3 -c 'import " + modules + "' >/dev/null 2>&1").c_str()) == 0;
}

class RecordingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime_dir_ = tmp_.path() + "/run";
    logs_ = tmp_.path() + "/logs";
    std::filesystem::create_directories(logs_);
  }

  // A ready daemon for `session` with `config_text` as its config (one worker).
  std::unique_ptr<DaemonProcess> start_daemon(const std::string& session, const std::string& config_text) {
    const std::string config = tmp_.path() + "/config-" + session + ".yaml";
    std::ofstream(config) << config_text;
    DaemonSpec spec;
    spec.executable = TENSORSCOPED_PATH;
    spec.config_path = config;
    spec.runtime_dir = runtime_dir_;
    spec.session = session;
    spec.output_dir = tmp_.path() + "/out";
    spec.workers = 1;
    spec.log_path = logs_ + "/daemon-" + session + ".log";
    std::string error;
    auto daemon = DaemonProcess::start(spec, &error);
    EXPECT_NE(daemon, nullptr) << error;
    if (!daemon) return nullptr;
    const Status ready = daemon->wait_ready(30s);
    EXPECT_TRUE(ready.is_ok()) << ready.message() << "\n" << daemon->log();
    return ready.is_ok() ? std::move(daemon) : nullptr;
  }

  // test_producer for `session` (rank 0) with `extra` arguments; stdin and stdout piped.
  std::unique_ptr<ChildProcess> start_producer(const std::string& session, const std::vector<std::string>& extra) {
    ChildProcess::Options o;
    o.argv = {TEST_PRODUCER_PATH,  "--session", session,          "--runtime-dir", runtime_dir_, "--rank", "0",
              "--wait-connect-ms", "30000",     "--stdin-control"};
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.env = {"OMP_NUM_THREADS=1"};
    o.stderr_path = logs_ + "/producer-" + session + ".err";
    o.pipe_stdin = true;
    o.pipe_stdout = true;
    std::string error;
    auto producer = ChildProcess::start(o, &error);
    EXPECT_NE(producer, nullptr) << error;
    return producer;
  }

  testing::TempDir tmp_{"ts-rec"};
  std::string runtime_dir_, logs_;
};

TEST_F(RecordingTest, KnownValuesOfEveryDtypeComeBackFromEverySink) {
  const std::string session = "rec-" + std::to_string(::getpid());
  std::ostringstream config;
  config << "video:\n  width: 160\n  height: 120\n"
         << "record:\n  video: \"^p\\\\.Float$\"\n  stats: \".*\"\n  npy: \"^p\\\\.\"\n"
         << "  hdf5: \"^p\\\\.\"\n  hdf5_gzip: 1\n"
         << "supervisor:\n  heartbeat_timeout_ms: 10000\n";
  auto daemon = start_daemon(session, config.str());
  ASSERT_NE(daemon, nullptr);
  auto producer = start_producer(session, {"--pattern", "--count", std::to_string(kSteps)});
  ASSERT_NE(producer, nullptr);
  const pid_t producer_pid = producer->pid();
  // The producer stays connected (its stdin open) until the daemon has every record.
  ASSERT_TRUE(producer->wait_for_line(
      [](const std::string& l) {
        const json j = parse_json_line(l);
        return j.is_object() && j.value("final", false);
      },
      120s))
      << "the producer printed no final line";
  const uint64_t records = kSteps * (kPatternStreams.size() + 1);
  json last;
  ASSERT_TRUE(daemon->wait_status(
      [&](const json& s) {
        for (const auto& p : s.value("producers", json::array())) {
          if (p.value("pid", 0LL) == static_cast<long long>(producer_pid))
            return p.value("received", uint64_t{0}) >= records;
        }
        return false;
      },
      60s, &last))
      << last.dump(2);
  producer->close_stdin();
  auto exit = producer->wait_exit(60s);
  ASSERT_TRUE(exit && exit->exited && exit->code == 0) << (exit ? exit->describe() : "still running");
  ASSERT_TRUE(daemon->process().send_signal(SIGTERM));
  auto daemon_exit = daemon->process().wait_exit(60s);
  ASSERT_TRUE(daemon_exit && daemon_exit->exited && daemon_exit->code == 0) << daemon->log();
  const std::string dir = daemon->session_dir();
  const std::string log = daemon->log();
  EXPECT_EQ(log.find("recording '"), std::string::npos) << "a recording sink failed:\n" << log;

  // .npy dumps: every dtype, every step, byte for byte.
  for (int step = 0; step < kSteps; ++step) {
    for (const auto& [stream, dtype] : kPatternStreams) {
      const std::string path = dir + "/dumps/step_" + std::to_string(step) + "/" + stream + "_rank0.npy";
      auto reader = recording::NpyReader::open(path);
      ASSERT_TRUE(reader) << reader.message();
      EXPECT_EQ(reader->dtype(), dtype) << path;
      EXPECT_EQ(reader->shape(), (std::vector<int64_t>{3, 5})) << path;
      const std::vector<uint8_t> want = pattern_bytes(step, dtype);
      std::vector<uint8_t> got(want.size());
      auto n = reader->read(got.data(), got.size());
      ASSERT_TRUE(n) << n.message();
      EXPECT_EQ(*n, want.size()) << path;
      EXPECT_EQ(reader->remaining_bytes(), 0u) << path;
      EXPECT_EQ(got, want) << path;
    }
  }

  // Statistics table: one row per record, the float32 mean at step 2 recomputed.
  const std::string csv = dir + "/stats/rank0_pid" + std::to_string(producer_pid) + ".csv";
  const auto lines = read_lines(csv);
  ASSERT_EQ(lines.size(), records + 1) << csv;
  EXPECT_EQ(lines[0].rfind("step,stream,kind,rank,device,dtype,shape,mean", 0), 0u);
  double sum = 0;
  for (int k = 0; k < 15; ++k) sum += pattern_value(2, k, wire::DType::kFloat32);
  bool found = false;
  for (const auto& line : lines) {
    if (line.rfind("2,p.Float,tensor,0,cpu,float32,3x5,", 0) != 0) continue;
    found = true;
    const double mean = std::stod(line.substr(std::strlen("2,p.Float,tensor,0,cpu,float32,3x5,")));
    EXPECT_NEAR(mean, sum / 15, 1e-9) << line;
  }
  EXPECT_TRUE(found) << "no row for p.Float at step 2";

  // Videos: only the stream record.video selects.
  std::set<std::string> video_streams;
  auto index = read_index(dir);
  ASSERT_TRUE(index) << index.message();
  for (const auto& f : *index) video_streams.insert(f.value("stream", ""));
  EXPECT_EQ(video_streams, (std::set<std::string>{"p.Float"}));

  // HDF5: finalized files only; h5py reads the values, steps and dtypes back.
  std::vector<std::string> h5;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/hdf5")) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.rfind('.', 0), std::string::npos) << "temporary file left: " << name;
    if (name.size() > 3 && name.substr(name.size() - 3) == ".h5") h5.push_back(e.path().string());
  }
  ASSERT_FALSE(h5.empty());
  if (!python_has("h5py, numpy")) GTEST_SKIP() << "/usr/bin/python3 has no h5py/numpy: HDF5 contents not read back";
  std::ostringstream script;
  script << "import h5py, numpy as np, sys\n"
         << "files = sys.argv[1:]\n"
         << "def find(name):\n"
         << "    out = []\n"
         << "    for f in files:\n"
         << "        h = h5py.File(f, 'r')\n"
         << "        for g in h.values():\n"
         << "            if g.attrs.get('stream') in (name, name.encode()):\n"
         << "                out.append((g['steps'][()], g['values'][()]))\n"
         << "    return out\n"
         << "for name, np_type in [('p.Float', np.float32), ('p.Long', np.int64), ('p.Short', np.int16)]:\n"
         << "    parts = find(name)\n"
         << "    steps = np.concatenate([s for s, _ in parts])\n"
         << "    values = np.concatenate([v for _, v in parts])\n"
         << "    assert list(steps) == list(range(" << kSteps << ")), (name, steps)\n"
         << "    assert values.dtype == np_type, (name, values.dtype)\n"
         << "    for i, step in enumerate(steps):\n"
         << "        want = ((np.arange(15) + 7 * step) % 100).reshape(3, 5)\n"
         << "        assert (values[i] == want).all(), (name, step)\n"
         << "const = find('p.const')\n"
         << "assert sum(len(s) for s, _ in const) == 1, const\n"
         << "print('ok')\n";
  std::vector<std::string> argv = {"/usr/bin/python3", "-c", script.str()};
  argv.insert(argv.end(), h5.begin(), h5.end());
  const CommandResult r = run_command(argv, logs_, 60s);
  EXPECT_EQ(r.out, "ok\n") << r.err;
}

TEST_F(RecordingTest, DaemonKilledMidWriteLeavesEveryFinishedFileReadable) {
  const std::string session = "reckill-" + std::to_string(::getpid());
  auto daemon = start_daemon(session,
                             "record:\n  video: \"\"\n  stats: \".*\"\n  npy: \".*\"\n  hdf5: \".*\"\n"
                             "  hdf5_rotate_bytes: 1048576\n"
                             "supervisor:\n  heartbeat_timeout_ms: 10000\n");
  ASSERT_NE(daemon, nullptr);
  auto producer = start_producer(session, {"--count", "0", "--max-elements", "4096", "--streams", "6"});
  ASSERT_NE(producer, nullptr);

  // Let the sinks finish a few HDF5 files, then SIGKILL the daemon while they write.
  const std::string dir = daemon->session_dir();
  auto finished_h5 = [&] {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir + "/hdf5", ec)) {
      const std::string name = e.path().filename().string();
      if (name[0] != '.' && name.size() > 3 && name.substr(name.size() - 3) == ".h5") out.push_back(e.path().string());
    }
    return out;
  };
  ASSERT_TRUE(wait_until([&] { return finished_h5().size() >= 3; }, 120s)) << daemon->log();
  daemon->process().kill_group();

  // Every file under a final name reads completely.
  size_t npy_files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir + "/dumps")) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.rfind(recording::kTempNpyPrefix, 0) == 0) continue;
    auto reader = recording::NpyReader::open(e.path().string());
    ASSERT_TRUE(reader) << reader.message();
    std::vector<uint8_t> data(reader->data_bytes());
    auto n = reader->read(data.data(), data.size());
    ASSERT_TRUE(n) << n.message();
    EXPECT_EQ(*n, data.size()) << e.path();
    ++npy_files;
  }
  EXPECT_GT(npy_files, 0u);
  const auto h5 = finished_h5();
  if (!python_has("h5py, numpy")) GTEST_SKIP() << "/usr/bin/python3 has no h5py: HDF5 files not read";
  std::vector<std::string> argv = {"/usr/bin/python3", "-c",
                                   "import h5py, sys\n"
                                   "n = 0\n"
                                   "for f in sys.argv[1:]:\n"
                                   "    with h5py.File(f, 'r') as h:\n"
                                   "        for g in h.values():\n"
                                   "            v, s = g['values'][()], g['steps'][()]\n"
                                   "            assert len(v) == len(s) == len(g['ranks']) == len(g['devices'])\n"
                                   "            n += len(s)\n"
                                   "assert n > 0\n"
                                   "print('ok')\n"};
  argv.insert(argv.end(), h5.begin(), h5.end());
  const CommandResult r = run_command(argv, logs_, 60s);
  EXPECT_EQ(r.out, "ok\n") << r.err;

  // The training process did not notice beyond counted drops.
  producer->close_stdin();
  auto exit = producer->wait_exit(60s);
  EXPECT_TRUE(exit && exit->exited && exit->code == 0) << (exit ? exit->describe() : "still running");
}

}  // namespace
}  // namespace tensorscope::itest

// integration_test.cc — end-to-end tests of tensorscoped with real processes: records
// from several producers become frames, SIGTERM finalizes every video, two sessions side
// by side, the status tool, a second daemon and another ABI refused, a tracked model.
//
// Each test starts its own daemon(s) in a private temporary directory (runtime dir,
// session, output) and runs test_producer processes against them (integration_fixture.h).
#include "integration_fixture.h"

namespace tensorscope::itest {
namespace {

// 1. Four producers x 500 pushes of varied shapes and dtypes, two workers, rotating
// files: every record is accounted for, every received record becomes one frame.
TEST_F(IntegrationTest, FourProducersEveryRecordBecomesOneFrame) {
  const auto t0 = Clock::now();
  const std::string name = session("acct");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("acct"), 2, write_config(20));
  ASSERT_NE(daemon, nullptr);

  constexpr int kProducers = 4;
  std::vector<ChildProcess*> producers;
  for (int rank = 0; rank < kProducers; ++rank) {
    std::vector<std::string> args = {"--count", "500", "--streams", std::to_string(3 + rank), "--stdin-control"};
    if (rank == 2) args.push_back("--bad-inputs");
    producers.push_back(start_producer(name, rank, args));
    ASSERT_NE(producers.back(), nullptr);
  }

  std::vector<json> finals;
  std::map<std::string, int64_t> expected;
  for (int rank = 0; rank < kProducers; ++rank) {
    json f = final_line(producers[rank]);
    ASSERT_TRUE(f.is_object()) << "producer rank " << rank << " printed no final line";
    expect_accounted(f, "rank " + std::to_string(rank));
    EXPECT_EQ(u64(f, "calls"), rank == 2 ? 502u : 500u);
    EXPECT_EQ(u64(f, "expected_refusals"), rank == 2 ? 2u : 0u);
    EXPECT_EQ(u64(f, "connections"), 1u);
    EXPECT_EQ(u64(f, "not_connected"), 0u);
    EXPECT_GT(u64(f, "pushed"), 0u);
    add_expected(f, rank, &expected);
    finals.push_back(f);
  }

  // While the producers are still connected, the daemon catches up: received == pushed.
  json last;
  const bool caught_up = daemon->wait_status(
      [&](const json& s) {
        for (int rank = 0; rank < kProducers; ++rank) {
          const json p = producer_entry(s, producers[rank]->pid());
          if (p.is_null()) return false;
          if (u64(p, "received") + u64(p, "dropped_invalid") < u64(finals[rank], "pushed")) return false;
        }
        return true;
      },
      kSettleTimeout, &last);
  EXPECT_TRUE(caught_up) << "the daemon never received every pushed record:\n" << last.dump(2);
  for (int rank = 0; rank < kProducers; ++rank) {
    const json p = producer_entry(last, producers[rank]->pid());
    SCOPED_TRACE("producer rank " + std::to_string(rank) + " in status: " + p.dump());
    ASSERT_TRUE(p.is_object());
    EXPECT_EQ(p.value("rank", -1), rank);
    EXPECT_EQ(u64(p, "pushed"), u64(finals[rank], "pushed"));
    EXPECT_EQ(u64(p, "received"), u64(p, "pushed"));
    EXPECT_EQ(u64(p, "dropped_invalid"), 0u);
    EXPECT_EQ(u64(p, "dropped_full"), u64(finals[rank], "dropped_full"));
    EXPECT_EQ(u64(p, "refused"), u64(finals[rank], "refused"));
  }
  // Both workers got producers (the supervisor balances them).
  std::set<int> used_workers;
  for (const auto& p : last.value("producers", json::array())) used_workers.insert(p.value("worker", -1));
  EXPECT_EQ(used_workers, (std::set<int>{0, 1}));

  for (auto* p : producers) release_producer(p);

  // Disconnected producers are drained and their files finalized.
  EXPECT_TRUE(daemon->wait_status([](const json& s) { return s.value("producers", json::array()).empty(); },
                                  kSettleTimeout, &last))
      << "producers still listed:\n"
      << last.dump(2);
  for (const auto& w : last.value("workers", json::array())) {
    const json stats = w.value("stats", json::object());
    EXPECT_TRUE(w.value("alive", false)) << w.dump();
    EXPECT_EQ(u64(w, "restarts"), 0u) << w.dump();
    EXPECT_EQ(u64(stats, "invalid"), 0u) << w.dump();
    EXPECT_EQ(u64(stats, "render_errors"), 0u) << w.dump();
  }
  EXPECT_EQ(frames_by_stream(index_or_fail(daemon->session_dir())), expected)
      << "index.json after the producers disconnected (before SIGTERM)";

  const double stop_seconds = terminate_daemon(daemon);
  const auto files = index_or_fail(daemon->session_dir());
  EXPECT_EQ(frames_by_stream(files), expected);
  // Small max_frames: every stream rotated through several files.
  EXPECT_GT(files.size(), expected.size());
  for (const auto& f : files) EXPECT_LE(f.value("frames", 0), 20) << f.dump();
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
  std::fprintf(stderr, "[ timing ] %zu files, %zu streams; SIGTERM->exit %.2f s; test %.1f s\n", files.size(),
               expected.size(), stop_seconds, std::chrono::duration<double>(Clock::now() - t0).count());
}

// 4. SIGTERM while producers push: exit 0 in time, every open video finalized and listed.
// One producer pushes as fast as it can (far faster than frames render: its ring stays
// full), the other at a training-loop pace.
TEST_F(IntegrationTest, SigtermWhileProducersPushFinalizesEveryVideo) {
  const std::string name = session("term");
  // max_frames larger than anything pushed here: every file is finished by the SIGTERM.
  // Frames render slower than the fast producer pushes, so its ring is full at SIGTERM;
  // shutdown_timeout_ms bounds how long finalizing may take before workers are killed.
  DaemonProcess* daemon =
      start_ready_daemon(name, output_dir("term"), 2, write_config(100000, /*shutdown_timeout_ms=*/60000, 320, 240));
  ASSERT_NE(daemon, nullptr);
  std::vector<ChildProcess*> producers;
  producers.push_back(start_producer(
      name, 0, {"--count", "0", "--stdin-control", "--sleep-us", "0", "--streams", "3", "--max-elements", "256"}));
  producers.push_back(
      start_producer(name, 1, {"--count", "0", "--stdin-control", "--sleep-us", "2000", "--streams", "3"}));
  for (auto* p : producers) ASSERT_NE(p, nullptr);

  // Wait until every stream has rendered frames (its video is open).
  json last;
  ASSERT_TRUE(daemon->wait_status(
      [&](const json& s) {
        std::set<std::string> streams;  // (rank, name): shapes vary, so one name may use several modes
        for (const auto& w : s["workers"]) {
          for (const auto& st : w["stats"].value("streams", json::array())) {
            if (u64(st, "frames") >= 5)
              streams.insert(std::to_string(st.value("rank", -1)) + "/" + st.value("stream", ""));
          }
        }
        return streams.size() == 6;
      },
      kSettleTimeout, &last))
      << last.dump(2);
  std::map<std::string, int64_t> frames_seen;
  for (const auto& w : last["workers"]) {
    for (const auto& st : w["stats"].value("streams", json::array())) {
      frames_seen[stream_key(st.value("stream", ""), st.value("rank", -1))] = st.value("frames", int64_t{0});
    }
  }
  EXPECT_TRUE(index_or_fail(daemon->session_dir()).empty());

  const double seconds = terminate_daemon(daemon, 90s);
  std::fprintf(stderr, "[ timing ] SIGTERM with producers pushing -> exit in %.2f s\n", seconds);
  EXPECT_THAT(daemon->log(), ::testing::Not(HasSubstr("did not finish in time")));

  const auto files = index_or_fail(daemon->session_dir());
  const auto frames = frames_by_stream(files);
  for (const auto& [key, n] : frames_seen) {
    ASSERT_TRUE(frames.count(key)) << key << " had an open video but nothing is listed";
    EXPECT_GE(frames.at(key), n) << key;
  }
  EXPECT_EQ(frames.size(), frames_seen.size());
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);

  // The producers lived through it and finish normally.
  for (auto* p : producers) {
    EXPECT_TRUE(p->running());
    ASSERT_TRUE(p->write_stdin("stop\n"));
    const json f = final_line(p);
    ASSERT_TRUE(f.is_object());
    expect_accounted(f, "producer");
    release_producer(p);
  }
}

// 5. Two daemons, two sessions, one runtime dir: no cross-talk.
TEST_F(IntegrationTest, TwoSessionsSideBySideKeepTheirOwnStreams) {
  const std::string config = write_config(25);
  struct Side {
    std::string session;
    int rank;
    int streams;
    DaemonProcess* daemon = nullptr;
    ChildProcess* producer = nullptr;
    json final;
  };
  std::vector<Side> sides = {{session("left"), 0, 3, nullptr, nullptr, nullptr},
                             {session("right"), 1, 5, nullptr, nullptr, nullptr}};
  for (auto& side : sides) {
    side.daemon = start_ready_daemon(side.session, output_dir(side.session), 1, config);
    ASSERT_NE(side.daemon, nullptr);
  }
  for (auto& side : sides) {
    side.producer = start_producer(side.session, side.rank,
                                   {"--count", "200", "--streams", std::to_string(side.streams), "--stdin-control"});
    ASSERT_NE(side.producer, nullptr);
  }
  for (auto& side : sides) {
    side.final = final_line(side.producer);
    ASSERT_TRUE(side.final.is_object());
    expect_accounted(side.final, side.session);
    json last;
    EXPECT_TRUE(side.daemon->wait_status(
        [&](const json& s) {
          const auto producers = s.value("producers", json::array());
          const json p = producer_entry(s, side.producer->pid());
          return producers.size() == 1 && p.is_object() && u64(p, "received") == u64(side.final, "pushed");
        },
        kSettleTimeout, &last))
        << side.session << ":\n"
        << last.dump(2);
    EXPECT_EQ(last.value("session", ""), side.session);
  }
  for (auto& side : sides) release_producer(side.producer);
  for (auto& side : sides) {
    json last;
    EXPECT_TRUE(side.daemon->wait_status([](const json& s) { return s["producers"].empty(); }, kSettleTimeout, &last))
        << last.dump(2);
    terminate_daemon(side.daemon);
  }
  for (auto& side : sides) {
    SCOPED_TRACE(side.session);
    std::map<std::string, int64_t> expected;
    add_expected(side.final, side.rank, &expected);
    EXPECT_EQ(expected.size(), static_cast<size_t>(side.streams));
    const auto files = index_or_fail(side.daemon->session_dir());
    EXPECT_EQ(frames_by_stream(files), expected);
    verify_session_dir(side.daemon->session_dir(), files, /*every_video_listed=*/true);
  }
}

// 6. The status tool, a second daemon on the same session, a client of another ABI.
TEST_F(IntegrationTest, StatusToolDuplicateDaemonAndAbiMismatch) {
  const std::string name = session("cli");
  const std::vector<std::string> status_args = {"status", "--session", name, "--runtime-dir", runtime_dir_, "--json"};
  CommandResult none = run_cli(status_args);
  ASSERT_FALSE(none.timed_out);
  EXPECT_TRUE(none.exit.exited && none.exit.code == 1) << none.exit.describe() << "\n" << none.err;
  EXPECT_THAT(none.err, HasSubstr("no daemon"));

  DaemonProcess* daemon = start_ready_daemon(name, output_dir("cli"), 2, write_config(50));
  ASSERT_NE(daemon, nullptr);

  CommandResult ok = run_cli(status_args);
  ASSERT_FALSE(ok.timed_out);
  EXPECT_TRUE(ok.exit.exited && ok.exit.code == 0) << ok.exit.describe() << "\n" << ok.err;
  const json reply = json::parse(ok.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(reply.is_object()) << "not JSON: " << ok.out;
  EXPECT_EQ(reply.value("type", ""), "status");
  EXPECT_EQ(reply.value("session", ""), name);
  EXPECT_EQ(reply.value("pid", 0LL), static_cast<long long>(daemon->process().pid()));
  ASSERT_TRUE(reply.contains("workers") && reply["workers"].is_array());
  EXPECT_EQ(reply["workers"].size(), 2u);
  EXPECT_TRUE(reply.contains("producers") && reply["producers"].is_array());
  CommandResult table = run_cli({"status", "--session", name, "--runtime-dir", runtime_dir_});
  EXPECT_TRUE(table.exit.exited && table.exit.code == 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr(name));

  // A second daemon for the same session refuses to start and leaves the first alone.
  DaemonProcess* twin = start_daemon(name, output_dir("cli-twin"), 1, write_config(50));
  ASSERT_NE(twin, nullptr);
  auto twin_exit = twin->process().wait_exit(kStartTimeout);
  ASSERT_TRUE(twin_exit.has_value()) << "a second daemon on the same session kept running";
  EXPECT_TRUE(twin_exit->exited && twin_exit->code != 0) << twin_exit->describe();
  EXPECT_THAT(twin->log(), HasSubstr("already")) << "the refusal should say a daemon already runs";
  EXPECT_THAT(twin->log(), HasSubstr(daemon->socket_path()));
  EXPECT_TRUE(daemon->process().running());
  EXPECT_TRUE(daemon->status().is_ok());

  // A registration with a wrong ABI version is refused with a clear message.
  const std::string segment = name + "." + std::to_string(::getpid()) + ".0.seg";
  // A well-formed registration of this process, with the given versions.
  const auto registration = [&](json versions) {
    json request = {{"type", "register"}, {"pid", ::getpid()},  {"rank", 0},
                    {"session", name},    {"segment", segment}, {"segment_size", 1 << 20}};
    request.update(versions);
    return request;
  };
  auto refusal = request_reply(daemon->socket_path(), registration({{"abi", 999}}));
  ASSERT_TRUE(refusal.is_ok()) << refusal.message();
  EXPECT_EQ(refusal->value("type", ""), "error") << refusal->dump();
  EXPECT_THAT(refusal->value("message", ""), HasSubstr("ABI version"));
  EXPECT_THAT(refusal->value("message", ""), HasSubstr("999"));
  // So is one with another control protocol version.
  auto other_protocol =
      request_reply(daemon->socket_path(), registration({{"abi", wire::kAbiVersion}, {"protocol", 999}}));
  ASSERT_TRUE(other_protocol.is_ok()) << other_protocol.message();
  EXPECT_EQ(other_protocol->value("type", ""), "error") << other_protocol->dump();
  EXPECT_THAT(other_protocol->value("message", ""), HasSubstr("control protocol version 999"));

  // Malformed requests from a same-uid peer are refused, never crash the daemon.
  const std::vector<json> malformed = {
      {{"type", 1}},
      json::array({1, 2, 3}),
      {{"type", "register"}, {"abi", 1}, {"session", 42}},
      {{"type", "register"}, {"abi", 1}, {"session", name}, {"segment", "../../etc/passwd"}},
      {{"type", "register"}, {"abi", 1}, {"session", name}, {"segment", segment}},  // no such file
  };
  for (const json& request : malformed) {
    auto reply = request_reply(daemon->socket_path(), request);
    ASSERT_TRUE(reply.is_ok()) << request.dump() << ": " << reply.message();
    EXPECT_EQ(reply->value("type", ""), "error") << request.dump() << " -> " << reply->dump();
    EXPECT_TRUE(daemon->process().running()) << "the daemon died on " << request.dump();
  }

  // The daemon keeps serving: status answers and a real producer gets through.
  auto after = daemon->status();
  ASSERT_TRUE(after.is_ok()) << after.message();
  EXPECT_GE(u64(*after, "registrations_refused"), 4u);  // the ABI one and three bad registrations
  ChildProcess* producer = start_producer(name, 0, {"--count", "30", "--streams", "1", "--stdin-control"});
  ASSERT_NE(producer, nullptr);
  const json f = final_line(producer);
  ASSERT_TRUE(f.is_object());
  expect_accounted(f, "producer");
  EXPECT_EQ(u64(f, "connections"), 1u);
  EXPECT_EQ(u64(f, "pushed") + u64(f, "dropped_full"), 30u);
  release_producer(producer);

  terminate_daemon(daemon);
  CommandResult gone = run_cli(status_args);
  EXPECT_TRUE(gone.exit.exited && gone.exit.code == 1) << gone.exit.describe();
  const auto files = index_or_fail(daemon->session_dir());
  EXPECT_EQ(frames_by_stream(files), (std::map<std::string, int64_t>{{stream_key("r0.s0", 0), u64(f, "pushed")}}));
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);
}

// 7. A producer trains a small CNN with track_model and track_layer: every tracked
// stream arrives as videos listed in index.json, with its kind and one frame per
// admitted step.
TEST_F(IntegrationTest, TrackedModelStreamsBecomeVideos) {
  const std::string name = session("track");
  DaemonProcess* daemon = start_ready_daemon(name, output_dir("track"), 1, write_config(100));
  ASSERT_NE(daemon, nullptr);
  constexpr int kSteps = 12, kEveryN = 3;
  ChildProcess* producer = start_producer(
      name, 0,
      {"--track-model", "--count", std::to_string(kSteps), "--every-n", std::to_string(kEveryN), "--stdin-control"});
  ASSERT_NE(producer, nullptr);
  const json f = final_line(producer);
  ASSERT_TRUE(f.is_object()) << "the producer printed no final line";
  const std::set<std::string> tracked = f.value("tracked", json::array()).get<std::set<std::string>>();
  const std::set<std::string> expected_tracked = {"model.0",      "model.1",      "model.4",
                                                  "model.0.grad", "model.1.grad", "model.4.grad"};
  EXPECT_EQ(tracked, expected_tracked);
  // 6 tracked streams and the model's module tree on every 3rd step, and the loss and
  // both tracks' summary records on every step.
  EXPECT_EQ(u64(f, "pushed"), 7u * (kSteps / kEveryN) + 3u * kSteps) << f.dump();
  EXPECT_EQ(u64(f, "dropped_full") + u64(f, "refused") + u64(f, "not_connected"), 0u) << f.dump();
  json last;
  EXPECT_TRUE(daemon->wait_status(
      [&](const json& s) {
        const json p = producer_entry(s, producer->pid());
        return p.is_object() && u64(p, "received") >= u64(f, "pushed");
      },
      kSettleTimeout, &last))
      << last.dump(2);
  release_producer(producer);
  terminate_daemon(daemon);

  const auto files = index_or_fail(daemon->session_dir());
  std::map<std::string, int64_t> frames;
  std::map<std::string, std::string> kinds;
  for (const auto& file : files) {
    frames[file.value("stream", "")] += file.value("frames", int64_t{0});
    kinds[file.value("stream", "")] = file.value("kind", "");
  }
  for (const auto& stream : expected_tracked) {
    EXPECT_EQ(frames[stream], kSteps / kEveryN) << stream;
    EXPECT_EQ(kinds[stream], stream.find(".grad") != std::string::npos ? "gradient" : "activation") << stream;
  }
  EXPECT_EQ(frames["loss"], kSteps);
  // The overview of the summaries: a video and a PNG per metric of the tracked kinds (no
  // fraction of zeros: no tracked output has exact zeros, a ReLU's would).
  EXPECT_EQ(kinds["overview"], "summary");
  std::set<std::string> overview_pngs;
  for (const auto& file : files) {
    const std::string path = file.value("path", "");
    if (path.size() > 4 && path.substr(path.size() - 4) == ".png") overview_pngs.insert(file.value("mode", ""));
  }
  EXPECT_EQ(overview_pngs, (std::set<std::string>{"act_std", "grad_norm"}));
  EXPECT_EQ(frames.size(), expected_tracked.size() + 2);
  verify_session_dir(daemon->session_dir(), files, /*every_video_listed=*/true);

  // The module tree log: the first logged step in full (the Sequential's modules that own
  // tensors, under the container, with the shapes this batch gives), then the same calls.
  const std::string tree_path = daemon->session_dir() + "/tree/rank0_pid" + std::to_string(producer->pid()) + ".log";
  std::ifstream in(tree_path);
  ASSERT_TRUE(in.good()) << tree_path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::vector<std::string> expected_lines = {
      "# tensorscope module tree log",
      "== step 0 | model | 3 calls | first logged step",
      "    model",
      "      model.0  Conv2d       float32[8,1,8,8]@cpu -> float32[8,4,6,6]@cpu",
      "      model.1  BatchNorm2d  float32[8,4,6,6]@cpu -> float32[8,4,6,6]@cpu",
      "      model.4  Linear       float32[8,144]@cpu -> float32[8,3]@cpu",
      "== step 3 | model | 3 calls | same as step 0",
      "== step 6 | model | 3 calls | same as step 3",
      "== step 9 | model | 3 calls | same as step 6"};
  EXPECT_EQ(lines, expected_lines);
}

}  // namespace
}  // namespace tensorscope::itest

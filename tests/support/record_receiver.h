// record_receiver.h — a Client connected to an in-process sink that keeps every record it
// receives, for tests that check exactly what the client sent (names, kinds, steps,
// shapes and bytes).
//
// Used by the client's tracking tests. Thread safety: records() and the accessors from
// the test thread; records arrive on the sink's thread.
#pragma once

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "fake_daemon.h"
#include "temp_dir.h"

namespace tensorscope::testing {

struct ReceivedRecord {
  std::string name;
  std::string kind;  // "activation", "gradient", ...
  int64_t step = 0;
  std::vector<int64_t> shape;
  wire::DType dtype = wire::DType::kInvalid;
  std::vector<uint8_t> payload;
  std::shared_ptr<const RowLabels> row_labels;  // null: sent without labels

  // The values as a float32 tensor (the tests send float32).
  torch::Tensor tensor() const {
    if (dtype != wire::DType::kFloat32) return torch::Tensor();
    return torch::from_blob(const_cast<uint8_t*>(payload.data()), shape, torch::kFloat32).clone();
  }
};

class RecordReceiver {
 public:
  explicit RecordReceiver(ClientOptions options = ClientOptions())
      : dir_("ts-track"), sink_(dir_.path() + "/run", "track", [this](const RecordView& v) { keep(v); }) {
    started_ = static_cast<bool>(sink_.start());
    client_ = std::make_unique<Client>(options.session("track")
                                           .runtime_dir(dir_.path() + "/run")
                                           .shm_budget(uint64_t{32} << 20)
                                           .reconnect_interval_ms(10));
    testing::wait_connected(*client_);
  }
  ~RecordReceiver() {
    client_.reset();
    sink_.stop();
  }

  bool ready() const { return started_ && client_->connected(); }
  Client& client() { return *client_; }

  // Every tensor record pushed so far, once the sink has received every record
  // (arrival order). Module tree and summary records are kept apart: trees(), summaries().
  std::vector<ReceivedRecord> records() {
    wait_all();
    std::lock_guard<std::mutex> lock(mutex_);
    return records_;
  }
  // The module tree records (kind "module_tree", payload: module_tree_format.h text).
  std::vector<ReceivedRecord> trees() {
    wait_all();
    std::lock_guard<std::mutex> lock(mutex_);
    return trees_;
  }
  // The summary records (kind "summary", payload: summary_format.h).
  std::vector<ReceivedRecord> summaries() {
    wait_all();
    std::lock_guard<std::mutex> lock(mutex_);
    return summaries_;
  }
  std::vector<ReceivedRecord> named(const std::string& name) {
    std::vector<ReceivedRecord> out;
    for (auto& r : records()) {
      if (r.name == name) out.push_back(std::move(r));
    }
    return out;
  }
  std::set<std::string> names() {
    std::set<std::string> out;
    for (const auto& r : records()) out.insert(r.name);
    return out;
  }

 private:
  void wait_all() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (records_.size() + trees_.size() + summaries_.size() >= client_->stats().pushed) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  void keep(const RecordView& v) {
    ReceivedRecord r;
    r.name = v.header.name;
    r.kind = wire::tensor_kind_name(static_cast<wire::TensorKind>(v.header.kind));
    r.step = v.header.step;
    r.dtype = static_cast<wire::DType>(v.header.dtype);
    r.shape.assign(v.header.shape, v.header.shape + v.header.ndim);
    r.payload.assign(v.payload, v.payload + v.header.payload_bytes);
    r.row_labels = v.row_labels;
    std::lock_guard<std::mutex> lock(mutex_);
    const auto kind = static_cast<wire::TensorKind>(v.header.kind);
    (kind == wire::TensorKind::kModuleTree    ? trees_
         : kind == wire::TensorKind::kSummary ? summaries_
                                              : records_)
        .push_back(std::move(r));
  }

  TempDir dir_;
  testing::FakeDaemon sink_;
  bool started_ = false;
  std::unique_ptr<Client> client_;
  std::mutex mutex_;
  std::vector<ReceivedRecord> records_;
  std::vector<ReceivedRecord> trees_;
  std::vector<ReceivedRecord> summaries_;
};

}  // namespace tensorscope::testing

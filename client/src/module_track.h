// module_track.h — ModuleTrack: what Client::track_model / track_layer set up. It turns
// the ATen ops seen by the op observer into module calls and sends their outputs, the
// gradients at those outputs, parameters and parameter gradients.
//
// Used inside the training process. libtorch modules have no hooks, so a call is
// recognized from the ops: an op with an input sharing storage with a parameter or
// buffer that a module itself registers, and with an input that is not one (the
// activation), is a forward op of that module; its first result that is not a view of
// a parameter is the module's output. A leaf module starts a new call at each such op;
// a module with tensor-owning descendants spans the contiguous run of ops touching its
// subtree. every_n applies to steps: the op observer listens only during sent steps.
// With TrackOptions::tree_log, a step's calls are also sent as one kModuleTree record.
// Thread safety: op callbacks arrive on any thread; calls are tracked per thread.
//
// Design: docs/design/module_tracking.md (the full rules: when a call begins and ends,
// in-place and optimizer ops, gradients, the tree log, steps).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

#include "call_stacks.h"
#include "grad_hook.h"
#include "module_index.h"
#include "module_tree_log.h"
#include "op_observer.h"
#include "track.h"
#include "track_policy.h"
#include "track_summaries.h"
#include "tensorscope/track_options.h"

namespace tensorscope {

class ClientImpl;

class ModuleTrack : public Track, public OpListener, public std::enable_shared_from_this<ModuleTrack> {
 public:
  // A FailedTrack when the name is empty, a regex is invalid or no module is selected.
  static std::shared_ptr<Track> create(std::weak_ptr<ClientImpl> client, const std::string& name,
                                       std::vector<ModuleEntry> modules, TrackOptions options, TrackKinds kinds);
  ModuleTrack(std::weak_ptr<ClientImpl> client, std::string name, std::vector<ModuleEntry> modules,
              TrackOptions options, TrackKinds kinds);
  ~ModuleTrack() override;

  // Track
  void stop() override;
  void end_calls() override;
  void step_changed(int64_t next) override;
  // Ends the open calls of one op thread (its backward started).
  void end_calls_of(uint64_t thread);
  std::vector<TrackedStream> streams() const override;

  // OpListener
  uint64_t on_op_start(const char* op_name, c10::ArrayRef<const c10::IValue> inputs) override;
  void on_op_end(uint64_t token, const std::vector<c10::IValue>& outputs) override;
  void on_backward_node(uint64_t forward_thread, int64_t sequence_nr, c10::ArrayRef<const c10::IValue> grads) override;

 private:
  struct Module {
    ModuleEntry entry;
    std::string stream;       // "<name>.<path>", or "<name>" for the root
    bool tracked = false;     // selected and owns tensors
    std::vector<int> notify;  // tracked modules in entry.chain, innermost first
  };
  // Where each parameter or buffer storage belongs. Immutable once published.
  struct StorageMap {
    struct Owner {
      int module;
      int tensor;  // index into tensors
    };
    std::unordered_map<const void*, Owner> owners;
    std::vector<at::Tensor> tensors;     // every parameter and buffer of the model
    std::vector<c10::Storage> storages;  // held: a key's address is never reused meanwhile
  };
  struct Pending {
    int module = -1;
    int call = 0;
    bool admitted = false;          // sent whole as its own stream (a sent step, and max_hz allows)
    bool summarize = false;         // a summarised step, and a call with a stream of its own
    bool summarize_step = false;    // a summarised step (parameters, with the first call)
    bool stack = false;             // a sent step: a row of the module's stacked calls
    at::Tensor output;              // held only when one of the above
    const void* storage = nullptr;  // the output's storage
    uint64_t thread = 0;            // op thread that produced it (autograd's forward thread)
    int tree_index = -1;            // its line in tree_, -1 when not listed
    at::Tensor labels;              // read_labels() when the call began, if admitted
  };
  struct GradTarget {
    std::string stream;
    int64_t output_nr = 0;
    bool send = true;
    bool summarize = false;
    int64_t step = 0;   // of the forward call (summaries)
    std::string stack;  // the stacked stream it is a row of ("": none)
    int call = 0;
    at::Tensor labels;  // the batch's row labels, read in the forward (TrackOptions::labels)
  };

  void select(const std::regex* include, const std::regex* exclude);
  bool needs_observer() const;
  // Installs or removes this track's op listener.
  void listen(bool on);
  void publish_storages();
  bool storages_changed(const StorageMap& map) const;
  std::string call_stream(int module, int call) const;
  // The stream of module `module`'s stacked calls, `what` after it ("" or ".grad").
  std::string stacked_stream(int module, const char* what) const;
  // Outside mutex_: sends finished stacks, each one calls x features matrix.
  void send_stacks(std::vector<CallStacks::Stack> stacks);
  uint8_t hint_for(ClientImpl& client, const std::string& stream) const;
  // The batch's labels (options_.labels()), read now: 1-D integers, else undefined (a
  // function that throws, or none). Read when a sent call begins, so that a later call
  // of the model on another batch (a siamese pair, a GAN's real and fake batches) cannot
  // change them for its output or, in backward, its gradient.
  at::Tensor read_labels() const;
  // `labels` when they label `tensor`'s rows (one per row); else undefined (sent without).
  static at::Tensor labels_of_rows(const at::Tensor& labels, const at::Tensor& tensor);
  // Under mutex_: moves every open call of thread `thread` (all threads when null) whose
  // module is not in `keep` into `finished`.
  void close_calls(std::vector<Pending>& open, const std::vector<int>* keep, std::vector<Pending>& finished);
  void set_open_count(int count);
  // Under mutex_: begins call of `module` with `output`.
  Pending begin_call(ClientImpl* client, uint64_t thread, int module, const at::Tensor& output);
  // Outside mutex_: sends a finished call.
  void finish(std::vector<Pending>& finished);
  void send_param_grad(const std::string& stream, const at::Tensor& grad);
  // Whether step `step` is sent whole and summarised; listens when either.
  void set_gates(int64_t step);
  // Summarises `tensor` for the current step (takes mutex_); a failure is counted refused.
  void summarize(ClientImpl& client, int64_t step, const std::string& stream, wire::TensorKind kind,
                 const at::Tensor& tensor, bool ratio);
  // Outside mutex_: one summary record per step.
  void send_summaries(std::map<int64_t, std::vector<TensorSummary>> ready);
  // Takes mutex_: queues the gathered summaries (the end of a backward: queued by the
  // first gradient gathered in it), refusing those written in place since.
  void flush_gathered();
  // Outside mutex_: refusals of summaries written in place before their flush, and of
  // those whose pass failed.
  static void refuse_written(ClientImpl& client, const std::vector<std::string>& written);
  static void refuse_failed(ClientImpl& client, const std::vector<std::pair<std::string, std::string>>& failed);
  // Under mutex_: the listed calls as a payload, and their step (an empty payload when
  // nothing is listed); open calls lose their line index.
  std::pair<std::string, int64_t> take_tree();
  // Outside mutex_.
  void send_tree(const std::pair<std::string, int64_t>& tree);
  // The input descriptions of an op that opens a call (tree_log only).
  static std::vector<std::string> describe_inputs(c10::ArrayRef<const c10::IValue> inputs, const StorageMap& map);
  static const void* storage_of(const at::Tensor& t);

  const std::weak_ptr<ClientImpl> client_;
  const std::string name_;
  const TrackOptions options_;
  const TrackKinds kinds_;
  std::vector<Module> modules_;
  std::vector<const void*> tensor_storages_;             // storages of the current map's tensors
  std::vector<std::unique_ptr<const StorageMap>> maps_;  // all published maps (kept: read lock-free)
  std::atomic<const StorageMap*> map_{nullptr};
  StreamGate gate_;
  GradSender param_grads_;
  std::vector<std::unique_ptr<GradHook>> hooks_;

  std::atomic<bool> stopped_{false};
  std::atomic<int> open_calls_{0};  // pending calls over all threads
  std::atomic<int> grad_keys_{0};
  const int64_t every_n_;                              // steps
  const int64_t stats_every_;                          // steps (0: no summaries)
  std::atomic<bool> full_on_{true}, stats_on_{false};  // of the current step (set_gates)
  const bool tree_log_;                                // TrackOptions::tree_log, for tracks sending outputs
  std::mutex listen_mutex_;                            // listener_
  std::shared_ptr<OpListener> listener_;               // registered while listening (a WeakOpListener)

  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::vector<Pending>> open_;  // by op thread id
  int open_count_ = 0;                                       // mirrored in open_calls_
  std::unordered_map<uint64_t, std::vector<int>> calls_;     // per op thread and module, this step
  int64_t calls_step_ = 0;
  // (forward thread, grad_fn sequence number) -> where its input gradients go
  std::unordered_map<uint64_t, std::unordered_map<int64_t, std::vector<GradTarget>>> grad_targets_;
  bool over_calls_logged_ = false;
  ModuleTreeLog tree_;
  TrackSummaries summaries_;
  std::atomic<bool> flush_queued_{false};  // flush_gathered() at the end of the backward now running
  CallStacks stacks_;                      // modules called many times a step (own lock)
  bool tree_closed_ = false;               // step_changed() sent the list of tree_closed_step_
  int64_t tree_closed_step_ = 0;
};

}  // namespace tensorscope

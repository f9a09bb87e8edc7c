#include "module_track.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <cstring>

#include "client_impl.h"
#include "tensorscope/base/logging.h"

namespace tensorscope {
namespace {

constexpr uint64_t kNoToken = 0;
constexpr size_t kMaxGradTargets = 4096;

bool is_inplace(const char* op_name) {
  if (op_name == nullptr) return false;
  const size_t n = std::strlen(op_name);
  return n >= 2 && op_name[n - 1] == '_' && op_name[n - 2] != '_';
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Calls f(tensor) for every tensor in `value` (a tensor, a tensor list or a list of
// optional tensors).
template <typename F>
void for_each_tensor(const c10::IValue& value, F&& f) {
  if (value.isTensor()) {
    f(value.toTensor());
  } else if (value.isTensorList()) {
    const auto list = value.toTensorList();
    for (size_t i = 0; i < list.size(); ++i) f(list.get(i));
  } else if (value.isList()) {
    for (const c10::IValue& item : value.toListRef()) {
      if (item.isTensor()) f(item.toTensor());
    }
  }
}

template <typename T, size_t N>
struct SmallSet {
  T items[N];
  size_t size = 0;
  void add(T x) {
    if (size < N) items[size++] = x;
  }
  bool has(T x) const { return std::find(items, items + size, x) != items + size; }
};

}  // namespace

const void* ModuleTrack::storage_of(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return nullptr;
  return t.storage().unsafeGetStorageImpl();
}

std::shared_ptr<Track> ModuleTrack::create(std::weak_ptr<ClientImpl> client, const std::string& name,
                                           std::vector<ModuleEntry> modules, TrackOptions options, TrackKinds kinds) {
  if (const std::string why = stream_name_refusal(name); !why.empty()) {
    return std::make_shared<FailedTrack>("track_model/track_layer: the track name is the streams' prefix: " + why);
  }
  std::regex include, exclude;
  try {
    if (!options.include().empty()) include = std::regex(options.include(), std::regex::ECMAScript);
    if (!options.exclude().empty()) exclude = std::regex(options.exclude(), std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return std::make_shared<FailedTrack>("track '" + name + "': invalid include/exclude regex: " + e.what());
  }
  auto track = std::make_shared<ModuleTrack>(std::move(client), name, std::move(modules), std::move(options), kinds);
  track->select(track->options_.include().empty() ? nullptr : &include,
                track->options_.exclude().empty() ? nullptr : &exclude);
  if (std::none_of(track->modules_.begin(), track->modules_.end(), [](const Module& m) { return m.tracked; })) {
    return std::make_shared<FailedTrack>("track '" + name +
                                         "': no module owns parameters or buffers and matches include/exclude");
  }
  track->publish_storages();
  if (has_kind(kinds, TrackKinds::kParameterGradient)) {
    std::weak_ptr<ModuleTrack> weak = track;
    for (const Module& m : track->modules_) {
      if (!m.tracked) continue;
      for (const auto& [param_name, param] : m.entry.params) {
        if (!param.defined() || !param.requires_grad()) continue;
        const std::string stream = m.stream + "." + param_name + ".grad";
        track->hooks_.push_back(std::make_unique<GradHook>(param, [weak, stream](const at::Tensor& grad) {
          if (auto self = weak.lock()) self->send_param_grad(stream, grad);
        }));
      }
    }
  }
  const auto owner = track->client_.lock();
  track->set_gates(owner ? owner->step() : 0);
  return track;
}

ModuleTrack::ModuleTrack(std::weak_ptr<ClientImpl> client, std::string name, std::vector<ModuleEntry> modules,
                         TrackOptions options, TrackKinds kinds)
    : client_(std::move(client)),
      name_(std::move(name)),
      options_(std::move(options)),
      kinds_(kinds),
      gate_(1, track_max_hz(client_)),
      param_grads_(client_, options_),
      every_n_(track_every_n(client_, options_)),
      stats_every_(std::max<int64_t>(0, options_.stats_every())),
      tree_log_(options_.tree_log() && has_kind(kinds_, TrackKinds::kOutput)),
      summaries_(options_.cast_format()),
      stacks_(options_.calls()) {
  modules_.reserve(modules.size());
  for (auto& entry : modules) {
    Module m;
    m.stream = entry.path.empty() ? name_ : name_ + "." + entry.path;
    m.entry = std::move(entry);
    modules_.push_back(std::move(m));
  }
  if (auto c = client_.lock()) calls_step_ = c->step();
}

ModuleTrack::~ModuleTrack() = default;

void ModuleTrack::select(const std::regex* include, const std::regex* exclude) {
  for (Module& m : modules_) {
    m.tracked = m.entry.owns_tensors() && (include == nullptr || std::regex_search(m.entry.path, *include)) &&
        (exclude == nullptr || !std::regex_search(m.entry.path, *exclude));
  }
  for (Module& m : modules_) {
    for (int k : m.entry.chain) {
      if (modules_[k].tracked) m.notify.push_back(k);
    }
  }
}

bool ModuleTrack::needs_observer() const {
  return has_kind(kinds_, TrackKinds::kOutput) || has_kind(kinds_, TrackKinds::kOutputGradient) ||
      has_kind(kinds_, TrackKinds::kParameter);
}

void ModuleTrack::listen(bool on) {
  std::lock_guard<std::mutex> lock(listen_mutex_);
  on = on && needs_observer() && !stopped_.load(std::memory_order_relaxed);
  if (on == (listener_ != nullptr)) return;
  if (on) {
    listener_ = std::make_shared<WeakOpListener>(weak_from_this());
    add_op_listener(listener_);
  } else {
    remove_op_listener(listener_.get());
    listener_.reset();
  }
}

void ModuleTrack::set_gates(int64_t step) {
  const auto client = client_.lock();
  const StepGates gates = step_gates(step, every_n_, stats_every_, client && client->capturing(step));
  full_on_.store(gates.full, std::memory_order_relaxed);
  stats_on_.store(gates.summarize, std::memory_order_relaxed);
  listen(gates.full || gates.summarize);
}

void ModuleTrack::summarize(ClientImpl& client, int64_t step, const std::string& stream, wire::TensorKind kind,
                            const at::Tensor& tensor, bool ratio) {
  std::string why;
  bool kept = false, non_finite = false, gathered = false;
  std::vector<std::string> written;
  {
    ObserverPause pause;  // our reductions are not the model's ops
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      kept = summaries_.add(step, stream, kind, tensor, ratio, &non_finite, &why, &gathered);
      if (summaries_.gathered() >= fused::SummaryBatch::kMaxGathered) written = summaries_.flush();
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  if (!kept) client.count_refused(stream, track_refusal(TrackRefusal::kNoSummary, why));
  refuse_written(client, written);
  if (gathered && (kind == wire::TensorKind::kGradient || kind == wire::TensorKind::kParameterGradient) &&
      !flush_queued_.exchange(true)) {
    // Flushed when this backward ends (its gradients are final then).
    std::weak_ptr<ModuleTrack> weak = weak_from_this();
    try {
      torch::autograd::Engine::get_default_engine().queue_callback([weak] {
        if (auto track = weak.lock()) track->flush_gathered();
      });
    } catch (...) {  // not in a backward: the next flush point takes them
      flush_queued_.store(false);
    }
  }
  if (non_finite && !client.capture_started()) {
    // The first NaN/Inf of this client: this tensor whole at once (unless the step sends
    // it anyway), every track whole for the next anomaly_capture_steps steps.
    client.non_finite_seen(step);
    if (!full_on_.load(std::memory_order_relaxed)) {
      client.send(stream, tensor, kind, hint_for(client, stream), &options_.transform());
    }
  }
}

void ModuleTrack::flush_gathered() {
  flush_queued_.store(false);
  std::vector<std::string> written;
  {
    ObserverPause pause;
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      written = summaries_.flush();
    } catch (...) {  // (never into the training loop)
    }
  }
  if (auto client = client_.lock()) refuse_written(*client, written);
}

void ModuleTrack::refuse_written(ClientImpl& client, const std::vector<std::string>& written) {
  for (const std::string& stream : written) {
    client.count_refused(stream, track_refusal(TrackRefusal::kWrittenBeforeSummary));
  }
}

void ModuleTrack::refuse_failed(ClientImpl& client, const std::vector<std::pair<std::string, std::string>>& failed) {
  for (const auto& [stream, why] : failed) client.count_refused(stream, track_refusal(TrackRefusal::kNoSummary, why));
}

void ModuleTrack::send_summaries(std::map<int64_t, std::vector<TensorSummary>> ready) {
  if (ready.empty()) return;
  auto client = client_.lock();
  if (!client) return;
  for (const auto& [step, summaries] : ready) client->send_summaries(name_, encode_summaries(summaries), step);
}

void ModuleTrack::step_changed(int64_t next) {
  std::pair<std::string, int64_t> tree;
  std::map<int64_t, std::vector<TensorSummary>> ready;
  std::vector<std::string> written;
  std::vector<std::pair<std::string, std::string>> failed;
  const auto client = client_.lock();
  {
    ObserverPause pause;
    std::lock_guard<std::mutex> lock(mutex_);
    tree = take_tree();
    written = summaries_.flush();
    ready = summaries_.take_ready(/*wait=*/false);
    failed = summaries_.take_failed();
    // A GPU summary is read a step late: its NaN starts the capture from the next step.
    if (client && !client->capture_started()) {
      if (const auto bad = TrackSummaries::first_non_finite(ready)) client->non_finite_seen(std::max(*bad, next - 1));
    }
    // An op of another thread may still read the ending step before the client stores
    // the next one: its calls must not start a second list for this step.
    tree_closed_ = client != nullptr;
    if (client) tree_closed_step_ = client->step();
  }
  if (client) {
    refuse_written(*client, written);
    refuse_failed(*client, failed);
  }
  send_tree(tree);
  send_summaries(std::move(ready));
  send_stacks(stacks_.take_all());  // the ending step's, stamped with it (the client's step is still that)
  set_gates(next);
}

void ModuleTrack::publish_storages() {
  auto map = std::make_unique<StorageMap>();
  std::vector<std::pair<int, at::Tensor>> all;
  for (size_t i = 0; i < modules_.size(); ++i) {
    for (const auto& p : modules_[i].entry.params) all.emplace_back(static_cast<int>(i), p.second);
    for (const auto& b : modules_[i].entry.buffers) all.emplace_back(static_cast<int>(i), b);
  }
  tensor_storages_.clear();
  for (auto& [module, tensor] : all) {
    const void* storage = storage_of(tensor);
    tensor_storages_.push_back(storage);
    map->tensors.push_back(tensor);
    // A tensor registered by several modules (tied weights) belongs to the first.
    if (storage != nullptr) {
      map->storages.push_back(tensor.storage());
      map->owners.emplace(storage, StorageMap::Owner{module, static_cast<int>(map->tensors.size() - 1)});
    }
  }
  map_.store(map.get(), std::memory_order_release);
  maps_.push_back(std::move(map));
}

bool ModuleTrack::storages_changed(const StorageMap& map) const {
  for (size_t i = 0; i < map.tensors.size(); ++i) {
    if (storage_of(map.tensors[i]) != tensor_storages_[i]) return true;
  }
  return false;
}

std::string ModuleTrack::call_stream(int module, int call) const {
  return call == 0 ? modules_[module].stream : modules_[module].stream + "#" + std::to_string(call);
}

std::string ModuleTrack::stacked_stream(int module, const char* what) const {
  return modules_[module].stream + std::string(kStackedCallsSuffix) + what;
}

void ModuleTrack::send_stacks(std::vector<CallStacks::Stack> stacks) {
  if (stacks.empty()) return;
  auto client = client_.lock();
  if (!client) return;
  for (CallStacks::Stack& stack : stacks) {
    if (stack.calls.empty()) continue;
    try {
      at::Tensor matrix;
      {
        ObserverPause pause;  // our own ops are not the model's
        at::NoGradGuard no_grad;
        matrix = stack.matrix();
      }
      const uint8_t hint = options_.render_mode() != RenderMode::kDefault ? static_cast<uint8_t>(options_.render_mode())
                                                                          : static_cast<uint8_t>(RenderMode::kHeatmap);
      client->send(stack.name, matrix, stack.kind, hint, nullptr);
      if (stack.dropped > 0) {
        client->count_refused(stack.name,
                              track_refusal(TrackRefusal::kStackDropped, std::to_string(stack.dropped),
                                            std::to_string(stack.calls.size())));
      }
      if (stack.changed > 0) {
        client->count_refused(stack.name, track_refusal(TrackRefusal::kStackChanged, std::to_string(stack.changed)));
      }
    } catch (const std::exception& e) {
      client->count_refused(stack.name, track_refusal(TrackRefusal::kStackFailed, e.what()));
    }
  }
}

at::Tensor ModuleTrack::read_labels() const {
  if (!options_.labels()) return {};
  try {
    ObserverPause pause;  // the function's ops (a slice, say) are not the model's
    at::Tensor labels = options_.labels()();
    if (labels.defined() && labels.dim() == 1 && at::isIntegralType(labels.scalar_type(), /*includeBool=*/false)) {
      return labels;
    }
  } catch (...) {  // a labels function that throws: sent without labels
  }
  return {};
}

at::Tensor ModuleTrack::labels_of_rows(const at::Tensor& labels, const at::Tensor& tensor) {
  if (!labels.defined() || !tensor.defined() || tensor.dim() == 0 || labels.size(0) != tensor.size(0)) return {};
  return labels;
}

uint8_t ModuleTrack::hint_for(ClientImpl& client, const std::string& stream) const {
  if (options_.render_mode() != RenderMode::kDefault) return static_cast<uint8_t>(options_.render_mode());
  return client.render_hint_for(stream);
}

void ModuleTrack::set_open_count(int count) {
  open_count_ = count;
  open_calls_.store(count, std::memory_order_relaxed);
}

void ModuleTrack::close_calls(std::vector<Pending>& open, const std::vector<int>* keep,
                              std::vector<Pending>& finished) {
  for (auto it = open.begin(); it != open.end();) {
    if (keep == nullptr || !contains(*keep, it->module)) {
      finished.push_back(std::move(*it));
      it = open.erase(it);
      set_open_count(open_count_ - 1);
    } else {
      ++it;
    }
  }
}

uint64_t ModuleTrack::on_op_start(const char* op_name, c10::ArrayRef<const c10::IValue> inputs) {
  if (stopped_.load(std::memory_order_relaxed)) return kNoToken;
  const StorageMap* map = map_.load(std::memory_order_acquire);
  if (map == nullptr) return kNoToken;

  int owner = -1;
  bool first = true, first_is_param = false;
  const void* first_storage = nullptr;
  SmallSet<int, 16> touched;         // indices into map->tensors
  SmallSet<const void*, 16> others;  // storages of the other tensor inputs
  for (const c10::IValue& value : inputs) {
    for_each_tensor(value, [&](const at::Tensor& t) {
      const void* storage = storage_of(t);
      const bool is_first = first;
      first = false;
      if (storage == nullptr) return;
      if (is_first) first_storage = storage;
      auto it = map->owners.find(storage);
      if (it == map->owners.end()) {
        others.add(storage);
        return;
      }
      if (owner < 0) owner = it->second.module;
      if (is_first) first_is_param = true;
      touched.add(it->second.tensor);
    });
  }

  const bool inplace = is_inplace(op_name);
  if (inplace && first_storage != nullptr && !first_is_param && open_calls_.load(std::memory_order_relaxed) > 0) {
    // An op writing a module's output: the module's own bias add continues its call;
    // anything else ends it first, so the output is sent as the module returned it.
    std::vector<Pending> finished;
    bool continues = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = open_.find(current_op_thread_id());
      if (it != open_.end()) {
        for (auto p = it->second.begin(); p != it->second.end();) {
          if (p->storage != first_storage) {
            ++p;
          } else if (owner >= 0 && contains(modules_[owner].entry.chain, p->module)) {
            continues = true;
            ++p;
          } else {
            finished.push_back(std::move(*p));
            p = it->second.erase(p);
            set_open_count(open_count_ - 1);
          }
        }
        if (it->second.empty()) open_.erase(it);
      }
    }
    finish(finished);
    if (continues) return kNoToken;
  }
  if (owner < 0) return kNoToken;
  // An in-place op that reads a parameter into another tensor (an EMA of the weights,
  // a target network's copy_) or writes a weight (optimizer, renorm) is no forward.
  if (inplace) return kNoToken;
  // An evaluation forward (gradients off): no call of the step (TrackOptions::evaluation).
  if (options_.evaluation() == EvaluationCalls::kSkip && !at::GradMode::is_enabled()) return kNoToken;
  if (others.size == 0) return kNoToken;  // parameters only: not a forward of the module
  for (size_t i = 0; i < touched.size; ++i) {
    const at::Tensor& param = map->tensors[touched.items[i]];
    if (!param.requires_grad()) continue;
    const void* grad = storage_of(param.grad());
    if (grad != nullptr && others.has(grad)) return kNoToken;  // optimizer arithmetic
  }
  // Low half: the owner; high half: where the call's input descriptions wait.
  const uint64_t ticket = tree_log_ ? ModuleTreeLog::stash_inputs(describe_inputs(inputs, *map)) : 0;
  return (static_cast<uint64_t>(owner) + 1) | (ticket << 32);
}

std::vector<std::string> ModuleTrack::describe_inputs(c10::ArrayRef<const c10::IValue> inputs, const StorageMap& map) {
  std::vector<std::string> out;
  for (const c10::IValue& value : inputs) {
    for_each_tensor(value, [&](const at::Tensor& t) {
      if (!t.defined() || out.size() >= ModuleTree::kMaxInputs) return;
      const void* storage = storage_of(t);
      if (storage != nullptr && map.owners.count(storage) > 0) return;  // a parameter or buffer of the model
      out.push_back(ModuleTreeLog::describe(t));
    });
  }
  return out;
}

void ModuleTrack::on_op_end(uint64_t token, const std::vector<c10::IValue>& outputs) {
  const int owner = static_cast<int>((token & 0xffffffffu) - 1);
  std::vector<std::string> inputs = ModuleTreeLog::take_inputs(static_cast<uint32_t>(token >> 32));
  const StorageMap* map = map_.load(std::memory_order_acquire);
  at::Tensor output;
  for (const c10::IValue& value : outputs) {
    for_each_tensor(value, [&](const at::Tensor& t) {
      if (output.defined()) return;
      const void* storage = storage_of(t);
      if (storage != nullptr && map->owners.count(storage) == 0) output = t;
    });
    if (output.defined()) break;
  }
  if (!output.defined()) return;  // a view of a weight, or no tensor result
  auto client = client_.lock();
  if (!client) return;
  if (!client->enabled()) {
    client->count_gated();
    return;
  }

  const uint64_t thread = current_op_thread_id();
  const void* storage = storage_of(output);
  std::vector<Pending> finished;
  std::pair<std::string, int64_t> older_tree;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_.load(std::memory_order_relaxed)) return;
    const int64_t step = client->step();
    if (step != calls_step_) {
      calls_.clear();
      calls_step_ = step;
    }
    if (!tree_.empty() && tree_.step() != step) older_tree = take_tree();
    const bool list =
        tree_log_ && full_on_.load(std::memory_order_relaxed) && !(tree_closed_ && step == tree_closed_step_);
    std::vector<int> begun;  // modules whose call begins with this op, innermost first
    std::vector<Pending>& open = open_[thread];
    close_calls(open, &modules_[owner].entry.chain, finished);
    for (int m : modules_[owner].notify) {
      auto p = std::find_if(open.begin(), open.end(), [m](const Pending& x) { return x.module == m; });
      if (p != open.end() && m == owner && !modules_[m].entry.composite) {
        finished.push_back(std::move(*p));  // a leaf called again: a new call
        open.erase(p);
        set_open_count(open_count_ - 1);
        p = open.end();
      }
      if (p != open.end()) {
        if (p->admitted || p->summarize) p->output = output;
        p->storage = storage;
        p->thread = thread;
        tree_.set_output(p->tree_index, output);
      } else {
        open.push_back(begin_call(client.get(), thread, m, output));
        set_open_count(open_count_ + 1);
        begun.push_back(m);
      }
    }
    if (list) {
      // Listed outermost first: a parent before the children it begins with.
      for (auto m = begun.rbegin(); m != begun.rend(); ++m) {
        auto p = std::find_if(open.begin(), open.end(), [&](const Pending& x) { return x.module == *m; });
        p->tree_index = tree_.begin(step, thread, p->call, modules_[*m].entry.path, modules_[*m].entry.type,
                                    m + 1 == begun.rend() ? std::move(inputs) : inputs, output);
      }
    }
    if (open.empty()) open_.erase(thread);
  }
  send_tree(older_tree);
  finish(finished);
}

std::pair<std::string, int64_t> ModuleTrack::take_tree() {
  if (tree_.empty()) return {};
  for (auto& [thread, open] : open_) {
    for (Pending& p : open) p.tree_index = -1;  // their lines leave with the list
  }
  const int64_t step = tree_.step();
  return {tree_.take(), step};
}

void ModuleTrack::send_tree(const std::pair<std::string, int64_t>& tree) {
  if (tree.first.empty()) return;
  auto client = client_.lock();
  if (!client) return;
  ObserverPause pause;
  client->send_module_tree(name_, tree.first, tree.second);
}

ModuleTrack::Pending ModuleTrack::begin_call(ClientImpl* client, uint64_t thread, int module,
                                             const at::Tensor& output) {
  std::vector<int>& calls = calls_[thread];
  if (calls.empty()) calls.assign(modules_.size(), 0);
  Pending p;
  p.module = module;
  p.thread = thread;
  p.call = calls[module]++;
  p.storage = storage_of(output);
  const bool full = full_on_.load(std::memory_order_relaxed);
  const bool stacks = stacks_.may_take(p.call) && stacks_.wants(stacked_stream(module, ""), p.call);
  const CallRoute route = route_call(options_.calls(), p.call, stacks);
  p.stack = full && route.stack_row;
  p.summarize_step = stats_on_.load(std::memory_order_relaxed);
  if (route.refused()) {
    if (!over_calls_logged_) {
      over_calls_logged_ = true;
      TS_LOG_WARN(
          "tensorscope: module '{}' ran more than {} times in one step; further calls are not "
          "sent (advance the step with Client::next_step())",
          modules_[module].stream, kMaxCallsPerStep);
    }
    client->count_refused(modules_[module].stream, track_refusal(TrackRefusal::kOverCalls));
    return p;
  }
  if (!route.own_stream) {  // only a row of the stacked calls
    if (p.stack || (p.summarize_step && p.call == 0)) p.output = output;
    return p;
  }
  if (full_on_.load(std::memory_order_relaxed)) {
    if (gate_.admit(call_stream(module, p.call)).admitted) {
      p.admitted = true;
      p.labels = read_labels();
    } else {
      client->count_gated();
    }
  }
  p.summarize = p.summarize_step;
  if (p.admitted || p.summarize || p.stack) p.output = output;
  return p;
}

void ModuleTrack::finish(std::vector<Pending>& finished) {
  if (finished.empty()) return;
  auto client = client_.lock();
  if (!client) return;
  ObserverPause pause;
  const int64_t step = client->step();
  for (Pending& p : finished) {
    if (!(p.admitted || p.summarize || p.stack || p.summarize_step) || !p.output.defined()) continue;
    const std::string stream = call_stream(p.module, p.call);
    const at::Tensor labels = p.admitted ? labels_of_rows(p.labels, p.output) : at::Tensor();  // for the gradient too
    if (has_kind(kinds_, TrackKinds::kOutput)) {
      if (p.admitted) {
        client->send(stream, p.output, wire::TensorKind::kActivation, hint_for(*client, stream), &options_.transform(),
                     labels);
      }
      if (p.summarize) summarize(*client, step, stream, wire::TensorKind::kActivation, p.output, false);
      if (p.stack)
        send_stacks(stacks_.take(stacked_stream(p.module, ""), p.output, wire::TensorKind::kActivation, step, p.call));
    }
    if (has_kind(kinds_, TrackKinds::kOutputGradient) && p.output.requires_grad() && p.output.grad_fn()) {
      const int64_t sequence_nr = static_cast<int64_t>(p.output.grad_fn()->sequence_nr());
      std::lock_guard<std::mutex> lock(mutex_);
      if (grad_keys_.load(std::memory_order_relaxed) >= static_cast<int>(kMaxGradTargets)) {
        grad_targets_.clear();  // backward never ran for these (eval with grad on): forget them
        grad_keys_.store(0, std::memory_order_relaxed);
      }
      grad_targets_[p.thread][sequence_nr].push_back(
          GradTarget{stream + ".grad", p.output.output_nr(), p.admitted, p.summarize, step,
                     p.stack ? stacked_stream(p.module, ".grad") : "", p.call, labels});
      grad_keys_.fetch_add(1, std::memory_order_relaxed);
    }
    if (has_kind(kinds_, TrackKinds::kParameter) && p.call == 0) {
      for (const auto& [param_name, param] : modules_[p.module].entry.params) {
        const std::string param_stream = modules_[p.module].stream + "." + param_name;
        if (p.admitted || p.stack) {  // (a sent step: with every call stacked, the first is not admitted alone)
          client->send(param_stream, param, wire::TensorKind::kParameter, hint_for(*client, param_stream),
                       &options_.transform());
        }
        if (p.summarize_step) summarize(*client, step, param_stream, wire::TensorKind::kParameter, param, true);
      }
    }
    p.output = at::Tensor();
    p.labels = at::Tensor();
  }
}

void ModuleTrack::on_backward_node(uint64_t forward_thread, int64_t sequence_nr,
                                   c10::ArrayRef<const c10::IValue> grads) {
  if (stopped_.load(std::memory_order_relaxed)) return;
  if (open_calls_.load(std::memory_order_relaxed) > 0) end_calls_of(forward_thread);
  if (grad_keys_.load(std::memory_order_relaxed) == 0) return;
  std::vector<GradTarget> targets;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto thread = grad_targets_.find(forward_thread);
    if (thread == grad_targets_.end()) return;
    auto node = thread->second.find(sequence_nr);
    if (node == thread->second.end()) return;
    targets = std::move(node->second);
    thread->second.erase(node);
    if (thread->second.empty()) grad_targets_.erase(thread);
    grad_keys_.fetch_sub(static_cast<int>(targets.size()), std::memory_order_relaxed);
  }
  auto client = client_.lock();
  if (!client) return;
  for (const GradTarget& target : targets) {
    if (target.output_nr < 0 || static_cast<size_t>(target.output_nr) >= grads.size()) continue;
    const c10::IValue& grad = grads[target.output_nr];
    if (!grad.isTensor() || !grad.toTensor().defined()) continue;
    if (target.send) {
      client->send(target.stream, grad.toTensor(), wire::TensorKind::kGradient, hint_for(*client, target.stream),
                   &options_.transform(), target.labels);
    }
    if (target.summarize) {
      summarize(*client, target.step, target.stream, wire::TensorKind::kGradient, grad.toTensor(), false);
    }
    if (!target.stack.empty()) {
      std::vector<CallStacks::Stack> done;
      {
        ObserverPause pause;
        done = stacks_.take(target.stack, grad.toTensor(), wire::TensorKind::kGradient, target.step, target.call);
      }
      send_stacks(std::move(done));
    }
  }
}

void ModuleTrack::send_param_grad(const std::string& stream, const at::Tensor& grad) {
  if (stopped_.load(std::memory_order_relaxed)) return;
  if (full_on_.load(std::memory_order_relaxed)) param_grads_.send(stream, grad, wire::TensorKind::kParameterGradient);
  if (stats_on_.load(std::memory_order_relaxed)) {
    if (auto client = client_.lock()) {
      summarize(*client, client->step(), stream, wire::TensorKind::kParameterGradient, grad, false);
    }
  }
}

void ModuleTrack::end_calls_of(uint64_t thread) {
  std::vector<Pending> finished;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = open_.find(thread);
    if (it == open_.end()) return;
    close_calls(it->second, nullptr, finished);
    open_.erase(it);
  }
  finish(finished);
}

void ModuleTrack::end_calls() {
  std::vector<Pending> finished;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [thread, open] : open_) close_calls(open, nullptr, finished);
    open_.clear();
    const StorageMap* map = map_.load(std::memory_order_acquire);
    if (!stopped_.load(std::memory_order_relaxed) && map != nullptr && storages_changed(*map)) {
      publish_storages();  // the model moved (module->to(device)) or was reloaded
    }
  }
  finish(finished);
}

void ModuleTrack::stop() {
  {
    std::lock_guard<std::mutex> lock(listen_mutex_);
    if (stopped_.exchange(true)) return;
    if (listener_) remove_op_listener(listener_.get());
    listener_.reset();
  }
  std::vector<std::unique_ptr<GradHook>> hooks;
  std::vector<Pending> finished;
  std::pair<std::string, int64_t> tree;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hooks = std::move(hooks_);
    for (auto& [thread, open] : open_) close_calls(open, nullptr, finished);
    open_.clear();
    grad_targets_.clear();
    grad_keys_.store(0, std::memory_order_relaxed);
    tree = take_tree();
  }
  hooks.clear();
  finish(finished);
  send_stacks(stacks_.take_all());
  send_tree(tree);
  std::map<int64_t, std::vector<TensorSummary>> ready;
  std::vector<std::string> written;
  std::vector<std::pair<std::string, std::string>> failed;
  {
    ObserverPause pause;
    std::lock_guard<std::mutex> lock(mutex_);
    written = summaries_.flush();
    ready = summaries_.take_ready(/*wait=*/true);
    failed = summaries_.take_failed();
  }
  if (auto client = client_.lock()) {
    refuse_written(*client, written);
    refuse_failed(*client, failed);
  }
  send_summaries(std::move(ready));
}

std::vector<TrackedStream> ModuleTrack::streams() const {
  std::vector<TrackedStream> out;
  if (stopped_.load(std::memory_order_relaxed)) return out;
  for (const Module& m : modules_) {
    if (!m.tracked) continue;
    if (has_kind(kinds_, TrackKinds::kOutput)) out.push_back({m.stream, "activation", m.entry.path});
    if (has_kind(kinds_, TrackKinds::kOutputGradient)) out.push_back({m.stream + ".grad", "gradient", m.entry.path});
    for (const auto& [param_name, param] : m.entry.params) {
      if (has_kind(kinds_, TrackKinds::kParameter)) {
        out.push_back({m.stream + "." + param_name, "parameter", m.entry.path});
      }
      if (has_kind(kinds_, TrackKinds::kParameterGradient) && param.requires_grad()) {
        out.push_back({m.stream + "." + param_name + ".grad", "parameter_gradient", m.entry.path});
      }
    }
  }
  for (const std::string& stacked : stacks_.seen()) {  // modules called many times a step
    for (const Module& m : modules_) {
      if (stacked.rfind(m.stream + std::string(kStackedCallsSuffix), 0) != 0) continue;
      out.push_back(
          {stacked,
           stacked.size() > 5 && stacked.compare(stacked.size() - 5, 5, ".grad") == 0 ? "gradient" : "activation",
           m.entry.path});
      break;
    }
  }
  return out;
}

}  // namespace tensorscope

// track_summaries.cc — see track_summaries.h.
#include "track_summaries.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>

#include "fused_summary_kernel.h"
#include "tensor_staging.h"
#include "tensor_summary.h"

namespace tensorscope {

at::Tensor device_summary_values(const at::Tensor& tensor, const at::Tensor& before, CastFormat cast,
                                 DeviceSummaryLayout* layout) {
  // Every reduction is over all elements (no reshape: a strided tensor would be copied)
  // and reads float64 (exact counts, sums without cancellation); the counts are L0 norms,
  // one kernel each.
  const at::Tensor x = tensor.detach();
  const bool scaled = x.scalar_type() == at::kDouble;
  const CastFormatInfo* info = cast_format_info(cast);
  *layout = DeviceSummaryLayout{scaled, before.defined(), info != nullptr ? cast : CastFormat::kNone};
  const at::Tensor wide = x.to(at::kDouble);
  const at::Tensor kept = at::nan_to_num(wide, 0.0, 0.0, 0.0);
  const at::Tensor max_abs = at::linalg_vector_norm(kept, std::numeric_limits<double>::infinity());
  const at::Tensor sums = scaled ? kept / max_abs.clamp_min(std::numeric_limits<double>::min()) : kept;
  const auto [var, mean] = at::var_mean(sums, /*unbiased=*/false);
  std::vector<at::Tensor> values = {at::linalg_vector_norm(wide, 0),
                                    at::linalg_vector_norm(at::nan_to_num(wide, 1.0, 0.0, 0.0), 0),
                                    at::linalg_vector_norm(kept, 0),
                                    mean,
                                    var,
                                    max_abs};
  if (before.defined()) {
    // In float64, as the CPU's ratio: integer and bool tensors too, no half-precision difference.
    const at::Tensor old = before.to(at::kDouble);
    values.push_back(at::linalg_vector_norm(wide - old, 2));
    values.push_back(at::linalg_vector_norm(old, 2));
  }
  if (info != nullptr) {
    const at::Tensor magnitude = kept.abs();
    values.push_back(at::threshold(magnitude, 0.0, std::numeric_limits<double>::infinity()).amin());
    values.push_back(at::linalg_vector_norm(at::threshold(magnitude, info->underflow_at_most, 0.0), 0));
    values.push_back(
        at::linalg_vector_norm(at::threshold(magnitude, std::nextafter(info->overflow_from, 0.0), 0.0), 0));
  }
  return at::stack(values);
}

TrackSummaries::TrackSummaries(CastFormat cast) : cast_(cast) {
  const char* pass = std::getenv("TENSORSCOPE_SUMMARY_PASS");
  const std::string mode = pass != nullptr ? pass : "";
  gather_cuda_ = fused::kernel_available() && mode != "off";
  gather_cpu_ = mode == "host";
}

TrackSummaries::~TrackSummaries() = default;

bool TrackSummaries::gathers(const at::Tensor& tensor, const std::string& name) const {
  if (gather_failed_ || tensor.numel() == 0 || at_once_.count(name) > 0) return false;
  return (gather_cuda_ && tensor.is_cuda()) || (gather_cpu_ && tensor.is_cpu());
}

at::Tensor TrackSummaries::previous_of(const at::Tensor& tensor, const Previous* previous) {
  if (previous == nullptr) return {};
  const at::Tensor& b = previous->device;
  const bool same = b.defined() && b.sizes() == tensor.sizes() && b.scalar_type() == tensor.scalar_type() &&
      b.device() == tensor.device();
  return same ? b : at::Tensor();
}

bool TrackSummaries::gather(Pending* p, const at::Tensor& tensor, Previous* previous, std::string* why) {
  const at::Tensor before = previous_of(tensor, previous);
  auto staged = std::make_shared<std::pair<StagedTensor, std::optional<StagedTensor>>>(
      std::piecewise_construct, std::forward_as_tuple(tensor), std::forward_as_tuple());
  if (before.defined()) staged->second.emplace(before);
  const TensorRef& ref = staged->first.ref();
  if (!is_c_contiguous(ref)) {  // (a CPU tensor's strided view: summarized at once)
    *why = "strided";
    return false;
  }
  fused::Input in;
  in.data = ref.data;
  in.dtype = ref.dtype;
  in.numel = static_cast<uint64_t>(tensor.numel());
  if (staged->second) {  // our own copy: the pass reads it, then keeps the tensor's values in it
    in.before = const_cast<void*>(staged->second->ref().data);
    in.ask.ratio = true;
    in.ask.keep = true;
  }
  const CastFormatInfo* info = cast_format_info(cast_);
  if (info != nullptr) {
    in.ask.cast = true;
    in.ask.underflow_at_most = info->underflow_at_most;
    in.ask.overflow_from = info->overflow_from;
  }
  int device = fused::SummaryBatch::kHost;
  uintptr_t stream = 0;
  if (ref.device == DeviceType::kCuda) {  // the pass runs after the tensor's stream (its StagedTensor's)
    device = ref.device_index;
    const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    stream = static_cast<uintptr_t>(impl->getStream(tensor.device()).id());
  }
  p->ticket = batch_.add(in, device, stream, ref.ordering);
  p->numel = in.numel;
  p->layout = DeviceSummaryLayout{tensor.scalar_type() == at::kDouble, in.ask.ratio,
                                  info != nullptr ? cast_ : CastFormat::kNone};
  if (previous != nullptr && !before.defined()) previous->device = tensor.detach().clone();  // (the first time)
  unflushed_.push_back(Unflushed{p->ticket, tensor, static_cast<int64_t>(tensor._version()), staged, p->summary.name});
  return true;
}

std::vector<std::string> TrackSummaries::flush() {
  std::vector<std::string> written;
  if (unflushed_.empty()) return written;
  for (const Unflushed& u : unflushed_) {
    if (static_cast<int64_t>(u.tensor._version()) != u.version) {
      batch_.cancel(u.ticket);
      cancelled_.push_back(u.ticket);
      at_once_.insert(u.name);
      written.push_back(u.name);
    }
  }
  batch_.flush();      // (a pass that cannot be queued fails its tickets: take_ready says why)
  unflushed_.clear();  // read by now (on the host), or by the pass queued after their streams
  return written;
}

std::vector<std::pair<std::string, std::string>> TrackSummaries::take_failed() {
  std::vector<std::pair<std::string, std::string>> failed;
  failed.swap(failed_);
  return failed;
}

bool TrackSummaries::add(int64_t step, const std::string& name, wire::TensorKind kind, const at::Tensor& tensor,
                         bool ratio, bool* non_finite, std::string* why, bool* gathered) {
  *non_finite = false;
  if (gathered != nullptr) *gathered = false;
  if (pending_.size() >= kMaxPending) {
    *why = "too many summaries waiting for their GPU copies";
    return false;
  }
  if (std::string refusal = staging_refusal(tensor); !refusal.empty()) {
    *why = refusal;
    return false;
  }
  at::NoGradGuard no_grad;
  Pending p;
  p.step = step;
  p.summary.name = name;
  p.summary.kind = kind;
  p.summary.dtype = wire_dtype(tensor.scalar_type());
  Previous* previous = ratio ? &previous_[name] : nullptr;
  if (gathers(tensor, name)) {
    std::string strided;
    if (gather(&p, tensor, previous, &strided)) {
      if (gathered != nullptr) *gathered = true;
      pending_.push_back(std::move(p));
      return true;
    }
  }
  if (tensor.numel() == 0) {
    // Nothing to reduce: the summary's zeros (and no copy from a device).
    p.summary.cast_format = cast_format_info(cast_) != nullptr ? cast_ : CastFormat::kNone;
  } else if (tensor.is_cuda()) {
    const at::Tensor before = previous_of(tensor, previous);
    p.numel = static_cast<uint64_t>(tensor.numel());
    const at::Tensor values = device_summary_values(tensor, before, cast_, &p.layout);
    if (previous != nullptr) previous->device = tensor.detach().clone();
    p.host = at::empty({values.numel()}, at::TensorOptions().dtype(at::kDouble).pinned_memory(true));
    p.host.copy_(values, /*non_blocking=*/true);
    const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    p.event = std::make_shared<c10::Event>(c10::DeviceType::CUDA);
    p.event->record(impl->getStream(tensor.device()));
  } else {
    const StagedTensor staged(tensor.device().is_cpu() ? tensor : tensor.cpu());
    if (!summarize_cpu(staged.ref(), cast_, previous != nullptr ? &previous->host : nullptr, &p.summary, why)) {
      return false;
    }
    *non_finite = !p.summary.finite();
  }
  pending_.push_back(std::move(p));
  return true;
}

std::optional<int64_t> TrackSummaries::first_non_finite(const std::map<int64_t, std::vector<TensorSummary>>& ready) {
  for (const auto& [step, summaries] : ready) {  // in step order
    for (const TensorSummary& s : summaries) {
      if (!s.finite()) return step;
    }
  }
  return std::nullopt;
}

std::map<int64_t, std::vector<TensorSummary>> TrackSummaries::take_ready(bool wait) {
  std::map<int64_t, std::vector<TensorSummary>> ready;
  std::vector<Pending> waiting;
  for (Pending& p : pending_) {
    if (p.ticket != 0) {  // gathered
      if (std::find(cancelled_.begin(), cancelled_.end(), p.ticket) != cancelled_.end()) continue;
      const bool unflushed =
          std::any_of(unflushed_.begin(), unflushed_.end(), [&](const Unflushed& u) { return u.ticket == p.ticket; });
      std::vector<double> values;
      std::string why;
      fused::SummaryBatch::State state = fused::SummaryBatch::State::kWaiting;
      for (int ms = 0; !unflushed; ++ms) {  // at the track's end: wait for the pass (bounded)
        state = batch_.take(p.ticket, &values, &why);
        if (!wait || state != fused::SummaryBatch::State::kWaiting || ms >= 5000) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (state == fused::SummaryBatch::State::kWaiting) {
        waiting.push_back(std::move(p));
        continue;
      }
      if (state != fused::SummaryBatch::State::kReady ||
          !summary_from_device_values(values.data(), values.size(), p.numel, p.layout, &p.summary, &why)) {
        gather_failed_ = true;
        failed_.emplace_back(p.summary.name, why.empty() ? std::string("no values") : why);
        continue;
      }
    } else if (p.event) {
      // At the track's end: wait for the copy (bounded; c10::Event has no blocking wait
      // in every libtorch this builds against).
      for (int ms = 0; wait && ms < 5000 && !p.event->query(); ++ms) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (!p.event->query()) {
        waiting.push_back(std::move(p));
        continue;
      }
      std::string why;
      if (!summary_from_device_values(p.host.data_ptr<double>(), static_cast<size_t>(p.host.numel()), p.numel, p.layout,
                                      &p.summary, &why)) {
        continue;  // (cannot happen: device_summary_values gives its layout)
      }
    }
    ready[p.step].push_back(std::move(p.summary));
  }
  pending_ = std::move(waiting);
  cancelled_.clear();  // (their entries are gone)
  return ready;
}

}  // namespace tensorscope

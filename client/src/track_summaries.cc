// track_summaries.cc — see track_summaries.h.
#include "track_summaries.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

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

bool TrackSummaries::add(int64_t step, const std::string& name, wire::TensorKind kind, const at::Tensor& tensor,
                         bool ratio, bool* non_finite, std::string* why) {
  *non_finite = false;
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
  Previous* previous = ratio ? &previous_[name] : nullptr;
  if (tensor.numel() == 0) {
    // Nothing to reduce: the summary's zeros (and no copy from a device).
    p.summary.cast_format = cast_format_info(cast_) != nullptr ? cast_ : CastFormat::kNone;
  } else if (tensor.is_cuda()) {
    at::Tensor before;
    if (previous != nullptr) {
      const at::Tensor& b = previous->device;
      if (b.defined() && b.sizes() == tensor.sizes() && b.scalar_type() == tensor.scalar_type() &&
          b.device() == tensor.device()) {
        before = b;
      }
    }
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
    if (p.event) {
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
  return ready;
}

}  // namespace tensorscope

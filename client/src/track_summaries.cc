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
namespace {

// A GPU summary's values: numel, nan, inf, zeros, l2, max_abs, mean, std, |now - before|,
// |before| (the last two -1 without an update ratio), as float64 on the tensor's device.
at::Tensor device_values(const at::Tensor& tensor, const at::Tensor& before) {
  at::Tensor x = tensor.detach().reshape({-1});
  if (x.scalar_type() == at::kBool) x = x.to(at::kByte);
  x = x.to(at::kDouble);
  const at::Tensor finite = at::isfinite(x);
  const at::Tensor nan = at::isnan(x).sum().to(at::kDouble);
  const at::Tensor count = finite.sum().to(at::kDouble);
  const at::Tensor kept = at::where(finite, x, at::zeros({}, x.options()));
  const at::Tensor squares = (kept * kept).sum();
  const at::Tensor n = count.clamp_min(1);
  const at::Tensor mean = kept.sum() / n;
  const at::Tensor std = (squares / n - mean * mean).clamp_min(0).sqrt();
  const at::Tensor max_abs = x.numel() > 0 ? kept.abs().max() : at::zeros({}, x.options());
  const double numel = static_cast<double>(x.numel());
  at::Tensor diff = at::full({}, -1.0, x.options()), base = at::full({}, -1.0, x.options());
  if (before.defined()) {
    diff = (tensor.detach().to(at::kDouble) - before.to(at::kDouble)).norm();
    base = before.to(at::kDouble).norm();
  }
  return at::stack({at::full({}, numel, x.options()), nan, at::full({}, numel, x.options()) - count - nan,
                    (x == 0).sum().to(at::kDouble), squares.sqrt(), max_abs, mean, std, diff, base});
}

void fill(TensorSummary* s, const double* v) {
  s->numel = static_cast<uint64_t>(v[0]);
  s->nan_count = static_cast<uint64_t>(v[1]);
  s->inf_count = static_cast<uint64_t>(v[2]);
  s->zero_count = static_cast<uint64_t>(v[3]);
  s->l2 = v[4];
  s->max_abs = v[5];
  s->mean = v[6];
  s->std = v[7];
  if (v[9] >= 0) {
    s->has_update_ratio = true;
    s->update_ratio = v[9] > 0 ? v[8] / v[9] : (v[8] == 0 ? 0.0 : std::numeric_limits<double>::infinity());
  }
}

}  // namespace

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
  at::Tensor before;
  if (ratio) {
    auto it = previous_.find(name);
    if (it != previous_.end() && it->second.sizes() == tensor.sizes() &&
        it->second.scalar_type() == tensor.scalar_type() && it->second.device() == tensor.device()) {
      before = it->second;
    }
    previous_[name] = tensor.detach().clone();
  }
  if (tensor.is_cuda()) {
    const at::Tensor values = device_values(tensor, before);
    p.host = at::empty({values.numel()}, at::TensorOptions().dtype(at::kDouble).pinned_memory(true));
    p.host.copy_(values, /*non_blocking=*/true);
    const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    p.event = std::make_shared<c10::Event>(c10::DeviceType::CUDA);
    p.event->record(impl->getStream(tensor.device()));
  } else {
    const StagedTensor staged(tensor.device().is_cpu() ? tensor : tensor.cpu());
    if (!summarize_cpu(staged.ref(), &p.summary, why)) return false;
    *non_finite = !p.summary.finite();
    if (before.defined()) {
      const StagedTensor old(before);
      double r = 0;
      if (update_ratio_cpu(staged.ref(), old.ref(), &r, why)) {
        p.summary.has_update_ratio = true;
        p.summary.update_ratio = r;
      }
    }
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
      fill(&p.summary, p.host.data_ptr<double>());
    }
    ready[p.step].push_back(std::move(p.summary));
  }
  pending_ = std::move(waiting);
  return ready;
}

}  // namespace tensorscope

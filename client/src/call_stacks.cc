#include "call_stacks.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

namespace tensorscope {
namespace {

// The rows of calls whose tensors share one shape, dtype and device, in one batch.
at::Tensor rows_of(const std::vector<at::Tensor>& tensors) {
  at::Tensor batch = at::stack(tensors);
  if (batch.is_complex()) batch = batch.abs();
  batch = batch.to(at::kFloat);
  const int64_t n = static_cast<int64_t>(tensors.size());
  at::Tensor rows = tensors[0].dim() >= 2 ? batch.reshape({n, tensors[0].size(0), -1}).mean(1) : batch.reshape({n, -1});
  if (rows.size(1) > kStackedRowLength)
    rows = at::adaptive_avg_pool1d(rows.unsqueeze(1), {kStackedRowLength}).squeeze(1);
  return rows;
}

bool same_kind(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && a.device() == b.device();
}

}  // namespace

at::Tensor call_row(const at::Tensor& tensor) { return rows_of({tensor.detach()})[0]; }

at::Tensor CallStacks::Stack::matrix() {
  std::stable_sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.call < b.call; });
  std::vector<at::Tensor> rows(calls.size());
  for (size_t i = 0; i < calls.size();) {
    if (calls[i].version < 0) {
      rows[i] = calls[i].tensor;
      ++i;
      continue;
    }
    size_t j = i;
    std::vector<at::Tensor> run;
    while (j < calls.size() && calls[j].version >= 0 && same_kind(calls[j].tensor, calls[i].tensor)) {
      run.push_back(calls[j].tensor);
      ++j;
    }
    const at::Tensor reduced = rows_of(run);
    for (size_t k = i; k < j; ++k) {
      rows[k] = reduced[static_cast<int64_t>(k - i)];
      if (calls[k].tensor._version() != calls[k].version) {
        ++changed;
        rows[k] = at::full_like(rows[k], std::numeric_limits<float>::quiet_NaN());
      }
    }
    i = j;
  }
  const int64_t width = rows[0].numel();
  for (at::Tensor& row : rows) {
    if (row.numel() == width) continue;
    row = row.numel() == 0 ? at::zeros({width}, rows[0].options())
                           : at::adaptive_avg_pool1d(row.reshape({1, 1, -1}), {width}).reshape({-1});
  }
  return at::stack(rows);
}

std::vector<CallStacks::Stack> CallStacks::collect(const std::vector<StackLedger::Closed>& closed) {
  std::vector<Stack> done;
  for (const StackLedger::Closed& c : closed) {
    auto it = open_.find(c.name);
    if (it == open_.end()) continue;
    it->second.dropped = c.dropped;
    done.push_back(std::move(it->second));
    open_.erase(it);
  }
  return done;
}

std::vector<CallStacks::Stack> CallStacks::take(const std::string& name, const at::Tensor& tensor,
                                                wire::TensorKind kind, int64_t step, int call) {
  const at::Tensor held = tensor.detach();
  const size_t bytes = static_cast<size_t>(held.numel()) * held.element_size();
  std::lock_guard<std::mutex> lock(mutex_);
  const StackLedger::Taken taken = ledger_.take(name, step, call, bytes);
  std::vector<Stack> done = collect(taken.closed);
  if (taken.row == StackLedger::Row::kDrop) return done;
  auto it = open_.find(name);
  if (it == open_.end()) {
    it = open_.emplace(name, Stack{}).first;
    it->second.name = name;
    it->second.kind = kind;
    it->second.step = step;
  }
  if (taken.row == StackLedger::Row::kHold) {
    it->second.calls.push_back({call, held, held._version()});
  } else {
    it->second.calls.push_back({call, call_row(held), -1});
  }
  return done;
}

std::vector<CallStacks::Stack> CallStacks::take_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  return collect(ledger_.take_all());
}

}  // namespace tensorscope

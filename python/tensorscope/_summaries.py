"""Per-step summaries of the tensors a track sees (its stats_every): numel, NaN/Inf
counts, exact zeros, and over the finite values the L2 norm, max |x|, mean and std; for
parameters, the update ratio |w_t - w_prev| / |w_prev| since the previous summarised step.

A summary is computed where the tensor lives. On the CPU the native core reads the tensor
once (client/core/tensor_summary.h), in the hook. On a GPU the reductions are queued on
the tensor's current stream into a small device tensor, copied to pinned host memory
without waiting, and an event recorded after it: the hook never synchronises with the
device. The summaries of a step go to the daemon as one record (shared/summary_format.h)
when the step ends; one whose GPU copy is not complete yet waits for a later step's flush
(keeping its own step).
"""

import torch

from . import _native

_FIELDS = 8  # numel, nan, inf, zeros, l2, max_abs, mean, std


def device_values(t):
    """The _FIELDS values of `t` as a float64 tensor on its device, from the statistics
    tensorscope.tensor_stats computes there (nothing waits for them)."""
    from ._capture import tensor_stats  # (_capture imports the tracks, which import this)

    s = tensor_stats(t)._pending  # mean, std, min, max, l2, nan, inf, zero_fraction (float64)
    n = torch.full((), float(t.numel()), dtype=torch.float64, device=s.device)  # a fill, no copy
    values = torch.stack([n, s[5], s[6], torch.round(s[7] * n), s[4], torch.maximum(s[2].abs(), s[3].abs()),
                          s[0], s[1]])
    return torch.nan_to_num(values, nan=0.0)  # nothing finite: 0, as the CPU kernel gives


def _to_host(values):
    """(pinned host copy of the device tensor `values`, CUDA event after the copy): queued
    on the current stream, never waited for here."""
    host = torch.empty(values.shape, dtype=values.dtype, pin_memory=True)
    host.copy_(values, non_blocking=True)
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(values.device))
    return host, event


def _on_the_way(value):
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], torch.cuda.Event)


def summarize(tensor):
    """The summary values of `tensor` (a tuple of _FIELDS), a (host, event) pair still on
    its way from the GPU, or a str saying why there is none."""
    if not isinstance(tensor, torch.Tensor) or tensor.is_complex() or tensor.layout != torch.strided:
        return "not a dense real tensor"
    if tensor.is_cuda:
        values = device_values(tensor)
        if values.is_cuda:
            return _to_host(values)
        v = values.tolist()  # an empty tensor: nothing was computed on the device
        return (int(v[0]), int(v[1]), int(v[2]), int(v[3])) + tuple(v[4:])
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    as_bool = t.dtype == torch.bool
    if as_bool:
        t = t.view(torch.uint8)
    try:
        capsule = t.__dlpack__()
    except Exception as e:  # an unsupported dtype (complex32, quantized, ...)
        return f"{type(e).__name__}: {e}"
    return _native.summarize(capsule, as_bool)


def update_ratio(now, before):
    """|now - before| / |before| of a parameter at two summarised steps, None, or (on a
    GPU) a (host, event) pair of the two norms on their way."""
    if now.is_cuda or before.is_cuda:
        diff = torch.linalg.vector_norm((now.detach() - before).to(torch.float64))
        return _to_host(torch.stack([diff, torch.linalg.vector_norm(before.to(torch.float64))]))
    try:
        ratio = _native.update_ratio(now.detach().__dlpack__(), before.__dlpack__())
    except Exception:
        return None
    return ratio if isinstance(ratio, float) else None


class StepSummaries:
    """A track's summaries not sent yet: [(step, name, kind, values, update ratio)], in the
    order the track saw the tensors. Values may still be (host, event) on their way from a
    GPU. Not thread-safe by itself: the track holds its lock."""

    MAX_PENDING = 65536  # beyond, new summaries are dropped (and counted by the caller)

    def __init__(self):
        self._pending = []

    def add(self, step, name, kind, values, ratio=None):
        if len(self._pending) >= self.MAX_PENDING:
            return False
        self._pending.append((step, name, kind, values, ratio))
        return True

    def take_ready(self, wait=False):
        """{step: [entry]} of the summaries whose values are known (see summaries.h for an
        entry), in order; those still on a GPU stay for a later call (with `wait`, at the
        track's end, they are waited for)."""
        ready, waiting = {}, []
        for item in self._pending:
            step, name, kind, values, ratio = item
            if wait:
                for v in (values, ratio):
                    if _on_the_way(v):
                        v[1].synchronize()
            if (_on_the_way(values) and not values[1].query()) or (_on_the_way(ratio) and not ratio[1].query()):
                waiting.append(item)
                continue
            if _on_the_way(values):
                v = values[0].tolist()
                values = (int(v[0]), int(v[1]), int(v[2]), int(v[3])) + tuple(v[4:])
            if _on_the_way(ratio):  # |now - before| and |before|
                diff, base = ratio[0].tolist()
                ratio = diff / base if base > 0 else (0.0 if diff == 0 else float("inf"))
            ready.setdefault(step, []).append((name, kind) + tuple(values) + (ratio,))
        self._pending = waiting
        return ready

    @staticmethod
    def first_non_finite_step(ready):
        """The earliest step of `ready` (take_ready's result) with a NaN or Inf, or None."""
        bad = [step for step, entries in ready.items() if any(e[3] or e[4] for e in entries)]
        return min(bad) if bad else None

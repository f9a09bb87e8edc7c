"""Per-step summaries of the tensors a track sees (its stats_every): numel, NaN/Inf
counts, exact zeros, and over the finite values the L2 norm, max |x|, mean and std; for
parameters, the update ratio |w_t - w_prev| / |w_prev| since the previous summarised step;
for a track with a cast_format, the low-precision numerics (the smallest non-zero |x|, the
values a cast to the format would make 0 or Inf: shared/cast_formats.h).

A summary is computed where the tensor lives. On the CPU the native core reads the tensor
once (client/core/tensor_summary.h), in the hook. On a GPU a few reductions (the fewest
that give the summary: a step bound by kernel launches pays per operation) are queued on
the tensor's current stream into one small float64 tensor, copied to pinned host memory
without waiting, and an event recorded after it: the hook never synchronises with the
device. The native core turns those values into the summary once they have arrived. The
summaries of a step go to the daemon as one record (shared/summary_format.h) when the step
ends; one whose GPU copy is not complete yet waits for a later step's flush (keeping its
own step).
"""

import math
import sys
from typing import NamedTuple

import torch

from . import _native


class Layout(NamedTuple):
    """Which values a GPU summary holds (client/core/tensor_summary.h's DeviceSummaryLayout):
    _native.DEVICE_SUMMARY_FIELDS, then DEVICE_RATIO_FIELDS with `ratio`, then
    DEVICE_NUMERICS_FIELDS with a `cast` format (its CAST_FORMATS value; 0: none)."""

    scaled: bool  # a float64 tensor's sums, divided by its max |x|
    ratio: bool
    cast: int


class OnTheWay(NamedTuple):
    """A summary reduced on a GPU: its values (in `layout`) in pinned host memory once
    `event` has completed."""

    host: torch.Tensor
    event: "torch.cuda.Event"
    numel: int
    layout: Layout


def cast_format_value(name):
    """The CAST_FORMATS value of a track's cast_format option (None: 0, no numerics);
    ValueError for any other value."""
    if name is None:
        return 0
    entry = _native.CAST_FORMATS.get(name) if isinstance(name, str) else None
    if entry is None:
        raise ValueError(f"cast_format must be None or one of {', '.join(map(repr, _native.CAST_FORMATS))} "
                         f"(tensorscope.CAST_FORMATS), not {name!r}")
    return entry[0]


# (underflow_at_most, overflow_from) of each cast format, by its value.
_LIMITS = {value: (under, over) for value, under, over in _native.CAST_FORMATS.values()}


def device_values(tensor, before=None, cast=0):
    """(float64 tensor of the values `layout` says, on the tensor's device; layout) of a
    non-empty tensor: with `before`, its update ratio against it; with a `cast` format,
    the numerics. The same operations as track_summaries.cc's device_summary_values.
    Nothing waits for them."""
    # Every reduction is over all elements (no reshape: a strided tensor would be copied)
    # and reads float64 (exact counts, sums without cancellation); the counts are L0
    # norms, one kernel each.
    x = tensor.detach()
    scaled = x.dtype == torch.float64
    wide = x.to(torch.float64)
    kept = torch.nan_to_num(wide, 0.0, 0.0, 0.0)
    max_abs = torch.linalg.vector_norm(kept, float("inf"))
    sums = kept / max_abs.clamp_min(sys.float_info.min) if scaled else kept  # (float64 squares could overflow)
    var, mean = torch.var_mean(sums, dim=None, correction=0)
    parts = {"nonzero": torch.linalg.vector_norm(wide, 0),
             "nonzero_or_nan": torch.linalg.vector_norm(torch.nan_to_num(wide, 1.0, 0.0, 0.0), 0),
             "nonzero_finite": torch.linalg.vector_norm(kept, 0), "mean": mean, "var": var, "max_abs": max_abs}
    fields = _native.DEVICE_SUMMARY_FIELDS
    if before is not None:
        old = before.to(torch.float64)  # as the CPU's ratio: integer and bool tensors too
        parts["diff"] = torch.linalg.vector_norm(wide - old)
        parts["base"] = torch.linalg.vector_norm(old)
        fields = fields + _native.DEVICE_RATIO_FIELDS
    if cast:
        under, over = _LIMITS[cast]
        magnitude = kept.abs()
        parts["min_abs_nonzero"] = torch.threshold(magnitude, 0.0, float("inf")).amin()  # zeros: +Inf
        parts["above_underflow"] = torch.linalg.vector_norm(torch.threshold(magnitude, under, 0.0), 0)
        parts["overflow"] = torch.linalg.vector_norm(torch.threshold(magnitude, math.nextafter(over, 0.0), 0.0), 0)
        fields = fields + _native.DEVICE_NUMERICS_FIELDS
    return torch.stack([parts[f] for f in fields]), Layout(scaled, before is not None, cast)


def summarize(tensor, before=None, cast=0):
    """The summary of `tensor` and, with `before` (the same parameter at its previous
    summarised step), its update ratio |tensor - before| / |before|; with a `cast` format
    (a CAST_FORMATS value), its numerics: (values, ratio, numerics) with values (numel,
    nan, inf, zeros, l2, max_abs, mean, std), ratio a float or None, numerics None or
    (cast, underflow, overflow, min_abs_nonzero); an OnTheWay from a GPU; or a str saying
    why there is none."""
    if not isinstance(tensor, torch.Tensor) or tensor.is_complex() or tensor.layout != torch.strided:
        return "not a dense real tensor"
    if tensor.numel() == 0:  # nothing to reduce (and no copy from a device)
        return (0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0), None, ((cast, 0, 0, 0.0) if cast else None)
    if tensor.is_cuda:
        values, layout = device_values(tensor, before, cast)
        host = torch.empty(values.shape, dtype=values.dtype, pin_memory=True)
        host.copy_(values, non_blocking=True)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(values.device))
        return OnTheWay(host, event, tensor.numel(), layout)
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
    values = _native.summarize(capsule, as_bool, cast)
    if isinstance(values, str):
        return values
    if before is not None and as_bool:
        before = before.view(torch.uint8)
    return from_native(values, update_ratio(t, before) if before is not None else None)


def from_native(values, ratio=None):
    """summarize()'s result from _native.summarize's (its 8 values, the numerics, the update
    ratio or None), `ratio` (when not None) taking the place of its ratio."""
    return tuple(values[:8]), values[9] if ratio is None else ratio, values[8]


def update_ratio(now, before):
    """|now - before| / |before| of a parameter at two summarised steps on the CPU, or None."""
    try:
        ratio = _native.update_ratio(now.detach().__dlpack__(), before.detach().cpu().__dlpack__())
    except Exception:
        return None
    return ratio if isinstance(ratio, float) else None


class Gathered:
    """A summary gathered into the track's SummaryBatch (client/core/summary_batch.h): its
    ticket, its numel and layout, and until the batch is flushed the tensor itself and its
    version (a tensor written in place since is left out)."""

    __slots__ = ("ticket", "numel", "layout", "tensor", "before", "version", "name")

    def __init__(self, ticket, numel, layout, tensor, before, name):
        self.ticket, self.numel, self.layout, self.name = ticket, numel, layout, name
        self.tensor, self.before, self.version = tensor, before, tensor._version


# A torch dtype -> the code of wire::DType a summary carries (_native.DTYPE_NAMES names
# them as torch does; 0, "invalid": not known).
DTYPE_CODES = {getattr(torch, name): code for code, name in enumerate(_native.DTYPE_NAMES)
               if code and isinstance(getattr(torch, name, None), torch.dtype)}


class StepSummaries:
    """A track's summaries not sent yet: [(step, name, kind, summary, shard, dtype)], in the order the
    track saw the tensors, a summary being summarize()'s (values, ratio, numerics), an
    OnTheWay or a Gathered. Not thread-safe by itself: the track holds its lock.

    Gathered summaries wait in `batch` for a flush (flush()): the track flushes when the
    tensors gathered so far are still as they were — a backward's end, a forward's start,
    a step change — and at most every SummaryBatch's kMaxGathered tensors."""

    MAX_PENDING = 65536  # beyond, new summaries are dropped (and counted by the caller)
    MAX_GATHERED = _native.FUSED_MAX_GATHERED  # a flush at this many (client/core/summary_batch.h)

    def __init__(self):
        self._pending = []
        self._unflushed = []  # the Gathered not flushed yet
        self.batch = _native.SummaryBatch()
        self.failed = []  # [(name, why)] of gathered summaries that did not come: the track refuses them

    def gathered(self):
        """How many gathered summaries wait for a flush."""
        return len(self._unflushed)

    def gather(self, gathered):
        """Keeps `gathered` for the next flush; True when that is due now (at MAX_GATHERED)."""
        self._unflushed.append(gathered)
        return len(self._unflushed) >= self.MAX_GATHERED

    def flush(self):
        """Queues the gathered summaries (one pass per device and stream). Returns the names
        of those whose tensor was written in place since it was gathered: left out."""
        if not self._unflushed:
            return []
        written = []
        for g in self._unflushed:
            if g.tensor._version != g.version:
                self.batch.cancel(g.ticket)
                g.ticket = None  # (dropped by take_ready: the track refuses it)
                written.append(g.name)
        self.batch.flush()  # (a pass that cannot be queued fails its tickets: take_ready says why)
        for g in self._unflushed:  # read by now (on the host), or by the pass queued on their stream
            g.tensor = g.before = None
        self._unflushed = []
        return written

    def add(self, step, name, kind, summary, shard=None, dtype=0):
        """`shard`: where a DTensor's local part sits (_sharding.placement), or None;
        `dtype`: the tensor's (DTYPE_CODES; 0: not known)."""
        if len(self._pending) >= self.MAX_PENDING:
            return False
        self._pending.append((step, name, kind, summary, shard, dtype))
        return True

    def take_failed(self):
        """[(name, why)] of the gathered summaries that did not come, since the last call."""
        failed, self.failed = self.failed, []
        return failed

    def take_ready(self, wait=False):
        """{step: [entry]} of the summaries whose values are known (see summaries.h for an
        entry), in order; those still on a GPU stay for a later call (with `wait`, at the
        track's end, they are waited for)."""
        if not self._pending:
            return {}
        ready, waiting = {}, []
        for item in self._pending:
            step, name, kind, summary, shard, dtype = item
            if isinstance(summary, Gathered):
                if summary.ticket is None:  # written in place before its flush
                    continue
                if summary.tensor is not None:  # not flushed yet
                    waiting.append(item)
                    continue
                values = self.batch.take(summary.ticket)
                if values is None and wait:
                    if torch.cuda.is_available():
                        torch.cuda.synchronize()
                    values = self.batch.take(summary.ticket)
                if values is None:
                    waiting.append(item)
                    continue
                if isinstance(values, str):
                    self.failed.append((name, values))
                    continue
                entry = _native.summary_from_device_values(values, summary.numel, *summary.layout)
                if isinstance(entry, str):
                    self.failed.append((name, entry))
                    continue
            elif isinstance(summary, OnTheWay):
                if wait:
                    summary.event.synchronize()
                if not summary.event.query():
                    waiting.append(item)
                    continue
                entry = _native.summary_from_device_values(summary.host.tolist(), summary.numel, *summary.layout)
                if isinstance(entry, str):  # (cannot happen: device_values gives its layout)
                    continue
            else:
                values, ratio, numerics = summary
                entry = tuple(values) + (ratio, numerics)
            ready.setdefault(step, []).append((name, kind) + tuple(entry) + (shard, dtype))
        self._pending = waiting
        return ready

    @staticmethod
    def first_non_finite_step(ready):
        """The earliest step of `ready` (take_ready's result) with a NaN or Inf, or None."""
        bad = [step for step, entries in ready.items() if any(e[3] or e[4] for e in entries)]
        return min(bad) if bad else None

"""ModuleTrack's summaries (_summaries.py): each tracked value of a summarized step is
summarized where it lives and joins its step's record; the first NaN/Inf a CPU summary
shows starts the anomaly capture; a step's records go out once their GPU copies are in.

A CUDA tensor's summary is gathered into the track's fused pass (client/core/
summary_batch.h) where the extension has the kernel: a pass per device and stream, queued
when the tensors gathered so far are still as they were — a backward's end, the root's
next forward, a step change, every 1,000 tensors — four operations on the stream whatever
their number. Inside a compiled graph, each call's tensors are flushed before the call
returns to the graph (whose next kernels may reuse their memory): a pass per tracked
call. A stream whose tensor was written in place before its flush (an in-place
activation after the module) is refused that once and summarized at once from then on.
TENSORSCOPE_SUMMARY_PASS=host gathers CPU tensors too (run on the host by the kernel's
arithmetic: the same logic without a GPU); =off gathers nothing. A DTensor is summarized
by its local part, with where that part sits (_sharding.py): no collective."""

from __future__ import annotations

import os

import torch

from . import _compiled
from . import _native
from ._sharding import local_part
from ._summaries import DTYPE_CODES, Gathered, Layout, OnTheWay, from_native, summarize
from . import _results as R
from ._tracks import _REFUSALS, ValueMeta, _refuse_quietly

_PASS = os.environ.get("TENSORSCOPE_SUMMARY_PASS", "")
_GATHER_CUDA = _native.FUSED_KERNEL and _PASS != "off"
GATHER_CPU = _PASS == "host"


class TrackSummaries:
    """The summaries part of ModuleTrack (a mixin: it uses the track's state)."""

    def _summarize_native(self, stream, tensor, values, kind, step):
        """The summary of a value the native hooks took (`values`: _native.summarize's)."""
        try:
            summary = values if isinstance(values, str) else from_native(values)
            self._summarize(self._client(), stream, tensor, kind, step, summary=summary)
        except Exception as e:  # never into the training loop
            _refuse_quietly(self._client(), stream, e)

    def _summarize(self, client, name, tensor, kind, step, ratio=False, summary=None):
        """Adds the summary of `tensor` (stream `name`) to the step's; for a parameter, with
        its update ratio since the previous summarised step. `summary`: summarize()'s
        result when the caller computed it."""
        if client is None or self._stopped or not client.enabled:
            return
        tensor, shard = local_part(tensor)  # (a DTensor: this rank's part, and where it sits)
        if summary is None:
            summary = self._gathered(name, tensor, ratio) if self._gathers(name, tensor) else None
            if summary is None:
                summary = self._summary_of(name, tensor, ratio)
        if isinstance(summary, str):
            client._refuse(name, _REFUSALS["no_summary"].format(summary))
            return
        if isinstance(summary, tuple) and not isinstance(summary, OnTheWay) and (summary[0][1] or summary[0][2]) \
                and client._capture_until is None:
            # The first NaN/Inf this client sees (on the CPU, known now): this tensor whole
            # at once, unless the step sends it anyway, and every track whole for the next
            # anomaly_capture_steps steps.
            at = client.step if step is None else step
            client._non_finite_seen(at)
            if not self._full_on and tensor is not None:
                self._send(name, tensor, kind, step, ValueMeta(self._paths.get(name, ""), "", "", ""))
        with self._lock:
            kept = self._summaries.add(client.step if step is None else step, name, kind, summary, shard,
                                       DTYPE_CODES.get(tensor.dtype, 0) if tensor is not None else 0)
            due = kept and isinstance(summary, Gathered) and self._summaries.gather(summary)
        if not kept:
            client._refuse(name, _REFUSALS["summary_not_kept"])
        if due:
            self._flush_gathered()
        elif isinstance(summary, Gathered) and _compiled.before_return(self._flush_gathered):
            pass  # a compiled graph's tensor: its pass is queued before the graph goes on
        elif isinstance(summary, Gathered) and not self._flush_queued and kind in (R.KIND_GRADIENT,
                                                                                   R.KIND_PARAMETER_GRADIENT):
            self._flush_after_backward()

    def _gathers(self, name, tensor):
        """Whether `tensor`'s summary is gathered into the fused pass."""
        return ((_GATHER_CUDA and tensor.is_cuda or self._gather_cpu and tensor.is_cpu) and name not in self._at_once
                and not self._gather_failed)

    def _gathered(self, name, tensor, ratio):
        """A Gathered for `tensor` (on the current stream), or None when the pass does not
        take it (a dtype it does not read, a strided or negative view, a subclass)."""
        before = self._previous_copy(name, tensor) if ratio else None
        stream = torch.cuda.current_stream(tensor.device).cuda_stream if tensor.is_cuda else 0
        ticket = self._outputs.gather(self._summaries.batch, tensor, before, stream)
        if ticket is None:
            return None
        if ratio and before is None:  # (the first time: from then on the pass keeps it in this copy)
            self._previous[name] = tensor.detach().clone()
        layout = Layout(tensor.dtype == torch.float64, before is not None, self._cast)
        return Gathered(ticket, tensor.numel(), layout, tensor, before, name)

    def _flush_gathered(self):
        """Queues the gathered summaries; a stream whose tensor was written in place since
        it was gathered is refused this once and summarized at once from now on."""
        with self._lock:
            written = self._summaries.flush()
        self._refuse_written(self._client(), written)

    def _refuse_written(self, client, written):
        for name in written:
            self._at_once.add(name)
            if client is not None:
                client._refuse(name, _REFUSALS["written_before_summary"])

    def _flush_after_backward(self):
        """Flushes when the backward now running ends (its gradients are then final)."""
        try:
            torch.autograd.Variable._execution_engine.queue_callback(self._backward_ended)
            self._flush_queued = True
        except RuntimeError:  # not in a backward: the next flush point takes them
            pass

    def _backward_ended(self):
        self._flush_queued = False
        try:
            self._flush_gathered()
        except Exception as e:  # never into the training loop
            _refuse_quietly(self._client(), self.name, e)

    def _refuse_failed(self, client):
        """Refuses the gathered summaries whose pass did not give them (a kernel this GPU
        cannot run, no memory for the pass): the track summarizes at once from then on."""
        for name, why in self._summaries.take_failed():
            self._gather_failed = True
            if client is not None:
                client._refuse(name or self.name, _REFUSALS["no_summary"].format(why))

    def _summary_of(self, name, tensor, ratio):
        """summarize()'s result for `tensor`: a plain CPU tensor (or parameter) read where it
        is by the native core, with no operation dispatched, a parameter's previous values
        kept there (PreviousValues); any other tensor as summarize() reads it, a parameter's
        previous value kept as a copy on its device."""
        kept = self._previous.get(name) if ratio else None
        if ratio and not isinstance(kept, _native.PreviousValues):
            kept = _native.PreviousValues()
        values = self._outputs.summarize(tensor, kept)
        if values is not None:
            if ratio:
                self._previous[name] = kept
            return values if isinstance(values, str) else from_native(values)
        before = self._previous_copy(name, tensor) if ratio else None
        if ratio:
            self._previous[name] = tensor.detach().clone()
        return summarize(tensor, before, self._cast)

    def _previous_copy(self, name, tensor):
        """The copy of parameter `name` kept at its last summarized step, when it is one of
        `tensor`'s shape, dtype and device (else None: no ratio this time)."""
        b = self._previous.get(name)
        if isinstance(b, torch.Tensor) and (b.shape, b.dtype, b.device) == (tensor.shape, tensor.dtype, tensor.device):
            return b
        return None

    def _send_summaries(self, ready):
        """Sends {step: [entry]} as one summary record per step."""
        client = self._client()
        if not ready or client is None or client._core is None:
            return
        for step, entries in ready.items():
            try:
                client._core.send_summaries(self.name, entries, step)
            except Exception as e:
                _refuse_quietly(client, self.name, e)

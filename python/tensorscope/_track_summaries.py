"""ModuleTrack's summaries (_summaries.py): each tracked value of a summarized step is
summarized where it lives and joins its step's record; the first NaN/Inf a CPU summary
shows starts the anomaly capture; a step's records go out once their GPU copies are in."""

from __future__ import annotations

import torch

from . import _native
from ._summaries import OnTheWay, from_native, summarize
from ._tracks import _REFUSALS, ValueMeta, _refuse_quietly


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
            kept = self._summaries.add(client.step if step is None else step, name, kind, summary)
        if not kept:
            client._refuse(name, _REFUSALS["summary_not_kept"])

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
        before = None
        if ratio:
            b = self._previous.get(name)
            if isinstance(b, torch.Tensor) and (b.shape, b.dtype, b.device) == (tensor.shape, tensor.dtype,
                                                                                  tensor.device):
                before = b
            self._previous[name] = tensor.detach().clone()
        return summarize(tensor, before, self._cast)

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

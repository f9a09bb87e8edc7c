"""ModuleTrack's step 0 before the first next_step()/set_step() (_step_zero.py): while it
is not known whether the script counts steps itself, each value goes to where each
reading (the track's own count of training forwards, "auto", or the client's steps,
"client") would send it, held in a window; once the reading is known, the window is sent
as that reading names and stamps it."""

from __future__ import annotations

from . import _compiled
from . import _results as R
from ._hook_objects import _Hook
from ._outputs import tensor_leaves
from ._step_zero import HOLD_BYTES, StepZeroWindow, call_name, trainable_version
from ._summaries import summarize
from ._tracks import MAX_CALLS_PER_STEP, ValueMeta, _refuse_quietly
from ._tree import record


def _chosen(reading, step, auto, client_target):
    """The target (stream, step, call) a value of step 0's window has under the known
    `reading`, its step filled in (the client reading's: `step`); None: not sent."""
    target = auto if reading == "auto" else client_target
    if target is None:
        return None
    name, at, call = target
    return name, step if at is None else at, call


class StepZeroRouting:
    """The step 0 part of ModuleTrack (a mixin: it uses the track's state)."""

    def _watch_step_zero(self):
        """A second or later training forward with no next_step() yet: from now on the
        hooks hold their values until the reading of step 0 is known."""
        version = trainable_version(self._trainable)
        with self._lock:
            if self._window is None:
                self._window = StepZeroWindow(self._first_version, self._calls, self._input_calls, self._stats_on)
                self._outputs.off()  # (the window holds what the hooks take)
            certain = self._window.forward(version)
        if certain:
            self._settle("auto")

    def _settle(self, reading, step=0):
        """The reading of step 0 is known: what the window held is sent as it names and
        stamps it (the client reading's values at `step`)."""
        with self._lock:
            if self._reading is not None:
                return
            window, self._window = self._window, None
            self._reading, self._step_zero = reading, step
            trees = []
            if window is not None and reading == "client":
                # Step 0 goes on (set_step to the same step): its calls counted so far.
                self._calls, self._input_calls = window.calls, window.input_calls
            elif window is not None and self._tree is not None:
                # The log of the auto reading's steps, the sent ones (the last, current one too).
                ends = [end for end, _ in window.marks]
                sent = [was_sent for _, was_sent in window.marks] + [window.open]
                for auto_step, ((calls, omitted), was_sent) in enumerate(zip(self._tree.take_parts(ends), sent)):
                    if was_sent and (calls or omitted):
                        trees.append(record(calls, omitted, auto_step))
            self._sync_output_hooks(self._client())
        if window is None:
            return
        for tensor, kind, meta, auto, client_target, labels in window.held:
            target = _chosen(reading, step, auto, client_target)
            if target is not None:
                name, at, call = target
                self._send(name, tensor, kind, at, meta._replace(call=call), labels)
        client = self._client()
        for summary, kind, auto, client_target in window.summaries:
            target = _chosen(reading, step, auto, client_target)
            if target is not None:
                name, at, _ = target
                self._summarize(client, name, None, kind, at, summary=summary)
        for tree in trees:
            self._send_tree(tree)

    def _route(self, auto, client_target, tensor, kind, meta, labels=None, summaries=(None, None)):
        """A value taken in step 0's window (see _step_zero.py): held while the reading is
        unknown, else sent as the known reading names it. A target: (stream, step, call).
        `summaries`: the (auto, client) targets of its summary, taken now."""
        self._route_summary(*summaries, tensor, kind)
        with self._lock:
            window = self._window
            if window is not None:
                kept = window.hold(tensor, kind, meta, auto, client_target, labels)
            reading, step = self._reading, self._step_zero
        if window is not None:
            if not kept:
                name = (client_target or auto)[0]
                self._client_refuse(name, f"taken before the first next_step(), and over the {HOLD_BYTES >> 20} MiB "
                                          "kept until the step is known")
            return
        target = _chosen(reading, step, auto, client_target)
        if target is not None:
            name, at, call = target
            self._send(name, tensor, kind, at, meta._replace(call=call), labels)

    def _route_summary(self, auto, client_target, tensor, kind):
        """The summary of a value taken in step 0's window: held with its targets while the
        reading is unknown (summaries are small: only their count is bounded), else added
        to the step the known reading names."""
        if auto is None and client_target is None:
            return
        summary = summarize(tensor, cast=self._cast)
        with self._lock:
            window = self._window
            if window is not None:
                kept = window.hold_summary(summary, kind, auto, client_target)
            reading, step = self._reading, self._step_zero
        if window is not None:
            if not kept:
                self._client_refuse((client_target or auto)[0], "summary taken before the first next_step(), and over "
                                                                "the summaries kept until the step is known")
            return
        target = _chosen(reading, step, auto, client_target)
        if target is not None:
            name, at, _ = target
            self._summarize(self._client(), name, tensor, kind, at, summary=summary)

    def _client_refuse(self, stream, why):
        client = self._client()
        if client is not None:
            client._refuse(stream, why)

    # -- step 0's window (see _step_zero.py) --

    def _count_in_window(self, counts, stream):
        """The call's number under the client reading (step 0 not yet over)."""
        with self._lock:
            window = self._window
            return window.count(getattr(window, counts), stream) if window is not None else 0

    def _targets(self, window, stream, suffix, call, call0, step, first_only=False, summaries=False):
        """Where a value of a call goes under each reading: (auto, client) targets; with
        `summaries`, where its summary goes (the client reading's step 0 is summarised
        whenever the track summarises)."""
        auto = client_target = None
        auto_open = window.summarizing if summaries else window.open
        if auto_open and call < MAX_CALLS_PER_STEP and (call == 0 or not first_only):
            auto = (call_name(stream, 0 if first_only else call) + suffix, step, call)
        client_open = self._stats_every > 0 if summaries else True
        if client_open and call0 < MAX_CALLS_PER_STEP and (call0 == 0 or not first_only):
            client_target = (call_name(stream, 0 if first_only else call0) + suffix, None, call0)
        return auto, client_target

    def _output_in_window(self, window, stream, path, type_name, module, output, call, call0, step):
        kinds = self._kinds
        if "output" in kinds or "gradient" in kinds:
            for suffix, tensor in tensor_leaves(output):
                labels = None if self._labels is None else self._labels_for(tensor)  # (as _on_output reads them)
                if "output" in kinds:
                    auto, client_target = self._targets(window, stream, suffix, call, call0, step)
                    summaries = self._targets(window, stream, suffix, call, call0, step, summaries=True)
                    meta = ValueMeta(path, type_name, "output", suffix)
                    self._route(auto, client_target, tensor, R.KIND_ACTIVATION, meta, labels, summaries)
                if "gradient" in kinds and _compiled.wants_gradient(tensor):
                    auto, client_target = self._targets(window, stream, suffix + ".grad", call, call0, step)
                    summaries = self._targets(window, stream, suffix + ".grad", call, call0, step, summaries=True)
                    meta = ValueMeta(path, type_name, "gradient", suffix)
                    _compiled.gradient_hook(tensor, _Hook(self._on_window_grad, auto, client_target, meta, labels,
                                                          summaries))
        for kind, values in (("parameter", module._parameters), ("buffer", module._buffers)):
            if kind in kinds:
                for vname, value in values.items():
                    if value is not None:
                        auto, client_target = self._targets(window, stream, f".{vname}", call, call0, step, True)
                        summaries = self._targets(window, stream, f".{vname}", call, call0, step, True, True)
                        meta = ValueMeta(path, type_name, kind, vname)
                        self._route(auto, client_target, value, R.KIND_PARAMETER, meta, None, summaries)

    def _on_window_grad(self, auto, client_target, meta, labels, summaries, grad):
        try:
            self._route(auto, client_target, grad, R.KIND_GRADIENT, meta, labels, summaries)
        except Exception as e:
            _refuse_quietly(self._client(), (client_target or auto or (self.name,))[0], e)

"""The tracks behind Client.track_model / track_layer / track_tensor, and what they share.

Module hooks are PyTorch's own. A track is installed only for the steps it sends: on a
gated step no module of the model carries a hook of ours, so it costs nothing. Outputs
are sent from forward hooks; inputs from forward pre-hooks (what the module receives,
before it runs); the gradient at a module's output comes from a hook the forward hook
puts on the output tensor (exactly d(loss)/d(output), in-place activations after the
module included). Nothing here raises into the training loop: a failure in a hook is
counted as a refused push.

A track sends through its owner (a TrackOwner, _owner.py): a Client (to the daemon) or a
Capture (kept in memory). Every value goes with what it is (module path, module type,
kind, leaf, call number), which the Client ignores and the Capture records.

The parts: _Track and TensorTrack here; ModuleTrack (_module_track.py) with its step 0
routing (_step_zero_routing.py) and summaries (_track_summaries.py); which modules and
kinds (_module_selection.py); the handle (_track_handle.py); the hook objects
(_hook_objects.py); the bookkeeping both clients share (the client core's track policy,
through _native: the call limit, the stacked calls' ledger, the step gates, the words of
refusals).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, NamedTuple, Optional

from . import _native
from . import _results as R
from ._hook_objects import _Hook
from ._owner import TrackOwner
from ._track_handle import TrackedStream

# The client core's track policy (client/core/track_policy.h), shared with the C++ tracks:
# separate calls of one module beyond this in one step are refused; the words of refusals.
MAX_CALLS_PER_STEP = _native.TRACK_POLICY["max_calls_per_step"]
_REFUSALS = _native.TRACK_REFUSALS
# What a track does with an evaluation forward (tensorscope/evaluation_calls.h): "skip"
# (default) or "track".
EVALUATION_MODES = tuple(_native.EVALUATION_CALLS)
# What follows a module's stream for one call's value, by kind name (_call_stacks.py).
_STACKED_WHAT = {"output": lambda leaf: leaf, "gradient": lambda leaf: leaf + ".grad", "input": lambda leaf: ".in" + leaf}


class ValueMeta(NamedTuple):
    """What a value a track sends is (a Capture's Stash keeps it; the stacked calls of a
    module are told apart by it): the module's path and type, what of the module it is
    ("output", "gradient", "input", "parameter", "buffer", "parameter_gradient"), its leaf
    (the "[0]" of a tuple output, a parameter's name) and the module's call in the step."""

    path: str
    module_type: str
    what: str
    leaf: str
    call: int = 0


class _Track:
    """Shared by the tracks: the owner (weakly), the gate, sending."""

    def __init__(self, client: TrackOwner, name: str, every_n: int, transform: Any, render_mode: int) -> None:
        self._client: Callable[[], Optional[TrackOwner]] = weakref.ref(client)
        self.name = name
        self._every_n = every_n
        self._transform = transform
        self._hint = render_mode
        self._stopped = False

    def _send(self, stream, tensor, kind, step=None, meta=None, labels=None):
        """meta: the ValueMeta of the value."""
        client = self._client()
        if client is None or self._stopped:
            return
        client._send_tracked(stream, tensor, kind, self._hint, self._transform, step, meta, labels)

    def step_changed(self):
        return False

    def steps_became_explicit(self, step):
        """The script called next_step()/set_step() for the first time; `step` is the
        client's step until then."""

    def stop(self):
        self._stopped = True


class TensorTrack(_Track):
    """track_tensor: the gradient of one tensor, every n-th time backward computes it."""

    def __init__(self, client: TrackOwner, name: str, tensor: Any, every_n: int, transform: Any,
                 render_mode: int) -> None:
        super().__init__(client, name, every_n, transform, render_mode)
        self._calls = 0
        self._hook = tensor.register_hook(_Hook(self._on_grad))

    def _on_grad(self, grad):
        try:
            call, self._calls = self._calls, self._calls + 1
            if call % self._every_n != 0:
                client = self._client()
                if client is not None:
                    client._count_gated()
                return
            self._send(self.name, grad, R.KIND_GRADIENT)
        except Exception as e:
            _refuse_quietly(self._client(), self.name, e)

    def streams(self):
        return [] if self._stopped else [TrackedStream(self.name, "gradient", "")]

    def stop(self):
        self._stopped = True
        self._hook.remove()


def _refuse_quietly(client: Optional[TrackOwner], stream: str, error: Exception) -> None:
    if client is not None:  # Client._refuse never raises
        client._refuse(stream, _REFUSALS["tracking_failed"].format(f"{type(error).__name__}: {error}"))

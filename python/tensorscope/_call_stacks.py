"""Modules called many times a step: a step's calls as one picture (as the C++ client's
tracks do: tensorscope/call_stacking.h, client/src/call_stacks.h).

An RNN cell stepped over a thousand timesteps, a block applied per token, an LBFGS
closure that runs the model twenty times a step: one stream per call ("<stream>#<k>")
would give a thousand videos. A track's `calls` option says what happens instead:

- "auto" (default): the first SEPARATE_CALLS calls of a step keep their own streams; once
  a module is called more often, each call of the step also becomes one row of a
  calls x features matrix, sent at the end of the step as "<stream>#calls" (a heatmap:
  the calls stacked along a time axis). Calls past SEPARATE_CALLS are only in it.
- "stacked": every call is only a row of "<stream>#calls".
- "separate": a stream per call, as many as MAX_CALLS_PER_STEP.

A row is the call's tensor averaged over its first (batch) dimension and flattened; a row
longer than MAX_ROW_LENGTH is averaged down to that many features. The calls' tensors are
held (a reference, no copy; up to HOLD_BYTES a track: the client core's StackLedger decides,
as for the C++ tracks) and reduced together where they live when the step ends: one batched reduction a step, a GPU's rows staying on the GPU. A
tensor written in place after its call (an in-place activation after the module) is seen
by its version counter: its row is NaN, and counted. Past HOLD_BYTES, a call's row is
reduced at once. In "auto", a module's first step with many calls stacks
its calls from the first past SEPARATE_CALLS; from its next step on, all its calls.
Gradients at the outputs ("<stream>#calls.grad") and inputs ("<stream>#calls.in[i]") are
stacked the same way.
Thread safety: take() and take_all() from any thread (autograd's included).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from . import _native

if TYPE_CHECKING:  # torch is imported when first needed: the names above are torch-free
    import torch

# The vocabulary and its numbers are the C++ client's (tensorscope/call_stacking.h).
_SEPARATE = dict(_native.CALL_STACKING)  # mode -> calls of a step with streams of their own (-1: all)
CALL_MODES = tuple(_SEPARATE)
SEPARATE_CALLS = _SEPARATE["auto"]
MAX_ROW_LENGTH = int(_native.STACKED_CALLS["row_length"])  # features per row
MAX_ROWS = int(_native.STACKED_CALLS["max_rows"])  # calls stacked per step; more are counted, not kept
HOLD_BYTES = int(_native.STACKED_CALLS["hold_bytes"])  # per track: calls' tensors held until the step's end
STACK_SUFFIX = str(_native.STACKED_CALLS["suffix"])
_ROW_HOLD = _native.TRACK_POLICY["row_hold"]
_ROW_DROP = _native.TRACK_POLICY["row_drop"]


def stacked_name(module_stream: str, what: str) -> str:
    """The stream of a module's stacked calls: `what` is what follows the module's
    stream for one call ("", "[0]", ".grad", "[1].grad", ".in[0]")."""
    return module_stream + STACK_SUFFIX + what


def call_row(tensor: torch.Tensor) -> torch.Tensor:
    """One call's row: float32, the mean over the first dimension, flattened, at most
    MAX_ROW_LENGTH long (averaged down)."""
    return _rows_of([tensor.detach()])[0]


def _rows_of(tensors: List[torch.Tensor]) -> torch.Tensor:
    """The rows of calls whose tensors have one shape, dtype and device, in one batch."""
    import torch
    import torch.nn.functional as F

    batch = torch.stack(tensors)
    if batch.is_complex():
        batch = batch.abs()
    batch = batch.to(torch.float32)
    n = len(tensors)
    rows = batch.reshape(n, tensors[0].shape[0], -1).mean(1) if tensors[0].dim() >= 2 else batch.reshape(n, -1)
    if rows.shape[1] > MAX_ROW_LENGTH:
        rows = F.adaptive_avg_pool1d(rows.unsqueeze(1), MAX_ROW_LENGTH).squeeze(1)
    return rows


class Stack:
    """The calls of one stacked stream in one step: each a row already reduced, or the
    call's tensor held (with its version) until the matrix is made."""

    def __init__(self, name: str, step: int, kind: int, meta: Any, first_call: int) -> None:
        self.name, self.step, self.kind, self.meta = name, step, kind, meta
        self.first_call = first_call
        self.calls: List[Any] = []  # torch.Tensor (a row) or (tensor, version) held
        self.order: List[int] = []  # each one's call number (gradients come last call first)
        self.dropped = 0  # calls past MAX_ROWS
        self.changed = 0  # held tensors written in place after their call (rows of NaN)

    def matrix(self) -> torch.Tensor:
        """calls x features, in call order; rows of another length than the first are
        averaged to it."""
        import torch

        rows: List[Any] = [self.calls[k] for k in sorted(range(len(self.calls)), key=self.order.__getitem__)]
        i = 0
        while i < len(rows):  # the held tensors, in runs of one shape, dtype and device
            if not isinstance(rows[i], tuple):
                i += 1
                continue
            first = rows[i][0]
            j = i
            while (j < len(rows) and isinstance(rows[j], tuple) and rows[j][0].shape == first.shape
                   and rows[j][0].dtype == first.dtype and rows[j][0].device == first.device):
                j += 1
            reduced = _rows_of([t for t, _ in rows[i:j]])
            for k in range(i, j):
                tensor, version = rows[k]
                rows[k] = reduced[k - i]
                if tensor._version != version:
                    self.changed += 1
                    rows[k] = torch.full_like(rows[k], float("nan"))
            i = j
        width = rows[0].numel()
        return torch.stack([r if r.numel() == width else _resample(r, width) for r in rows])


def _resample(row: torch.Tensor, width: int) -> torch.Tensor:
    import torch
    import torch.nn.functional as F

    if row.numel() == 0:
        return torch.zeros(width, dtype=row.dtype, device=row.device)
    return F.adaptive_avg_pool1d(row.reshape(1, 1, -1), width).reshape(-1)


class CallStacks:
    """A track's stacked calls (see the module's docstring). Which rows are held, reduced
    at once or dropped is the client core's policy (_native.StackLedger, shared with the
    C++ tracks); the tensors are kept here."""

    def __init__(self, mode: str) -> None:
        if mode not in CALL_MODES:
            raise ValueError(f"calls {mode!r} is not one of {', '.join(CALL_MODES)}")
        self._ledger = _native.StackLedger(mode)
        # Calls of a step with a stream of their own (None: all of them, no stacking).
        self.separate: Optional[int] = _SEPARATE[mode] if _SEPARATE[mode] >= 0 else None
        self.alone = self._ledger.alone  # alone(call): whether call `call` of a step gets a stream of its own
        self.may_take = self._ledger.may_take  # may_take(call): whether it can be a row of some stack
        self._lock = threading.Lock()
        self._open: Dict[str, Stack] = {}
        self._metas: Dict[str, Any] = {}  # stacked stream -> meta of its first stacked call

    def stacking(self) -> bool:
        return self.separate is not None

    def take(self, name: str, tensor: torch.Tensor, kind: int, step: int, call: int, meta: Any) -> List[Stack]:
        """Call `call`'s tensor for stacked stream `name`, if it is to be stacked; the
        stacks of `name` of an earlier step, now complete."""
        if self.separate is None or not self._ledger.wants(name, call):
            return []
        detached = tensor.detach()
        with self._lock:
            row, closed = self._ledger.take(name, step, call, detached.numel() * detached.element_size())
            self._metas.setdefault(name, meta)
            done = self._collect(closed)
            if row == _ROW_DROP:
                return done
            stack = self._open.get(name)
            if stack is None:
                stack = self._open[name] = Stack(name, step, kind, meta, call)
            stack.first_call = min(stack.first_call, call)
            stack.calls.append((detached, detached._version) if row == _ROW_HOLD else call_row(detached))
            stack.order.append(call)
        return done

    def take_all(self) -> List[Stack]:
        """Every stack still open (the step ended, or the track)."""
        if not self._open:  # (the usual step: no lock; a stack opened meanwhile waits for the next end)
            return []
        with self._lock:
            return self._collect(self._ledger.take_all())

    def _collect(self, closed: List[Tuple[str, int, int, int]]) -> List[Stack]:
        """The stacks the ledger closed, with their dropped calls (under the lock)."""
        done = []
        for name, _step, _rows, dropped in closed:
            stack = self._open.pop(name, None)
            if stack is not None:
                stack.dropped = dropped
                done.append(stack)
        return done

    def seen(self) -> List[Tuple[str, Any]]:
        """(stacked stream, meta of its first stacked call) of the modules seen with many
        calls so far."""
        with self._lock:
            return [(name, self._metas[name]) for name in self._ledger.seen() if name in self._metas]

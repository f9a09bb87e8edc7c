"""The module tree log of a track: which tracked module calls one step made, in call
order, with the shapes, dtypes and devices of their inputs and outputs.

A track collects the calls of each step it sends here and hands them to the native core,
which formats them exactly as the C++ client does (shared/module_tree_format.h) and sends
one record per step to a daemon that reads them (the daemon's `record.tree`).

With values on (a track's tree_log="values"), each call's output also gets a fingerprint
when the output hook sees it: its sum, its L2 norm and FINGERPRINT_SAMPLES evenly spaced
elements, in float64, computed on the tensor's device (on a GPU, copied to pinned host
memory without waiting). When the step's calls are sent, each fingerprint is compared with
the same call's (thread, call number, path) at the previous logged step: "=" when every
number is within the tolerance (|now - before| <= atol + rtol * |before|, NaN equal to
NaN), "~" when not, "?" when there is nothing to compare with (first logged step, another
shape) or the GPU has not finished computing it yet (never waited for). A change that
leaves the sum, the norm and the sampled elements within tolerance is not seen.
"""

from threading import get_ident

import torch

from ._outputs import tensor_leaves

MAX_CALLS = 4096  # per step; more are counted as omitted
MAX_INPUTS = 16  # per call
FINGERPRINT_SAMPLES = 64
_DTYPE_NAMES = {}  # torch dtype -> "float32", ... (str(dtype) is slow on the hot path)


def describe(tensor):
    """(dtype, shape, device) of `tensor`, as the native core formats it."""
    dtype = tensor.dtype
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "", 1)
    if tensor.is_cuda:
        return (name, tensor.shape, f"cuda{tensor.get_device()}")
    return (name, tensor.shape, "cpu" if tensor.is_cpu else tensor.device.type)


def _leaves(value):
    """The tensors of a module's arguments or output (fast for the usual cases)."""
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, tuple) and all(isinstance(v, torch.Tensor) for v in value):
        return value
    return [t for _, t in tensor_leaves(value)]


def fingerprint(tensor):
    """(host float64 tensor, CUDA event or None) of `tensor`'s fingerprint (see the top of
    this file); the event, when there is one, says when the host copy is complete."""
    x = tensor.detach().reshape(-1)
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)
    if not x.is_floating_point():
        x = x.to(torch.float64)
    n = x.numel()
    if n == 0:
        fp = torch.zeros(2, dtype=torch.float64, device=x.device)
    else:
        sample = x[:: max(1, n // FINGERPRINT_SAMPLES)][:FINGERPRINT_SAMPLES].to(torch.float64)
        total = x.sum(dtype=torch.float64)
        norm = torch.linalg.vector_norm(x, dtype=torch.float64)
        fp = torch.cat([torch.stack([total, norm]), sample])
    if fp.is_cuda:
        host = torch.empty(fp.shape, dtype=torch.float64, pin_memory=True)
        host.copy_(fp, non_blocking=True)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(fp.device))
        return host, event
    return (fp if fp.device.type == "cpu" else fp.cpu()), None


class TreeLog:
    """The calls of one step. Not thread-safe by itself: the track holds its lock.
    `values`: None, or (rtol, atol) to fingerprint outputs and compare them step to step."""

    def __init__(self, skip_ids, values=None):
        self._skip = skip_ids  # ids of the model's parameters and buffers: not inputs
        self._values = values
        self._previous = {}  # (thread, call, path) -> (output description, fingerprint) at the last take()
        self.clear()

    def clear(self):
        self._calls = []  # (thread, call, path, type, inputs, output)
        self._fingerprints = {}  # index in _calls -> fingerprint(), values on
        self._omitted = 0
        self._threads = {}  # thread ident -> number, by first call in the step
        self._open = {}  # thread ident -> [(module id, index)] calls begun, not ended
        self._numbers = {}  # (thread, path) -> calls so far
        self.step = None

    @property
    def empty(self):
        return not self._calls and not self._omitted

    @property
    def position(self):
        """How many calls are listed so far (a place to split the log at, see take_parts)."""
        return len(self._calls)

    def begin(self, step, path, type_name, module, inputs):
        """A call of `module` begins (its forward pre-hook); `step` counts at the step's
        first call only."""
        if self.step is None:
            self.step = step
        ident = get_ident()
        thread = self._threads.get(ident)
        if thread is None:
            thread = self._threads[ident] = len(self._threads)
        key = (thread, path)
        call = self._numbers.get(key, 0)
        self._numbers[key] = call + 1
        index = -1
        if len(self._calls) < MAX_CALLS:
            index = len(self._calls)
            self._calls.append((thread, call, path, type_name, self._describe_inputs(inputs), None))
        else:
            self._omitted += 1
        self._open.setdefault(ident, []).append((id(module), index))

    def end(self, module, output):
        """The call of `module` that began last on this thread ends (its forward hook)."""
        stack = self._open.get(get_ident())
        if not stack or stack[-1][0] != id(module):
            return  # its begin was not seen (hooks installed during the call)
        _, index = stack.pop()
        if index < 0:
            return
        for tensor in _leaves(output):
            if id(tensor) not in self._skip:
                c = self._calls[index]
                self._calls[index] = (c[0], c[1], c[2], c[3], c[4], describe(tensor))
                if self._values is not None:
                    self._fingerprints[index] = fingerprint(tensor)
                return

    def take(self):
        """(calls, omitted, step) of the step so far, and a fresh log. With values on,
        each call has a seventh item: "=", "~", "?" or "" (no output)."""
        calls = self._calls
        if self._values is not None:
            calls = self._compare(calls)
        out = (calls, self._omitted, self.step if self.step is not None else 0)
        self.clear()
        return out

    def take_parts(self, ends):
        """Like take(), the log split before each position in `ends` (ascending), each part
        numbered as a step of its own: [(calls, omitted)], one more than `ends`. (A track
        that took several steps for one learns it late: see _step_zero.py.)"""
        calls, fingerprints, omitted = self._calls, self._fingerprints, self._omitted
        bounds = [0, *ends, len(calls)]
        parts = []
        for lo, hi in zip(bounds, bounds[1:]):
            numbers = {}
            part, part_fingerprints = [], {}
            for index in range(lo, hi):
                c = calls[index]
                call = numbers.get((c[0], c[2]), 0)
                numbers[(c[0], c[2])] = call + 1
                if index in fingerprints:
                    part_fingerprints[len(part)] = fingerprints[index]
                part.append((c[0], call) + c[2:])
            if self._values is not None:
                part = self._compare(part, part_fingerprints)
            parts.append((part, 0))
        parts[-1] = (parts[-1][0], omitted)
        self.clear()
        return parts

    def _compare(self, calls, fingerprints=None):
        rtol, atol = self._values
        fingerprints = self._fingerprints if fingerprints is None else fingerprints
        now = {}
        out = []
        for index, c in enumerate(calls):
            fp = fingerprints.get(index)
            value = ""
            if fp is not None:
                host, event = fp
                value = "?"
                if event is None or event.query():
                    key = (c[0], c[1], c[2])
                    before = self._previous.get(key)
                    if before is not None and before[0] == c[5] and before[1].shape == host.shape:
                        same = torch.allclose(host, before[1], rtol=rtol, atol=atol, equal_nan=True)
                        value = "=" if same else "~"
                    now[key] = (c[5], host)
            out.append(c + (value,))
        self._previous = now
        return out

    def _describe_inputs(self, inputs):
        if type(inputs) is tuple and len(inputs) == 1 and isinstance(inputs[0], torch.Tensor):  # (most calls)
            return [] if id(inputs[0]) in self._skip else [describe(inputs[0])]
        out = []
        for tensor in _leaves(inputs):
            if len(out) >= MAX_INPUTS:
                break
            if id(tensor) not in self._skip:
                out.append(describe(tensor))
        return out


def owned_tensor_ids(module):
    """ids of the parameters and buffers of `module` and its submodules."""
    return {id(t) for t in module.parameters()} | {id(t) for t in module.buffers()}


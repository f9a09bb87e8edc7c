"""The module tree log of a track: which tracked module calls one step made, in call
order, with the shapes, dtypes and devices of their inputs and outputs.

A track collects the calls of each step it sends here and hands them to the native core,
which formats them exactly as the C++ client does (shared/module_tree_format.h) and sends
one record per step to a daemon that reads them (the daemon's `record.tree`).
"""

import threading

import torch

from ._outputs import tensor_leaves

MAX_CALLS = 4096  # per step; more are counted as omitted
MAX_INPUTS = 16  # per call
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


class TreeLog:
    """The calls of one step. Not thread-safe by itself: the track holds its lock."""

    def __init__(self, skip_ids):
        self._skip = skip_ids  # ids of the model's parameters and buffers: not inputs
        self.clear()

    def clear(self):
        self._calls = []  # (thread, call, path, type, inputs, output)
        self._omitted = 0
        self._threads = {}  # thread ident -> number, by first call in the step
        self._open = {}  # thread ident -> [(module id, index)] calls begun, not ended
        self._numbers = {}  # (thread, path) -> calls so far
        self.step = None

    @property
    def empty(self):
        return not self._calls and not self._omitted

    def begin(self, step, path, type_name, module, inputs):
        """A call of `module` begins (its forward pre-hook)."""
        if self.step is None:
            self.step = step
        ident = threading.get_ident()
        thread = self._threads.setdefault(ident, len(self._threads))
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
        stack = self._open.get(threading.get_ident())
        if not stack or stack[-1][0] != id(module):
            return  # its begin was not seen (hooks installed during the call)
        _, index = stack.pop()
        if index < 0:
            return
        for tensor in _leaves(output):
            if id(tensor) not in self._skip:
                c = self._calls[index]
                self._calls[index] = (c[0], c[1], c[2], c[3], c[4], describe(tensor))
                return

    def take(self):
        """(calls, omitted, step) of the step so far, and a fresh log."""
        out = (self._calls, self._omitted, self.step if self.step is not None else 0)
        self.clear()
        return out

    def _describe_inputs(self, inputs):
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


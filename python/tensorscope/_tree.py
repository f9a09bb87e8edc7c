"""The module tree log of a track: which tracked module calls one step made, in call
order, with the shapes, dtypes and devices of their inputs and outputs.

The calls are kept natively (_native.TreeLog, python/native/tree_log.h): the forward
pre-hook of each tracked module is a native callable, and the output hook hands the output
to it, so a logged call costs no Python frame of its own. Each sent step's calls go as one
record, formatted exactly as the C++ client formats them (shared/module_tree_format.h), to
a daemon that reads them (the daemon's `record.tree`).

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

import threading

import torch

from . import _native
from ._outputs import tensor_leaves

FINGERPRINT_SAMPLES = 64


def _leaves(value):
    """The tensors of a module's arguments or output other than a tensor or a tuple or list
    of tensors (those the native log reads itself)."""
    return [t for _, t in tensor_leaves(value)]


def make_tree_log(core, root, stamp, inert_hook, values=None, training=None):
    """The log of a track of `root`: a _native.TreeLog (tree_log.h: `stamp` gives the step
    at a step's first call, or None to log nothing until the next take; `training`, when
    not None, is (model, torch.is_grad_enabled): the calls of evaluation forwards are not
    listed), wrapped in a
    ValuesLog when `values` is (rtol, atol)."""
    log = _native.TreeLog(core, torch.Tensor, owned_tensor_ids(root), stamp, _leaves, inert_hook, training)
    return log if values is None else ValuesLog(log, values)


def record(calls, omitted, step):
    """(payload, step) of calls a track collected, as TreeLog.take() gives them."""
    return _native.format_module_tree(calls, omitted), step


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


class ValuesLog:
    """A TreeLog with tree_log="values": each call's output fingerprinted when it ends, and
    compared with the same call's at the previous logged step when the log is taken (each
    call then has a seventh item: "=", "~", "?" or "" for no output). Thread-safe: a
    fingerprint taken while the log is taken goes with the calls it belongs to."""

    def __init__(self, log, values):
        self._lock = threading.Lock()
        self._log = log
        self._values = values  # (rtol, atol)
        self._fingerprints = {}  # position in the log -> fingerprint()
        self._previous = {}  # (thread, call, path) -> (output description, fingerprint) at the last take

    def hook(self, path, type_name):
        return self._log.hook(path, type_name)

    def begin(self, path, type_name, module, inputs):
        self._log.begin(path, type_name, module, inputs)

    def end(self, module, output):
        with self._lock:
            ended = self._log.end(module, output)
            if ended is not None:
                index, tensor = ended
                self._fingerprints[index] = fingerprint(tensor)
        return ended

    @property
    def step(self):
        return self._log.step

    @property
    def empty(self):
        return self._log.empty

    @property
    def position(self):
        return self._log.position

    def take(self):
        """As TreeLog.take(), the calls compared."""
        step = self._log.step
        [(calls, omitted)] = self.take_parts([])
        return record(calls, omitted, step or 0) if calls or omitted else None

    def take_parts(self, ends):
        """As TreeLog.take_parts(), each part's calls compared with the part before."""
        with self._lock:
            fingerprints, self._fingerprints = self._fingerprints, {}
            taken = self._log.take_parts(ends)
        parts, start = [], 0
        for calls, omitted in taken:
            part_fingerprints = {i: fingerprints[start + i] for i in range(len(calls)) if start + i in fingerprints}
            parts.append((self._compare(calls, part_fingerprints), omitted))
            start += len(calls)
        return parts

    def _compare(self, calls, fingerprints):
        rtol, atol = self._values
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


def owned_tensor_ids(module):
    """ids of the parameters and buffers of `module` and its submodules."""
    return {id(t) for t in module.parameters()} | {id(t) for t in module.buffers()}

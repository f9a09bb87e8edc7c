"""The tensor leaves of a module's output, named like the C++ client's streams.

A single tensor is the stream itself; in tuples and lists (namedtuples included) each
tensor leaf gets its index (`[0]`, `[1][0]` for LSTM's `(out, (h, c))`), in mappings
(dicts, HuggingFace ModelOutput) and dataclasses its key (`[logits]`). `None` leaves and
values that are not tensors are skipped. A call's inputs are named the same way, by
argument: `[0]` for the first positional argument, `[mask]` for a keyword argument.
"""

import dataclasses
from collections.abc import Mapping

import torch

MAX_DEPTH = 8  # deeper nesting is not searched
MAX_LEAVES = 256  # leaves of one output beyond this are not sent


class Leaves:
    """The tensor leaves of a call already named, [(suffix, tensor)]: what a compiled graph
    hands a track's hook for a call's inputs or output (_compiled.py)."""

    __slots__ = ("pairs",)

    def __init__(self, pairs):
        self.pairs = list(pairs)


def tensor_leaves(output):
    """[(suffix, tensor)] for every tensor leaf of `output`, in order."""
    if isinstance(output, Leaves):
        return list(output.pairs)
    leaves = []
    _collect(output, "", 0, leaves)
    return leaves


def _collect(value, suffix, depth, leaves):
    if len(leaves) >= MAX_LEAVES:
        return
    if isinstance(value, torch.Tensor):
        leaves.append((suffix, value))
        return
    if value is None or depth >= MAX_DEPTH or isinstance(value, (str, bytes)):
        return
    if isinstance(value, (tuple, list)):  # before Mapping: an ABC check costs a microsecond
        for index, item in enumerate(value):
            _collect(item, f"{suffix}[{index}]", depth + 1, leaves)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _collect(item, f"{suffix}[{key}]", depth + 1, leaves)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _collect(getattr(value, field.name, None), f"{suffix}[{field.name}]", depth + 1, leaves)


def input_leaves(args, kwargs=None):
    """[(suffix, tensor)] for the tensors a module call receives: "[<i>]" for positional
    argument i, "[<name>]" for keyword argument `name`, and further "[j]"/"[key]" for the
    tensors inside a tuple, list, dict or dataclass argument."""
    if isinstance(args, Leaves):
        return list(args.pairs)
    leaves = []
    for index, value in enumerate(args):
        _collect(value, f"[{index}]", 1, leaves)
    if kwargs:
        for key, value in kwargs.items():
            _collect(value, f"[{key}]", 1, leaves)
    return leaves

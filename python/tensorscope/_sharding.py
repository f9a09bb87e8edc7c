"""DTensors (torch.distributed.tensor): FSDP2's sharded parameters and their gradients, a
tensor-parallel layer's weights. A track reads a DTensor's local part where it lives —
no collective is added to the training step — and says where that part sits in the whole
tensor (shared/shard_placement.h): its summary is the part's, and the readers
(read_summaries) merge the ranks' parts into the whole tensor's. A full tensor sent for a
DTensor is this rank's part. A tensor-parallel layer's output whose all-reduce is still
running (an AsyncCollectiveTensor) is read once it has come: the hook waits for the
model's own collective, a little earlier than the model would."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from . import _native

_PLAIN = (torch.Tensor, torch.nn.Parameter, type(None))  # (never a DTensor: no module to import)
_PLACEMENT = _native.MESH_PLACEMENTS  # {"shard": code, "replicate": code, "partial": code}
_types = []  # [DTensor, AsyncCollectiveTensor] (None where torch has no such class), found at first need


def _distributed_types():
    if not _types:
        dtensor = waiting = None
        if torch.distributed.is_available():
            # (Any error: an old PyTorch's modules may not even import on this Python.)
            try:
                from torch.distributed.tensor import DTensor as dtensor
            except Exception:
                try:
                    from torch.distributed._tensor import DTensor as dtensor
                except Exception:
                    dtensor = None
            try:  # what a tensor-parallel layer's output is while its all-reduce runs
                from torch.distributed._functional_collectives import AsyncCollectiveTensor as waiting
            except Exception:
                waiting = None
        _types.extend((dtensor, waiting))
    return _types


def is_dtensor(value: Any) -> bool:
    if type(value) in _PLAIN:
        return False
    kind = _distributed_types()[0]
    return kind is not None and isinstance(value, kind)


def placement(value: Any) -> Optional[Tuple[int, Tuple[Tuple[int, int, int, int], ...]]]:
    """Where a DTensor's local part sits: (the whole tensor's numel, ((placement, tensor
    dim, coordinate, size) per mesh dimension)); None for any other tensor, or a DTensor
    this rank holds no part of."""
    if not is_dtensor(value):
        return None
    mesh = value.device_mesh
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        return None
    dims = []
    for p, at, size in zip(value.placements, coordinate, mesh.shape):
        if p.is_shard():
            dims.append((_PLACEMENT["shard"], p.dim % max(value.dim(), 1), at, size))
        elif p.is_partial():
            dims.append((_PLACEMENT["partial"], 0, at, size))
        else:
            dims.append((_PLACEMENT["replicate"], 0, at, size))
    return value.numel(), tuple(dims)


def local_tensor(value: Any) -> Any:
    """A DTensor's local part (to_local(): no collective); the result of a collective the
    model already started (an AsyncCollectiveTensor: a tensor-parallel layer's output),
    once it has come; any other value as it is."""
    if type(value) in _PLAIN:
        return value
    dtensor, waiting = _distributed_types()
    if dtensor is not None and isinstance(value, dtensor):
        with torch.no_grad():
            value = value.to_local()
    if waiting is not None and isinstance(value, waiting):
        value = value.wait()
    return value


def local_part(value: Any) -> Tuple[Any, Optional[Tuple[int, Tuple[Tuple[int, int, int, int], ...]]]]:
    """(local_tensor(value), placement(value)): the tensor to read and where it sits."""
    if type(value) in _PLAIN:
        return value, None
    return local_tensor(value), placement(value)

"""DTensors (torch.distributed.tensor): FSDP2's sharded parameters and their gradients, a
tensor-parallel layer's weights. A track reads a DTensor's local part where it lives —
no collective is added to the training step — and says where that part sits in the whole
tensor (shared/shard_placement.h): its summary is the part's, and the readers
(read_summaries, the live view) merge the ranks' parts into the whole tensor's. A full
tensor sent for a DTensor is this rank's part."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from . import _native

_PLAIN = (torch.Tensor, torch.nn.Parameter)
_PLACEMENT = _native.MESH_PLACEMENTS  # {"shard": code, "replicate": code, "partial": code}
_dtensor = []  # [the DTensor class, or None where torch has none], found at first need


def _dtensor_type():
    if not _dtensor:
        found = None
        if torch.distributed.is_available():
            try:
                from torch.distributed.tensor import DTensor as found
            except ImportError:
                try:
                    from torch.distributed._tensor import DTensor as found
                except ImportError:
                    found = None
        _dtensor.append(found)
    return _dtensor[0]


def is_dtensor(value: Any) -> bool:
    if type(value) in _PLAIN:
        return False
    kind = _dtensor_type()
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
    """A DTensor's local part (to_local(): no collective); any other value as it is."""
    if not is_dtensor(value):
        return value
    with torch.no_grad():
        return value.to_local()


def local_part(value: Any) -> Tuple[Any, Optional[Tuple[int, Tuple[Tuple[int, int, int, int], ...]]]]:
    """(local_tensor(value), placement(value)): the tensor to read and where it sits."""
    if type(value) in _PLAIN:
        return value, None
    return local_tensor(value), placement(value)

"""Results, render modes and record kinds shared by the client and its tracks."""

from __future__ import annotations

import enum
from typing import Dict, Optional, Tuple

from . import _native


class PushResult(str, enum.Enum):
    """What happened to one push (compares equal to its string value)."""

    PUSHED = "pushed"  # copied into shared memory; the daemon will receive it
    GATED = "gated"  # skipped by every_n / max_hz, or tracking is disabled
    DROPPED_FULL = "dropped_full"  # the ring had no room (daemon slow); nothing waited
    NOT_CONNECTED = "not_connected"  # no daemon for this session right now
    REFUSED = "refused"  # bad input: unsupported type or dtype, too large, bad name, failed transform

    def __str__(self) -> str:
        return self.value


# Indexed by the native result codes (PushResult in push_result.h, in order); the enum's
# values are the C++ names (test_push.py checks them against _native.PUSH_RESULTS).
RESULTS = tuple(PushResult(name) for name in _native.PUSH_RESULTS)


def not_admitted(code: int) -> PushResult:
    """The result of a push that Core.admit / admit_tracked did not let through: -1 when
    the gate said no, -2 - result code when a send cannot go ahead now (both counted)."""
    return PushResult.GATED if code == -1 else RESULTS[-2 - code]

# Render mode names -> wire values, as the C++ side defines them (RenderMode, wire::RenderHint).
RENDER_MODES: Dict[str, int] = dict(_native.RENDER_MODES)

# The cast formats a track's summaries can measure against (cast_format=), in the C++
# side's order (shared/cast_formats.h).
CAST_FORMATS: Tuple[str, ...] = tuple(_native.CAST_FORMATS)

# wire::TensorKind values of tensors.
KIND_TENSOR = _native.TENSOR_KINDS["tensor"]
KIND_ACTIVATION = _native.TENSOR_KINDS["activation"]
KIND_GRADIENT = _native.TENSOR_KINDS["gradient"]
KIND_PARAMETER = _native.TENSOR_KINDS["parameter"]
KIND_PARAMETER_GRADIENT = _native.TENSOR_KINDS["parameter_gradient"]


def render_hint(mode: Optional[str], what: str = "render_mode") -> int:
    """The wire value of render mode `mode` (a name; None is the default). Raises on bad use."""
    if mode is None:
        return 0
    if not isinstance(mode, str):
        raise TypeError(f"{what} must be a str (one of {', '.join(RENDER_MODES)}), not {type(mode).__name__}")
    try:
        return RENDER_MODES[mode]
    except KeyError:
        raise ValueError(f"{what} {mode!r} is not one of {', '.join(RENDER_MODES)}") from None

"""Results, render modes and record kinds shared by the client and its tracks."""

from __future__ import annotations

import enum
from typing import Dict, Optional


class PushResult(str, enum.Enum):
    """What happened to one push (compares equal to its string value)."""

    PUSHED = "pushed"  # copied into shared memory; the daemon will receive it
    GATED = "gated"  # skipped by every_n / max_hz, or tracking is disabled
    DROPPED_FULL = "dropped_full"  # the ring had no room (daemon slow); nothing waited
    NOT_CONNECTED = "not_connected"  # no daemon for this session right now
    REFUSED = "refused"  # bad input: unsupported type or dtype, too large, bad name, failed transform

    def __str__(self) -> str:
        return self.value


# Indexed by the native result codes (PushResult in push_result.h, in order).
RESULTS = (
    PushResult.PUSHED,
    PushResult.GATED,
    PushResult.DROPPED_FULL,
    PushResult.NOT_CONNECTED,
    PushResult.REFUSED,
)

# wire::RenderHint values by name (RenderMode in render_mode.h).
RENDER_MODES: Dict[str, int] = {
    "default": 0,
    "auto": 1,
    "line": 2,
    "histogram": 3,
    "heatmap": 4,
    "force2d": 5,
    "pca": 6,
    "tsne": 7,
    "stats": 8,
}

# wire::TensorKind values.
KIND_TENSOR = 1
KIND_ACTIVATION = 2
KIND_GRADIENT = 3
KIND_PARAMETER = 4
KIND_PARAMETER_GRADIENT = 5


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

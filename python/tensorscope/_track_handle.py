"""What Client.track_model / track_layer / track_tensor return: TrackHandle, and the
streams it may send (TrackedStream)."""

from __future__ import annotations

from typing import Any, List, NamedTuple


class TrackedStream(NamedTuple):
    """One stream a handle may send."""

    name: str  # e.g. "net.features.0", "net.fc.weight.grad", "net.fc.in[0]"
    kind: str  # "activation", "gradient", "parameter", "parameter_gradient", "buffer", "input"
    module: str  # qualified module path ("" for the root or a tracked tensor)


class TrackHandle:
    """Stands for one track. remove() (or leaving a `with` block) removes every hook."""

    def __init__(self, track: Any = None, error: str = "") -> None:
        self._track = track
        self._error = error

    @property
    def ok(self) -> bool:
        """False when the track could not be set up; `error` says why."""
        return self._track is not None

    @property
    def error(self) -> str:
        """Why the track could not be set up ("" when it was)."""
        return self._error

    @property
    def streams(self) -> List[TrackedStream]:
        """The streams this handle may send (calls after the first of a step add "#<k>")."""
        return self._track.streams() if self._track is not None else []

    def remove(self) -> None:
        """Removes every hook this handle installed; the handle becomes inert."""
        track, self._track = self._track, None
        if track is not None:
            track.stop()

    def __enter__(self) -> TrackHandle:
        return self

    def __exit__(self, *exc: object) -> bool:
        self.remove()
        return False

    def __repr__(self) -> str:
        if self._track is None:
            return f"TrackHandle(ok=False, error={self._error!r})" if self._error else "TrackHandle(removed)"
        return f"TrackHandle({self._track.name!r}, {len(self.streams)} streams)"

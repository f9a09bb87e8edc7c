"""What a track may use of the object that owns it: TrackOwner, the one protocol both a
Client (tensors go to the daemon) and a Capture (tensors stay in the process) give. A
track holds its owner weakly and never reaches past this list (test_capture.py checks
that both owners have every member)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol


class TrackOwner(Protocol):
    enabled: bool  # tracking on
    step: int  # the step a value taken now belongs to
    _core: Any  # the native Core that sends to the daemon, or None (a Capture)
    _explicit_steps: bool  # next_step()/set_step() were called: the owner counts the steps
    _transform: Optional[Callable[[str, Any], Any]]  # the owner's transform, or None
    _capture_until: Optional[int]  # after the first NaN/Inf: the last step sent whole

    def _send_tracked(self, stream: str, tensor: Any, kind: int, hint: int, transform: Any, step: Optional[int],
                      meta: Any = None, labels: Any = None) -> Any:
        """Sends (or keeps) one value a track took, with its ValueMeta."""

    def _refuse(self, stream: str, why: str) -> Any:
        """Counts a value the track could not take, and why."""

    def _capturing(self, step: int) -> bool:
        """Whether `step` sends whole tensors because of an anomaly (anomaly_capture_steps)."""

    def _non_finite_seen(self, step: int) -> None:
        """A summary showed a NaN or Inf at `step`: the anomaly capture begins."""

    def _count_gated(self) -> None:
        """Counts a value the gates held back."""

    def _count_sync_copy(self, why: str) -> None:
        """Counts a device tensor copied to the host synchronously, and why."""

    def _cuda_staging_usable(self) -> bool:
        """Whether CUDA tensors can go through the staging pool (CUDA IPC)."""


# Its members (attributes, then methods), for the check that an owner has each.
MEMBERS = tuple(TrackOwner.__annotations__) + tuple(
    name for name, value in vars(TrackOwner).items() if callable(value) and not name.startswith("__"))

"""tensorscope: watch the tensors of a running PyTorch training job.

    import tensorscope
    scope = tensorscope.Client(session="exp1")
    scope.track_model("net", model, every_n=10)
    ...
    scope.push("loss", loss)
    scope.next_step()

The daemon (tensorscoped) renders every stream into videos; see docs/user/python.md.
Without a daemon: `capture(model)` keeps module tensors (or their statistics) in memory,
`read_stats(session_dir)` reads a daemon's statistics tables into the same DataFrame,
`read_separation(session_dir)` reads how well the classes of projections separate, frame by
frame; `read_summaries(session_dir)` / `read_anomalies(session_dir)` read the per-step summaries
of tracked tensors and what the daemon flagged in them (first NaN/Inf, explosions, dead
units),
`init_dumps(folder)` / `dump(tensor, name)` write .npy files as the daemon's .npy sink
does, and `compare(a, b)` runs the `tensorscope compare` engine on files or folders.

`import tensorscope` imports neither torch nor pandas: the names that touch tensors load
their module (and torch) when first used, pandas is imported when a DataFrame is asked
for, so reading a session's tables and `compare` on files work where torch is missing.
"""

from typing import TYPE_CHECKING, Any

# Imported now: what needs neither torch nor pandas (reading a session's tables, compare).
from ._anomalies import read_anomalies, read_summaries
from ._compare import CompareEntry, CompareResult, compare
from ._frames import read_stats
from ._results import CAST_FORMATS, RENDER_MODES, PushResult
from ._separation import read_separation
from ._stats import ClientStats
from ._native import EXPORT_METRICS
from ._native import VERSION as __version__

# Imported when first used: what touches tensors (and imports torch).
_LAZY = {
    "Capture": "_capture", "Stash": "_capture", "TensorStats": "_capture", "capture": "_capture",
    "tensor_stats": "_capture", "Client": "_client", "DumpResult": "_dumps", "Dumps": "_dumps", "dump": "_dumps",
    "init_dumps": "_dumps", "TrackedStream": "_track_handle", "TrackHandle": "_track_handle",
    "export_wandb": "_wandb_export",
}

if TYPE_CHECKING:
    from ._capture import Capture, Stash, TensorStats, capture, tensor_stats
    from ._client import Client
    from ._dumps import DumpResult, Dumps, dump, init_dumps
    from ._track_handle import TrackedStream, TrackHandle
    from ._wandb_export import export_wandb


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tensorscope' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list:  # type: ignore[type-arg]
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "CAST_FORMATS",
    "Capture",
    "Client",
    "ClientStats",
    "CompareEntry",
    "CompareResult",
    "EXPORT_METRICS",
    "DumpResult",
    "Dumps",
    "PushResult",
    "RENDER_MODES",
    "Stash",
    "TensorStats",
    "TrackHandle",
    "TrackedStream",
    "__version__",
    "capture",
    "compare",
    "dump",
    "export_wandb",
    "init_dumps",
    "read_anomalies",
    "read_separation",
    "read_stats",
    "read_summaries",
    "tensor_stats",
]

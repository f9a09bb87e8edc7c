"""tensorscope: watch the tensors of a running PyTorch training job.

    import tensorscope
    scope = tensorscope.Client(session="exp1")
    scope.track_model("net", model, every_n=10)
    ...
    scope.push("loss", loss)
    scope.next_step()

The daemon (tensorscoped) renders every stream into videos; see the project README.
Without a daemon: `capture(model)` keeps module tensors (or their statistics) in memory,
`read_stats(session_dir)` reads a daemon's statistics tables into the same DataFrame.
"""

from ._capture import Capture, Stash, TensorStats, capture, tensor_stats
from ._client import Client
from ._frames import read_stats
from ._results import RENDER_MODES, PushResult
from ._stats import ClientStats
from ._tracks import TrackedStream, TrackHandle
from ._native import VERSION as __version__

__all__ = [
    "Capture",
    "Client",
    "ClientStats",
    "PushResult",
    "RENDER_MODES",
    "Stash",
    "TensorStats",
    "TrackHandle",
    "TrackedStream",
    "__version__",
    "capture",
    "read_stats",
    "tensor_stats",
]

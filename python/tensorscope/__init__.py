"""tensorscope: watch the tensors of a running PyTorch training job.

    import tensorscope
    scope = tensorscope.Client(session="exp1")
    scope.track_model("net", model, every_n=10)
    ...
    scope.push("loss", loss)
    scope.next_step()

The daemon (tensorscoped) renders every stream into videos; see the project README.
Without a daemon: `capture(model)` keeps module tensors (or their statistics) in memory,
`read_stats(session_dir)` reads a daemon's statistics tables into the same DataFrame,
`read_summaries(session_dir)` / `read_anomalies(session_dir)` read the per-step summaries
of tracked tensors and what the daemon flagged in them (first NaN/Inf, explosions, dead
units),
`init_dumps(folder)` / `dump(tensor, name)` write .npy files as the daemon's .npy sink
does, and `compare(a, b)` runs the `tensorscope compare` engine on files or folders.
"""

from ._anomalies import read_anomalies, read_summaries
from ._capture import Capture, Stash, TensorStats, capture, tensor_stats
from ._client import Client
from ._compare import CompareEntry, CompareResult, compare
from ._dumps import DumpResult, Dumps, dump, init_dumps
from ._frames import read_stats
from ._results import RENDER_MODES, PushResult
from ._stats import ClientStats
from ._tracks import TrackedStream, TrackHandle
from ._native import VERSION as __version__

__all__ = [
    "Capture",
    "Client",
    "ClientStats",
    "CompareEntry",
    "CompareResult",
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
    "init_dumps",
    "read_anomalies",
    "read_stats",
    "read_summaries",
    "tensor_stats",
]

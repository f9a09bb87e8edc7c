"""tensorscope: watch the tensors of a running PyTorch training job.

    import tensorscope
    scope = tensorscope.Client(session="exp1")
    scope.track_model("net", model, every_n=10)
    ...
    scope.push("loss", loss)
    scope.next_step()

The daemon (tensorscoped) renders every stream into videos; see the project README.
"""

from ._client import Client
from ._results import RENDER_MODES, PushResult
from ._stats import ClientStats
from ._tracks import TrackedStream, TrackHandle
from ._native import VERSION as __version__

__all__ = ["Client", "ClientStats", "PushResult", "RENDER_MODES", "TrackHandle", "TrackedStream", "__version__"]

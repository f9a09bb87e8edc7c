"""A training script that uses every public name of tensorscope, checked by
`mypy --strict` (test_typing.py): the package's annotations must let a strictly typed
user program through. It is also run (without a daemon), so it must work."""

import os
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

import tensorscope
from tensorscope import (
    CAST_FORMATS,
    RENDER_MODES,
    Capture,
    Client,
    ClientStats,
    CompareEntry,
    CompareResult,
    DumpResult,
    Dumps,
    PushResult,
    Stash,
    TensorStats,
    TrackedStream,
    TrackHandle,
    capture,
    compare,
    dump,
    init_dumps,
    read_anomalies,
    read_separation,
    read_stats,
    read_summaries,
    tensor_stats,
)


def train(scope: Client, model: nn.Module, steps: int) -> List[PushResult]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    results: List[PushResult] = []
    for _ in range(steps):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        results.append(scope.push("loss", loss))
        step: int = scope.next_step()
        assert step == scope.step
    return results


def main() -> int:
    version: str = tensorscope.__version__
    modes: Dict[str, int] = RENDER_MODES
    formats: Tuple[str, ...] = CAST_FORMATS
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    runtime = tempfile.mkdtemp(prefix="tstyping-")
    with Client(session="typing", runtime_dir=runtime, connect_timeout_ms=0) as scope:
        batch = torch.tensor([0, 1, 1, 0])
        outputs: TrackHandle = scope.track_model(
            "net", model, every_n=2, kinds=("output", "gradient"), stats_every=1, labels=lambda: batch
        )
        labelled: PushResult = scope.push("emb", torch.randn(4, 8), labels=["cat", "dog", "dog", "cat"])
        grads: TrackHandle = scope.track_layer("net", model, include=r"^0$", cast_format=CAST_FORMATS[0])
        weight = torch.zeros(3, requires_grad=True)
        tracked: TrackHandle = scope.track_tensor("w", weight, render_mode="line")
        results = train(scope, model, 3)
        assert all(r in (PushResult.NOT_CONNECTED, PushResult.GATED) for r in results), results
        streams: List[TrackedStream] = outputs.streams
        names = [s.name for s in streams] + [s.kind for s in scope.tracked()]
        ok: bool = outputs.ok and grads.error == "" and tracked.ok
        scope.set_label("typed")
        scope.set_render_mode("loss", "line")
        scope.enabled = True
        scope.set_step(10)
        stats: ClientStats = scope.stats()
        anomalies: List[Dict[str, Any]] = scope.anomalies()
        connected: bool = scope.connected
        rank: int = scope.rank
        options: Dict[str, Any] = scope.options
        outputs.remove()
    with capture(model, every_n=1) as cap:
        model(torch.randn(2, 8)).sum().backward()
        cap.next_step()
    c: Capture = cap
    first: Stash = c[0]
    ts: TensorStats = tensor_stats(torch.arange(4.0))
    mean: float = ts.mean + ts.std + ts.l2_norm + ts.zero_fraction
    count: int = ts.nan_count + ts.inf_count + len(c)
    folder = tempfile.mkdtemp(prefix="tstyping-dumps-")
    dumps: Dumps = init_dumps(folder, rank=0)
    written: DumpResult = dump(torch.ones(3), "x", step=0)
    also: DumpResult = dumps.dump(np.zeros(2, dtype=np.float32), "y", step=1)
    path: Optional[str] = written.path
    result: CompareResult = compare(torch.ones(3), torch.ones(3))
    entries: List[CompareEntry] = result.entries
    try:
        read_stats(folder)
    except (FileNotFoundError, ValueError):
        pass
    try:
        read_separation(folder)
    except (FileNotFoundError, ValueError):
        pass
    try:
        read_summaries(folder)
    except (FileNotFoundError, ValueError):
        pass
    listed: List[Dict[str, Any]] = read_anomalies(folder)
    print(version, len(modes), len(formats), names[:1], ok, stats.pushed, len(anomalies), connected, rank, len(options),
          first.stream, mean >= 0, count, bool(written), bool(also), path is not None, bool(result), len(entries),
          listed, file=sys.stderr)
    return 0 if bool(written) and bool(result) and os.path.isdir(folder) else 1


if __name__ == "__main__":
    sys.exit(main())

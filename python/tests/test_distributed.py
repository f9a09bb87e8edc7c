"""Four ranks of DistributedDataParallel (CPU, Gloo) each tracking their model: one
daemon receives all four, with files per rank and nothing dropped."""

import os

from conftest import run_ranks

WORLD = 4
STEPS = 3
STREAMS = {"net.0", "net.3", "net.0.grad", "net.3.grad", "loss"}


def test_four_ddp_ranks_one_daemon(daemon):
    worker = os.path.join(os.path.dirname(__file__), "ddp_worker.py")
    results = run_ranks(worker, [daemon.session, daemon.runtime_dir, str(STEPS)], WORLD)
    assert sorted(r["rank"] for r in results) == list(range(WORLD))
    for r in results:
        # and per step a module tree record and both tracks' summary records
        assert r["pushed"] == STEPS * (len(STREAMS) + 1 + 2), r
        assert r["dropped_full"] == 0 and r["refused"] == 0 and r["not_connected"] == 0, r
    daemon.stop()
    frames = daemon.frames()
    assert set(frames) == {(s, rank) for s in STREAMS for rank in range(WORLD)}
    assert all(count == STEPS for count in frames.values()), frames
    for rank in range(WORLD):
        assert daemon.npy("net.3", STEPS - 1, rank).shape == (4, 3)

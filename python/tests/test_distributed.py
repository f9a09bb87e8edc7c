"""Four ranks of DistributedDataParallel (CPU, Gloo) each tracking their model: one
daemon receives all four, with files per rank and nothing dropped."""

import json
import os
import socket
import subprocess
import sys

WORLD = 4
STEPS = 3
STREAMS = {"net.0", "net.3", "net.0.grad", "net.3.grad", "loss"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_four_ddp_ranks_one_daemon(daemon):
    worker = os.path.join(os.path.dirname(__file__), "ddp_worker.py")
    port = str(free_port())
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD),
                   LOCAL_WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, worker, daemon.session, daemon.runtime_dir, str(STEPS)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-4000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
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

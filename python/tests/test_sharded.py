"""Sharded models (FSDP2's fully_shard, 2 ranks on the CPU with Gloo): a DTensor's local
part is summarized where it lives, with where it sits; the readers merge the ranks' parts
into the whole tensor's row, whose statistics are those of the same model trained
unsharded on the ranks' batches together; tracking adds no collective to the step."""

import json
import os
import socket
import subprocess
import sys

import pandas as pd
import pytest
import torch

import tensorscope

fsdp = pytest.importorskip("torch.distributed.fsdp")
pytestmark = pytest.mark.skipif(not hasattr(fsdp, "fully_shard") or not torch.distributed.is_available(),
                                reason="FSDP2 (fully_shard) needs PyTorch >= 2.6")

WORLD = 2
STEPS = 5  # the first untracked
WEIGHTS = ("net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(daemon):
    worker = os.path.join(os.path.dirname(__file__), "fsdp_worker.py")
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
    return results


def reference():
    """{(step, stream): (the tensor's values)} of the model trained unsharded on both ranks'
    batches: parameters as the forward saw them, their gradients as the optimizer did."""
    sys.path.insert(0, os.path.dirname(__file__))
    from fsdp_worker import batch, model

    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    values = {}
    for step in range(STEPS):
        for name, p in net.named_parameters():
            values[(step, "net." + name)] = p.detach().clone()
        x = torch.cat([batch(step, rank) for rank in range(WORLD)])
        net(x).pow(2).mean().backward()  # (the mean over both batches: FSDP2's mean of the ranks' gradients)
        for name, p in net.named_parameters():
            values[(step, f"net.{name}.grad")] = p.grad.detach().clone()
        opt.step()
        opt.zero_grad()
    return values


def test_a_sharded_models_whole_tensors_are_the_unsharded_models(daemon):
    results = run_ranks(daemon)
    for r in results:
        assert r["refused"] == 0 and r["dropped_full"] == 0, r
        # Tracking adds no collective: a tracked step dispatches the untracked step's.
        assert r["collectives"][0] > 0, r["collectives"]  # (FSDP2's gathers and reductions are seen)
        assert r["collectives"][1:] == [r["collectives"][0]] * (STEPS - 1), r["collectives"]
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    parts = table[table.shard != ""]
    whole = table[table["rank"] == -1]
    streams = list(WEIGHTS) + [w + ".grad" for w in WEIGHTS]
    assert set(parts.stream) == set(streams)
    # Each rank's part says where it sits: net.2.weight's 5 rows are cut 3 + 2.
    w = parts[(parts.stream == "net.2.weight") & (parts.step == 1)].sort_values("rank")
    assert list(w.shard) == ["S0@0/2", "S0@1/2"] and list(w.numel) == [48, 32] and list(w.whole_numel) == [80, 80]
    # A module's outputs are each rank's own batch: not sharded, no whole row.
    assert set(table[table["rank"] >= 0].stream) - set(streams) == {"net.0", "net.2", "net.0.grad", "net.2.grad"}
    assert not set(whole.stream) - set(streams)
    expected = reference()
    for step in range(1, STEPS):
        rows = whole[whole.step == step].set_index("stream")
        assert sorted(rows.index) == sorted(streams), step
        for stream in streams:
            x = expected[(step, stream)].double()
            row = rows.loc[stream]
            assert row.numel == x.numel() and pd.isna(row.whole_numel)
            assert row.l2 == pytest.approx(x.norm().item(), rel=1e-5), (step, stream)
            assert row.max_abs == pytest.approx(x.abs().max().item(), rel=1e-5), (step, stream)
            assert row["mean"] == pytest.approx(x.mean().item(), rel=1e-4, abs=1e-6 * row.max_abs), (step, stream)
            assert row["std"] == pytest.approx(x.std(unbiased=False).item(), rel=1e-4), (step, stream)
            assert row.zero_fraction == pytest.approx((x == 0).double().mean().item()), (step, stream)
            if stream in WEIGHTS and step > 1:  # (the ratio since the previous summarized step)
                before = expected[(step - 1, stream)].double()
                ratio = ((x - before).norm() / before.norm()).item()
                assert row.update_ratio == pytest.approx(ratio, rel=1e-3), (step, stream)
    # "local" leaves the whole rows out, "whole" the parts.
    assert (tensorscope.read_summaries(daemon.session_dir, shards="local")["rank"] >= 0).all()
    only_whole = tensorscope.read_summaries(daemon.session_dir, shards="whole")
    assert (only_whole.shard == "").all() and len(only_whole[only_whole["rank"] == -1]) == len(whole)
    with pytest.raises(ValueError):
        tensorscope.read_summaries(daemon.session_dir, shards="merged")


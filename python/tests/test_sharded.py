"""Sharded models (FSDP2's fully_shard, and a tensor-parallel plan; 2 ranks on the CPU with
Gloo): a DTensor's local part is summarized where it lives, with where it sits; the
readers merge the ranks' parts into the whole tensor's row, whose statistics are those of
the same model trained unsharded (on the ranks' batches together for FSDP2, on their one
batch for tensor parallelism); tracking adds no collective to the step. Two nodes, a
daemon each, are read as one run, by the readers and by the live view."""

import os
import subprocess
import sys

import pandas as pd
import pytest
import torch

import tensorscope
from conftest import free_port, run_ranks

pytestmark = pytest.mark.skipif(
    tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 6) or not torch.distributed.is_available(),
    reason="FSDP2 (fully_shard) and DTensor need PyTorch >= 2.6")

WORLD = 2
STEPS = 5  # the first untracked
WEIGHTS = ("net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias")


def sharded_ranks(daemon, how):
    worker = os.path.join(os.path.dirname(__file__), "sharded_worker.py")
    return run_ranks(worker, [how, daemon.session, daemon.runtime_dir, str(STEPS)], WORLD)


def reference(how, world=WORLD):
    """{(step, stream): (the tensor's values)} of the model trained unsharded on what the
    ranks trained on: parameters as the forward saw them, their gradients as the optimizer
    did."""
    sys.path.insert(0, os.path.dirname(__file__))
    from sharded_worker import batch, micro_batches, model

    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    values = {}
    for step in range(STEPS):
        for name, p in net.named_parameters():
            values[(step, "net." + name)] = p.detach().clone()
        for micro in range(micro_batches(how)):
            # (FSDP2: the mean over the ranks' batches, FSDP2's mean of the ranks' gradients)
            x = torch.cat([batch(step, rank, micro) for rank in range(world)]) if how != "tp" else batch(step, 0)
            net(x).pow(2).mean().backward()
        for name, p in net.named_parameters():
            values[(step, f"net.{name}.grad")] = p.grad.detach().clone()
        opt.step()
        opt.zero_grad()
    return values


# Where each rank's part of net.2.weight (5 x 16) and net.2.bias sits, and how large it is.
FSDP_PARTS = {"net.2.weight": (["S0@0/2", "S0@1/2"], [48, 32]), "net.2.bias": (["S0@0/2", "S0@1/2"], [3, 2])}
PARTS = {"fsdp": FSDP_PARTS, "fsdp-accumulate": FSDP_PARTS,
         "tp": {"net.2.weight": (["S1@0/2", "S1@1/2"], [40, 40]), "net.2.bias": (["R@0/2", "R@1/2"], [5, 5])}}


def whole_overview(parent, metric):
    """The "whole" heatmaps of `tensorscope view --dir parent`'s overview of `metric`, once
    the view has read every table."""
    import json
    import urllib.request

    from conftest import CLI, wait_until

    viewer = subprocess.Popen([CLI, "view", "--dir", parent], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        address = viewer.stdout.readline().strip()
        assert address.startswith("http://"), viewer.stderr.read()
        base, token = address.split("/#t=")
        answer = {}

        def read():
            url = f"{base}/api/overview?t={token}&metric={metric}&columns=100"
            with urllib.request.urlopen(url, timeout=30) as r:
                answer.update(json.load(r))
            return all(source["complete"] for source in answer["sources"])

        assert wait_until(read, 60, interval=0.3)
        return answer["whole"]
    finally:
        viewer.terminate()
        viewer.communicate(timeout=60)


@pytest.mark.parametrize("how", ["fsdp", "fsdp-accumulate", "tp"])
def test_a_sharded_models_whole_tensors_are_the_unsharded_models(daemon, how):
    results = sharded_ranks(daemon, how)
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
    # Each rank's part says where it sits (FSDP2 cuts net.2.weight's 5 rows 3 + 2).
    for stream, (where, numels) in PARTS[how].items():
        w = parts[(parts.stream == stream) & (parts.step == 1)].sort_values("rank")
        assert list(w.shard) == where and list(w.numel) == numels, (stream, w)
        assert list(w.whole_numel) == [80 if stream == "net.2.weight" else 5] * WORLD
    # A module's outputs are each rank's (FSDP2: of its own batch; a row-wise layer's after
    # its all-reduce): not sharded, no whole row.
    outputs = set(table[table["rank"] >= 0].stream) - set(streams)
    assert {"net.0", "net.2", "net.0.grad", "net.2.grad"} <= outputs, outputs
    # One row per rank, tensor and step: micro-batches or not, a step is an optimizer step.
    assert (parts.groupby(["step", "rank", "stream"]).size() == 1).all()
    assert sorted(set(parts.step)) == list(range(1, STEPS))
    assert not set(whole.stream) - set(streams)
    expected = reference(how)
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



def test_two_nodes_with_a_daemon_each_are_read_as_one_run(tmp_path):
    """torchrun --nnodes 2 --nproc-per-node 2 on one machine: each node's ranks write to
    their node's daemon (its own runtime directory, its own output folder under a common
    parent); the readers take the parent. The whole tensors are merged across the nodes'
    folders, and the first anomaly is the run's earliest: rank 3 (on node 1) gets a NaN at
    step 2, before any rank of node 0 sees one (their gradients, later that step)."""
    from conftest import Daemon

    session = "nodes"
    daemons = []
    for n in range(2):
        (tmp_path / f"node{n}").mkdir()
        daemons.append(Daemon(str(tmp_path / f"node{n}"), session).start())
    worker = os.path.join(os.path.dirname(__file__), "sharded_worker.py")
    port = str(free_port())
    try:
        nodes = []
        for n, d in enumerate(daemons):
            command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(n),
                       "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", port, worker,
                       "fsdp", session, d.runtime_dir, str(STEPS), "3", "2"]
            nodes.append(subprocess.Popen(command, env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        for p in nodes:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err[-4000:]
            assert len([line for line in out.splitlines() if line.startswith("{")]) == 2, out
    finally:
        for d in daemons:
            d.stop()
    parent = str(tmp_path)
    table = tensorscope.read_summaries(parent)
    nodes = sorted(set(table[table["rank"] >= 0].node))
    assert len(nodes) == 2 and all(n.endswith(f"node{k}/out/{session}") for k, n in enumerate(nodes)), nodes
    for rank in range(4):
        assert set(table[table["rank"] == rank].node) == {nodes[rank // 2]}, rank
    # net.2.weight's 5 rows over 4 ranks (2 + 1 + 1 + 1): the whole needs both folders.
    w = table[(table.stream == "net.2.weight") & (table.step == 1)].sort_values("rank")
    assert list(w["rank"]) == [-1, 0, 1, 2, 3] and list(w.shard)[1:] == [f"S0@{r}/4" for r in range(4)]
    x = reference("fsdp", world=4)[(1, "net.2.weight")].double()
    assert w.iloc[0].numel == 80 and w.iloc[0].l2 == pytest.approx(x.norm().item(), rel=1e-5)
    one_node = tensorscope.read_summaries(daemons[0].session_dir)
    assert (one_node["rank"] >= 0).all(), "half the shards: no whole row"
    # The same through a glob and through a list.
    assert len(tensorscope.read_summaries(os.path.join(parent, "node*", "out", session))) == len(table)
    assert len(tensorscope.read_summaries([d.session_dir for d in daemons])) == len(table)
    # The live view over the parent: the whole gradient's norm, merged from both nodes'
    # parts, beside each rank's.
    whole = whole_overview(parent, "grad_norm")
    assert len(whole) == 1 and whole[0]["ranks"] == [0, 1, 2, 3], whole
    row = whole[0]["rows"].index("net.2.weight.grad")
    g = reference("fsdp", world=4)
    for column, step in enumerate(whole[0]["first_steps"]):
        if step < 2:  # (before rank 3's NaN)
            expected = g[(step, "net.2.weight.grad")].double().norm().item()
            assert whole[0]["values"][row][column] == pytest.approx(expected, rel=1e-3), step
        assert whole[0]["nonfinite"][row][column] == (step >= 2), step
    assert whole[0]["first_steps"][-1] == STEPS - 1 and whole[0]["left_out"]["conflicting"] == 0
    anomalies = tensorscope.read_anomalies(parent)
    first = anomalies[0]
    assert (first["type"], first["step"], first["rank"], first["stream"]) == ("non_finite", 2, 3, "net.0"), first
    assert first["node"] == nodes[1] and first["details"]["order"] == 0
    assert {a["rank"] for a in anomalies if a["type"] == "non_finite"} == {0, 1, 2, 3}
    assert [(a["step"], a["details"]["order"]) for a in anomalies] == sorted(
        (a["step"], a["details"]["order"]) for a in anomalies)

"""A run compared with a reference run as it trains: the first tensor that leaves
tolerance is reported as the anomaly "divergence", at its step, with both values; two
identical runs part nowhere; a layer changed at step 50, or one that breaks in bfloat16,
is named at its step and nothing before it."""

import os
import re
import shutil
import subprocess

import pytest
import torch
from torch import nn

import tensorscope

from conftest import CLI, Daemon, wait_until


class NaiveNorm(nn.Module):
    """A layer norm written out: E[x^2] - E[x]^2, exact enough in float32, a cancellation
    in bfloat16 for activations far from 0."""

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x * x).mean(-1, keepdim=True) - mean * mean).clamp_min(1e-5)
        return (x - mean) / var.sqrt()


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.factor = 1.0

    def forward(self, x):
        return x * self.factor


class Net(nn.Module):
    def __init__(self, low=None):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(16, 64)
        with torch.no_grad():
            self.fc1.bias.fill_(30.0)  # activations around 30: where bfloat16 has 3 bits after the point
        self.norm = NaiveNorm()
        self.scale = Scale()
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(64, 8)
        self.low = low  # the dtype the norm runs in (None: float32)

    def forward(self, x):
        h = self.fc1(x)
        if self.low is not None:
            h = h.to(self.low)
        h = self.act(self.scale(self.norm(h)))
        return self.fc2(h.float())


def train(scope, model, steps, change=None):
    torch.manual_seed(1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        if change is not None:
            change(model, step)
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        scope.next_step()


def run(daemon, steps, change=None, low=None, diverges=False, **options):
    """One training of Net under `daemon`: what scope.anomalies() said before the client
    closed (the live report; when the run `diverges`, waited for: the supervisor writes
    the reports it is sent a moment later) and `tensorscope status` then, after which the
    daemon stops."""
    torch.set_num_threads(1)  # the same reduction order in both runs
    model = Net(low)
    with tensorscope.Client(**daemon.client_options(**options)) as scope:
        # Every module, those without parameters too (the norm, the scale, the ReLU).
        scope.track_model("net", model, every_n=1000, kinds=("output", "gradient"), containers=True)
        train(scope, model, steps, change)
        live = []

        def reported():
            live[:] = [a for a in scope.anomalies(timeout=60) if a["type"] == "divergence"]
            return live

        if diverges:
            wait_until(reported, 60, interval=0.2)
        else:
            reported()
        # The workers' heartbeats carry the counts.
        status = [""]

        def shown():
            status[0] = subprocess.run([CLI, "status", "--session", daemon.session, "--runtime-dir",
                                        daemon.runtime_dir], capture_output=True, text=True, timeout=60).stdout
            return "reference runs" in status[0]

        if options.get("reference") or "--reference" in daemon.args:
            wait_until(shown, 60, interval=0.2)
    daemon.stop()
    return live, status[0]


@pytest.fixture
def two_daemons(tmp_path):
    made = []

    def make(session, args=()):
        d = Daemon(str(tmp_path), session, npy="", args=args).start()
        made.append(d)
        return d

    yield make
    for d in made:
        if d.process.poll() is None:
            d.stop()
        shutil.rmtree(d.runtime_dir, ignore_errors=True)


def divergences(daemon):
    return [a for a in tensorscope.read_anomalies(daemon.session_dir) if a["type"] == "divergence"]


def compared(daemon):
    """(tensors compared, outside tolerance) from the daemon's log line at the run's end."""
    m = re.search(r"against the reference \S+: (\d+) tensors compared, (\d+) outside tolerance", daemon.log())
    assert m, daemon.log()
    return int(m.group(1)), int(m.group(2))


def test_identical_runs_part_nowhere(two_daemons):
    reference = two_daemons("fp32")
    run(reference, 30)
    # The reference named by its session name, on the daemon's command line.
    again = two_daemons("again", args=("--reference", "fp32"))
    live, status = run(again, 30)
    assert live == []
    assert "reference runs" in status and "0 outside tolerance" in status, status
    assert divergences(again) == []
    done, outside = compared(again)
    assert outside == 0
    assert done >= 29 * 12, done  # 6 outputs and 6 gradients a step (the root's too): all but the last step


def test_a_layer_changed_at_step_50_is_named_there_and_nowhere_before(two_daemons):
    reference = two_daemons("before")
    run(reference, 70)

    def change(model, step):
        model.scale.factor = 1.01 if step >= 50 else 1.0

    changed = two_daemons("changed")
    live, status = run(changed, 70, change, diverges=True, reference=reference.session_dir)
    assert len(live) == 1, changed.log()  # reported while the run trained
    assert "FIRST first divergence from the reference: step 50, rank 0, net.scale" in status, status
    found = divergences(changed)
    assert found == live
    a = found[0]
    assert (a["step"], a["stream"], a["kind"], a["rank"]) == (50, "net.scale", "activation", 0), a
    assert a["details"]["reference_value"] != a["details"]["value"]
    assert a["details"]["reference"] == reference.session_dir
    assert "first divergence from the reference: step 50, rank 0, net.scale" in a["message"], a["message"]
    assert "first divergence from the reference: step 50" in changed.log()
    _, outside = compared(changed)
    assert outside > 0


def test_a_layer_that_breaks_in_bfloat16_is_named_at_its_first_step(two_daemons):
    reference = two_daemons("fp32")
    run(reference, 12)
    bf16 = two_daemons("bf16")
    # Named relative to the working directory: the client makes it absolute.
    run(bf16, 12, low=torch.bfloat16, reference=os.path.relpath(reference.session_dir))
    found = divergences(bf16)
    assert len(found) == 1, bf16.log()
    a = found[0]
    assert (a["step"], a["stream"]) == (0, "net.norm"), a
    assert a["details"]["dtype"] == "bfloat16" and a["details"]["reference_dtype"] == "float32", a
    assert a["details"]["order"] == 1  # net.fc1 before it agreed


def test_a_reference_that_is_not_there_is_said_and_nothing_is_compared(two_daemons):
    lone = two_daemons("lone")
    run(lone, 5, reference="/nonexistent/run")
    assert "is not there yet" in lone.log(), lone.log()
    assert divergences(lone) == []
    assert compared(lone) == (0, 0)


def train_ranks(daemon, ranks, steps, change=None, **options):
    """`ranks` processes' worth of training in this one (a client per rank, as
    test_summaries does), each rank on its own data; then the daemon stopped."""
    torch.set_num_threads(1)
    models = [Net() for _ in ranks]
    opts = [torch.optim.SGD(m.parameters(), lr=0.01) for m in models]
    scopes = [tensorscope.Client(**daemon.client_options(rank=r, **options)) for r in ranks]
    try:
        for scope, model in zip(scopes, models):
            scope.track_model("net", model, every_n=1000, kinds=("output", "gradient"), containers=True)
        for step in range(steps):
            for i, r in enumerate(ranks):
                if change is not None:
                    change(r, models[i], step)
                torch.manual_seed(1000 * r + step)
                loss = models[i](torch.randn(8, 16)).pow(2).mean()
                opts[i].zero_grad()
                loss.backward()
                opts[i].step()
                scopes[i].next_step()
        for scope in scopes:
            scope.anomalies(timeout=60)
    finally:
        for scope in scopes:
            scope.close()
    daemon.stop()


def test_ranks_are_compared_rank_by_rank(two_daemons):
    reference = two_daemons("two_ranks")
    train_ranks(reference, [0, 1], 20)

    def change(rank, model, step):
        model.scale.factor = 1.02 if rank == 1 and step >= 6 else 1.0

    # Rank 2 is not in the reference: not compared, never reported.
    run_b = two_daemons("three_ranks", args=("--reference", "two_ranks"))
    train_ranks(run_b, [0, 1, 2], 20, change)
    found = divergences(run_b)
    assert [(a["rank"], a["step"], a["stream"]) for a in found] == [(1, 6, "net.scale")], found
    assert found[0]["details"]["reference_table"].endswith(".csv") and "/rank1_pid" in found[0]["details"][
        "reference_table"], found[0]

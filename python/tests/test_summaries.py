"""Per-step summaries of tracked tensors and the anomalies the daemon finds in them: a NaN
named at its step and module, only the rank that went bad reported, an explosion after
the learning rate blows up, a dead ReLU layer, no report for a healthy model, the summary
table's values, and malformed summary records refused and counted."""

import json
import math
import os
import signal
import subprocess
import time

import pytest
import torch
from torch import nn

import tensorscope
from tensorscope import _anomalies, _native, _summaries
from conftest import CLI, wait_until


class LogLayer(nn.Module):
    """log(|fc(x)| + 1 - shift): finite until `shift` is raised (the test's known step)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("shift", torch.zeros(()))

    def forward(self, x):
        return torch.log(self.fc(x).abs() + 1 - self.shift)


def six_layers():
    return nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8), LogLayer(),
                         nn.Linear(8, 8))


def train(scope, model, steps, bad_step=None, lr=1e-3):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(steps):
        if step == bad_step:
            model[4].shift.fill_(1e6)  # log of a negative value from here on: NaN
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        scope.next_step()


def test_a_nan_is_reported_at_its_step_and_module(daemon):
    torch.manual_seed(0)
    model = six_layers()
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, every_n=100, kinds=("output", "gradient"))
        train(scope, model, 45, bad_step=37)
        assert wait_until(lambda: scope.anomalies(), 60), daemon.log()
        reported = scope.anomalies()
    table = subprocess.run([CLI, "status", "--session", daemon.session, "--runtime-dir", daemon.runtime_dir],
                           capture_output=True, text=True, timeout=60).stdout
    assert "1 anomaly" in table and "FIRST first non-finite value: step 37, rank 0, net.4" in table, table
    daemon.stop()
    first = [a for a in reported if a["type"] == "non_finite"]
    assert len(first) == 1, reported
    assert (first[0]["step"], first[0]["stream"], first[0]["rank"], first[0]["kind"]) == (37, "net.4", 0, "activation")
    assert "step 37" in first[0]["message"] and "net.4" in first[0]["message"]
    assert tensorscope.read_anomalies(daemon.session_dir) == reported
    assert daemon.status() is None  # stopped
    table = tensorscope.read_summaries(daemon.session_dir)
    at37 = table[(table.step == 37) & (table.stream == "net.4")].iloc[0]
    assert at37.nan_count == 32 and at37.numel == 32
    assert table[(table.step == 36) & (table.nan_count > 0)].empty
    assert "first non-finite value: step 37" in daemon.log()


def test_a_restarted_daemon_goes_on_from_the_sessions_files(daemon):
    """The daemon killed (kill -9) mid-run and started again on the session: the NaN the
    first one reported stays the first and is not reported again, the summaries of the
    steps while it was away reach the new one, and the overview starts from the table the
    first one wrote."""
    torch.manual_seed(0)
    model = six_layers()
    with tensorscope.Client(**daemon.client_options(reconnect_interval_ms=50)) as scope:
        scope.track_model("net", model, every_n=100, kinds=("output", "gradient"))
        train(scope, model, 20, bad_step=10)
        first = [a for a in scope.anomalies(timeout=60) if a["type"] == "non_finite"]
        assert [(a["step"], a["stream"]) for a in first] == [(10, "net.4")], daemon.log()
        daemon.kill()
        assert wait_until(lambda: not scope.connected, 30)
        train(scope, model, 5)  # steps 20..24 while no daemon runs: their summaries wait
        assert scope.stats().summaries_held > 0
        daemon.start()
        assert wait_until(lambda: scope.connected, 60)
        train(scope, model, 20)  # still NaN: a detector that started over sees it again
        scope.anomalies(timeout=60)
        assert scope.stats().summaries_held == 0
    daemon.stop()
    firsts = [a for a in tensorscope.read_anomalies(daemon.session_dir) if a["type"] == "non_finite"]
    assert [(a["step"], a["stream"]) for a in firsts] == [(10, "net.4")], firsts
    log = daemon.log()
    assert "anomalies of an earlier daemon of this session read back" in log, log
    assert "summaries read back from" in log, log
    table = tensorscope.read_summaries(daemon.session_dir)
    assert set(table[table.stream == "net.0"].step) == set(range(45)), "every step, the ones while away too"


def daemon_processes(pid):
    """The daemon's supervisor and its workers (its children)."""
    found = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(c) for c in f.read().split()]
    return found


def test_a_nan_while_the_daemon_stalls_is_reported_at_its_step(daemon):
    """The daemon reads nothing for 10 s (a worker blocked on a slow disk, a frozen cgroup):
    the ring fills, the summaries wait in the client, and the NaN that came in the middle
    of the stall is reported at its own step and module once the daemon reads again."""
    torch.manual_seed(0)
    model = six_layers()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with tensorscope.Client(**daemon.client_options(shm_budget=1 << 20, ring_slots=16)) as scope:
        scope.track_model("net", model, every_n=100, kinds=("output", "gradient"))
        train(scope, model, 3)
        assert scope.anomalies() == [] and scope.stats().connected
        processes = daemon_processes(daemon.process.pid)
        for p in processes:
            os.kill(p, signal.SIGSTOP)
        bad_step = None
        try:
            start = time.monotonic()
            while time.monotonic() - start < 10:
                if bad_step is None and time.monotonic() - start > 5:
                    bad_step = scope.step
                    model[4].shift.fill_(1e6)
                loss = model(torch.randn(4, 8)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                scope.next_step()
                time.sleep(0.002)  # the rest of a training step: about 4,000 steps, 10 MB of summaries
            during = scope.stats()
        finally:
            for p in reversed(processes):
                os.kill(p, signal.SIGCONT)
        steps = scope.step
        assert during.summaries_held > 0, during  # the ring was full: they waited
        assert during.summaries_lost == 0, during
        assert during.evidence_held > 0, during
        reported = scope.anomalies(timeout=120)
        assert scope.stats().summaries_held == 0
    first = [a for a in reported if a["type"] == "non_finite"]
    assert [(a["step"], a["stream"]) for a in first] == [(bad_step, "net.4")], (bad_step, reported, daemon.log())
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    summarized = set(table[table.stream == "net.4"].step)
    assert summarized == set(range(steps)), sorted(set(range(steps)) - summarized)[:20]
    # The evidence: net.4's whole output at the NaN's step and the two after it arrived,
    # though the ring was full (dropped otherwise).
    received = {int(r["step"]) for r in daemon.stats_rows() if r["stream"] == "net.4"}
    assert {bad_step, bad_step + 1, bad_step + 2} <= received, (bad_step, sorted(received)[-20:])


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_the_overview_is_drawn_per_metric_and_listed(daemon):
    torch.manual_seed(3)
    model = six_layers()
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, every_n=100, kinds=("output", "gradient", "parameter"))
        train(scope, model, 60, bad_step=37)
    daemon.stop()
    with open(f"{daemon.session_dir}/index.json") as f:
        files = json.load(f)["files"]
    overview = [e for e in files if e["stream"] == "overview"]
    pngs = {e["mode"]: e for e in overview if e["path"].endswith(".png")}
    videos = {e["mode"]: e for e in overview if e["path"].endswith(".mp4")}
    # No tracked output is ever exactly zero (no ReLU): no fraction of zeros to show.
    metrics = {"grad_norm", "act_std", "update_ratio"}
    assert set(pngs) == metrics and set(videos) == metrics, overview
    for metric, e in pngs.items():
        assert e["path"] == f"overview__rank0__pid{os.getpid()}__{metric}.png"
        assert (e["kind"], e["device"], e["rank"], e["first_step"], e["last_step"]) == ("summary", "all", 0, 0, 59)
        width, height = png_size(f"{daemon.session_dir}/{e['path']}")
        assert width >= 1280 and height >= 720
    for e in videos.values():
        assert e["frames"] >= 1 and e["last_step"] <= 58, e  # the newest step is left to other tracks
        assert os.path.getsize(f"{daemon.session_dir}/{e['path']}") > 1000


def test_the_first_nan_brings_whole_tensors_of_the_steps_around_it(daemon):
    torch.manual_seed(5)
    model = six_layers()
    with tensorscope.Client(**daemon.client_options(), anomaly_capture_steps=2) as scope:
        scope.track_model("net", model, every_n=100, kinds=("output", "gradient"))
        train(scope, model, 45, bad_step=37)
    daemon.stop()
    steps = {}
    for r in daemon.stats_rows():
        steps.setdefault(r["stream"], set()).add(int(r["step"]))
    # Step 0 (every_n), the NaN tensor itself at once at step 37, everything at 38 and 39.
    assert steps["net.4"] == {0, 37, 38, 39}, steps
    assert steps["net.0"] == {0, 38, 39} and steps["net.0.grad"] == {0, 38, 39}
    assert all(s <= {0, 37, 38, 39} for s in steps.values())


def test_only_the_rank_that_went_bad_is_reported(daemon):
    torch.manual_seed(1)
    models = [six_layers() for _ in range(4)]
    opts = [torch.optim.SGD(m.parameters(), lr=1e-3) for m in models]
    scopes = [tensorscope.Client(**daemon.client_options(rank=r)) for r in range(4)]
    try:
        for r, scope in enumerate(scopes):
            scope.track_model("net", models[r], every_n=100)
        for step in range(30):
            for r in range(4):
                if r == 2 and step == 20:
                    models[r][4].shift.fill_(1e6)
                loss = models[r](torch.randn(4, 8)).pow(2).mean()
                opts[r].zero_grad()
                loss.backward()
                opts[r].step()
                scopes[r].next_step()
        assert wait_until(lambda: scopes[0].anomalies(), 60), daemon.log()
    finally:
        for scope in scopes:
            scope.close()
    daemon.stop()
    reported = tensorscope.read_anomalies(daemon.session_dir)
    assert [(a["type"], a["rank"], a["step"], a["stream"]) for a in reported] == [("non_finite", 2, 20, "net.4")]


def test_an_exploding_learning_rate_is_reported_within_a_few_steps(daemon):
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 16), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, every_n=1000, kinds=("output", "gradient"))
        for step in range(80):
            if step == 60:
                for group in opt.param_groups:
                    group["lr"] = 50.0  # blows up from here
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            scope.next_step()
        reported = scope.anomalies(timeout=60)
        status = subprocess.run([CLI, "status", "--session", daemon.session, "--runtime-dir", daemon.runtime_dir],
                                capture_output=True, text=True, timeout=60).stdout
    daemon.stop()
    explosions = [a for a in tensorscope.read_anomalies(daemon.session_dir) if a["type"] == "explosion"]
    assert explosions, daemon.log()
    assert 60 <= min(a["step"] for a in explosions) <= 64, explosions
    assert all(a["details"]["ratio"] > 50 and a["details"]["rms"] >= 1 for a in explosions)
    # The first of each type is named first in status.
    first = min(explosions, key=lambda a: a["step"])
    assert "FIRST explosion: step %d" % first["step"] in status, status
    assert any(a["type"] == "explosion" for a in reported)


class DeadBlock(nn.Module):
    """relu(x + bias) with a bias that kills every unit."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.full((8,), -1e3))

    def forward(self, x):
        return torch.relu(x + self.bias)


def test_a_dead_relu_layer_is_reported_and_a_healthy_model_is_not(daemon):
    torch.manual_seed(3)
    dead = nn.Sequential(nn.Linear(8, 8), DeadBlock(), nn.Linear(8, 1))
    healthy = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    opt_dead = torch.optim.SGD(dead.parameters(), lr=1e-3)
    opt_healthy = torch.optim.Adam(healthy.parameters(), lr=1e-3)
    x, y = torch.randn(128, 8), torch.randn(128, 1)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("dead", dead, every_n=1000)
        scope.track_model("healthy", healthy, every_n=1000, kinds=("output", "gradient", "parameter"))
        for step in range(500):
            batch = slice((step * 16) % 128, (step * 16) % 128 + 16)
            for model, opt in ((dead, opt_dead), (healthy, opt_healthy)):
                loss = (model(x[batch]) - y[batch]).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            scope.next_step()
    daemon.stop()
    reported = tensorscope.read_anomalies(daemon.session_dir)
    assert [(a["type"], a["stream"], a["step"]) for a in reported] == [("dead_units", "dead.1", 49)], reported
    with open(f"{daemon.session_dir}/index.json") as f:
        overview = [e["mode"] for e in json.load(f)["files"] if e["stream"] == "overview" and e["path"].endswith(".png")]
    assert "zero_fraction" in overview, overview  # the dead block's zeros
    table = tensorscope.read_summaries(daemon.session_dir)
    weights = table[(table.stream == "healthy.0.weight") & (table.step > 0)]
    assert len(weights) == 499 and (weights.update_ratio > 0).all() and (weights.update_ratio < 0.1).all()
    assert math.isnan(table[(table.stream == "healthy.0.weight") & (table.step == 0)].update_ratio.iloc[0])


def test_summary_table_values_match_the_tensors(daemon):
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(5, 7))
    outputs = {}
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, every_n=100, stats_every=2)
        for step in range(6):
            out = model(torch.randn(3, 5))
            outputs[step] = out.detach().double()
            scope.next_step()
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    assert list(table.step) == [0, 2, 4] and set(table.stream) == {"net.0"}
    for row in table.itertuples():
        t = outputs[row.step]
        assert row.numel == 21 and row.kind == "activation" and row.rank == 0
        assert row.l2 == pytest.approx(t.norm().item(), rel=1e-6)
        assert row.max_abs == pytest.approx(t.abs().max().item(), rel=1e-6)
        assert row.mean == pytest.approx(t.mean().item(), abs=1e-6)
        assert row.std == pytest.approx(t.std(unbiased=False).item(), rel=1e-5)


class HalfInTheMiddle(nn.Module):
    """fp32, then a bf16 layer (its input cast), then fp32 again: a mixed-precision port."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(6, 8), nn.Linear(8, 8).to(torch.bfloat16), nn.Linear(8, 3)

    def forward(self, x):
        return self.c(self.b(self.a(x).to(torch.bfloat16)).float())


def test_each_row_says_its_tensors_dtype(daemon):
    torch.manual_seed(2)
    model = HalfInTheMiddle()
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, kinds=("output", "gradient", "parameter"))
        for _ in range(3):
            model(torch.randn(4, 6)).pow(2).mean().backward()
            model.zero_grad()
            scope.next_step()
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    dtypes = dict(zip(table.stream, table.dtype))
    assert {dtypes[s] for s in ("net.a", "net.a.grad", "net.a.weight", "net.c", "net.c.bias")} == {"float32"}, dtypes
    assert {dtypes[s] for s in ("net.b", "net.b.grad", "net.b.weight", "net.b.bias")} == {"bfloat16"}, dtypes
    assert _summaries.DTYPE_CODES[torch.bfloat16] == _native.DTYPE_NAMES.index("bfloat16")


def test_compacted_and_older_tables_read_with_their_steps(tmp_path):
    """A long run's table whose older lines the daemon compacted (a line standing for
    several steps), a table written before the steps column and one written before the
    numerics columns, read as one."""
    (tmp_path / "summaries").mkdir()
    columns = _anomalies.SUMMARY_COLUMNS
    assert columns[15:] == ("steps", "cast_format", "dynamic_range", "underflow_fraction", "overflow_fraction",
                            "shard", "whole_numel", "dtype")
    v1, v2, v3, v4 = ",".join(columns[:15]), ",".join(columns[:16]), ",".join(columns[:20]), ",".join(columns[:22])
    v5 = ",".join(columns)
    (tmp_path / "summaries" / "rank0_pid5.csv").write_text(
        v2 + "\n0,0,net,0,x,activation,10,3.5,2,0.1,1,0,0,0.5,,8\n8,0,net,0,x,activation,10,1,1,0,1,0,0,0,,1\n")
    (tmp_path / "summaries" / "rank1_pid6.csv").write_text(v1 + "\n3,1,net,0,x,activation,10,1,1,0,1,0,0,0,\n")
    (tmp_path / "summaries" / "rank1_pid9.csv").write_text(
        v3 + "\n4,1,net,0,x,activation,10,1,1,0,1,0,0,0,,1,fp16,12.5,0.2,0\n"
        "5,1,net,0,x,activation,10,1,1,0,1,0,0,0,,1,,,,\n")
    (tmp_path / "summaries" / "rank3_pid4.csv").write_text(
        v4 + "\n9,3,net,0,x.weight,parameter,10,1,1,0,1,0,0,0,,1,,,,,S0@1/2,20\n")
    (tmp_path / "summaries" / "rank4_pid2.csv").write_text(
        v5 + "\n10,4,net,0,x,activation,10,1,1,0,1,0,0,0,,1,,,,,,,bfloat16\n")
    table = tensorscope.read_summaries(tmp_path)
    assert list(table.step) == [0, 3, 4, 5, 8, 9, 10]
    assert list(table.steps) == [8, 1, 1, 1, 1, 1, 1] and str(table.steps.dtype) == "int64"
    assert list(table.pid) == [5, 6, 9, 9, 5, 4, 2]
    assert list(table.dtype) == ["", "", "", "", "", "", "bfloat16"]  # (not known before the column)
    table = table[table.step < 10].reset_index(drop=True)
    assert list(table.cast_format) == ["", "", "fp16", "", "", ""]
    assert table.dynamic_range[2] == 12.5 and table.underflow_fraction[2] == 0.2 and table.overflow_fraction[2] == 0
    assert table.drop(index=2)[["dynamic_range", "underflow_fraction", "overflow_fraction"]].isna().all().all()
    assert list(table.shard) == ["", "", "", "", "", "S0@1/2"] and table.whole_numel[5] == 20
    assert table.whole_numel[:5].isna().all()  # (a shard without its other half: no whole row)
    (tmp_path / "summaries" / "rank2_pid7.csv").write_text("step,rank,steps\n")
    with pytest.raises(ValueError):
        tensorscope.read_summaries(tmp_path)


def test_malformed_summary_records_are_refused_and_counted(daemon):
    with tensorscope.Client(**daemon.client_options()) as scope:
        core = scope._core
        # more NaN than elements, a negative norm, more underflows than elements: refused by
        # the daemon, counted invalid
        core.send_summaries("bad", [("x", 2, 4, 9, 0, 0, 1.0, 1.0, 0.0, 0.0, None, None)], 0)
        core.send_summaries("bad", [("y", 2, 4, 0, 0, 0, -1.0, 1.0, 0.0, 0.0, None, None)], 1)
        core.send_summaries("bad", [("w", 2, 4, 0, 0, 0, 1.0, 1.0, 0.0, 0.0, None, (1, 5, 0, 0.5))], 1)
        with pytest.raises(TypeError):
            core.send_summaries("bad", [("z", 2)], 2)
        shard = ("v", 2, 4, 0, 0, 0, 1.0, 1.0, 0.0, 0.0, None, None)
        with pytest.raises(ValueError, match="smaller"):  # a whole tensor smaller than its part
            core.send_summaries("bad", [shard + ((3, ((1, 0, 0, 2),)),)], 2)
        with pytest.raises(ValueError, match="coordinate"):
            core.send_summaries("bad", [shard + ((8, ((1, 0, 2, 2),)),)], 2)
        with pytest.raises(TypeError, match="shard"):
            core.send_summaries("bad", [shard + ((8, ()),)], 2)
        with pytest.raises(ValueError):
            core.send_summaries("bad", [("z", 6, 4, 0, 0, 0, 1.0, 1.0, 0.0, 0.0, None, None)], 2)  # not a tensor kind
        with pytest.raises(ValueError, match="cast format"):
            core.send_summaries("bad", [("z", 2, 4, 0, 0, 0, 1.0, 1.0, 0.0, 0.0, None, (77, 0, 0, 0.0))], 2)
        with pytest.raises(TypeError, match="numerics"):
            core.send_summaries("bad", [("z", 2, 4, 0, 0, 0, 1.0, 1.0, 0.0, 0.0, None, (1, 0))], 2)

        def refused():
            s = daemon.status()
            producers = s["producers"] if s else []
            return producers and producers[0]["dropped_invalid"] == 3

        assert wait_until(refused, 60), daemon.status()
    daemon.stop()
    assert "refused a summary record" in daemon.log()
    assert tensorscope.read_anomalies(daemon.session_dir) == []


@pytest.mark.parametrize("values", [
    [0.0, -0.0, 3.0, -4.0, float("nan"), float("inf"), 1.0],
    [1000.0 + 0.01 * k for k in range(100)],
    [float("nan")] * 3,
    [float("-inf"), 0.0],
    [2.5],
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_device_path_agrees_with_the_cpu_kernel(values, dtype):
    # The GPU path's reductions (on the tensor's device) run on the CPU, and the native
    # core's arithmetic on their values, against the native kernel the CPU path uses: the
    # same numbers either way.
    t = torch.tensor(values, dtype=dtype)
    cpu, _, _ = _summaries.summarize(t)
    values, layout = _summaries.device_values(t)
    device = _native.summary_from_device_values(values.tolist(), t.numel(), *layout)
    assert device[:4] == cpu[:4]
    assert device[4:8] == pytest.approx(list(cpu[4:]), rel=1e-6, abs=1e-9)
    assert device[8] is None and device[9] is None


def test_the_device_path_of_integers_bools_huge_values_and_ratios():
    for t in [torch.arange(-5, 20, dtype=torch.int32), torch.tensor([True, False, True]),
              torch.randn(300, dtype=torch.float64) * 1e300]:
        cpu, _, _ = _summaries.summarize(t)
        values, layout = _summaries.device_values(t)
        device = _native.summary_from_device_values(values.tolist(), t.numel(), *layout)
        assert device[:4] == cpu[:4], t.dtype
        assert device[4:8] == pytest.approx(list(cpu[4:]), rel=1e-9), t.dtype
    before = torch.randn(30, 20)
    now = before + 1e-3 * torch.randn(30, 20)
    values, layout = _summaries.device_values(now, before)
    device = _native.summary_from_device_values(values.tolist(), now.numel(), *layout)
    assert device[8] == pytest.approx(_summaries.summarize(now, before)[1], rel=1e-6)
    # Other dtypes in float64 as the CPU does it (BatchNorm's int64 count, a bool mask, half).
    for a, b in [(now.half(), before.half()), ((now * 100).int(), (before * 100).int()), (now > 0, before > 0)]:
        values, layout = _summaries.device_values(a, b)
        device = _native.summary_from_device_values(values.tolist(), a.numel(), *layout)
        cpu_ratio = _summaries.summarize(a, b)[1]
        assert cpu_ratio is not None and device[8] == pytest.approx(cpu_ratio, rel=1e-9), a.dtype
    assert _native.summary_from_device_values([1.0] * 5, 3, False).startswith("a device summary of 5 values")
    assert _native.summary_from_device_values([1.0] * 8, 3, False).startswith("a device summary of 8 values")
    with pytest.raises(ValueError, match="cast format 99"):
        _native.summary_from_device_values([1.0] * 9, 3, False, False, 99)
    # An empty tensor, on any device, is summarised without reductions: as the CPU kernel gives it.
    assert _summaries.summarize(torch.zeros(0, 3)) == ((0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0), None, None)
    assert _summaries.summarize(torch.zeros(0, 3), cast=2)[2] == (2, 0, 0, 0.0)


def test_a_device_summary_dispatches_few_operations():
    # On a GPU each operation is a kernel launch, and a step bound by launches pays for each
    # (the float64 formula this replaced dispatched 80).
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    t = torch.randn(256, 512)
    with Count() as plain:
        _summaries.device_values(t)
    with Count() as with_ratio:
        _summaries.device_values(t, t + 1)
    with Count() as with_numerics:
        _summaries.device_values(t, None, _native.CAST_FORMATS["fp8_e4m3"][0])
    print(f"operations per device summary: {len(plain.ops)}, with the update ratio {len(with_ratio.ops)}, "
          f"with numerics {len(with_numerics.ops)}")
    assert len(plain.ops) <= 12, plain.ops
    assert len(with_ratio.ops) <= len(plain.ops) + 6, with_ratio.ops
    assert len(with_numerics.ops) <= len(plain.ops) + 7, with_numerics.ops


def test_a_summary_on_its_way_from_a_gpu_waits_for_its_event():
    # take_ready's GPU branch with the device values of a CPU tensor and a stand-in for
    # the CUDA event: held while the copy is not complete, then the same entry as the CPU
    # path gives (the update ratio last).
    class Event:
        def __init__(self):
            self.done = False

        def query(self):
            return self.done

        def synchronize(self):
            self.done = True

    before = torch.randn(8, 5)
    now = before + 0.01 * torch.randn(8, 5)
    bad = now.clone()
    bad[0, 0] = float("nan")
    event = Event()
    pending = _summaries.StepSummaries()
    bf16 = _native.CAST_FORMATS["bf16"][0]
    for step, t, b in [(7, bad, None), (7, now, before)]:
        values, layout = _summaries.device_values(t, b, bf16)
        assert pending.add(step, "w", 5, _summaries.OnTheWay(values, event, t.numel(), layout))
    assert pending.add(8, "b", 5, _summaries.summarize(torch.ones(3)))
    ready = pending.take_ready()
    assert list(ready) == [8]  # the CPU one; the GPU ones wait
    ready = pending.take_ready(wait=True)
    assert len(ready[7]) == 2
    for entry, t, b in zip(ready[7], [bad, now], [None, before]):
        cpu_values, cpu_ratio, cpu_numerics = _summaries.summarize(t, b, bf16)
        assert entry[:2] == ("w", 5) and entry[2:6] == cpu_values[:4]
        assert entry[11] == cpu_numerics and cpu_numerics[0] == bf16
        # (abs: the mean is near 0, where float32 and float64 sums differ by more than rel
        # 1e-6; the values are of order 1)
        assert entry[6:10] == pytest.approx(list(cpu_values[4:]), rel=1e-6, abs=1e-6)
        assert (entry[10] is None) == (b is None) and (b is None or entry[10] == pytest.approx(cpu_ratio, rel=1e-6))
    assert ready[7][0][3] == 1  # the NaN
    assert _summaries.StepSummaries.first_non_finite_step(ready) == 7
    assert pending.take_ready(wait=True) == {}

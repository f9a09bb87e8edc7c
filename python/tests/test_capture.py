"""tensorscope.capture (in memory, no daemon) and tensorscope.read_stats (the daemon's
statistics tables): the entries and DataFrame rows exactly as expected, the statistics
equal to the daemon's for the same tensors, bounds, failures and removal."""

import copy
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import tensorscope
from conftest import BUILD

COLUMNS = ["step", "module", "type", "kind", "leaf", "call", "rank", "pid", "stream"]
STATS = ["dtype", "shape", "device", "mean", "std", "min", "max", "l2_norm", "nan_count", "inf_count",
         "zero_fraction"]


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def batch(step):
    return torch.randn(5, 3, generator=torch.Generator().manual_seed(20 + step))


def reference(model, x):
    """The outputs of modules 0, 1, 2 and d(loss)/d(each), computed by hand on a copy."""
    m = copy.deepcopy(model)
    a0 = m[0](x)
    a1 = torch.relu(a0)
    a2 = m[2](a1)
    g0, g1, g2 = torch.autograd.grad(a2.pow(2).sum(), [a0, a1, a2])
    return [a.detach() for a in (a0, a1, a2)], [g0, g1, g2]


def hooks_of(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_to_frame_rows_and_columns_three_modules_three_steps():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pid = os.getpid()
    expected = []
    with tensorscope.capture(model, grad=True, stash=lambda t: t.std(), rank=3) as cap:
        assert cap.tracking
        for step in range(3):
            x = batch(step)
            (a0, a1, a2), (g0, g1, g2) = reference(model, x)
            row = lambda module, type_, kind, stream, t: (step, module, type_, kind, "", 0, 3, pid, stream,
                                                          t.std().item())
            expected += [
                # forward hooks run as each module returns: the root last
                row("0", "Linear", "output", "model.0", a0),
                row("1", "ReLU", "output", "model.1", a1),
                row("2", "Linear", "output", "model.2", a2),
                row("", "Sequential", "output", "model", a2),
                # backward: module 2's output is the root's, its hooks in the order they were put on
                row("2", "Linear", "gradient", "model.2.grad", g2),
                row("", "Sequential", "gradient", "model.grad", g2),
                row("1", "ReLU", "gradient", "model.1.grad", g1),
                row("0", "Linear", "gradient", "model.0.grad", g0),
            ]
            model(x).pow(2).sum().backward()
            opt.step()
            opt.zero_grad()
            assert cap.next_step() == step + 1
    assert not cap.tracking and hooks_of(model) == 0
    frame = cap.to_frame()
    assert list(frame.columns) == COLUMNS + ["value"]
    assert [str(frame[c].dtype) for c in ("step", "call", "rank", "pid")] == ["int64"] * 4
    assert list(frame.itertuples(index=False, name=None)) == expected
    # The entries themselves: a list like tensor_tracker's, values as the stash returned them.
    assert len(cap) == 24 and cap.dropped == 0 and cap.errors == 0
    first = cap[0]
    assert isinstance(first, tensorscope.Stash) and isinstance(first.value, torch.Tensor)
    assert (first.module, first.kind, first.value.item()) == ("0", "output", expected[0][-1])
    assert [s.stream for s in cap[4:6]] == ["model.2.grad", "model.grad"]
    assert [s.step for s in cap] == [s for s in range(3) for _ in range(8)]
    model(batch(0))  # after the block: nothing more
    assert len(cap) == 24


def test_auto_steps_every_n_include_exclude_and_statistics():
    model = mlp()
    ref = copy.deepcopy(model)
    with tensorscope.capture(model, grad=False, every_n=2, include=r"^(|0|1)$", exclude="1") as cap:
        assert [(s.name, s.kind, s.module) for s in cap.streams] == [
            ("model", "activation", ""), ("model.0", "activation", "0")]
        outputs = []
        for step in range(5):  # no next_step(): each training forward is a step
            x = batch(step)
            with torch.no_grad():
                outputs.append((ref[0](x), ref(x)))
            model(x)
            assert cap.step == step
    assert [(s.step, s.stream) for s in cap] == [
        (0, "model.0"), (0, "model"), (2, "model.0"), (2, "model"), (4, "model.0"), (4, "model")]
    for entry in cap:
        a0, out = outputs[entry.step]
        value = (a0 if entry.module == "0" else out).double().numpy()
        s = entry.value
        assert isinstance(s, tensorscope.TensorStats)
        assert (s.dtype, s.shape, s.device) == ("float32", tuple(value.shape), "cpu")
        assert (s.nan_count, s.inf_count, s.zero_fraction) == (0, 0, float(np.mean(value == 0)))
        assert (s.min, s.max) == (value.min(), value.max())
        for got, want in ((s.mean, value.mean()), (s.std, value.std()), (s.l2_norm, np.sqrt((value ** 2).sum()))):
            assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_special_values_and_calls_in_one_step():
    x = torch.tensor([[0.0, 1.0, -2.0, float("nan")], [float("inf"), float("-inf"), 0.0, 4.0]])
    s = tensorscope.tensor_stats(x)
    finite = np.array([0.0, 1.0, -2.0, 0.0, 4.0])
    assert (s.nan_count, s.inf_count, s.zero_fraction, s.min, s.max) == (1, 2, 0.25, -2.0, 4.0)
    assert s.mean == pytest.approx(finite.mean(), rel=1e-15) and s.std == pytest.approx(finite.std(), rel=1e-15)
    assert s.l2_norm == pytest.approx(np.sqrt((finite ** 2).sum()), rel=1e-15)
    empty = tensorscope.tensor_stats(torch.zeros(0, 3))
    assert (empty.shape, empty.nan_count, empty.inf_count) == ((0, 3), 0, 0)
    assert all(math.isnan(v) for v in (empty.mean, empty.std, empty.min, empty.max, empty.l2_norm,
                                       empty.zero_fraction))
    none_finite = tensorscope.tensor_stats(torch.tensor([float("nan"), float("inf")]))
    assert (none_finite.nan_count, none_finite.inf_count, none_finite.zero_fraction) == (1, 1, 0.0)
    assert math.isnan(none_finite.mean) and math.isnan(none_finite.l2_norm)
    big = tensorscope.tensor_stats(torch.tensor([1e308, 1e308, -1e308], dtype=torch.float64))
    assert big.l2_norm == pytest.approx(math.sqrt(3) * 1e308, rel=1e-15)
    assert big.mean == pytest.approx(1e308 / 3, rel=1e-15)
    ints = tensorscope.tensor_stats(torch.tensor([[3, 0], [-1, 2]], dtype=torch.int16))
    assert (ints.dtype, ints.mean, ints.min, ints.max, ints.zero_fraction) == ("int16", 1.0, -1.0, 3.0, 0.25)

    model = mlp().eval()
    with tensorscope.capture(model, grad=False, include="^0$") as cap:
        cap.set_step(7)
        model(batch(0))
        model(batch(1))  # eval forwards are not steps: the second call of the step
    assert [(s.step, s.stream, s.call) for s in cap] == [(7, "model.0", 0), (7, "model.0#1", 1)]


def test_bounds_failures_and_repr():
    model = mlp()

    def flaky(t):
        if t.shape[-1] == 2:
            raise RuntimeError("no")
        return float(t.sum())

    with tensorscope.capture(model, stash=flaky, max_entries=5) as cap:
        for _ in range(2):
            out = model(batch(0))
            out.sum().backward()
    # 8 tensors a step. Step 0: the 4 of 2 columns fail (module 2, the root, their
    # gradients), 4 are kept. Step 1: the first is kept (5, the most), the other 7 are
    # dropped before their stash runs.
    assert cap.errors == 4 and "RuntimeError: no" in cap.last_error
    assert len(cap) == 5 and cap.dropped == 7
    assert [(s.step, s.stream) for s in cap] == [
        (0, "model.0"), (0, "model.1"), (0, "model.1.grad"), (0, "model.0.grad"), (1, "model.0")]
    assert repr(cap) == "Capture(stashes=5, tracking=False, dropped=7, errors=4)"
    assert out.shape == (5, 2)
    with pytest.raises(TypeError):
        tensorscope.capture("model")
    with pytest.raises(ValueError):
        tensorscope.capture(model, every_n=0)
    with pytest.raises(TypeError):
        tensorscope.capture(model, stash=3)
    with pytest.raises(ValueError):
        tensorscope.capture(model, kinds="outputs")
    assert hooks_of(model) == 0


class Odd(nn.Module):
    """No parameters; NaN and Inf in its output."""

    def forward(self, x):
        return torch.cat([x, x / 0.0], dim=1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.norm = nn.BatchNorm1d(4)
        self.odd = Odd()

    def forward(self, x):
        return self.norm(self.act(self.fc(x))), self.odd(x)


def test_statistics_equal_the_daemon_table(daemon):
    model = Net()
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, containers=True, kinds=["output", "gradient", "buffer"])
        with tensorscope.capture(model, name="net", grad=True, kinds=["output", "buffer"]) as cap:
            for step in range(3):
                x = batch(step)
                x[0, 0] = 0.0
                model(x)[0].pow(2).sum().backward()
                scope.push("loss", x.sum())
                scope.next_step()
                cap.next_step()
        assert scope.stats().refused == 0 and cap.errors == 0
    daemon.stop()
    daemon_frame = tensorscope.read_stats(daemon.session_dir)
    ours = cap.to_frame()
    assert list(daemon_frame.columns) == list(ours.columns) == COLUMNS + STATS
    pushes = daemon_frame[daemon_frame["stream"] == "loss"]
    assert list(pushes[["step", "kind"]].itertuples(index=False, name=None)) == [(s, "tensor") for s in range(3)]
    assert pushes["module"].isna().all() and pushes["type"].isna().all()
    tracked = daemon_frame[daemon_frame["stream"] != "loss"]
    # The daemon's records do not tell buffers from parameters.
    ours["kind"] = ours["kind"].replace("buffer", "parameter")
    a = tracked.sort_values(["step", "stream"]).reset_index(drop=True)
    b = ours.sort_values(["step", "stream"]).reset_index(drop=True)
    # a step: 6 outputs (the root's two), 4 gradients (not odd's: no grad), 3 buffers
    assert sorted(a.loc[a["step"] == 0, "stream"]) == sorted([
        "net[0]", "net[1]", "net.fc", "net.act", "net.norm", "net.odd", "net[0].grad", "net.fc.grad",
        "net.act.grad", "net.norm.grad", "net.norm.running_mean", "net.norm.running_var",
        "net.norm.num_batches_tracked"])
    assert len(a) == 3 * 13
    assert a[COLUMNS + ["dtype", "shape", "device", "nan_count", "inf_count"]].equals(
        b[COLUMNS + ["dtype", "shape", "device", "nan_count", "inf_count"]])
    odd = a[a["stream"] == "net.odd"]
    assert list(odd["inf_count"]) == [14, 14, 14] and list(odd["nan_count"]) == [1, 1, 1]
    root = a[a["module"] == ""]
    assert sorted(set(root["leaf"])) == ["[0]", "[1]"] and set(root["type"]) == {"Net"}
    assert set(a["type"]) == {"Net", "Linear", "ReLU", "Odd", "BatchNorm1d"}
    for column in ("mean", "std", "min", "max", "l2_norm", "zero_fraction"):
        np.testing.assert_allclose(a[column].to_numpy(), b[column].to_numpy(), rtol=1e-12, atol=1e-15,
                                   equal_nan=True, err_msg=column)


def test_read_stats_documented_format(tmp_path):
    (tmp_path / "stats").mkdir()
    (tmp_path / "tree").mkdir()
    header = ("step,stream,kind,rank,device,dtype,shape,mean,std,min,max,l2_norm,nan_count,inf_count,"
              "zero_fraction\n")
    (tmp_path / "stats" / "rank1_pid42.csv").write_text(
        header
        + "2,t,activation,1,cpu,float32,4x3,0.5,1,-1,2,3.5,0,0,0.25\n"
        + "2,t.fc.in[0],activation,1,cpu,float32,4x2,1e-300,,,,inf,3,1,\n"
        + "1,t.fc.weight,parameter,1,cuda0,bfloat16,3x2,0,0,0,0,0,0,0,1\n"
        + "1,t.fc.weight.grad,parameter_gradient,1,cpu,float32,3x2,1,0,1,1,2.5,0,0,0\n"
        + "1,t.lstm#1[1][0].grad,gradient,1,cpu,float16,scalar,2,0,2,2,2,0,0,0\n"
        + '1,"a,""b""",tensor,1,cpu,int64,0,,,,,,0,0,\n'
        + "1,other.x,activation,1,cpu,uint8,3x0x2,,,,,,0,0,\n"
        + "3,t.fc,activation,1,cpu,float32,2"  # a line a killed worker left unfinished
    )
    (tmp_path / "stats" / "rank0_pid7.csv").write_text(header + "2,t.fc#2,activation,0,cpu,bool,5,1,0,1,1,2,0,0,0\n")
    (tmp_path / "tree" / "rank1_pid42.log").write_text(
        "# tensorscope module tree log\n"
        "== step 1 | t | 2 calls | first logged step\n"
        "    t        Net     float32[4,3]@cpu -> float32[4,3]@cpu\n"
        "      t.fc   Linear  float32[4,2]@cpu -> float32[4,3]@cpu\n"
        "        t.lstm#1  LSTM  - -> -\n")
    frame = tensorscope.read_stats(tmp_path)
    assert list(frame.columns) == COLUMNS + STATS
    rows = [tuple(None if isinstance(v, float) and math.isnan(v) else v for v in r)
            for r in frame.itertuples(index=False, name=None)]
    nan = None
    assert rows == [
        (1, "fc", "Linear", "parameter", "weight", 0, 1, 42, "t.fc.weight", "bfloat16", (3, 2), "cuda0",
         0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 1.0),
        (1, "fc", "Linear", "parameter_gradient", "weight", 0, 1, 42, "t.fc.weight.grad", "float32", (3, 2), "cpu",
         1.0, 0.0, 1.0, 1.0, 2.5, 0, 0, 0.0),
        (1, "lstm", "LSTM", "gradient", "[1][0]", 1, 1, 42, "t.lstm#1[1][0].grad", "float16", (), "cpu",
         2.0, 0.0, 2.0, 2.0, 2.0, 0, 0, 0.0),
        (1, None, None, "tensor", "", 0, 1, 42, 'a,"b"', "int64", (0,), "cpu", nan, nan, nan, nan, nan, 0, 0, nan),
        (1, None, None, "output", "", 0, 1, 42, "other.x", "uint8", (3, 0, 2), "cpu",
         nan, nan, nan, nan, nan, 0, 0, nan),
        (2, "fc", "Linear", "output", "", 2, 0, 7, "t.fc#2", "bool", (5,), "cpu", 1.0, 0.0, 1.0, 1.0, 2.0, 0, 0, 0.0),
        (2, "", "Net", "output", "", 0, 1, 42, "t", "float32", (4, 3), "cpu", 0.5, 1.0, -1.0, 2.0, 3.5, 0, 0, 0.25),
        (2, "fc", "Linear", "input", "[0]", 0, 1, 42, "t.fc.in[0]", "float32", (4, 2), "cpu",
         1e-300, nan, nan, nan, math.inf, 3, 1, nan),
    ]
    other = tensorscope.read_stats(str(tmp_path), track=["other", "t"])
    # (an unknown type is missing: None or NaN, as the pandas version has it)
    assert [(m, None if pd.isna(t) else t) for m, t in
            other.loc[other["stream"] == "other.x", ["module", "type"]].itertuples(index=False, name=None)] == [
        ("x", None)]
    with pytest.raises(FileNotFoundError):
        tensorscope.read_stats(tmp_path / "nothing")
    (tmp_path / "stats" / "rank0_pid7.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a tensorscope statistics table"):
        tensorscope.read_stats(tmp_path)


def test_package_works_without_pandas():
    script = """
import sys
sys.modules["pandas"] = None  # as if it were not installed
import torch, tensorscope
m = torch.nn.Linear(2, 2)
with tensorscope.capture(m) as cap:
    m(torch.ones(1, 2))
print(len(cap), cap[0].kind)
try:
    cap.to_frame()
except ImportError as e:
    print("ImportError:", e)
"""
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "1 output", "ImportError: tensorscope: DataFrames need pandas (Debian: apt-get install python3-pandas)"]


def test_a_client_and_a_capture_give_every_member_a_track_uses():
    # _owner.TrackOwner lists what a track may use of its owner; both owners have it all
    # (a member one of them lacks would fail only on the path that uses it).
    from tensorscope._owner import MEMBERS

    model = nn.Linear(2, 2)
    with tensorscope.Client("owners", enabled=False, autostart=False) as scope, \
            tensorscope.capture(model) as cap:
        for owner in (scope, cap):
            missing = [name for name in MEMBERS if not hasattr(owner, name)]
            assert not missing, (type(owner).__name__, missing)
    assert "_send_tracked" in MEMBERS and "_core" in MEMBERS and "step" in MEMBERS

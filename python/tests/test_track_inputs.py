"""Module inputs, buffers and containers (the root included) tracked through a real
daemon: the values that arrive equal what each module received (before it ran), the
buffers as the forward left them, and the root's stream equals model(x), bitwise."""

import copy

import numpy as np
import torch
from torch import nn

import tensorscope
from tensorscope import _hook_objects
from tensorscope._outputs import input_leaves


class Mix(nn.Module):
    """Two tensor arguments and a parameter of its own."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([0.5, -1.0, 2.0, 0.25]))

    def forward(self, a, b):
        return a * self.scale + b


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)  # changes its input: its input stream is the value before
        self.mix = Mix()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        h = self.act(self.fc(x))
        return self.head(self.mix(h, x))


def batch(step):
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(10 + step))


def reference(model, x):
    """What each module receives and returns, computed by hand on a copy."""
    m = copy.deepcopy(model)
    with torch.no_grad():
        fc = m.fc(x)
        act = torch.relu(fc)
        mix = m.mix(act, x)
        head = m.head(mix)
    return {
        "net.in[0]": x, "net": head,
        "net.fc.in[0]": x, "net.fc": fc,
        "net.act.in[0]": fc, "net.act": act,
        "net.mix.in[0]": act, "net.mix.in[1]": x, "net.mix": mix,
        "net.head.in[0]": mix, "net.head": head,
    }


def test_inputs_and_containers_equal_what_modules_received(daemon):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    expected = {}
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_model("net", model, kinds=("input", "output"), containers=True)
        assert handle.ok
        # Input streams are known once a sent step called the module.
        assert [s.name for s in handle.streams] == ["net", "net.fc", "net.act", "net.mix", "net.head"]
        for step in range(2):
            x = batch(step)
            for name, value in reference(model, x).items():
                expected[(name, step)] = value.clone()
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            scope.next_step()
        assert [(s.name, s.kind, s.module) for s in handle.streams] == [
            ("net.in[0]", "input", ""), ("net", "activation", ""),
            ("net.fc.in[0]", "input", "fc"), ("net.fc", "activation", "fc"),
            ("net.act.in[0]", "input", "act"), ("net.act", "activation", "act"),
            ("net.mix.in[0]", "input", "mix"), ("net.mix.in[1]", "input", "mix"), ("net.mix", "activation", "mix"),
            ("net.head.in[0]", "input", "head"), ("net.head", "activation", "head"),
        ]
        s = scope.stats()
        assert s.refused == 0 and s.dropped_full == 0
        assert s.pushed == 2 * (11 + 1 + 1)  # 11 streams, a module tree and a summary record per step
    daemon.stop()
    frames = daemon.frames()
    assert sorted(frames) == sorted({(name, 0) for name, _ in expected})
    assert all(count == 2 for count in frames.values()), frames
    for (name, step), value in expected.items():
        got = daemon.npy(name, step)
        assert got.dtype == np.float32 and np.array_equal(got, value.numpy()), (name, step)


def test_root_stream_equals_model_output_and_defaults_unchanged(daemon):
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(5, 3), nn.Tanh(), nn.Linear(3, 2))
    outputs = []
    with tensorscope.Client(**daemon.client_options()) as scope:
        whole = scope.track_model("seq", model, containers=True)
        plain = scope.track_model("plain", model, tree_log=False)
        assert [s.name for s in whole.streams] == ["seq", "seq.0", "seq.1", "seq.2"]
        assert [s.name for s in plain.streams] == ["plain.0", "plain.2"]  # as before: no container
        for step in range(3):
            outputs.append(model(batch(step)[:, :1].repeat(1, 5)).detach().clone())
            scope.next_step()
    daemon.stop()
    names = {name for name, _ in daemon.frames()}
    assert names == {"seq", "seq.0", "seq.1", "seq.2", "plain.0", "plain.2"}
    for step, out in enumerate(outputs):
        assert np.array_equal(daemon.npy("seq", step), out.numpy()), step
        assert np.array_equal(daemon.npy("seq.2", step), out.numpy()), step


def test_root_inputs_on_auto_steps_with_every_n(daemon):
    model = nn.Sequential(nn.Linear(2, 2))
    sent = {}
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, kinds="input", every_n=2, containers=True)
        for step in range(5):  # no next_step(): each training forward is a step
            x = batch(step)[:, :2]
            if step % 2 == 0:
                sent[step] = x.clone()
            model(x).sum().backward()
    daemon.stop()
    rows = sorted((r["stream"], int(r["step"])) for r in daemon.stats_rows())
    assert rows == sorted([(n, s) for s in (0, 2, 4) for n in ("net.in[0]", "net.0.in[0]")])
    for step, x in sent.items():
        # steps 2 and 4 start in the root's call: its input hook goes in during that call
        assert np.array_equal(daemon.npy("net.in[0]", step), x.numpy()), step
        assert np.array_equal(daemon.npy("net.0.in[0]", step), x.numpy()), step


def test_buffers_as_the_forward_left_them(daemon):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    seen = []
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_model("net", model, kinds="buffer")
        assert [s.name for s in handle.streams] == [
            "net.1.running_mean", "net.1.running_var", "net.1.num_batches_tracked"]
        for step in range(2):
            model(batch(step)[:, :3])
            seen.append({k: v.clone() for k, v in model[1].named_buffers()})
            scope.next_step()
    daemon.stop()
    for step, buffers in enumerate(seen):
        for key, value in buffers.items():
            got = daemon.npy(f"net.1.{key}", step)
            assert np.array_equal(got, value.numpy()), (key, step)
    assert daemon.npy("net.1.num_batches_tracked", 1) == 2


class Keyword(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, mask=None, extra=None):
        return self.fc(x) * mask + extra[1]


def test_input_names_positional_nested_and_keyword(daemon):
    x, y, z, m = (torch.full((2,), float(i)) for i in range(4))
    leaves = input_leaves((x, (y, None, z), 3), {"mask": m, "n": 7})
    assert [(suffix, t) for suffix, t in leaves] == [("[0]", x), ("[1][0]", y), ("[1][2]", z), ("[mask]", m)]

    model = Keyword()
    x = torch.randn(2, 3)
    mask = torch.ones(2, 3)
    extra = (torch.zeros(1), torch.full((3,), 2.0))
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_model("k", model, kinds="input", containers=True)
        scope.set_step(5)  # explicit steps: both calls are in step 5
        model(x, mask=mask, extra=extra)
        model(x, mask, extra)
        names = [s.name for s in handle.streams]
    daemon.stop()
    assert {int(r["step"]) for r in daemon.stats_rows()} == {5}
    got = {name for name, _ in daemon.frames()}
    # The second call passes everything by position; "#1" names its streams.
    second = {"k#1.in[0]", "k#1.in[1]", "k#1.in[2][0]", "k#1.in[2][1]", "k.fc#1.in[0]"}
    if _hook_objects.PRE_HOOK_KWARGS:  # PyTorch 2: keyword arguments by name
        first = {"k.in[0]", "k.in[mask]", "k.in[extra][0]", "k.in[extra][1]", "k.fc.in[0]"}
    else:  # PyTorch 1.x: forward pre-hooks see the positional arguments only
        first = {"k.in[0]", "k.fc.in[0]"}
    assert got == first | second
    assert set(names) == first
    assert np.array_equal(daemon.npy("k#1.in[2][1]", 5), extra[1].numpy())
    assert np.array_equal(daemon.npy("k.fc#1.in[0]", 5), x.numpy())

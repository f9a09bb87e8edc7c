"""Tracks on compiled models (torch.compile, PyTorch 2): torch.compile(model) (default and
fullgraph=True), blocks compiled one by one, and model.compile() give every tracked output,
gradient and summary at exact steps, the values of eager mode, with no graph break; a NaN is
reported at its step and module; a track made after the model was compiled works; an
evaluation forward of a compiled model is left out. Skipped where torch has no
torch.compile with custom ops (PyTorch 1.13)."""

import os
import shutil
import uuid
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import tensorscope
from tensorscope import _compiled
from conftest import Daemon

pytestmark = pytest.mark.skipif(not _compiled.SUPPORTED, reason="torch.compile with custom ops needs PyTorch >= 2.4")

STEPS = 8
EVERY_N = 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)
        self.act = nn.ReLU(inplace=True)  # in place on the output of a tracked module

    def forward(self, x):
        return x + self.act(self.norm(self.fc(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def compiled(model, how):
    """The model to call, compiled as `how` says (the track always gets the model itself,
    but for "wrapper", which hands track_model the OptimizedModule)."""
    if how == "eager":
        return model
    if how in ("compile", "wrapper"):
        return torch.compile(model)
    if how == "fullgraph":
        return torch.compile(model, fullgraph=True)
    if how == "blocks":
        for i, block in enumerate(model.blocks):
            model.blocks[i] = torch.compile(block)
        return model
    if how == "method":
        model.compile()
        return model
    raise ValueError(how)


def graph_breaks():
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def train(root, how, bad_step=None, track_after=None, cast_format=None):
    """Trains Net for STEPS steps, tracked (outputs, gradients, summaries every step, with
    numerics against `cast_format`, whole tensors every EVERY_N-th as .npy); returns
    (daemon, graph breaks, anomalies, warnings)."""
    torch.manual_seed(0)
    model = Net()
    data = [(torch.randn(4, 8), torch.randn(4, 4)) for _ in range(STEPS)]
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    daemon = Daemon(root, "cmp-" + uuid.uuid4().hex[:8]).start()
    try:
        run = compiled(model, how)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        with warnings.catch_warnings(record=True) as caught, \
                tensorscope.Client(**daemon.client_options(every_n=EVERY_N)) as scope:
            warnings.simplefilter("always")

            def track():
                handle = scope.track_model("net", run if how == "wrapper" else model, kinds=("output", "gradient"),
                                           cast_format=cast_format)
                assert handle.ok, handle.error

            if track_after is None:
                track()
            for step, (x, y) in enumerate(data):
                if step == track_after:
                    track()
                if step == bad_step:
                    with torch.no_grad():
                        model.blocks[1].fc.weight[0, 0] = float("nan")
                loss = (run(x) - y).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                scope.next_step()
            anomalies = scope.anomalies(timeout=60) if bad_step is not None else []
            assert scope.stats().refused == 0, scope.stats()
        breaks = graph_breaks()
    finally:
        daemon.stop()
        shutil.rmtree(daemon.runtime_dir, ignore_errors=True)
    return daemon, breaks, anomalies, [str(w.message) for w in caught]


STREAMS = sorted(f"net.{m}{g}" for m in ("inp", "blocks.0.fc", "blocks.0.norm", "blocks.1.fc", "blocks.1.norm", "head")
                 for g in ("", ".grad"))


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    daemon, breaks, _, _ = train(str(tmp_path_factory.mktemp("eager")), "eager")
    assert breaks == 0
    return daemon


@pytest.mark.parametrize("how", ["compile", "fullgraph", "blocks", "method", "wrapper"])
def test_a_compiled_model_gives_what_eager_mode_gives_with_no_graph_break(tmp_path, eager, how):
    daemon, breaks, _, caught = train(str(tmp_path), how)
    assert breaks == 0, how
    assert not [w for w in caught if "tensorscope" in w], caught
    table = tensorscope.read_summaries(daemon.session_dir)
    reference = tensorscope.read_summaries(eager.session_dir)
    for step in range(STEPS):
        assert sorted(table[table.step == step].stream) == STREAMS, (how, step)
    merged = table.merge(reference, on=["step", "stream"], suffixes=("", "_eager"))
    assert len(merged) == STEPS * len(STREAMS)
    for column in ("l2", "max_abs", "mean", "std", "zero_fraction"):
        np.testing.assert_allclose(merged[column], merged[column + "_eager"], rtol=1e-4, atol=1e-6, err_msg=column)
    assert (merged.numel == merged.numel_eager).all()
    # Whole tensors every EVERY_N-th step, as eager mode sent them.
    for step in range(0, STEPS, EVERY_N):
        for stream in ("net.blocks.0.fc", "net.blocks.0.fc.grad", "net.head.grad"):
            np.testing.assert_allclose(daemon.npy(stream, step), eager.npy(stream, step), rtol=1e-4, atol=1e-6,
                                       err_msg=f"{stream} at step {step}")
    assert not os.path.exists(os.path.join(daemon.session_dir, "anomalies.jsonl")) or not \
        tensorscope.read_anomalies(daemon.session_dir)


def test_a_nan_in_a_compiled_model_is_reported_at_its_step_and_module(tmp_path):
    _, breaks, anomalies, _ = train(str(tmp_path), "compile", bad_step=5)
    assert breaks == 0
    first = [a for a in anomalies if a["type"] == "non_finite"]
    assert [(a["step"], a["stream"], a["kind"]) for a in first] == [(5, "net.blocks.1.fc", "activation")], anomalies


def test_the_numerics_of_a_compiled_model_are_eager_modes(tmp_path):
    (tmp_path / "eager").mkdir()
    (tmp_path / "compiled").mkdir()
    eager_run, _, _, _ = train(str(tmp_path / "eager"), "eager", cast_format="fp8_e4m3")
    daemon, breaks, _, _ = train(str(tmp_path / "compiled"), "compile", cast_format="fp8_e4m3")
    assert breaks == 0
    table = tensorscope.read_summaries(daemon.session_dir)
    merged = table.merge(tensorscope.read_summaries(eager_run.session_dir), on=["step", "stream"],
                         suffixes=("", "_eager"))
    assert len(merged) == STEPS * len(STREAMS) and set(merged.cast_format) == {"fp8_e4m3"}
    # Gradients of a mean over 16 outputs: many below e4m3's smallest subnormal.
    assert (merged.underflow_fraction > 0).any()
    for column in ("dynamic_range", "underflow_fraction", "overflow_fraction"):
        np.testing.assert_allclose(merged[column], merged[column + "_eager"], rtol=1e-3, atol=0.02, err_msg=column)


def test_a_track_made_after_the_model_was_compiled_and_run_is_not_empty(tmp_path, eager):
    daemon, breaks, _, caught = train(str(tmp_path), "compile", track_after=3)
    assert breaks == 0
    assert any("made after torch.compile traced a graph" in w for w in caught), caught
    table = tensorscope.read_summaries(daemon.session_dir)
    assert sorted(set(table.step)) == list(range(3, STEPS))
    for step in range(3, STEPS):
        assert sorted(table[table.step == step].stream) == STREAMS, step


def test_an_evaluation_forward_of_a_compiled_model_is_left_out(tmp_path):
    torch.manual_seed(0)
    model = Net()
    run = torch.compile(model)
    daemon = Daemon(str(tmp_path), "cmp-" + uuid.uuid4().hex[:8]).start()
    try:
        with tensorscope.Client(**daemon.client_options(every_n=1)) as scope:
            scope.track_model("net", model)
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            for step in range(4):
                loss = run(torch.randn(4, 8)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                with torch.no_grad():
                    run(torch.full((4, 8), 1e6))  # huge: its summaries would stand out
                scope.next_step()
    finally:
        daemon.stop()
        shutil.rmtree(daemon.runtime_dir, ignore_errors=True)
    table = tensorscope.read_summaries(daemon.session_dir)
    assert sorted(set(table.step)) == [0, 1, 2, 3]
    assert not any("#1" in s for s in table.stream), sorted(set(table.stream))
    assert table.max_abs.max() < 1e3, table[table.max_abs >= 1e3]


def test_compiled_siamese_calls_gradient_accumulation_and_counted_steps(tmp_path):
    """A compiled model called twice a step (a siamese pair: its second call is "#1"), two
    micro-batches per optimizer step, and steps counted from the forwards (no next_step):
    the streams, call numbers and steps of eager mode."""

    def run(how, root):
        torch.manual_seed(0)
        model = Net()
        run_model = compiled(model, how)
        os.makedirs(root)
        daemon = Daemon(root, "cmp-" + uuid.uuid4().hex[:8]).start()
        try:
            with tensorscope.Client(**daemon.client_options(every_n=1)) as scope:
                scope.track_model("pair", model, kinds=("output", "gradient"))
                opt = torch.optim.SGD(model.parameters(), lr=0.01)
                torch.manual_seed(1)
                for step in range(3):
                    a, b = torch.randn(4, 8), torch.randn(4, 8)
                    (run_model(a) - run_model(b)).pow(2).mean().backward()
                    opt.step()
                    opt.zero_grad()
                    scope.next_step()
            with tensorscope.Client(**daemon.client_options(every_n=1, rank=1)) as scope:
                scope.track_model("acc", model, kinds=("output", "gradient"))
                for step in range(4):  # no next_step(): the track counts the training forwards
                    for micro in range(2):
                        run_model(torch.randn(4, 8)).pow(2).mean().backward()
                    opt.step()
                    opt.zero_grad()
        finally:
            daemon.stop()
            shutil.rmtree(daemon.runtime_dir, ignore_errors=True)
        table = tensorscope.read_summaries(daemon.session_dir)
        return {(int(r.rank), int(r.step), r.stream): r.l2 for r in table.itertuples()}

    eager = run("eager", str(tmp_path / "eager"))
    compiled_ = run("compile", str(tmp_path / "compiled"))
    assert sorted(compiled_) == sorted(eager), (sorted(set(eager) - set(compiled_)), sorted(set(compiled_) - set(eager)))
    assert (0, 2, "pair.blocks.1.fc#1.grad") in compiled_ and (1, 7, "acc.head.grad") in compiled_, sorted(compiled_)
    for key, l2 in eager.items():
        assert compiled_[key] == pytest.approx(l2, rel=1e-4), key


def test_the_gradients_of_compiled_calls_go_to_their_calls_latest_first():
    """CompilableHook's bookkeeping alone: each compiled call's gradient hooks wait for the
    backward graph, which reaches the later calls first; inactive or released hooks do
    nothing."""
    module = nn.Linear(2, 2)
    got = []

    def runtime(module, args, output):
        call = tag[0]
        _compiled.gradient_hook(output, lambda grad: got.append((call, grad.item())))

    tag = ["first"]
    hook = _compiled.CompilableHook("output", module, None, runtime, lambda: None)
    forward = lambda: _compiled._observe([torch.zeros(())], hook.id, _compiled._TAPPED, True, -1)  # noqa: E731
    backward = lambda g: _compiled._observe([torch.tensor(g)], hook.id, "", True, 0)  # noqa: E731
    hook.active = True
    forward()
    tag[0] = "second"
    forward()
    backward(2.0)
    backward(1.0)
    backward(9.0)  # no call waits for it
    assert got == [("second", 2.0), ("first", 1.0)] and hook.pending == []
    _compiled._observe([torch.zeros(())], hook.id, _compiled._UNTAPPED, True, -1)  # no gradient comes
    assert hook.pending == []
    hook.active = False
    forward()
    assert hook.pending == []
    hook.active = True
    hook.release()
    forward()  # a stale graph's call: nothing
    assert hook.pending == []
    assert got == [("second", 2.0), ("first", 1.0)]


def test_what_a_compiled_call_reads_later_is_run_before_the_call_returns_to_its_graph():
    """before_return: called inside tensorscope::observe, once per call whatever the number of
    asks, before the op returns; outside a compiled call it says False and runs nothing."""
    module = nn.Linear(2, 2)
    ran = []

    def flush():
        ran.append(len(seen))

    seen = []

    def runtime(module, args, output):
        seen.append(output)
        assert _compiled.before_return(flush) and _compiled.before_return(flush)
        assert ran == []

    hook = _compiled.CompilableHook("output", module, None, runtime, lambda: None)
    hook.active = True
    _compiled._observe([torch.zeros(())], hook.id, _compiled._UNTAPPED, True, -1)
    assert ran == [1]
    assert not _compiled.before_return(flush)
    assert ran == [1]
    hook.release()


@pytest.mark.skipif(not hasattr(torch.Tag, "cudagraph_unsafe"), reason="no cudagraph_unsafe tag before PyTorch 2.8")
def test_the_op_is_kept_out_of_cuda_graphs():
    # A CUDA graph replays kernels only: captured, the op would skip the hooks at each replay.
    assert torch.Tag.cudagraph_unsafe in torch.ops.tensorscope.observe.default.tags

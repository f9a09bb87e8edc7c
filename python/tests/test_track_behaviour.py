"""What tracking does in the cases PyTorch users hit: tuple outputs, in-place
activations, shared modules, no_grad/eval/inference_mode, parameters and buffers,
include/exclude, every_n with and without next_step, hooks only on sent steps, handle
removal, wrappers, TorchScript, and bad use."""

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import tensorscope
from conftest import wait_until


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return self.head(out[:, -1])


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.act(self.fc(self.act(self.fc(x))))


def hooks_of(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_lstm_tuple_outputs_are_streams(daemon):
    model = Recurrent()
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model)
        model(torch.randn(3, 7, 4)).sum().backward()
        assert scope.stats().pushed == 4
    daemon.stop()
    assert sorted(daemon.frames()) == [("net.head", 0), ("net.lstm[0]", 0), ("net.lstm[1][0]", 0), ("net.lstm[1][1]", 0)]


def test_inplace_relu_gradient_and_shared_module_calls(daemon):
    torch.manual_seed(3)
    model = Shared()
    x = torch.randn(4, 5)
    # Reference: d(loss)/d(fc output) for each call, with out-of-place ReLUs.
    y0 = model.fc(x)
    y1 = model.fc(torch.relu(y0))
    g0, g1 = torch.autograd.grad(torch.relu(y1).pow(2).sum(), [y0, y1])
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_layer("net", model, kinds=["output", "gradient"])
        model(x).pow(2).sum().backward()
        assert scope.stats().pushed == 4 and scope.stats().refused == 0
        handle.remove()
    daemon.stop()
    assert sorted(daemon.frames()) == sorted(
        [("net.fc", 0), ("net.fc#1", 0), ("net.fc.grad", 0), ("net.fc#1.grad", 0)])
    # The in-place ReLU changed the outputs after they were sent: the values are pre-ReLU.
    assert np.array_equal(daemon.npy("net.fc", 0), y0.detach().numpy())
    assert np.array_equal(daemon.npy("net.fc.grad", 0), g0.numpy())


def test_no_grad_eval_and_inference_mode_forwards(daemon):
    # An inference script asks for its evaluation forwards (left out by default).
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, kinds=("output", "gradient"), evaluation="track")
        model.eval()
        with torch.no_grad():
            model(torch.randn(2, 3))
        scope.next_step()
        with torch.inference_mode():
            model(torch.randn(2, 3))
        s = scope.stats()
        # and the tree and summary records of step 0 (step 1's are open)
        assert s.pushed == 4 + 1 + 1 and s.refused == 0


@pytest.mark.parametrize("how", ["no_grad", "inference_mode", "eval"])
def test_evaluation_forwards_are_left_out_by_default(daemon, how):
    # Outputs, their summaries, the tree log, the calls' numbers: nothing of an evaluation
    # forward, whichever way it is run; the training forward after it is the step's first
    # call.
    torch.manual_seed(6)
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    probe = torch.full((2, 3), 1e4)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, kinds=("output", "gradient"))
        for _ in range(3):
            if how == "eval":
                model.eval()
                model(probe)
                model.train()
            else:
                with getattr(torch, how)():
                    model(probe)
            model(torch.randn(2, 3)).sum().backward()
            scope.next_step()
        assert scope.stats().refused == 0
    daemon.stop()
    steps = {}
    for r in daemon.stats_rows():
        steps.setdefault(r["stream"], []).append(int(r["step"]))
    assert {name: sorted(s) for name, s in steps.items()} == {
        name: [0, 1, 2] for name in ("net.0", "net.1", "net.0.grad", "net.1.grad")}
    for step in range(3):
        assert abs(daemon.npy("net.0", step)).max() < 1e3
    table = tensorscope.read_summaries(daemon.session_dir)
    assert set(table.stream) == {"net.0", "net.1", "net.0.grad", "net.1.grad"}
    assert (table.groupby("stream").size() == 3).all()


def test_parameters_buffers_and_parameter_gradients(daemon):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_model("net", model, kinds=["parameter", "buffer", "parameter_gradient"])
        kinds = sorted({s.kind for s in handle.streams})
        assert kinds == ["buffer", "parameter", "parameter_gradient"]
        model(torch.randn(5, 3)).sum().backward()
        weight_grad = model[0].weight.grad.clone()
    daemon.stop()
    names = {name for name, _ in daemon.frames()}
    assert names == {"net.0.weight", "net.0.bias", "net.1.weight", "net.1.bias", "net.1.running_mean",
                     "net.1.running_var", "net.1.num_batches_tracked", "net.0.weight.grad", "net.0.bias.grad",
                     "net.1.weight.grad", "net.1.bias.grad"}
    assert np.array_equal(daemon.npy("net.0.weight.grad", 0), weight_grad.numpy())


def test_include_exclude_and_tracked():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Conv2d(2, 2, 3), nn.Linear(2, 2))
    scope = tensorscope.Client(session="nobody-ie", connect_timeout_ms=0, runtime_dir="/tmp/ts-none")
    h = scope.track_model("m", model, include=r"^[02]$", exclude="2")
    assert [s.name for s in h.streams] == ["m.0"]
    none = scope.track_model("m2", model, include="nothing-matches")
    assert not none.ok and "no module" in none.error
    assert [s.name for s in scope.tracked()] == ["m.0"]
    scope.close()


def test_every_n_with_next_step_installs_hooks_only_on_sent_steps(daemon):
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    sent_steps_hooks = []
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, every_n=2, stats_every=0)
        for step in range(5):
            # Where torch.compile exists the hooks stay registered, turned off (_compiled.py).
            sent_steps_hooks.append(sum(getattr(h, "active", True) for h in model[0]._forward_hooks.values()))
            model(torch.randn(1, 2))
            scope.next_step()
    daemon.stop()
    assert sent_steps_hooks == [1, 0, 1, 0, 1]  # gated steps carry no hook of ours (no summaries asked)
    steps = sorted(int(r["step"]) for r in daemon.stats_rows() if r["stream"] == "net.0")
    assert steps == [0, 2, 4]


def test_a_model_called_three_times_a_step_follows_the_client_steps(daemon):
    # A GAN loop: the discriminator runs on real data, on generated data detached, and on
    # generated data for the generator's loss; next_step() after both optimizers. Before
    # the first next_step() the tracks cannot tell a second call from a new step; from it
    # on, both tracks count the client's steps as from step 0 (nothing taken before leaks).
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 4))
    disc = nn.Sequential(nn.Linear(4, 1))
    opt_g = torch.optim.SGD(gen.parameters(), lr=0.01)
    opt_d = torch.optim.SGD(disc.parameters(), lr=0.01)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("G", gen, every_n=3)
        scope.track_model("D", disc, every_n=3)
        for _ in range(7):
            fake = gen(torch.randn(8, 4))
            loss_d = disc(fake.detach()).mean() - disc(torch.randn(8, 4)).mean()
            opt_d.zero_grad()
            loss_d.backward()
            opt_d.step()
            loss_g = -disc(fake).mean()
            opt_g.zero_grad()
            loss_g.backward()
            opt_g.step()
            scope.next_step()
    daemon.stop()
    steps = {}
    for r in daemon.stats_rows():
        steps.setdefault(r["stream"], []).append(int(r["step"]))
    assert sorted(steps["G.0"]) == [0, 3, 6]
    assert sorted(steps["D.0"]) == [0, 3, 6]
    assert sorted(steps["D.0#1"]) == [0, 3, 6]
    assert sorted(steps["D.0#2"]) == [0, 3, 6]


def test_every_n_without_next_step_counts_training_forwards(daemon):
    model = nn.Sequential(nn.Linear(2, 2))
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, every_n=3)
        for _ in range(7):
            model(torch.randn(1, 2)).sum().backward()
        model.eval()
        model(torch.randn(1, 2))  # an eval forward is no step, and no call of step 6 either
    daemon.stop()
    rows = [(r["stream"], int(r["step"])) for r in daemon.stats_rows()]
    assert sorted(rows) == [("net.0", 0), ("net.0", 3), ("net.0", 6)]


def test_disabled_transform_removal_and_late_modules(daemon):
    model = nn.Sequential(nn.Linear(4, 4))
    with tensorscope.Client(**daemon.client_options(enabled=False)) as scope:
        with scope.track_model("net", model, transform=lambda name, t: t.abs().amax(dim=0)) as handle:
            model(torch.randn(3, 4))
            assert scope.stats().pushed == 0 and scope.stats().gated == 1
            scope.enabled = True
            model.add_module("late", nn.Linear(4, 4))  # added after tracking: ignored
            out = model(torch.randn(3, 4))
            # A second training forward before any next_step(): a new step, or step 0's
            # second call? Held until known (here: at removal, as a step of its own).
            assert scope.stats().pushed == 0
            assert handle.ok and len(handle.streams) == 1
        assert hooks_of(model) == 0 and not handle.ok
        assert scope.stats().pushed == 3  # that output, and the module tree and summary records of its step
        model(torch.randn(3, 4))
        assert scope.stats().pushed == 3
    assert out.shape == (3, 4)
    daemon.stop()
    # No next_step(): each training forward is a step; the sent one was the second.
    assert daemon.npy("net.0", 1).shape == (4,)


def test_wrappers_are_named_after_the_inner_module():
    model = nn.Sequential(nn.Linear(2, 2))
    scope = tensorscope.Client(session="nobody-dp", connect_timeout_ms=0, runtime_dir="/tmp/ts-none")
    handle = scope.track_model("net", nn.DataParallel(model))
    assert [s.name for s in handle.streams] == ["net.0"]
    nn.DataParallel(model)(torch.randn(1, 2))
    assert scope.stats().not_connected == 1  # the hook ran
    scope.close()
    assert hooks_of(model) == 0


def test_torchscript_submodules_warn():
    model = nn.Sequential(torch.jit.script(nn.Linear(2, 2)), nn.Linear(2, 2))
    scope = tensorscope.Client(session="nobody-js", connect_timeout_ms=0, runtime_dir="/tmp/ts-none")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = scope.track_model("net", model)
    assert any("TorchScript" in str(w.message) for w in caught)
    assert [s.name for s in handle.streams] == ["net.1"]
    scope.close()


def test_track_tensor_gradient(daemon):
    w = torch.randn(3, requires_grad=True)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_tensor("w.grad", w, every_n=2)
        for _ in range(3):
            (w * w).sum().backward()
        assert scope.stats().pushed == 2 and scope.stats().gated == 1
    daemon.stop()
    assert np.array_equal(daemon.npy("w.grad", 0), (2 * w).detach().numpy())


def test_bad_use_raises_at_the_call():
    scope = tensorscope.Client(session="nobody-bad", connect_timeout_ms=0, runtime_dir="/tmp/ts-none")
    with pytest.raises(TypeError):
        scope.track_model("net", "not a module")
    with pytest.raises(ValueError):
        scope.track_tensor("t", torch.zeros(2))
    with pytest.raises(ValueError):
        scope.track_model("net", nn.Linear(2, 2), include="(")
    with pytest.raises(ValueError):
        scope.track_model("net", nn.Linear(2, 2), kinds="outputs")
    with pytest.raises(TypeError):
        scope.track_model("net", nn.Linear(2, 2), every_n="2")
    with pytest.raises(ValueError):
        scope.track_model("", nn.Linear(2, 2))
    # A track name starts every stream's name: one no stream can have is refused here, not
    # on every push (NUL, a terminal escape, 64 KiB).
    for bad in ("net\x00x", "\x1b[31mnet", "n" * 65536):
        for track in (scope.track_model, scope.track_layer):
            with pytest.raises(ValueError, match="stream name"):
                track(bad, nn.Linear(2, 2))
        with pytest.raises(ValueError, match="stream name"):
            scope.track_tensor(bad, torch.zeros(2, requires_grad=True))
    with pytest.raises(ValueError):
        scope.set_render_mode("s", "sparkle")
    # Steps are 64-bit, as from C++: a clear error, not an OverflowError.
    with pytest.raises(ValueError, match="step must be between"):
        scope.set_step(2**70)
    with pytest.raises(ValueError, match="step must be between"):
        scope.set_step(-(2**63) - 1)
    scope.close()


def test_daemon_killed_mid_run_training_goes_on(daemon):
    model = nn.Sequential(nn.Linear(2, 2))
    with tensorscope.Client(**daemon.client_options(reconnect_interval_ms=50)) as scope:
        scope.track_model("net", model)
        model(torch.randn(1, 2))
        scope.next_step()
        daemon.kill()
        assert wait_until(lambda: not scope.connected, 10)
        for _ in range(3):
            model(torch.randn(1, 2))
            scope.next_step()
        assert scope.stats().not_connected >= 1
        daemon.start()
        assert wait_until(lambda: scope.connected, 10)
        model(torch.randn(1, 2))
        s = scope.stats()
        assert s.pushed >= 2 and s.connections == 2, s



@pytest.mark.parametrize("method", ["track_model", "track_layer"])
def test_track_keywords_are_the_one_option_list_and_each_is_passed_on(tmp_path, monkeypatch, method):
    """track_model's and track_layer's keywords are the C++ list's (track_option_list.h,
    _native.TRACK_OPTIONS) with its Python defaults, and every one reaches the track."""
    import ast
    import inspect

    options = tensorscope._native.TRACK_OPTIONS
    parameters = inspect.signature(getattr(tensorscope.Client, method)).parameters
    keywords = {n: p.default for n, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(keywords) == set(options)
    for name, literal in options.items():
        assert keywords[name] == ast.literal_eval(literal), name
    received = {}

    def spy(self, name, module, default_kind, **given):
        received.update(given)
        return tensorscope.TrackHandle(error="spied")

    monkeypatch.setattr(tensorscope.Client, "_track_module", spy)
    marks = {name: object() for name in options}  # a value of its own for each keyword
    with tensorscope.Client(session="keywords", runtime_dir=str(tmp_path), connect_timeout_ms=0) as scope:
        getattr(scope, method)("m", nn.Linear(2, 2), **marks)
    assert received == marks

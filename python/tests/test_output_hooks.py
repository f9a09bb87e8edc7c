"""The tracks' output hooks in C (python/native/output_hook.h): a module's first call in a
sent or summarised step with a plain CPU tensor output is sent and summarised without the
Python hook, and so is the gradient at it, with the same streams, steps and values; every
other call (a second call in the step, a bool output, a negative view, labels, a
transform) and gradient (a negative view) goes to the Python hooks as before."""

import copy
import gc
import pickle
import sys

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import tensorscope
from tensorscope import _module_track
from conftest import wait_until


class Probe:
    """Counts the calls the Python output hook takes (ModuleTrack._on_output), and the
    gradients the Python gradient hook does (ModuleTrack._on_grad); by_root: the same
    [calls, gradients] for each tracked model."""

    def __init__(self, monkeypatch):
        self.calls = self.grads = 0
        self.by_root = {}
        on_output, on_grad = _module_track.ModuleTrack._on_output, _module_track.ModuleTrack._on_grad

        def counted_output(track, *args):
            self.calls += 1
            self.by_root.setdefault(track._root, [0, 0])[0] += 1
            return on_output(track, *args)

        def counted_grad(track, *args):
            self.grads += 1
            self.by_root.setdefault(track._root, [0, 0])[1] += 1
            return on_grad(track, *args)

        monkeypatch.setattr(_module_track.ModuleTrack, "_on_output", counted_output)
        monkeypatch.setattr(_module_track.ModuleTrack, "_on_grad", counted_grad)


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def outputs_of(model, x):
    """The outputs of model[0] and model[2] for input x, computed without calling the
    (tracked) modules."""
    with torch.no_grad():
        first = F.linear(x, model[0].weight, model[0].bias)
        return first.numpy(), F.linear(torch.tanh(first), model[2].weight, model[2].bias).numpy()


def test_first_calls_go_native_with_the_python_hooks_values(daemon, monkeypatch):
    probe = Probe(monkeypatch)
    model = mlp()
    a, b = torch.randn(4, 6), torch.randn(5, 6)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("m", model, every_n=1, stats_every=0)
        for step in range(3):  # a siamese step: the model called twice
            (model(a).sum() + model(b).sum()).backward()
            scope.next_step()
        assert scope.stats().pushed == 3 * (4 + 1) and scope.stats().refused == 0  # (+ the step's tree log)
    daemon.stop()
    # Two modules with parameters, two calls a step: the second calls took the Python hook.
    assert probe.calls == 3 * 2
    first_a, last_a = outputs_of(model, a)
    first_b, last_b = outputs_of(model, b)
    for step in range(3):
        assert np.array_equal(daemon.npy("m.0", step), first_a)
        assert np.array_equal(daemon.npy("m.2", step), last_a)
        assert np.array_equal(daemon.npy("m.0#1", step), first_b)
        assert np.array_equal(daemon.npy("m.2#1", step), last_b)


def test_the_default_track_sends_and_summarizes_first_calls_natively(daemon, monkeypatch):
    probe = Probe(monkeypatch)
    model = mlp()
    inputs = [torch.randn(4, 6) for _ in range(3)]
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("m", model)  # every step whole and summarised
        for x in inputs:
            model(x).sum().backward()
            scope.next_step()
        assert scope.stats().refused == 0
    daemon.stop()
    assert probe.calls == 0
    table = tensorscope.read_summaries(daemon.session_dir)
    for step, x in enumerate(inputs):
        first, last = outputs_of(model, x)
        assert np.array_equal(daemon.npy("m.0", step), first)
        for stream, values in (("m.0", first), ("m.2", last)):
            row = table[(table.step == step) & (table.stream == stream)]
            assert len(row) == 1 and row.iloc[0].numel == values.size
            assert row.iloc[0].l2 == pytest.approx(float(np.linalg.norm(values.astype(np.float64))), rel=1e-6)


def test_steps_counted_from_training_forwards_stamp_the_native_sends(daemon, monkeypatch):
    probe = Probe(monkeypatch)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 6)
    sent = {}
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("m", model, every_n=2, stats_every=0, tree_log=False)
        for step in range(5):  # no next_step(): each training forward is a step
            optimizer.zero_grad()
            model(x).sum().backward()
            if step % 2 == 0:
                sent[step] = outputs_of(model, x)[0]
            optimizer.step()
        assert scope.stats().pushed == 3 * 2
    daemon.stop()
    # Step 0 and the first forward of step 1 were held until the optimizer's step told the
    # steps apart (_step_zero.py): those took the Python hook; steps 2 and 4 went native.
    assert probe.calls == 2
    assert sorted(daemon.frames()) == [("m.0", 0), ("m.2", 0)]
    for step, values in sent.items():
        assert np.array_equal(daemon.npy("m.0", step), values)


class Mask(nn.Module):
    def forward(self, x):
        return x > 0


def test_bool_outputs_and_negative_views_take_the_python_hook(daemon, monkeypatch):
    probe = Probe(monkeypatch)
    x = torch.randn(4, 3)

    class Flip(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return torch._neg_view(self.lin(x))

    class Both(nn.Module):
        def __init__(self):
            super().__init__()
            self.flip = Flip()
            self.mask = Mask()

        def forward(self, x):
            return self.flip(x), self.mask(x)

    both = Both()
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("m", both, every_n=1, stats_every=0, containers=True, include=r"^(flip|mask)$")
        both(x)
        scope.next_step()
        assert scope.stats().pushed == 2 + 1 and scope.stats().refused == 0  # (+ the step's tree log)
    daemon.stop()
    assert probe.calls == 2  # neither was sent in C
    assert np.array_equal(daemon.npy("m.flip", 0), -both.flip.lin(x).detach().numpy())
    assert np.array_equal(daemon.npy("m.mask", 0), (x > 0).numpy())


def test_what_only_python_does_turns_the_native_path_off(daemon, monkeypatch):
    probe = Probe(monkeypatch)
    model = mlp()
    x = torch.randn(3, 6)
    labels = ["a", "b", "c"]
    with tensorscope.Client(**daemon.client_options()) as scope:
        tracks = [
            scope.track_model("lab", model, every_n=1, stats_every=0, labels=lambda: labels),
            scope.track_model("tf", model, every_n=1, stats_every=0, transform=lambda name, t: t * 2),
        ]
        model(x).sum().backward()
        scope.next_step()
        assert scope.stats().refused == 0
        for t in tracks:
            t.remove()
    daemon.stop()
    assert probe.calls == 2 * 2  # every track, both modules: in Python
    assert np.array_equal(daemon.npy("tf.0", 0), 2 * model[0](x).detach().numpy())


def test_a_copy_or_pickle_of_a_tracked_model_is_not_tracked(daemon):
    model = mlp()
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("m", model, every_n=1, stats_every=0)
        # (Where torch.compile exists, the native hook runs inside a CompilableHook.)
        hooks = [getattr(h, "eager", h) for h in model[0]._forward_hooks.values()]
        assert any(type(h).__name__ == "OutputHook" for h in hooks)
        for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
            copied(torch.randn(2, 6))
        assert scope.stats().pushed == 0
        model(torch.randn(2, 6))
        assert scope.stats().pushed == 2


def reference_grads(model, x):
    """d(sum of the output)/d(output of model[0]) and of model[2], computed without the
    (tracked) modules."""
    first = F.linear(x, model[0].weight.detach(), model[0].bias.detach()).requires_grad_()
    last = F.linear(torch.tanh(first), model[2].weight.detach(), model[2].bias.detach())
    g_first, g_last = torch.autograd.grad(last.sum(), [first, last])
    return g_first.numpy(), g_last.numpy()


def test_gradients_at_first_calls_go_native(daemon, monkeypatch):
    probe = Probe(monkeypatch)
    model = mlp()
    a, b = torch.randn(4, 6), torch.randn(5, 6)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_layer("m", model)  # gradients, every step whole and summarised
        for _ in range(2):  # a siamese step: the second calls' gradients take the Python hooks
            (model(a).sum() + model(b).sum()).backward()
            scope.next_step()
        assert scope.stats().refused == 0
    daemon.stop()
    # The second calls took the Python output hook; their gradients the Python gradient
    # hook in step 1 (in step 0 the window of _step_zero.py held them: its own hook).
    assert (probe.calls, probe.grads) == (2 * 2, 2)
    table = tensorscope.read_summaries(daemon.session_dir)
    for step in range(2):
        for call, x in (("", a), ("#1", b)):
            g_first, g_last = reference_grads(model, x)
            assert np.array_equal(daemon.npy(f"m.0{call}.grad", step), g_first)
            assert np.array_equal(daemon.npy(f"m.2{call}.grad", step), g_last)
        row = table[(table.step == step) & (table.stream == "m.0.grad")]
        g_first = reference_grads(model, a)[0]
        assert len(row) == 1 and row.iloc[0].kind == "gradient"
        assert row.iloc[0].l2 == pytest.approx(float(np.linalg.norm(g_first.astype(np.float64))), rel=1e-6)


class NegativeGrad(torch.autograd.Function):
    """The identity, whose backward hands on the gradient as a negative view."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return torch._neg_view(-grad)


class Flipped(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return NegativeGrad.apply(self.lin(x))


def test_a_gradient_the_native_hook_cannot_take_goes_to_python(daemon, monkeypatch):
    probe = Probe(monkeypatch)
    model = Flipped()
    x = torch.randn(2, 3)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_layer("m", model, stats_every=0)
        (model(x) * torch.arange(3.0)).sum().backward()
        scope.next_step()
        assert scope.stats().refused == 0
    daemon.stop()
    assert (probe.calls, probe.grads) == (0, 1)
    assert np.array_equal(daemon.npy("m.lin.grad", 0), np.tile(np.arange(3.0, dtype=np.float32), (2, 1)))


def test_a_removed_track_sends_no_gradient_of_a_forward_before(daemon):
    model = mlp()
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_layer("m", model, stats_every=0)
        loss = model(torch.randn(2, 6)).sum()
        handle.remove()
        loss.backward()
        assert scope.stats().pushed == 0


def test_a_client_dropped_without_close_disconnects_while_the_model_lives(daemon):
    """The hooks and the tree log hold the client's Core weakly: dropping the client frees
    it, and the daemon sees the producer go, though the model keeps the track's hooks."""
    model = mlp()
    scope = tensorscope.Client(**daemon.client_options())
    references = sys.getrefcount(scope._core)
    scope.track_layer("m", model, kinds=["output", "gradient"])
    model(torch.randn(2, 6)).sum().backward()
    scope.next_step()
    loss = model(torch.randn(2, 6)).sum()  # (gradient hooks waiting on this step's outputs)
    held = sys.getrefcount(scope._core) - references  # (outside the assert: pytest's rewrite holds one)
    assert held == 0  # the track holds no reference to the Core
    assert wait_until(lambda: [p["connected"] for p in daemon.status()["producers"]] == [True], 60)
    del scope
    gc.collect()
    assert wait_until(lambda: not any(p["connected"] for p in daemon.status()["producers"]), 60), daemon.status()
    loss.backward()  # the hooks find no client: nothing happens
    model(torch.randn(2, 6))

"""What the summaries cost the training step on the CPU: the tensors are read where they are
by the native core, so the operations a step dispatches are the model's own whatever the
number of tracked tensors (a parameter's previous values, for its update ratio, are kept by
the core rather than cloned); and the ratios so kept are the parameters' own."""

import collections

import pytest
import torch
from torch import nn

import tensorscope
from tensorscope import _native

KINDS = ("output", "gradient", "parameter", "parameter_gradient")


def count_mode():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops[str(func)] += 1
            return func(*args, **(kwargs or {}))

    return Count()


def ops_per_step(scope, layers, steps=4):
    """The operations dispatched by the last of `steps` training steps of an MLP of `layers`
    linear layers (tracked with every kind by `scope`, when not None)."""
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.Tanh()) for _ in range(layers)])
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    if scope is not None:
        scope.track_model(f"mlp{layers}", model, every_n=1000, stats_every=1, kinds=KINDS)
    ops = None
    for _ in range(steps):
        x = torch.randn(4, 16)
        with count_mode() as counted:
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if scope is not None:
                scope.next_step()
        ops = counted.ops
    return ops


def test_cpu_summaries_dispatch_no_operation_per_tracked_tensor(daemon):
    plain = {n: ops_per_step(None, n) for n in (2, 8)}
    with tensorscope.Client(**daemon.client_options()) as scope:
        tracked = {n: ops_per_step(scope, n) for n in (2, 8)}
    extra = {n: tracked[n] - plain[n] for n in (2, 8)}
    print(f"operations per step: untracked {sum(plain[2].values())} / {sum(plain[8].values())}, tracked "
          f"{sum(tracked[2].values())} / {sum(tracked[8].values())} (2 / 8 layers)")
    assert sum(plain[8].values()) > sum(plain[2].values())  # (the counting sees the model's operations)
    assert extra[8] == extra[2], extra  # not growing with the tracked tensors
    assert not extra[8], extra  # and in fact none
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    for n in (2, 8):
        # 8 streams a layer (output, its gradient, 2 parameters, their 2 gradients, the Tanh's
        # output and gradient), every step.
        rows = table[table.stream.str.startswith(f"mlp{n}.")]
        assert set(rows.kind) == {"activation", "gradient", "parameter", "parameter_gradient"}
        assert len(rows[rows.kind == "parameter"]) == 2 * n * 4


def test_a_parameters_update_ratio_kept_natively_is_its_own(daemon):
    torch.manual_seed(1)
    model = nn.Linear(6, 5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    weights = {}
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("lin", model, every_n=1000, kinds="parameter")
        for step in range(5):
            weights[step] = model.weight.detach().double().clone()
            loss = model(torch.randn(3, 6)).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            scope.next_step()
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    rows = table[table.stream == "lin.weight"].sort_values("step")
    assert list(rows.step) == [0, 1, 2, 3, 4]
    assert rows.update_ratio.isna().iloc[0]  # (nothing to compare with yet)
    for row in rows.iloc[1:].itertuples():
        now, before = weights[row.step], weights[row.step - 1]
        assert row.update_ratio == pytest.approx(((now - before).norm() / before.norm()).item(), rel=1e-6)


def test_previous_values_are_kept_in_the_core():
    hooks = tensorscope._tensors.output_hooks(lambda: None)
    kept = _native.PreviousValues()
    assert kept.bytes == 0
    w = nn.Parameter(torch.randn(4, 3))
    first = hooks.summarize(w, kept)
    assert first[9] is None and kept.bytes == 4 * 3 * 4
    with torch.no_grad():
        w.mul_(2)
    second = hooks.summarize(w, kept)
    assert second[9] == pytest.approx(1.0, rel=1e-6)  # |2w - w| / |w|
    assert second[:8] == hooks.summarize(w)[:8] and hooks.summarize(w)[9] is None
    # Not read here (the track's Python path reads them): bool, a subclass, a non-tensor; a
    # wrong `previous` is a TypeError.

    class Sub(torch.Tensor):
        pass

    assert hooks.summarize(torch.ones(2, dtype=torch.bool)) is None
    assert hooks.summarize(torch.ones(2).as_subclass(Sub)) is None
    assert hooks.summarize("not a tensor") is None
    with pytest.raises(TypeError):
        hooks.summarize(w, "not kept values")


def train_for(scope, model, seconds, batch):
    """Trains `model` on random batches of `batch` rows until `seconds` have passed and
    stats().own_time has a window's figure (a busy machine stretches the steps)."""
    import time

    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    start = time.monotonic()
    while time.monotonic() - start < seconds or (scope.stats().own_time < 0 and time.monotonic() - start < 120):
        loss = model(torch.randn(batch, model[0].in_features)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        scope.next_step()


def test_a_client_measures_its_own_cost_and_says_once_when_it_is_high(daemon, capfd):
    # A tiny model every layer of which is summarized every step: the hooks cost more than
    # the model. Said once, in stats() and on stderr.
    tiny = nn.Sequential(*[nn.Linear(8, 8) for _ in range(12)])
    with tensorscope.Client(**daemon.client_options()) as scope:
        if scope.stats().own_time_note:  # (the meter is the process's: an earlier file's tiny model spoke)
            pytest.skip("this process's client already said its cost was high; run this file alone")
        scope.track_model("tiny", tiny, every_n=1000, kinds=KINDS)
        train_for(scope, tiny, 6, 2)
        stats = scope.stats()
        print(f"own time of the tiny model: {stats.own_time:.1%}")
        assert stats.own_time > 0.05, stats
        assert "tracking took" in stats.own_time_note and "stats_every" in stats.own_time_note
        assert stats.own_time_note in repr(stats)
        train_for(scope, tiny, 6, 2)  # another window over the limit
    err = capfd.readouterr().err
    assert err.count("tracking took") == 1, err


def test_the_cost_of_a_few_summaries_on_a_heavy_step_is_a_small_share():
    # Without a daemon: the hooks run (and summarize) all the same. Two wide layers, their
    # outputs summarized each step: the spans are measured (a share above 0) and are the
    # hooks only, not the step (well under half of it, whatever the machine's load). The
    # meter is the process's: 11 s make the last window this test's alone.
    wide = nn.Sequential(nn.Linear(1024, 1024), nn.Linear(1024, 1024))
    with tensorscope.Client(session="own-cost-heavy", connect_timeout_ms=0, autostart=False) as scope:
        scope.track_model("wide", wide, every_n=1000, kinds="output")
        train_for(scope, wide, 11, 256)
        share = scope.stats().own_time
    print(f"own time of the wide model: {share:.2%}")
    assert 0 < share < 0.5

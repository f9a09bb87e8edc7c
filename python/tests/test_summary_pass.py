"""The fused summary pass's logic on the CPU (TENSORSCOPE_SUMMARY_PASS=host: CPU tensors
gathered into passes run on the host with the GPU kernel's arithmetic): a track's
summaries gathered and flushed at a backward's end, the root's next forward and the step
change are those summarized at once; a few passes a step whatever the number of tensors;
a tensor written in place before its flush is refused once and its stream summarized at
once from then on."""

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import tensorscope
from tensorscope import _native, _track_summaries

KINDS = ("output", "gradient", "parameter", "parameter_gradient")
COLUMNS = ("numel", "nan_count", "inf_count", "zero_fraction", "l2", "max_abs", "mean", "std", "update_ratio")


def track(scope, name, model, gathered, monkeypatch, **options):
    """track_model with CPU tensors gathered into the fused pass or summarized at once."""
    monkeypatch.setattr(_track_summaries, "GATHER_CPU", gathered)
    monkeypatch.setattr(tensorscope._module_track, "GATHER_CPU", gathered)
    handle = scope.track_model(name, model, every_n=1000, **options)
    return handle, scope._tracks[-1]()


def train(scope, models, steps, data):
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]
    for step in range(steps):
        for model, opt in zip(models, opts):
            loss = model(data[step]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        scope.next_step()


def rows_by_stream(table, prefix):
    rows = table[table.stream.str.startswith(prefix + ".")]
    return {(s[len(prefix):], step): r for s, step, r in zip(rows.stream, rows.step, rows.itertuples())}


def test_gathered_summaries_are_the_summaries_taken_at_once(daemon, monkeypatch):
    torch.manual_seed(3)
    at_once = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 16), nn.Linear(16, 4))
    gathered = copy.deepcopy(at_once)
    data = [torch.randn(5, 12) for _ in range(6)]
    with tensorscope.Client(**daemon.client_options()) as scope:
        track(scope, "at_once", at_once, False, monkeypatch, kinds=KINDS)
        _, fused = track(scope, "gathered", gathered, True, monkeypatch, kinds=KINDS)
        train(scope, [at_once, gathered], 6, data)
        assert fused._summaries.batch.passes > 0
        refused = scope.stats().refused
    assert refused == 0
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    a, b = rows_by_stream(table, "at_once"), rows_by_stream(table, "gathered")
    assert len(a) == 6 * 3 * 6 and set(a) == set(b)  # 3 Linear: output, gradient, 2 parameters, their gradients
    for key, row in a.items():
        other = b[key]
        for column in COLUMNS:
            x, y = getattr(row, column), getattr(other, column)
            if x != x:  # NaN: no update ratio at the first step
                assert y != y, (key, column)
            else:  # (the CPU's sums are float32 within blocks: a mean near 0 is known to 1e-6 of the values)
                assert y == pytest.approx(x, rel=1e-6, abs=1e-6 * row.max_abs), (key, column, x, y)


def test_a_step_is_a_few_passes_whatever_the_number_of_tensors(monkeypatch):
    passes = {}
    with tensorscope.Client(session="pass-count", connect_timeout_ms=0, autostart=False) as scope:
        for layers in (2, 16):
            model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(layers)])
            _, fused = track(scope, f"mlp{layers}", model, True, monkeypatch, kinds=KINDS)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            counts = []
            for _ in range(4):
                before = fused._summaries.batch.passes
                loss = model(torch.randn(3, 8)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                scope.next_step()
                counts.append(fused._summaries.batch.passes - before)
            passes[layers] = counts
    print(f"passes per step: {passes}")
    assert passes[16][1:] == passes[2][1:]  # not growing with the tensors
    assert all(0 < n <= 3 for n in passes[16][1:]), passes


class InPlaceAfter(nn.Module):
    """A tracked Linear whose output the forward then writes in place."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        return self.out(F.relu(self.fc(x), inplace=True))


def test_a_tensor_written_in_place_before_its_flush_is_refused_once_then_summarized_at_once(daemon, monkeypatch):
    torch.manual_seed(4)
    model = InPlaceAfter()
    with tensorscope.Client(**daemon.client_options()) as scope:
        _, fused = track(scope, "net", model, True, monkeypatch, kinds="output")
        outputs = {}

        def keep(module, inputs, output):
            outputs[len(outputs)] = output.detach().clone()  # (before the ReLU writes it)

        model.fc.register_forward_hook(keep)
        for step in range(4):
            model(torch.randn(3, 6))
            scope.next_step()
        assert "net.fc" in fused._at_once
        refused = scope.stats().refused
    assert refused == 1
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    fc = table[table.stream == "net.fc"].sort_values("step")
    assert list(fc.step) == [1, 2, 3]  # step 0's was written before its flush
    for row in fc.itertuples():
        assert row.l2 == pytest.approx(outputs[row.step].norm().item(), rel=1e-6)  # the output as the module gave it
        assert row.zero_fraction == pytest.approx((outputs[row.step] == 0).float().mean().item())
    assert list(table[table.stream == "net.out"].step) == [0, 1, 2, 3]  # gathered all along


class FailingBatch(_native.SummaryBatch):
    """A SummaryBatch whose passes fail on the device (a kernel this GPU cannot run)."""

    def take(self, ticket):
        super().take(ticket)
        return "fused summary kernel: no kernel image is available for execution on the device"


def test_a_failed_pass_is_refused_and_the_track_summarizes_at_once_after(daemon, monkeypatch):
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    with tensorscope.Client(**daemon.client_options()) as scope:
        _, fused = track(scope, "net", model, True, monkeypatch, kinds="output")
        monkeypatch.setattr(fused._summaries, "batch", FailingBatch())
        for step in range(3):
            model(torch.randn(2, 4))
            scope.next_step()
        refused = scope.stats().refused
        assert fused._gather_failed
    assert refused == 2  # step 0's two outputs
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    assert sorted(set(table.step)) == [1, 2] and len(table) == 4


def test_a_pass_takes_at_most_max_gathered_tensors(monkeypatch):
    # 180 layers, every kind: 1,080 tensors a step, so a flush comes when 1,000 are gathered.
    layers = 180
    model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(layers)])
    with tensorscope.Client(session="pass-limit", connect_timeout_ms=0, autostart=False) as scope:
        _, fused = track(scope, "deep", model, True, monkeypatch, kinds=KINDS)
        assert 6 * layers > fused._summaries.MAX_GATHERED == _native.FUSED_MAX_GATHERED == 1000
        most = 0
        real_gather = fused._summaries.gather

        def gather(g):
            nonlocal most
            due = real_gather(g)
            most = max(most, fused._summaries.gathered())
            return due

        monkeypatch.setattr(fused._summaries, "gather", gather)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        counts = []
        for _ in range(3):
            before = fused._summaries.batch.passes
            loss = model(torch.randn(1, 2)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            scope.next_step()
            counts.append(fused._summaries.batch.passes - before)
        assert scope.stats().refused == 0
    assert most == 1000
    assert counts[1:] == [2, 2], counts


class Reused(nn.Module):
    """Intermediates a compiled graph frees early: Inductor writes later results into the
    memory of a tracked output once the graph no longer reads it."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c, self.d = nn.Linear(12, 32), nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 4)

    def forward(self, x):
        x = torch.tanh(self.a(x))
        x = torch.sin(self.b(x)) * 2
        x = torch.cos(self.c(x)) + 1
        return self.d(x)


@pytest.mark.skipif(not tensorscope._compiled.SUPPORTED, reason="torch.compile with custom ops needs PyTorch >= 2.4")
def test_a_compiled_graphs_tensors_are_summarized_before_the_graph_reuses_their_memory(daemon, monkeypatch):
    from torch._dynamo.utils import counters

    torch.manual_seed(5)
    eager = Reused()
    compiled = copy.deepcopy(eager)
    data = [torch.randn(6, 12) for _ in range(4)]
    torch._dynamo.reset()
    counters.clear()
    with tensorscope.Client(**daemon.client_options()) as scope:
        track(scope, "eager", eager, True, monkeypatch, kinds=("output", "gradient"))
        _, fused = track(scope, "compiled", compiled, True, monkeypatch, kinds=("output", "gradient"))
        train(scope, [eager, torch.compile(compiled, fullgraph=True)], 4, data)
        assert fused._summaries.batch.passes > 0
        refused = scope.stats().refused
    assert refused == 0
    assert sum(counters["graph_break"].values()) == 0
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    a, b = rows_by_stream(table, "eager"), rows_by_stream(table, "compiled")
    assert len(a) == 4 * 4 * 2 and set(a) == set(b)
    for key, row in a.items():
        for column in ("zero_fraction", "l2", "max_abs", "mean", "std"):
            x, y = getattr(row, column), getattr(b[key], column)
            assert y == pytest.approx(x, rel=1e-4, abs=1e-5 * row.max_abs), (key, column, x, y)

"""Modules called many times a step (tensorscope/_call_stacks.py): past the first calls,
a step's calls become one calls x features matrix per stream, with every call's values in
it; "separate" keeps a stream per call, "stacked" stacks them all."""

import json
import os

import numpy as np
import pytest
import torch
from torch import nn

import tensorscope
from tensorscope import _call_stacks as CS
from tensorscope._tracks import ValueMeta

HIDDEN, BATCH = 6, 3


def test_a_row_is_the_batch_mean_and_long_rows_are_averaged_down():
    t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    np.testing.assert_allclose(CS.call_row(t).numpy(), t.reshape(2, 12).mean(0).numpy())
    assert CS.call_row(torch.ones(5, dtype=torch.int64)).dtype == torch.float32
    long = torch.arange(CS.MAX_ROW_LENGTH * 3, dtype=torch.float32)
    row = CS.call_row(long)
    assert row.numel() == CS.MAX_ROW_LENGTH
    np.testing.assert_allclose(row[:2].numpy(), [1.0, 4.0])  # means of 0..2 and 3..5


def test_rows_of_another_length_are_resampled_to_the_first():
    stack = CS.Stack("m#calls", 0, 0, ("m", "Linear", "output", "", 0), 0)
    stack.calls, stack.order = [torch.zeros(4), torch.tensor([0.0, 3.0])], [0, 1]
    m = stack.matrix()
    assert m.shape == (2, 4)
    np.testing.assert_allclose(m[1].numpy(), [0, 0, 3, 3])  # averaged (as pooling does) to 4 features


def test_held_calls_are_reduced_in_order_and_one_written_in_place_is_nan():
    stacks = CS.CallStacks("stacked")
    meta = ValueMeta("m", "Linear", "output", "")
    outs = [torch.full((2, 3), float(k)) for k in range(5)]
    outs[3] = torch.arange(6.0).reshape(3, 2)  # another shape: a run of its own
    for k, t in enumerate(outs):
        assert stacks.take("m#calls", t, 0, 7, k, meta) == []
    outs[1].add_(100)  # written in place after its call
    (stack,) = stacks.take_all()
    m = stack.matrix().numpy()
    assert m.shape == (5, 3)
    np.testing.assert_allclose(m[[0, 2, 4]], [[0] * 3, [2] * 3, [4] * 3])
    assert np.isnan(m[1]).all() and stack.changed == 1
    np.testing.assert_allclose(m[3], [2, 2.5, 3])  # mean over rows [2, 3], resampled to 3 features
    # A later step's call completes the stack of the earlier one.
    stacks.take("m#calls", outs[0], 0, 7, 0, meta)
    (done,) = stacks.take("m#calls", outs[0], 0, 8, 0, meta)
    assert done.step == 7 and len(done.calls) == 1


def test_the_vocabulary_and_its_numbers_are_the_cpp_ones():
    from tensorscope import _native

    assert CS.CALL_MODES == ("auto", "stacked", "separate") == tuple(_native.CALL_STACKING)
    assert (CS.SEPARATE_CALLS, CS.MAX_ROW_LENGTH, CS.MAX_ROWS, CS.STACK_SUFFIX) == (4, 1024, 4096, "#calls")
    assert [CS.CallStacks(m).separate for m in CS.CALL_MODES] == [4, 0, None]


def test_an_unknown_mode_is_refused(daemon):
    with tensorscope.Client(**daemon.client_options()) as scope:
        with pytest.raises(ValueError, match="calls must be one of"):
            scope.track_model("m", nn.Linear(2, 2), calls="every")


def rnn_steps(scope, cell, steps, timesteps, seen):
    """`steps` training steps of an RNN cell over `timesteps`; `seen` gets each step's
    outputs (timesteps x batch x hidden)."""
    torch.manual_seed(1)
    opt = torch.optim.SGD(cell.parameters(), lr=0.01)
    for _ in range(steps):
        h = torch.zeros(BATCH, HIDDEN)
        outs = []
        for _ in range(timesteps):
            h = cell(torch.randn(BATCH, 2), h)
            outs.append(h.detach().clone())
        opt.zero_grad()
        h.pow(2).sum().backward()
        opt.step()
        seen.append(torch.stack(outs))
        scope.next_step()


def streams_and_steps(daemon):
    out = {}
    for r in daemon.stats_rows():
        out.setdefault(r["stream"], set()).add(int(r["step"]))
    return out


def test_auto_keeps_four_calls_and_stacks_every_call_of_a_step(daemon):
    cell = nn.RNNCell(2, HIDDEN)
    seen = []
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_model("rnn", cell, kinds=["output", "gradient"])
        rnn_steps(scope, cell, 3, 30, seen)
        names = {s.name for s in handle.streams}
    daemon.stop()
    got = streams_and_steps(daemon)
    for name in ("rnn", "rnn#1", "rnn#2", "rnn#3", "rnn#calls", "rnn.grad", "rnn#3.grad", "rnn#calls.grad"):
        assert got.get(name) == {0, 1, 2}, (name, sorted(got))
    assert not [n for n in got if n.startswith("rnn#4") or n.startswith("rnn#29")], sorted(got)
    assert {"rnn#calls", "rnn#calls.grad"} <= names
    # Step 0 learns the module is called often at its 5th call: rows from call 4 on.
    # From step 1, every call: row k is call k's output averaged over the batch.
    first = daemon.npy("rnn#calls", 0)
    np.testing.assert_allclose(first, seen[0][4:].mean(1).numpy(), rtol=1e-6, atol=1e-6)
    for step in (1, 2):
        m = daemon.npy("rnn#calls", step)
        assert m.shape == (30, HIDDEN)
        np.testing.assert_allclose(m, seen[step].mean(1).numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(daemon.npy("rnn#2", step), seen[step][2].numpy(), rtol=1e-6)
    # Gradients arrive last call first; their rows are in call order too: the last call's
    # is the loss's gradient, d(sum h^2)/dh = 2h, averaged over the batch.
    grads = daemon.npy("rnn#calls.grad", 2)
    assert grads.shape == (30, HIDDEN)
    np.testing.assert_allclose(grads[-1], 2 * seen[2][-1].mean(0).numpy(), rtol=1e-5, atol=1e-6)


def test_separate_keeps_a_stream_per_call_and_stacked_only_the_matrix(daemon):
    seen = []
    with tensorscope.Client(**daemon.client_options()) as scope:
        apart, together = nn.RNNCell(2, HIDDEN), nn.RNNCell(2, HIDDEN)
        scope.track_model("apart", apart, calls="separate")
        scope.track_model("together", together, calls="stacked")
        rnn_steps(scope, apart, 2, 12, seen)
        rnn_steps(scope, together, 2, 12, seen)
    daemon.stop()
    got = streams_and_steps(daemon)
    assert "apart#11" in got and not [n for n in got if n.startswith("apart#calls")]
    assert [n for n in got if n.startswith("together")] == ["together#calls"]
    m = daemon.npy("together#calls", got["together#calls"].pop())
    assert m.shape == (12, HIDDEN)  # from the first step on: all calls


def test_a_cell_called_a_thousand_times_a_step_gives_a_handful_of_videos(tmp_path):
    from conftest import Daemon

    d = Daemon(str(tmp_path), "calls", npy="", video=".*").start()
    try:
        cell = nn.LSTMCell(4, 16)
        opt = torch.optim.SGD(cell.parameters(), lr=0.01)
        with tensorscope.Client(**d.client_options()) as scope:
            scope.track_model("seq", cell, kinds=["output", "gradient"])
            for _ in range(2):
                h = c = torch.zeros(2, 16)
                for _ in range(1000):
                    h, c = cell(torch.randn(2, 4), (h, c))
                opt.zero_grad()
                h.sum().backward()
                opt.step()
                scope.next_step()
            stats = scope.stats()
        d.stop()
    finally:
        if d.process.poll() is None:
            d.stop()
    assert stats.refused == 0, stats
    with open(os.path.join(d.session_dir, "index.json")) as f:
        files = json.load(f)["files"]
    files = [e for e in files if e["stream"] != "overview"]  # the rank's overview, beside
    streams = {e["stream"] for e in files}
    # [0] and [1] (h, c) of 4 calls and their stack, outputs and gradients.
    assert streams <= {f"seq{c}{leaf}{g}" for c in ("", "#1", "#2", "#3", "#calls") for leaf in ("[0]", "[1]")
                       for g in ("", ".grad")}, sorted(streams)
    assert {"seq#calls[0]", "seq#calls[1].grad"} <= streams
    assert len(files) <= 20, len(files)
    assert len(streams) >= 16  # 4 calls + the stack, x (h, c), x (output, gradient) - 4


def test_gradient_accumulation_stacks_the_fifth_micro_batch_not_the_evaluation(daemon):
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(3, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    outputs = []
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", net, every_n=2, kinds=("output", "gradient"))
        for _ in range(5):
            opt.zero_grad()
            step = []
            for _ in range(5):
                y = net(torch.randn(2, 3))
                step.append(y.detach().clone())
                y.sum().backward()
            opt.step()
            net.eval()
            with torch.no_grad():
                net(torch.randn(2, 3))  # an evaluation: no call of the step, no row
            net.train()
            outputs.append(step)
            scope.next_step()
    daemon.stop()
    got = streams_and_steps(daemon)
    assert set(got) == {"net.0", "net.0#1", "net.0#2", "net.0#3", "net.0#calls", "net.0.grad", "net.0#1.grad",
                        "net.0#2.grad", "net.0#3.grad", "net.0#calls.grad"}, sorted(got)
    assert got["net.0#calls"] == {0, 2, 4}
    np.testing.assert_allclose(daemon.npy("net.0#calls", 0), outputs[0][4].mean(0, keepdim=True).numpy(), rtol=1e-6)
    for step in (2, 4):
        expected = torch.stack([y.mean(0) for y in outputs[step]]).numpy()
        np.testing.assert_allclose(daemon.npy("net.0#calls", step), expected, rtol=1e-6)


def test_separate_calls_past_the_shared_limit_are_refused_in_the_shared_words(tmp_path, monkeypatch):
    """The call limit and the words of the refusal are the client core's track policy
    (client/core/track_policy.h), the C++ tracks' too."""
    from tensorscope import _native

    limit = _native.TRACK_POLICY["max_calls_per_step"]
    assert limit == 1024
    refusals = []
    with tensorscope.Client(session="limit", runtime_dir=str(tmp_path), connect_timeout_ms=0) as scope:
        monkeypatch.setattr(scope, "_refuse", lambda stream, why: refusals.append((stream, why)))
        cell = nn.Linear(2, 2)
        scope.track_model("cell", cell, calls="separate", stats_every=0)
        scope.next_step()
        for _ in range(limit + 3):  # one step
            cell(torch.ones(1, 2))
    assert refusals == [("cell", _native.TRACK_REFUSALS["over_calls"])] * 3

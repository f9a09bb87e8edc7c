"""The exact steps (and values) a track sends in the loop shapes of real training: a model
called several times a step (GAN, siamese), gradient accumulation, eval forwards between
steps, several models and a track made late, next_step() from the first step or only
later, set_step() to resume, and scripts that never call next_step()."""

import numpy as np
import torch
from torch import nn

import tensorscope
from tensorscope import _step_zero


def steps_by_stream(daemon):
    steps = {}
    for r in daemon.stats_rows():
        steps.setdefault(r["stream"], []).append(int(r["step"]))
    return {name: sorted(s) for name, s in steps.items()}


def gan_step(gen, disc, opt_g, opt_d, seen=None):
    """One GAN step: the discriminator runs on generated data (detached), on real data,
    and on generated data for the generator's loss."""
    fake = gen(torch.randn(8, 4))
    d_fake, d_real = disc(fake.detach()), disc(torch.randn(8, 4))
    opt_d.zero_grad()
    (d_fake.mean() - d_real.mean()).backward()
    opt_d.step()
    d_gen = disc(fake)
    opt_g.zero_grad()
    (-d_gen.mean()).backward()
    opt_g.step()
    if seen is not None:
        seen.append([t.detach().clone() for t in (d_fake, d_real, d_gen)])


def gan():
    torch.manual_seed(0)
    gen, disc = nn.Sequential(nn.Linear(4, 4)), nn.Sequential(nn.Linear(4, 1))
    return gen, disc, torch.optim.SGD(gen.parameters(), lr=0.1), torch.optim.SGD(disc.parameters(), lr=0.1)


def test_gan_every_second_step_sends_each_call_once_at_its_step(daemon):
    gen, disc, opt_g, opt_d = gan()
    seen = []
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("G", gen, every_n=2)
        scope.track_model("D", disc, every_n=2)
        for _ in range(5):
            gan_step(gen, disc, opt_g, opt_d, seen)
            scope.next_step()
    daemon.stop()
    steps = steps_by_stream(daemon)
    for name in ("G.0", "D.0", "D.0#1", "D.0#2"):
        assert steps[name] == [0, 2, 4], name
    assert "D.0#3" not in steps
    for step in (0, 2, 4):  # each call's own values, the ones held in step 0 included
        for call, name in enumerate(("D.0", "D.0#1", "D.0#2")):
            np.testing.assert_array_equal(daemon.npy(name, step).reshape(-1), seen[step][call].numpy().reshape(-1))


def summary_steps(daemon):
    """{stream: [steps]} of the session's summary table."""
    table = tensorscope.read_summaries(daemon.session_dir)
    return {name: sorted(int(s) for s in group.step) for name, group in table.groupby("stream")}


def test_step_zeros_later_calls_are_summarized_and_their_nan_reported_at_step_zero(daemon):
    # The discriminator's second and third calls of step 0 are taken while the track cannot
    # yet tell them from new steps (_step_zero.py): their summaries are held with them.
    gen, disc, opt_g, opt_d = gan()
    with tensorscope.Client(**daemon.client_options(every_n=1000)) as scope:
        scope.track_model("G", gen, kinds=("output", "gradient"))
        scope.track_model("D", disc, kinds=("output", "gradient"))
        fake = gen(torch.randn(8, 4))
        d_fake, d_real = disc(fake.detach()), disc(torch.full((8, 4), float("nan")))  # NaN in call #1
        (d_fake.mean() - d_real.mean()).backward()
        d_gen = disc(fake)
        (-d_gen.mean()).backward()
        scope.next_step()
        for _ in range(2):
            gan_step(gen, disc, opt_g, opt_d)
            scope.next_step()
        first = [a for a in scope.anomalies(timeout=60) if a["type"] == "non_finite"]
    daemon.stop()
    steps = summary_steps(daemon)
    for name in ("G.0", "G.0.grad", "D.0", "D.0#1", "D.0#2", "D.0.grad", "D.0#1.grad", "D.0#2.grad"):
        assert steps[name] == [0, 1, 2], name
    assert [(a["step"], a["stream"]) for a in first] == [(0, "D.0#1")], first


def test_without_next_step_gradient_accumulation_summarizes_every_counted_step(daemon):
    # Two micro-batches per update and never next_step(): each training forward is a step,
    # its summaries included, those taken before the track knew it (the second update).
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", net, every_n=1000, kinds=("output", "gradient"))
        for _ in range(4):
            for _ in range(2):
                net(torch.randn(2, 3)).sum().backward()
            opt.step()
            opt.zero_grad()
    daemon.stop()
    assert summary_steps(daemon) == {"net.0": list(range(8)), "net.0.grad": list(range(8))}


def test_gradient_accumulation_with_an_eval_forward_each_step(daemon):
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(3, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with tensorscope.Client(**daemon.client_options()) as scope:
        # A stream per call (by default, calls past the 4th are stacked: test_call_stacks.py).
        scope.track_model("net", net, every_n=2, kinds=("output", "gradient"), calls="separate")
        for _ in range(5):
            opt.zero_grad()
            for _ in range(4):
                net(torch.randn(2, 3)).sum().backward()
            opt.step()
            net.eval()
            with torch.no_grad():
                net(torch.randn(2, 3))  # an evaluation forward: no call of the step
            net.train()
            scope.next_step()
    daemon.stop()
    steps = steps_by_stream(daemon)
    for name in ("net.0", "net.0#1", "net.0#2", "net.0#3"):
        assert steps[name] == [0, 2, 4], name
    for name in ("net.0.grad", "net.0#1.grad", "net.0#2.grad", "net.0#3.grad"):
        assert steps[name] == [0, 2, 4], name
    assert set(steps) == {"net.0", "net.0#1", "net.0#2", "net.0#3",
                          "net.0.grad", "net.0#1.grad", "net.0#2.grad", "net.0#3.grad"}


class WordLanguageModel(nn.Module):
    """pytorch/examples word_language_model's RNNModel, small."""

    def __init__(self, tokens=50, width=16):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(tokens, width)
        self.rnn = nn.LSTM(width, width)
        self.decoder = nn.Linear(width, tokens)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(output)), hidden


def test_an_evaluation_after_an_epochs_last_step_leaves_the_next_step_whole(daemon):
    # The example's loop: evaluate() runs after the epoch's last next_step(), under
    # no_grad and eval(); a NaN put into the decoder at the next (training) step is
    # reported at that step, every training step has its summaries and gradients, and the
    # evaluation's calls are no rows of their own.
    torch.manual_seed(4)
    model = WordLanguageModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    tokens = torch.randint(0, 50, (401, 4))
    epochs, batches, bad_step = 3, 7, 14  # step 14: the first step of the third epoch

    def hidden():
        return torch.zeros(1, 4, 16), torch.zeros(1, 4, 16)

    def evaluate():
        model.eval()
        with torch.no_grad():
            for i in range(5):
                out, _ = model(tokens[i * 10:i * 10 + 10], hidden())
        model.train()

    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("lm", model, every_n=1000, kinds=("output", "gradient"))
        step = 0
        for _ in range(epochs):
            for b in range(batches):
                if step == bad_step:
                    with torch.no_grad():
                        model.decoder.bias.fill_(float("nan"))
                x, y = tokens[b * 20:b * 20 + 20], tokens[b * 20 + 1:b * 20 + 21]
                out, _ = model(x, hidden())
                loss = nn.functional.cross_entropy(out.reshape(-1, 50), y.reshape(-1))
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
                opt.step()
                scope.next_step()
                step += 1
            evaluate()
        reported = scope.anomalies(timeout=60)
    daemon.stop()
    first = [(a["step"], a["stream"]) for a in reported if a["type"] == "non_finite"]
    assert first == [(bad_step, "lm.decoder")], (reported, daemon.log())
    table = tensorscope.read_summaries(daemon.session_dir)
    assert set(table.stream) == {"lm.encoder", "lm.rnn[0]", "lm.rnn[1][0]", "lm.rnn[1][1]", "lm.decoder",
                                 "lm.encoder.grad", "lm.rnn[0].grad", "lm.decoder.grad"}, sorted(set(table.stream))
    for stream in ("lm.decoder", "lm.decoder.grad", "lm.encoder"):
        assert sorted(table[table.stream == stream].step) == list(range(epochs * batches)), stream


def test_next_step_only_from_the_second_step_on(daemon):
    # A siamese net (two calls a step) with next_step() at the top of the loop from the
    # second step on: the first step's second call is known to be its own only then.
    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(3, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", net, every_n=2)
        for i in range(6):
            if i > 0:
                scope.next_step()
            a, b = net(torch.randn(2, 3)), net(torch.randn(2, 3))
            opt.zero_grad()
            (a - b).pow(2).sum().backward()
            opt.step()
    daemon.stop()
    steps = steps_by_stream(daemon)
    assert steps["net.0"] == [0, 2, 4] and steps["net.0#1"] == [0, 2, 4]


def test_several_models_a_late_track_and_a_resumed_run_send_the_multiples_of_every_n(daemon):
    small, large = nn.Sequential(nn.Linear(2, 2)), nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.set_step(95)  # resumed from a checkpoint taken at step 95
        scope.track_model("small", small, every_n=10)
        late = None
        for step in range(95, 125):
            if step == 103:
                late = scope.track_model("large", large, every_n=10)
            small(torch.randn(1, 2))
            large(torch.randn(1, 64))
            scope.next_step()
        assert late.ok
    daemon.stop()
    steps = steps_by_stream(daemon)
    assert steps["small.0"] == [100, 110, 120]
    assert steps["large.0"] == [110, 120] and steps["large.2"] == [110, 120]


def test_without_next_step_each_training_forward_is_a_step(daemon):
    # Never next_step(): the second forward's values wait until the track knows (here: the
    # second optimizer update), then go out as the steps the forwards counted.
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(3, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    outputs = []
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", net, every_n=3)
        for _ in range(8):
            out = net(torch.randn(2, 3))
            outputs.append(out.detach().clone())
            opt.zero_grad()
            out.sum().backward()
            opt.step()
    daemon.stop()
    assert steps_by_stream(daemon) == {"net.0": [0, 3, 6]}
    for step in (0, 3, 6):
        np.testing.assert_array_equal(daemon.npy("net.0", step), outputs[step].numpy())


def test_what_does_not_fit_while_step_zero_is_unknown_is_counted(daemon, monkeypatch):
    monkeypatch.setattr(_step_zero, "HOLD_BYTES", 3 * 2 * 8 * 4)  # two Linear(8, 8) outputs of 3 rows
    net = nn.Sequential(nn.Linear(8, 8))
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", net)
        for _ in range(4):
            net(torch.randn(3, 8))  # one step, four calls: the 2nd and 3rd are held, the 4th refused
        assert scope.stats().refused == 1 and scope.stats().pushed == 1
        scope.next_step()
        net(torch.randn(3, 8))
        assert scope.stats().refused == 1
    daemon.stop()
    assert steps_by_stream(daemon) == {"net.0": [0, 1], "net.0#1": [0], "net.0#2": [0]}


def test_a_capture_reads_step_zero_as_a_client_does():
    net = nn.Sequential(nn.Linear(2, 2))
    with tensorscope.capture(net, name="net", every_n=2, grad=False, containers=False) as cap:
        for _ in range(3):
            net(torch.randn(1, 2))
            net(torch.randn(1, 2))
            cap.next_step()
    assert sorted((s.step, s.call, s.stream) for s in cap) == [
        (0, 0, "net.0"), (0, 1, "net.0#1"), (2, 0, "net.0"), (2, 1, "net.0#1")]


def test_many_calls_without_an_update_settle_as_steps(daemon, monkeypatch):
    # No optimizer and no next_step(): after HOLD_FORWARDS forwards the track takes each
    # forward as a step (a model looked at in training mode, or called in a loop).
    bound = 4
    monkeypatch.setattr(_step_zero, "HOLD_FORWARDS", bound)
    net = nn.Sequential(nn.Linear(2, 2))
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", net, every_n=2)
        for _ in range(bound + 2):
            net(torch.randn(1, 2))
        assert scope.stats().pushed >= 2  # settled before the end: sent while running
    daemon.stop()
    assert steps_by_stream(daemon)["net.0"] == [0, 2, 4]

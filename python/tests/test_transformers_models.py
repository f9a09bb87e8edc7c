"""Real PyTorch 2 programs: a GPT-2-style language model and a ResNet, each built from a
`transformers` config (random weights, no download), trained for a few dozen steps with
track_model + track_layer and nothing else changed: every tracked output and gradient is
summarised at every step, the overview is drawn, and a NaN put into one layer's weight at a
known step is reported first at that step and module. The GPT-2 model compiled
(torch.compile) has no more graph breaks tracked than untracked. Skipped where
`transformers` is not installed (Debian's PyTorch 1.13)."""

import json
import os
import uuid

import pytest
import torch

import tensorscope
from conftest import Daemon

try:
    import transformers
except ImportError:  # (a skip per test: a module skipped whole counts as no test run)
    transformers = None
pytestmark = pytest.mark.skipif(transformers is None, reason="needs transformers (the PyTorch 2 venv)")

STEPS = 30
BAD_STEP = 24


def gpt2():
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=32)
    model = transformers.GPT2LMHeadModel(config)
    tokens = torch.randint(0, 100, (4, 16))

    def loss():
        return model(tokens, labels=tokens).loss

    return model, loss, model.transformer.h[1].mlp.c_fc.weight, "transformer.h.1.mlp.c_fc"


def resnet():
    config = transformers.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                       layer_type="basic", num_labels=5)
    model = transformers.ResNetForImageClassification(config)
    images, labels = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])

    def loss():
        return model(images, labels=labels).loss

    layer = "resnet.encoder.stages.1.layers.0.layer.0.convolution"
    return model, loss, model.get_submodule(layer).weight, layer


@pytest.mark.parametrize("make", [gpt2, resnet])
def test_a_transformers_model_is_tracked_at_every_step_and_its_nan_found(daemon, make):
    torch.manual_seed(0)
    model, loss_of, poisoned, layer = make()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with tensorscope.Client(**daemon.client_options(every_n=10)) as scope:
        outputs = scope.track_model("m", model)
        grads = scope.track_layer("m", model)
        assert outputs.ok and grads.ok, (outputs.error, grads.error)
        for step in range(STEPS):
            if step == BAD_STEP:
                with torch.no_grad():
                    poisoned[0, 0] = float("nan")
            loss = loss_of()
            opt.zero_grad()
            loss.backward()
            opt.step()
            scope.next_step()
        anomalies = scope.anomalies(timeout=60)
        assert scope.stats().refused == 0 and scope.stats().dropped_full == 0, scope.stats()
    daemon.stop()

    first = [a for a in anomalies if a["type"] == "non_finite"]
    assert [(a["step"], a["stream"], a["kind"]) for a in first] == [(BAD_STEP, f"m.{layer}", "activation")], anomalies

    table = tensorscope.read_summaries(daemon.session_dir)
    streams = sorted(set(table[table.step == 0].stream))
    for step in range(STEPS):
        assert sorted(table[table.step == step].stream) == streams, step
    modules = [n for n, m in model.named_modules() if m._parameters or m._buffers]
    for path in modules:  # each module's output and the gradient at it
        assert any(s == f"m.{path}" or s.startswith(f"m.{path}[") for s in streams), path
        assert any(s.startswith(f"m.{path}") and s.endswith(".grad") for s in streams), path
    finite = table[table.step < BAD_STEP]
    assert finite.nan_count.sum() == 0 and (finite.l2 > 0).all()

    with open(os.path.join(daemon.session_dir, "index.json")) as f:
        overview = [e for e in json.load(f)["files"] if e["stream"] == "overview" and e["path"].endswith(".png")]
    drawn = {e["mode"]: e for e in overview}
    assert {"grad_norm", "act_std"} <= set(drawn), overview
    assert all((e["first_step"], e["last_step"]) == (0, STEPS - 1) for e in drawn.values()), overview


def compiled_graph_breaks(root, tracked):
    """Graph breaks of a compiled GPT-2 over 3 training steps, tracked or not."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model, _, _, _ = gpt2()
    tokens = torch.randint(0, 100, (4, 16))
    run = torch.compile(model, backend="aot_eager")
    torch._dynamo.reset()
    counters.clear()
    os.makedirs(root, exist_ok=True)
    daemon = Daemon(root, "hf-" + uuid.uuid4().hex[:8]).start()
    try:
        with tensorscope.Client(**daemon.client_options()) as scope:
            if tracked:
                scope.track_model("m", model)
                scope.track_layer("m", model)
            for _ in range(3):
                run(tokens, labels=tokens).loss.backward()
                scope.next_step()
            breaks = sum(counters["graph_break"].values())
    finally:
        daemon.stop()
    steps = sorted(set(tensorscope.read_summaries(daemon.session_dir).step)) if tracked else [0, 1, 2]
    return breaks, steps


def test_tracking_a_compiled_gpt2_adds_no_graph_break(tmp_path):
    from tensorscope import _compiled

    if not _compiled.SUPPORTED:
        pytest.skip("torch.compile with custom ops needs PyTorch >= 2.4")
    untracked, _ = compiled_graph_breaks(str(tmp_path / "untracked"), False)
    tracked, steps = compiled_graph_breaks(str(tmp_path / "tracked"), True)
    assert tracked == untracked, (tracked, untracked)
    assert steps == [0, 1, 2]

"""track_model / track_layer on a CNN and a Transformer encoder trained through a real
daemon: the streams and frame counts exactly as expected, and the values that arrive
equal to the modules' outputs and the autograd gradients, bitwise (float32, CPU)."""

import copy

import numpy as np
import torch
from torch import nn

import tensorscope

STEPS = 3


def cnn():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),  # 0
        nn.ReLU(inplace=True),  # 1: in place on conv 0's output
        nn.Conv2d(4, 4, 3, padding=1),  # 2
        nn.BatchNorm2d(4),  # 3
        nn.ReLU(),  # 4
        nn.Flatten(),  # 5
        nn.Linear(4 * 8 * 8, 10),  # 6
    )


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g)


def cnn_reference(model, x, y):
    """Each tracked module's output and d(loss)/d(output), computed by hand on a copy
    (out-of-place ReLU: the same values the in-place model computes)."""
    m = copy.deepcopy(model)
    a0 = m[0](x)
    a2 = m[2](torch.relu(a0))
    a3 = m[3](a2)
    a6 = m[6](torch.relu(a3).flatten(1))
    loss = nn.functional.cross_entropy(a6, y)
    grads = torch.autograd.grad(loss, [a0, a2, a3, a6])
    outputs = {"net.0": a0, "net.2": a2, "net.3": a3, "net.6": a6}
    return {**{k: v.detach() for k, v in outputs.items()}, **{k + ".grad": g for k, g in zip(outputs, grads)}}


def test_cnn_outputs_and_gradients_bitwise(daemon):
    model = cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    expected = {}
    with tensorscope.Client(**daemon.client_options()) as scope:
        outputs = scope.track_model("net", model)
        grads = scope.track_layer("net", model)
        assert outputs.ok and grads.ok
        assert [s.name for s in outputs.streams] == ["net.0", "net.2", "net.3", "net.6"]
        assert [s.name for s in grads.streams] == ["net.0.grad", "net.2.grad", "net.3.grad", "net.6.grad"]
        for step in range(STEPS):
            x, y = batch(step)
            for name, value in cnn_reference(model, x, y).items():
                expected[(name, step)] = value
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            scope.push("loss", loss)
            scope.next_step()
        s = scope.stats()
        assert s.refused == 0 and s.dropped_full == 0
        # 8 streams, the loss, a module tree record, and both tracks' summary records
        assert s.pushed == STEPS * (8 + 1 + 1 + 2)
    daemon.stop()
    frames = daemon.frames()
    names = sorted({name for name, _ in expected} | {"loss"})
    assert sorted(name for name, _ in frames) == names
    assert all(count == STEPS for count in frames.values()), frames
    for (name, step), value in expected.items():
        got = daemon.npy(name, step)
        assert got.dtype == np.float32 and got.shape == tuple(value.shape), name
        assert np.array_equal(got, value.numpy()), (name, step)


def encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
    return nn.Sequential(nn.Linear(8, 16), nn.TransformerEncoder(layer, num_layers=2), nn.Linear(16, 4))


def test_transformer_encoder_streams_and_values(daemon):
    model = encoder()
    reference = copy.deepcopy(model)
    captured = {}

    def capture(name):
        def hook(module, inputs, output):
            out = output[0] if isinstance(output, tuple) else output
            captured[(name, step)] = out.detach().clone()
            out.register_hook(lambda g: captured.__setitem__((name + ".grad", step), g.clone()))

        return hook

    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ref_opt = torch.optim.Adam(reference.parameters(), lr=1e-3)
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_model("enc", model, kinds=("output", "gradient"))
        streams = [s.name for s in handle.streams if s.kind == "activation"]
        # MultiheadAttention's out_proj is used through its weights, never called: no stream.
        for path, module in reference.named_modules():
            name = "enc." + path
            if name in streams:
                suffix = "[0]" if isinstance(module, nn.MultiheadAttention) else ""
                module.register_forward_hook(capture(name + suffix))
        for step in range(STEPS):
            g = torch.Generator().manual_seed(step)
            x, target = torch.randn(4, 5, 8, generator=g), torch.randn(4, 5, 4, generator=g)
            for m, o in ((reference, ref_opt), (model, opt)):
                loss = nn.functional.mse_loss(m(x), target)
                loss.backward()
                o.step()
                o.zero_grad()
            scope.next_step()
        assert scope.stats().refused == 0
    daemon.stop()
    frames = daemon.frames()
    expected_names = sorted({name for name, _ in captured})
    assert len(expected_names) == 2 * (2 + 2 * 5)  # in/out linear + 2 layers x (attn, 2 linear, 2 norm), + grads
    assert sorted(name for name, _ in frames) == expected_names
    assert all(count == STEPS for count in frames.values()), frames
    for (name, step), value in captured.items():
        if "[" in name:  # file names of such streams are escaped; counted above
            continue
        assert np.array_equal(daemon.npy(name, step), value.numpy()), (name, step)

"""Mixed precision: outputs under bf16 autocast, bf16 and fp16 weights and their gradients
are sent, decoded by the daemon's workers, dumped bit for bit, summarised with wide accumulation (2^20 ones: fp16's own
sum overflows to inf, the summary's mean is 1 and its L2 norm 1024), and compared by
tensorscope.compare."""

import numpy as np
import pytest
import torch
from torch import nn

import tensorscope

HALF_DTYPES = [torch.bfloat16, torch.float16]


def bits(array):
    """The raw 16-bit patterns of a bf16 (structured) or fp16 .npy array."""
    return np.ascontiguousarray(array).view(np.uint16)


def tensor_bits(tensor):
    return tensor.detach().contiguous().view(torch.int16).numpy().view(np.uint16)


class Recorder:
    """The outputs of a model's Linear layers and the gradients at them, as PyTorch gave
    them (hooks of the test's own, registered after tensorscope's)."""

    def __init__(self, model):
        self.outputs, self.grads = {}, {}
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear):
                module.register_forward_hook(self._hook(name))

    def _hook(self, name):
        def hook(module, args, output):
            self.outputs[name] = output.detach().clone()
            output.register_hook(lambda g: self.grads.__setitem__(name, g.detach().clone()))

        return hook


def half_model(dtype):
    if dtype == torch.float16 and not torch.__version__.startswith("2."):
        pytest.skip("fp16 matmul on the CPU needs PyTorch 2")
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(dtype)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=["bf16", "fp16"])
def test_half_precision_weights_outputs_and_gradients_are_dumped_bit_for_bit(daemon, dtype):
    model = half_model(dtype)
    recorder = Recorder(model)
    with tensorscope.Client(**daemon.client_options(every_n=1)) as scope:
        scope.track_model("h", model, kinds=("output", "gradient", "parameter", "parameter_gradient"))
        x = torch.randn(4, 8).to(dtype)
        model(x).float().pow(2).mean().backward()
        scope.next_step()
        assert scope.stats().refused == 0, scope.stats()
    daemon.stop()
    for index in ("0", "2"):
        layer = model[int(index)]
        assert np.array_equal(bits(daemon.npy(f"h.{index}", 0)), tensor_bits(recorder.outputs[index]))
        assert np.array_equal(bits(daemon.npy(f"h.{index}.grad", 0)), tensor_bits(recorder.grads[index]))
        assert np.array_equal(bits(daemon.npy(f"h.{index}.weight", 0)), tensor_bits(layer.weight))
        assert np.array_equal(bits(daemon.npy(f"h.{index}.weight.grad", 0)), tensor_bits(layer.weight.grad))
    # The daemon's workers decoded each half-precision frame (their statistics table).
    rows = {r["stream"]: r for r in daemon.stats_rows()}
    for index in ("0", "2"):
        assert float(rows[f"h.{index}"]["mean"]) == pytest.approx(recorder.outputs[index].double().mean().item(),
                                                                rel=1e-6, abs=1e-9)
    table = tensorscope.read_summaries(daemon.session_dir)
    out = table[table.stream == "h.2"].iloc[0]
    reference = recorder.outputs["2"].double()
    assert out.numel == reference.numel()
    assert out.l2 == pytest.approx(reference.norm().item(), rel=1e-9)
    assert out["mean"] == pytest.approx(reference.mean().item(), rel=1e-9, abs=1e-12)
    assert out["std"] == pytest.approx(reference.std(unbiased=False).item(), rel=1e-9)
    assert out.max_abs == reference.abs().max().item()


def test_bf16_autocast_outputs_are_sent_as_bf16_and_compare_to_their_values(daemon, tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    recorder = Recorder(model)
    with tensorscope.Client(**daemon.client_options(every_n=1)) as scope:
        scope.track_model("amp", model, kinds=("output", "gradient"))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = model(torch.randn(4, 8))
        assert y.dtype == torch.bfloat16
        y.float().pow(2).mean().backward()
        scope.next_step()
    daemon.stop()
    dumped = daemon.npy("amp.2", 0)
    assert dumped.dtype.names == ("bfloat16",)
    assert np.array_equal(bits(dumped), tensor_bits(recorder.outputs["2"]))
    assert np.array_equal(bits(daemon.npy("amp.2.grad", 0)), tensor_bits(recorder.grads["2"]))
    # compare: the bf16 dump against its values in fp32 (equal), and against values 1 % off.
    from tensorscope._dumps import dump_path

    path = f"{daemon.session_dir}/{dump_path('amp.2', 0, 0)}"
    assert tensorscope.compare(path, recorder.outputs["2"].float()).ok
    assert not tensorscope.compare(path, recorder.outputs["2"].float() * 1.01).ok


class Ones(nn.Module):
    """2^20 values of one `dtype`: `scale` times one."""

    def __init__(self, dtype):
        super().__init__()
        self.scale = nn.Parameter(torch.ones((), dtype=dtype))

    def forward(self, x):
        return self.scale * torch.ones(1 << 20, dtype=self.scale.dtype) + 0 * x.sum()


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=["bf16", "fp16"])
def test_half_precision_summaries_accumulate_wide(daemon, dtype):
    model = Ones(dtype)
    with tensorscope.Client(**daemon.client_options(every_n=1000)) as scope:
        scope.track_model("ones", model)
        model(torch.zeros(1, dtype=dtype)).float().sum().backward()
        scope.next_step()
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    row = table[table.stream == "ones"].iloc[0]
    assert (row.numel, row["mean"], row["std"], row.l2, row.max_abs) == (1 << 20, 1.0, 0.0, 1024.0, 1.0)

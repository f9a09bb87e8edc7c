"""The low-precision numerics of a track's summaries (track_model(cast_format=...)): the
counts of what a cast would lose agree with PyTorch's own casts (bf16, fp16, and the fp8
formats where this PyTorch has them), on the CPU kernel and on the device path; a training
run with a cast format fills the summary table's columns and the overview's numerics
metrics (from the output hooks' native path and the Python hooks alike), a layer pushed
out of fp16's range seen at the step it happens."""

import json
import math
import os

import pytest
import torch
from torch import nn

import tensorscope
from tensorscope import _native, _summaries


def torch_dtype(name):
    """The torch dtype of a cast format, or None where this PyTorch has none (fp8 before 2.1)."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8_e4m3": getattr(torch, "float8_e4m3fn", None),
            "fp8_e5m2": getattr(torch, "float8_e5m2", None)}[name]


# Half the spacing of each format's largest binade: a value further than this from what the
# cast gives was clipped, not rounded (PyTorch's CPU cast to fp8 e4m3 saturates at 448).
HALF_TOP_ULP = {"bf16": 2.0 ** 119, "fp16": 16.0, "fp8_e4m3": 16.0, "fp8_e5m2": 4096.0}


def values_around_the_limits():
    """float32 values over 300 binades, the formats' limits and their neighbours, zeros,
    NaN and Inf."""
    g = torch.Generator().manual_seed(11)
    spread = torch.randn(20000, generator=g) * torch.exp2(torch.randint(-150, 127, (20000,), generator=g).float())
    limits = []
    for _, under, over in _native.CAST_FORMATS.values():
        for v in (under, over, 448.0, 57344.0, 65504.0):
            f = torch.tensor([v], dtype=torch.float32)
            limits += [f, torch.nextafter(f, torch.tensor([0.0])), torch.nextafter(f, torch.tensor([math.inf]))]
    special = torch.tensor([0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, -1.0])
    x = torch.cat([spread, torch.cat(limits), -torch.cat(limits), special])
    return x[torch.randperm(x.numel(), generator=g)]


def lost_in_the_cast(x, name):
    """(underflow, overflow, min_abs_nonzero) of float tensor x as PyTorch's cast to the
    format loses them: finite non-zero values that become 0, finite values that become
    Inf/NaN or are clipped."""
    wide = x.double()
    cast = x.to(torch_dtype(name)).double()
    finite = torch.isfinite(wide)
    under = finite & (wide != 0) & (cast == 0)
    over = finite & (~torch.isfinite(cast) | ((wide.abs() - cast.abs()) > HALF_TOP_ULP[name]))
    magnitudes = wide.abs()[finite & (wide != 0)]
    smallest = magnitudes.min().item() if magnitudes.numel() else 0.0
    return int(under.sum()), int(over.sum()), smallest


@pytest.mark.parametrize("name", list(_native.CAST_FORMATS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_counts_are_what_pytorchs_own_cast_loses(name, dtype):
    if torch_dtype(name) is None:
        pytest.skip(f"PyTorch {torch.__version__} has no {name} dtype")
    x = values_around_the_limits().to(dtype)
    under, over, smallest = lost_in_the_cast(x, name)
    assert under > 0 and over > 0, "the data reach both limits"
    cast = _native.CAST_FORMATS[name][0]
    values, ratio, numerics = _summaries.summarize(x, cast=cast)
    assert ratio is None
    assert numerics == (cast, under, over, smallest)
    # The device path (its reductions run on the CPU here as on a GPU) gives the same.
    device_values, layout = _summaries.device_values(x, None, cast)
    device = _native.summary_from_device_values(device_values.tolist(), x.numel(), *layout)
    assert device[9] == numerics
    assert device[:4] == values[:4]


def test_a_half_precision_tensor_against_fp8():
    # A bf16 output measured against fp8 e4m3: what it holds beyond 464 overflows, below
    # 2^-10 underflows.
    x = torch.tensor([0.0, 1e-4, 300.0, 470.0, 1e5, -2e5], dtype=torch.bfloat16)
    e4m3 = _native.CAST_FORMATS["fp8_e4m3"][0]
    _, _, numerics = _summaries.summarize(x, cast=e4m3)
    assert numerics[:3] == (e4m3, 1, 3), "1e-4 < 2^-10 becomes 0; 470, 1e5, 2e5 do not fit"
    assert numerics[3] == pytest.approx(1e-4, rel=1e-2)


def test_cast_format_is_checked():
    assert tensorscope.CAST_FORMATS == ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2")
    with tensorscope.Client("numerics-check", enabled=False, autostart=False) as scope:
        for bad in ("fp8", "BF16", "", 16):
            with pytest.raises(ValueError, match="cast_format must be None or one of 'bf16'"):
                scope.track_model("net", nn.Linear(2, 2), cast_format=bad)
    with pytest.raises(ValueError, match="cast format 9"):
        _native.summarize(torch.ones(2).__dlpack__(), False, 9)


class Block(nn.Module):
    """Linear then a gain (a buffer the test raises to push the output out of fp16's range)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.register_buffer("gain", torch.ones(()))

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.gain


def test_a_run_with_a_cast_format_fills_the_table_and_the_overview(daemon):
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(16, 16), Block(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, every_n=100, kinds=("output", "gradient"), cast_format="fp16")
        scope.track_model("plain", model, every_n=100, include="^0$")
        for step in range(30):
            if step == 20:
                model[1].gain.fill_(1e6)  # from here on net.1's outputs pass 65504
            loss = model(torch.randn(8, 16)).pow(2).mean() * 1e-12
            opt.zero_grad()
            loss.backward()
            opt.step()
            scope.next_step()
    daemon.stop()
    table = tensorscope.read_summaries(daemon.session_dir)
    ours = table[table.track == "net"]
    assert set(ours.cast_format) == {"fp16"}
    assert set(table[table.track == "plain"].cast_format) == {""}
    assert table[table.track == "plain"].dynamic_range.isna().all()
    block = ours[(ours.stream == "net.1") & (ours.kind == "activation")].set_index("step")
    assert (block.loc[:19, "overflow_fraction"] == 0).all()
    assert (block.loc[20:, "overflow_fraction"] > 0).all(), block.overflow_fraction
    # A ReLU's output: max |x| over the smallest positive output, in binades.
    assert (block.dynamic_range > 0).all() and (block.dynamic_range < 60).all()
    # The loss is scaled by 1e-12: the gradients reach below fp16's smallest subnormal.
    grads = ours[ours.kind == "gradient"]
    assert (grads.underflow_fraction > 0).any(), grads[["stream", "step", "underflow_fraction"]]
    with open(f"{daemon.session_dir}/index.json") as f:
        files = json.load(f)["files"]
    pngs = {e["mode"] for e in files if e["stream"] == "overview" and e["path"].endswith(".png")}
    assert {"dynamic_range", "underflow", "overflow"} <= pngs, pngs
    assert os.path.getsize(f"{daemon.session_dir}/overview__rank0__pid{os.getpid()}__overflow.png") > 1000

"""The module tree log from Python tracks: the daemon's tree/rank<r>_pid<p>.log lists each
sent step's module calls exactly as it does for the C++ client."""

import glob
import os

import pytest
import torch
from torch import nn

import tensorscope
from tensorscope import _native


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(torch.relu(self.fc(x)))


class Twice(nn.Module):
    """A container (no parameters of its own): a shared Linear called twice, an LSTM
    whose output is a tuple."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 8, batch_first=True)
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(self.fc(out[:, -1]))


def tree_log(daemon):
    files = glob.glob(os.path.join(daemon.session_dir, "tree", "*.log"))
    assert len(files) <= 1, files
    if not files:
        return ""
    with open(files[0]) as f:
        return f.read()


def run(scope, model, batches):
    for x in batches:
        model(x).sum().backward()
        scope.next_step()


def test_nested_calls_every_n_and_changed_shapes(daemon):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), Block(), nn.Linear(8, 3))
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, every_n=2)
        run(scope, model, [torch.randn(2, 4)] * 3 + [torch.randn(5, 4)] * 2)
    daemon.stop()
    text = tree_log(daemon)
    assert text.startswith("# tensorscope module tree log\n")
    # Steps 0, 2 and 4 are sent; 1 and 3 are not (every_n 2).
    headers = [line for line in text.splitlines() if line.startswith("== step")]
    assert headers == [
        "== step 0 | net | 4 calls | first logged step",
        "== step 2 | net | 4 calls | same as step 0",
        "== step 4 | net | 4 calls | changed since step 2: 4 changed",
    ]
    first = text.split("== step 2")[0]
    lines = [line.split() for line in first.splitlines()[2:]]
    assert lines == [
        ["net"],
        ["net.0", "Linear", "float32[2,4]@cpu", "->", "float32[2,8]@cpu"],
        ["net.1"],  # a parent without parameters: shown for the nesting
        ["net.1.fc", "Linear", "float32[2,8]@cpu", "->", "float32[2,8]@cpu"],
        ["net.1.norm", "LayerNorm", "float32[2,8]@cpu", "->", "float32[2,8]@cpu"],
        ["net.2", "Linear", "float32[2,8]@cpu", "->", "float32[2,3]@cpu"],
    ]
    assert "*     net.0         Linear     float32[5,4]@cpu -> float32[5,8]@cpu" in text


def test_second_call_tuple_output_and_auto_steps(daemon):
    torch.manual_seed(0)
    model = Twice()
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("rnn", model)
        for _ in range(2):  # no next_step(): each training forward of the root is a step
            model(torch.randn(3, 5, 4)).sum().backward()
    daemon.stop()
    text = tree_log(daemon)
    headers = [line for line in text.splitlines() if line.startswith("== step")]
    assert headers == ["== step 0 | rnn | 3 calls | first logged step", "== step 1 | rnn | 3 calls | same as step 0"]
    lines = [line.split() for line in text.split("== step 1")[0].splitlines()[2:]]
    assert lines == [
        ["rnn"],
        # the first tensor of (out, (h, c)); the weights are not inputs
        ["rnn.lstm", "LSTM", "float32[3,5,4]@cpu", "->", "float32[3,5,8]@cpu"],
        ["rnn.fc", "Linear", "float32[3,8]@cpu", "->", "float32[3,8]@cpu"],
        ["rnn.fc#1", "Linear", "float32[3,8]@cpu", "->", "float32[3,8]@cpu"],
    ]


def test_off_without_outputs_or_when_asked(daemon):
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("quiet", model, tree_log=False)
        scope.track_layer("grads", model)  # gradients only: no tree
        run(scope, model, [torch.randn(2, 4)] * 2)
        # outputs and gradients of 2 Linears, and both tracks' summary records, 2 steps
        assert scope.stats().pushed == 2 * 2 * 2 + 2 * 2
    daemon.stop()
    assert "== step" not in tree_log(daemon)


def test_root_with_parameters_on_auto_steps_and_removal(daemon):
    model = nn.Linear(4, 2)
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_model("one", model, every_n=2)
        for _ in range(5):  # auto-steps 0..4: the hooks of steps 2 and 4 go in during the root's call
            model(torch.randn(1, 4))
        handle.remove()  # step 4 is still open: its list leaves with the track
    daemon.stop()
    text = tree_log(daemon)
    headers = [line for line in text.splitlines() if line.startswith("== step")]
    assert headers == [
        "== step 0 | one | 1 call | first logged step",
        "== step 2 | one | 1 call | same as step 0",
        "== step 4 | one | 1 call | same as step 2",
    ]
    assert "    one  Linear  float32[1,4]@cpu -> float32[1,2]@cpu\n" in text


def test_bad_arguments_raise_in_the_native_call(daemon):
    with tensorscope.Client(**daemon.client_options()) as scope:
        core = scope._core
        good = (0, 0, "fc", "Linear", [("float32", (2, 3), "cpu")], None)
        assert isinstance(core.send_module_tree("t", [good], 0, 0), int)
        with pytest.raises(TypeError):
            core.send_module_tree("t", [(0, 0, "fc")], 0, 0)
        with pytest.raises(TypeError):
            core.send_module_tree("t", [(0, 0, "fc", "Linear", [("float32", [2], "cpu")], None)], 0, 0)
        with pytest.raises(ValueError):
            core.send_module_tree("t", [(-1, 0, "fc", "Linear", [], None)], 0, 0)
        with pytest.raises(TypeError):
            core.send_module_tree("t", "not a list", 0, 0)
    with pytest.raises(TypeError):
        tensorscope.Client(**daemon.client_options()).track_model("x", nn.Linear(1, 1), tree_log="yes")
    assert _native is not None


def headers_and_marked(text, track):
    """The step headers of `track` and the lines of its blocks that carry a mark."""
    out, current = [], None
    for line in text.splitlines():
        if line.startswith("== step"):
            current = line.split(" | ")[1]
            if current == track:
                out.append(line)
        elif current == track and line[:1] in "*+-~":
            out.append(" ".join(line.split()))
    return out


def test_value_changes_since_the_previous_logged_step(daemon):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, tree_log="values")
        scope.track_model("loose", model, tree_log="values", tree_log_tolerance=(0.5, 0.0))
        scope.track_model("plain", model)  # shapes only: version 1 payloads, as before
        for step in range(5):
            with torch.no_grad():
                if step == 2:
                    model[2].bias += 1e-3  # net.2's output moves by 1e-3: beyond the default tolerance
                if step == 3:
                    model[2].bias.mul_(1 + 1e-9)  # within it
                if step == 4:
                    model[0].weight[1, 2] += 0.25  # one weight of net.0: its output and net.2's move
            model(x)
            scope.next_step()
    daemon.stop()
    text = tree_log(daemon)
    assert headers_and_marked(text, "net") == [
        "== step 0 | net | 2 calls | first logged step",
        "== step 1 | net | 2 calls | same as step 0, values within tolerance",
        "== step 2 | net | 2 calls | changed since step 1: 1 value changed; 1 unchanged call not shown",
        "~ net.2 Linear float32[3,4]@cpu -> float32[3,2]@cpu (values changed)",
        "== step 3 | net | 2 calls | same as step 2, values within tolerance",
        "== step 4 | net | 2 calls | changed since step 3: 2 values changed",
        "~ net.0 Linear float32[3,4]@cpu -> float32[3,4]@cpu (values changed)",
        "~ net.2 Linear float32[3,4]@cpu -> float32[3,2]@cpu (values changed)",
    ]
    loose = headers_and_marked(text, "loose")
    assert loose[2] == "== step 2 | loose | 2 calls | same as step 1, values within tolerance", loose
    assert headers_and_marked(text, "plain")[1:] == [f"== step {s} | plain | 2 calls | same as step {s - 1}"
                                                    for s in range(1, 5)]


def test_fingerprints_see_the_value_at_the_call_and_any_sampled_change():
    from tensorscope._tree import FINGERPRINT_SAMPLES, TreeLog

    log = TreeLog(set(), values=(1e-5, 1e-8))
    module = nn.Identity()

    def one_step(step, out):
        log.begin(step, "m", "Identity", module, (out,))
        log.end(module, out)
        return log.take()[0][0][6]

    base = torch.arange(1000, dtype=torch.float32)
    assert one_step(0, base.clone()) == "?"  # nothing to compare with
    out = base.clone()
    log.begin(1, "m", "Identity", module, (out,))
    log.end(module, out)
    out.mul_(2)  # changed in place after the call: the fingerprint has the value at the call
    assert log.take()[0][0][6] == "="
    swapped = base.clone()
    stride = 1000 // FINGERPRINT_SAMPLES
    swapped[[0, stride]] = swapped[[stride, 0]]  # sum and norm stay, a sampled element moves
    assert one_step(2, swapped) == "~"
    assert one_step(3, swapped.clone()) == "="
    assert one_step(4, swapped[:10].clone()) == "?"  # another shape: not compared
    assert one_step(5, torch.full((10,), float("nan"))) == "~"  # numbers became NaN
    assert one_step(6, torch.full((10,), float("nan"))) == "="  # NaN equals NaN
    assert one_step(7, torch.tensor([True, False] * 5)) == "?"  # another dtype: not compared
    plain = TreeLog(set())
    plain.begin(0, "m", "Identity", module, (base,))
    plain.end(module, base)
    assert len(plain.take()[0][0]) == 6  # values off: version 1 calls
    with pytest.raises(TypeError):
        tensorscope.Client(session="nobody-tl", connect_timeout_ms=0, runtime_dir="/tmp/ts-none").track_model(
            "x", nn.Linear(1, 1), tree_log="value")
    with pytest.raises(ValueError):
        tensorscope.Client(session="nobody-tl", connect_timeout_ms=0, runtime_dir="/tmp/ts-none").track_model(
            "x", nn.Linear(1, 1), tree_log="values", tree_log_tolerance=(-1, 0))

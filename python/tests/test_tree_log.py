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
        assert scope.stats().pushed == 2 * 2 * 2  # outputs and gradients of 2 Linears, 2 steps
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

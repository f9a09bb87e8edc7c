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


@pytest.mark.parametrize("stats_every", [1, 0])  # 0: no hook of the track listens on odd steps
def test_root_with_parameters_on_auto_steps_and_removal(daemon, stats_every):
    model = nn.Linear(4, 2)
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_model("one", model, every_n=2, stats_every=stats_every)
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
        good = (0, 0, "fc", "Linear", [("float32", (2, 3), "cpu"), "int64[2]@cpu"], None)
        payload = _native.format_module_tree([good], 0)
        assert payload == b"tensorscope-module-tree 1 omitted=0\n0\t0\tfc\tLinear\tfloat32[2,3]@cpu int64[2]@cpu\t-\n"
        assert isinstance(core.send_module_tree("t", payload, 0), int)
        with pytest.raises(TypeError):
            core.send_module_tree("t", "not bytes", 0)
        with pytest.raises(TypeError):
            _native.format_module_tree([(0, 0, "fc")], 0)
        with pytest.raises(TypeError):
            _native.format_module_tree([(0, 0, "fc", "Linear", [("float32", [2], "cpu")], None)], 0)
        with pytest.raises(ValueError):
            _native.format_module_tree([(-1, 0, "fc", "Linear", [], None)], 0)
        with pytest.raises(TypeError):
            _native.format_module_tree("not a list", 0)
        with pytest.raises(TypeError):
            _native.TreeLog(object(), torch.Tensor, set(), lambda: 0, list, lambda: None)  # not a Core
        with pytest.raises(TypeError):
            _native.TreeLog(None, "not a type", set(), lambda: 0, list, lambda: None)
        with pytest.raises(TypeError):
            _native.TreeLog(None, torch.Tensor, {"not an id"}, lambda: 0, list, lambda: None)
    with pytest.raises(TypeError):
        tensorscope.Client(**daemon.client_options()).track_model("x", nn.Linear(1, 1), tree_log="yes")


def native_log(root=None, stamp=lambda: 7, core=None):
    from tensorscope._hook_objects import _inert_hook
    from tensorscope._tree import make_tree_log

    return make_tree_log(core, root if root is not None else nn.Identity(), stamp, _inert_hook)


def test_native_log_nests_numbers_and_splits_calls():
    import copy
    import pickle
    import threading

    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    log = native_log(model)
    for path, module in [("", model), ("0", model[0]), ("1", model[1])]:
        module.register_forward_pre_hook(log.hook(path, type(module).__name__))
    ends = {}
    for module in model.modules():
        module.register_forward_hook(lambda m, i, o: ends.setdefault(id(m), []).append(log.end(m, o)))
    x = torch.randn(2, 4)
    model(x)
    model(x)
    assert log.step == 7 and log.position == 6
    out = [e for e in ends[id(model)] if e is not None]
    assert [index for index, _ in out] == [0, 3] and out[0][1].shape == (2, 3)
    [(first, omitted0), (second, omitted1)] = log.take_parts([3])
    assert (omitted0, omitted1) == (0, 0)
    assert first == [(0, 0, "", "Sequential", ["float32[2,4]@cpu"], "float32[2,3]@cpu"),
                     (0, 0, "0", "Linear", ["float32[2,4]@cpu"], "float32[2,3]@cpu"),  # the weight is not an input
                     (0, 0, "1", "ReLU", ["float32[2,3]@cpu"], "float32[2,3]@cpu")]
    assert [c[:3] for c in second] == [(0, 0, ""), (0, 0, "0"), (0, 0, "1")]  # numbered afresh in its part
    assert log.empty and log.step is None and log.take() is None

    # a second call of the model in the step: "#1"; the record is the C++ client's format
    model(x)
    model(x)
    payload, step = log.take()
    lines = payload.decode().splitlines()
    assert step == 7 and lines[0] == "tensorscope-module-tree 1 omitted=0"
    assert lines[4].split("\t")[:4] == ["0", "1", "", "Sequential"]

    # another thread's calls are numbered as thread 1
    model(x)
    worker = threading.Thread(target=model, args=(x,))
    worker.start()
    worker.join()
    [(calls, _)] = log.take_parts([])
    assert [(c[0], c[1], c[2]) for c in calls] == [(0, 0, ""), (0, 0, "0"), (0, 0, "1"),
                                                   (1, 0, ""), (1, 0, "0"), (1, 0, "1")]

    # copies of a model are not tracked
    hooked = nn.Linear(4, 3)
    hooked.register_forward_pre_hook(log.hook("", "Linear"))
    for copied in (copy.deepcopy(hooked), pickle.loads(pickle.dumps(hooked))):
        copied(x)
    assert log.empty
    hooked(x)
    assert log.position == 1


def test_native_log_formats_a_step_once_and_describes_shapes_afresh():
    # A step with the calls of the step before sends that step's payload again (without
    # formatting it); one call with another shape, dtype or device makes a new one. The
    # descriptions, remembered by dtype, sizes and device, follow every change.
    model = nn.Linear(4, 3)
    log = native_log(model)
    model.register_forward_pre_hook(log.hook("", "Linear"))
    model.register_forward_hook(lambda m, i, o: log.end(m, o))
    payloads = []
    for x in (torch.randn(2, 4), torch.randn(2, 4), torch.randn(5, 4), torch.randn(2, 4),
              torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 1, 4, dtype=torch.float64)):
        model.to(x.dtype)(x)
        payloads.append(log.take()[0].decode())
    assert payloads[0] == payloads[1] == payloads[3]
    assert "float32[5,4]@cpu" in payloads[2] and "float32[5,3]@cpu" in payloads[2] and payloads[2] != payloads[0]
    assert "float64[2,4]@cpu" in payloads[4] and "float64[2,3]@cpu" in payloads[4]
    assert "float64[2,1,4]@cpu" in payloads[5] and "float64[2,1,3]@cpu" in payloads[5]
    assert all("float32" not in p for p in payloads[4:])


def test_native_log_stamps_once_a_step_and_never_raises():
    asked = []

    def stamp():
        asked.append(1)
        return None if len(asked) == 1 else 3

    module = nn.Identity()
    log = native_log(stamp=stamp)
    hook = log.hook("m", "Identity")
    hook(module, (torch.zeros(1),))  # stamp() said no: nothing this step, and not asked again
    hook(module, (torch.zeros(1),))
    assert log.empty and len(asked) == 1
    assert log.take() is None
    for _ in range(3):
        hook(module, (torch.zeros(1),))
    assert len(asked) == 2 and log.step == 3 and log.position == 3

    class Odd(torch.Tensor):  # a tensor whose shape cannot be read: described as "?"
        @property
        def shape(self):
            raise RuntimeError("no shape")

    def bad_leaves(value):
        raise RuntimeError("leaves failed")

    broken = tensorscope._native.TreeLog(None, torch.Tensor, set(), lambda: 0, bad_leaves, lambda: None)
    broken.hook("m", "X")(module, ({"a": torch.zeros(1)},))  # leaves() raised: listed without inputs
    broken.hook("m", "X")(module)  # too few arguments
    broken.hook("m", "X")(module, (torch.zeros(2), 5))  # a tuple not all tensors: leaves() again
    assert broken.end(module, object()) is None
    broken.hook("m", "X")(module, (torch.zeros(2).as_subclass(Odd),))
    [(calls, _)] = broken.take_parts([])
    assert [c[4] for c in calls] == [[], [], ["?"]]

    weird = native_log(stamp=lambda: "not a step")
    weird.hook("m", "X")(module, (torch.zeros(1),))
    assert weird.empty

    many = native_log()
    hook = many.hook("m", "Identity")
    for _ in range(4096 + 5):
        hook(module, (torch.zeros(1),))
    [(calls, omitted)] = many.take_parts([])
    assert len(calls) == 4096 and omitted == 5


def test_native_log_taken_while_python_runs_inside_a_hook():
    """A step may end (another thread's take) while a call runs Python code of ours: the
    leaves of a dict argument or output. The call is dropped, never written into the
    fresh log (nor into freed memory)."""
    module = nn.Identity()
    logs = []

    def leaves(value):
        logs[0].take_parts([])  # as another thread ending the step would, mid-call
        return list(value.values())

    log = tensorscope._native.TreeLog(None, torch.Tensor, set(), lambda: 0, leaves, lambda: None)
    logs.append(log)
    hook = log.hook("m", "Identity")
    hook(module, ({"a": torch.zeros(1)},))  # begin: its inputs read through leaves()
    assert log.empty and log.step is None
    hook(module, (torch.zeros(1),))  # (a tuple of tensors: no leaves())
    assert log.position == 1
    assert log.end(module, {"out": torch.zeros(2)}) is None  # end: its output read through leaves()
    assert log.empty
    hook(module, (torch.zeros(3),))
    assert log.end(module, torch.zeros(3)) is not None
    [(calls, _)] = log.take_parts([])
    assert calls == [(0, 0, "m", "Identity", ["float32[3]@cpu"], "float32[3]@cpu")]


def test_native_log_follows_the_client_switch(daemon):
    with tensorscope.Client(**daemon.client_options()) as scope:
        log = native_log(core=scope._core)
        hook = log.hook("m", "Identity")
        scope.enabled = False
        hook(nn.Identity(), (torch.zeros(1),))
        assert log.empty
        scope.enabled = True
        hook(nn.Identity(), (torch.zeros(1),))
        assert log.position == 1


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
    from tensorscope._hook_objects import _inert_hook
    from tensorscope._tree import FINGERPRINT_SAMPLES, make_tree_log

    module = nn.Identity()
    log = make_tree_log(None, module, lambda: 0, _inert_hook, values=(1e-5, 1e-8))

    def one_step(out):
        log.begin("m", "Identity", module, (out,))
        log.end(module, out)
        return log.take_parts([])[0][0][0][6]

    base = torch.arange(1000, dtype=torch.float32)
    assert one_step(base.clone()) == "?"  # nothing to compare with
    out = base.clone()
    log.begin("m", "Identity", module, (out,))
    log.end(module, out)
    out.mul_(2)  # changed in place after the call: the fingerprint has the value at the call
    payload, step = log.take()
    assert payload.startswith(b"tensorscope-module-tree 2 ") and payload.endswith(b"\t=\n") and step == 0
    swapped = base.clone()
    stride = 1000 // FINGERPRINT_SAMPLES
    swapped[[0, stride]] = swapped[[stride, 0]]  # sum and norm stay, a sampled element moves
    assert one_step(swapped) == "~"
    assert one_step(swapped.clone()) == "="
    assert one_step(swapped[:10].clone()) == "?"  # another shape: not compared
    assert one_step(torch.full((10,), float("nan"))) == "~"  # numbers became NaN
    assert one_step(torch.full((10,), float("nan"))) == "="  # NaN equals NaN
    assert one_step(torch.tensor([True, False] * 5)) == "?"  # another dtype: not compared
    plain = make_tree_log(None, module, lambda: 0, _inert_hook)
    plain.begin("m", "Identity", module, (base,))
    plain.end(module, base)
    assert len(plain.take_parts([])[0][0][0]) == 6  # values off: version 1 calls
    with pytest.raises(TypeError):
        tensorscope.Client(session="nobody-tl", connect_timeout_ms=0, runtime_dir="/tmp/ts-none").track_model(
            "x", nn.Linear(1, 1), tree_log="value")
    with pytest.raises(ValueError):
        tensorscope.Client(session="nobody-tl", connect_timeout_ms=0, runtime_dir="/tmp/ts-none").track_model(
            "x", nn.Linear(1, 1), tree_log="values", tree_log_tolerance=(-1, 0))

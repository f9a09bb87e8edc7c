"""Client.push through a real daemon: every dtype, strides, devices, numpy, refusals,
options checked at the call, and a training loop that never notices a missing daemon."""

import numpy as np
import pytest
import torch

import tensorscope
from tensorscope import PushResult

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.uint8, torch.bool]


def sample(dtype, shape=(3, 5)):
    g = torch.Generator().manual_seed(7)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape, generator=g).to(dtype)


def as_numpy(t):
    if t.dtype == torch.bfloat16:  # the .npy sink keeps bfloat16 bits as uint16
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def npy_values(a):
    if a.dtype.names:  # structured bfloat16: its bits
        return a[a.dtype.names[0]].view(np.uint16)
    return a


def test_every_dtype_arrives_bitwise(daemon):
    sent = {}
    with tensorscope.Client(**daemon.client_options()) as scope:
        assert scope.connected
        for dtype in DTYPES:
            t = sample(dtype)
            name = "t_" + str(dtype).replace("torch.", "")
            assert scope.push(name, t) == PushResult.PUSHED, name
            sent[name] = t
        s = scope.stats()
        assert s.pushed == len(DTYPES) and s.refused == 0 and s.bytes > 0
    daemon.stop()
    rows = {r["stream"]: r for r in daemon.stats_rows()}
    for name, t in sent.items():
        got = npy_values(daemon.npy(name, 0))
        assert got.shape == tuple(t.shape), name
        assert np.array_equal(got.view(np.uint8), as_numpy(t).view(np.uint8)), name
        assert rows[name]["dtype"] == name[2:], rows[name]["dtype"]


def test_views_requires_grad_and_numpy(daemon):
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    cases = {
        "transposed": base.transpose(0, 2),
        "sliced": base[:, 1:3, ::2],
        "expanded": torch.arange(4.0).expand(3, 4),
        "negstep": torch.from_numpy(np.arange(10.0)[::-3].copy()).flip(0),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "grad": (base * 2).requires_grad_(),
        "neg_bit": torch._neg_view(base),  # a view with the negation bit set
    }
    arrays = {
        "np_f64": np.linspace(0, 1, 7),
        "np_strided": np.arange(24, dtype=np.int32).reshape(4, 6)[::2, ::-1],
        "np_bool": np.array([True, False, True]),
        "np_readonly": np.frombuffer(b"\x01\x02\x03\x04", dtype=np.uint8),
        "np_scalar": np.float32(1.5),
    }
    with tensorscope.Client(**daemon.client_options()) as scope:
        for name, t in cases.items():
            assert scope.push(name, t) == PushResult.PUSHED, name
        for name, a in arrays.items():
            assert scope.push(name, a) == PushResult.PUSHED, name
    daemon.stop()
    for name, t in cases.items():
        assert np.array_equal(daemon.npy(name, 0), t.detach().resolve_neg().numpy()), name
    for name, a in arrays.items():
        assert np.array_equal(daemon.npy(name, 0), np.asarray(a)), name


def test_a_pushed_tensor_in_a_graph_keeps_its_graph(daemon):
    # The export takes the values without detach() where torch allows it: the graph the
    # tensor is part of, and its gradients, are not touched.
    x = torch.linspace(-1, 1, 12, requires_grad=True)
    y = (x * 3).reshape(3, 4)
    with tensorscope.Client(**daemon.client_options()) as scope:
        assert scope.push("nonleaf", y) == PushResult.PUSHED
        assert y.requires_grad and y.grad_fn is not None
        (y * y).sum().backward()
    assert torch.allclose(x.grad, 18 * x.detach())
    daemon.stop()
    assert np.array_equal(daemon.npy("nonleaf", 0), y.detach().numpy())


def test_refusals_are_counted_never_raised(daemon, capfd):
    with tensorscope.Client(**daemon.client_options(max_tensor_bytes=1024)) as scope:
        assert scope.push("text", "not a tensor") == PushResult.REFUSED
        assert scope.push("complex", torch.zeros(3, dtype=torch.complex64)) == PushResult.REFUSED
        assert scope.push("big", torch.zeros(1024)) == PushResult.REFUSED  # 4096 bytes
        assert scope.push("uint16", np.zeros(3, dtype=np.uint16)) == PushResult.REFUSED
        assert scope.push("", torch.zeros(1)) == PushResult.REFUSED
        assert scope.push("x" * 300, torch.zeros(1)) == PushResult.REFUSED
        assert scope.push(42, torch.zeros(1)) == PushResult.REFUSED
        assert scope.push("sparse", torch.eye(3).to_sparse()) == PushResult.REFUSED
        assert scope.push("deep", torch.zeros([1] * 9)) == PushResult.REFUSED
        assert scope.push("ok", torch.zeros(4)) == PushResult.PUSHED
        s = scope.stats()
        assert s.refused == 9 and s.pushed == 1
    err = capfd.readouterr().err
    assert "complex" in err and "view_as_real" in err
    assert "max_tensor_bytes" in err


def test_transform_and_failing_transform(daemon):
    def per_channel_std(name, t):
        if name == "bad":
            raise RuntimeError("boom")
        return t.std(dim=(0, 2, 3))

    x = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(1))
    with tensorscope.Client(**daemon.client_options(transform=per_channel_std)) as scope:
        assert scope.push("act", x) == PushResult.PUSHED
        assert scope.push("bad", x) == PushResult.REFUSED
    daemon.stop()
    assert np.array_equal(daemon.npy("act", 0), x.std(dim=(0, 2, 3)).numpy())


def test_every_n_max_hz_enabled_steps(daemon):
    with tensorscope.Client(**daemon.client_options(every_n=3)) as scope:
        results = [scope.push("g", torch.zeros(2)) for _ in range(7)]
        assert results.count(PushResult.PUSHED) == 3  # calls 1, 4, 7
        scope.enabled = False
        assert not scope.enabled
        assert scope.push("h", torch.zeros(2)) == PushResult.GATED
        scope.enabled = True
        assert scope.next_step() == 1 and scope.step == 1
        scope.set_step(10)
        assert scope.step == 10
        scope.set_label("lr=0.1")
        scope.set_render_mode("h", "histogram")
        assert scope.push("h", torch.zeros(2)) == PushResult.PUSHED
        assert scope.stats().gated == 4 + 1
    with tensorscope.Client(**daemon.client_options(max_hz=0.01)) as scope:
        assert [scope.push("hz", torch.zeros(1)) for _ in range(3)] == [PushResult.PUSHED] + [PushResult.GATED] * 2
    daemon.stop()
    steps = sorted(int(r["step"]) for r in daemon.stats_rows() if r["stream"] == "h")
    assert steps == [10]


def test_max_hz_gates_a_tracks_tensors_per_stream_in_the_core(daemon):
    """A track's tensors go through the core's max_hz gate (admit_tracked), apart from
    push()'s call counts: one module output in 100 s is sent, the rest counted as gated."""
    model = torch.nn.Linear(4, 4)
    with tensorscope.Client(**daemon.client_options(max_hz=0.01)) as scope:
        scope.track_model("m", model, every_n=1, stats_every=0, tree_log=False)
        for _ in range(3):
            model(torch.randn(2, 4))
            scope.next_step()
        assert scope.push("m", torch.zeros(1)) == PushResult.PUSHED  # push() has its own gate
        stats = scope.stats()
    assert (stats.pushed, stats.gated) == (2, 2), stats


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"every_n": "10"}, TypeError),
        ({"every_n": 0}, ValueError),
        ({"every_n": True}, TypeError),
        ({"max_hz": -1}, ValueError),
        ({"rank": "0"}, TypeError),
        ({"shm_budget": 1.5}, TypeError),
        ({"session": "bad name"}, ValueError),
        ({"session": 3}, TypeError),
        ({"autostart": 1}, TypeError),
        ({"transform": 5}, TypeError),
        ({"runtime_dir": 7}, TypeError),
        ({"autostart_idle_exit_ms": 10}, ValueError),
        ({"pacing": "yes"}, TypeError),
    ],
)
def test_bad_options_raise_at_the_call(kwargs, error):
    with pytest.raises(error):
        tensorscope.Client(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"every_n": 0}, "every_n must be at least 1, not 0"),
        ({"ring_slots": 0}, "ring_slots must be between 1 and 1048576, not 0"),
        ({"shm_budget": 1 << 70}, f"shm_budget must be between 65536 and 1099511627776, not {1 << 70}"),
        ({"max_hz": -1}, "max_hz must be at least 0, not -1.0"),
        ({"every_n": "10"}, "every_n must be an int, not str"),
        ({"runtime_dir": "a\0b"}, "runtime_dir contains a NUL character"),
    ],
)
def test_bad_options_say_what_the_cpp_client_says(kwargs, message):
    """The words come from the one table of options (core_option_table.h; the C++ side:
    core_option_table_test.cc)."""
    with pytest.raises((TypeError, ValueError)) as raised:
        tensorscope.Client(**kwargs)
    assert str(raised.value) == message


def test_the_signature_is_the_table_of_options():
    """Client's keywords and their defaults are the native table's (plus the transform, a
    Python callable): an option added to one and not the other fails here."""
    import inspect

    parameters = inspect.signature(tensorscope.Client.__init__).parameters
    keywords = {name: p.default for name, p in parameters.items() if name not in ("self", "transform")}
    assert keywords == tensorscope._native.CLIENT_OPTIONS
    assert list(keywords)[0] == "session"


def test_every_keyword_reaches_the_native_options(tmp_path):
    """Each keyword given a value other than its default arrives in the resolved options
    (scope.options, what the native core was given): none keeps its default unseen."""
    import inspect

    defaults = tensorscope._native.CLIENT_OPTIONS
    other = {bool: lambda v: not v, int: lambda v: v + 1, float: lambda v: v + 0.5,
             str: lambda v: str(tmp_path / "x") if v == "" or "/" in v else v + "x"}
    given = {name: other[type(value)](value) for name, value in defaults.items() if value is not None}
    given["rank"] = 3  # its default is None: the environment's
    given["session"] = "keywords"
    given["enabled"] = False  # (no segment, no daemon)
    given["autostart"] = False
    assert set(given) == set(defaults)
    assert set(inspect.signature(tensorscope.Client.__init__).parameters) - {"self", "transform"} == set(given)
    scope = tensorscope.Client(**given)
    try:
        for name, value in given.items():
            assert scope.options[name] == value, name
    finally:
        scope.close()


def test_paths_may_be_path_objects(tmp_path):
    with tensorscope.Client(session="paths", runtime_dir=tmp_path, connect_timeout_ms=0) as scope:
        assert scope.options["runtime_dir"] == str(tmp_path)


def test_no_daemon_training_goes_on(tmp_path):
    with tensorscope.Client(session="nobody", runtime_dir=str(tmp_path), connect_timeout_ms=0) as scope:
        assert not scope.connected
        for _ in range(5):
            assert scope.push("x", torch.ones(3)) == PushResult.NOT_CONNECTED
        s = scope.stats()
        assert s.not_connected == 5 and s.pushed == 0
        assert "no daemon" in s.connection_note or s.connection_note
        assert "not connected" in repr(s)
    assert scope.push("x", torch.ones(3)) == PushResult.NOT_CONNECTED  # closed: still no exception
    assert scope.stats().closed


def test_pacing_is_reported_and_can_be_turned_off(daemon):
    """The daemon keeps up here: no pacing (the pacing itself: pacing_test.cc, C++)."""
    for pacing in (True, False):
        with tensorscope.Client(**daemon.client_options(pacing=pacing)) as scope:
            assert scope.connected
            for _ in range(20):
                assert scope.push("p", torch.ones(8)) == PushResult.PUSHED
            s = scope.stats()
            assert (s.pace_stride, s.paced, s.pace_note) == (1.0, 0, "")
            assert scope.options["pacing"] is pacing


def test_the_vocabularies_are_the_cpp_ones():
    """Render modes, push results and tensor kinds come from the extension (C++), so a
    name added or renamed there reaches Python without a second list."""
    from tensorscope import _native, _results

    assert tensorscope.RENDER_MODES == _native.RENDER_MODES
    assert list(tensorscope.RENDER_MODES) == ["default", "auto", "line", "histogram", "heatmap", "force2d", "pca",
                                              "tsne", "stats"]
    assert tuple(r.value for r in _results.RESULTS) == _native.PUSH_RESULTS
    assert {r.value for r in tensorscope.PushResult} == set(_native.PUSH_RESULTS)
    assert _native.TENSOR_KINDS == {"tensor": 1, "activation": 2, "gradient": 3, "parameter": 4,
                                    "parameter_gradient": 5}
    assert _native.RECORD_KINDS == dict(_native.TENSOR_KINDS, module_tree=6, summary=7)


def test_names_built_anew_or_reused_reach_their_own_streams_and_gates(daemon):
    """The extension keeps the text of the last names it was given, by object (a literal or
    a name built once is not converted again): names built anew each call (more than it
    keeps), names reused, and equal text in different objects all go to their own stream,
    and every_n counts each stream's calls."""
    fixed = [f"fixed{i}" for i in range(20)]
    with tensorscope.Client(**daemon.client_options(every_n=2)) as scope:
        for _ in range(4):
            for i in range(40):
                assert scope.push("built" + str(i), torch.full((2,), float(i))) in (PushResult.PUSHED,
                                                                                   PushResult.GATED)
            for i, name in enumerate(fixed):
                scope.push(name, torch.full((2,), float(i)))
    daemon.stop()
    frames = daemon.frames()
    for i in range(40):
        assert frames[(f"built{i}", 0)] == 2, i  # calls 0 and 2 of 4
    for name in fixed:
        assert frames[(name, 0)] == 2, name
    assert len(frames) == 60, sorted(frames)


def test_the_push_gate_answers_like_the_method(tmp_path):
    """push() is the native gate (Core.push_gate) on a client's instance: gated calls,
    admitted ones, a name that is not a str, keywords and a closed client all answer as
    the method does."""
    with tensorscope.Client(session="gate", runtime_dir=str(tmp_path), connect_timeout_ms=0, every_n=3) as scope:
        assert type(scope.push).__name__ == "PushGate"
        results = [scope.push("x", torch.ones(2)) for _ in range(6)]
        nc, gated = PushResult.NOT_CONNECTED, PushResult.GATED  # no daemon: an admitted call is not_connected
        assert results == [nc, gated, gated, nc, gated, gated]
        assert scope.push(5, torch.ones(1)) == PushResult.REFUSED
        assert scope.push(name="y", tensor=torch.ones(1)) == nc
        s = scope.stats()
        assert (s.gated, s.not_connected, s.refused) == (4, 3, 1), s
    assert scope.push("x", torch.ones(2)) == PushResult.NOT_CONNECTED
    assert type(scope.push).__name__ == "method"


def test_a_client_and_its_push_gate_are_collected(tmp_path):
    import gc
    import weakref

    scope = tensorscope.Client(session="gate", runtime_dir=str(tmp_path), connect_timeout_ms=0)
    alive = weakref.ref(scope)
    del scope
    gc.collect()
    assert alive() is None


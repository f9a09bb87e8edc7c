"""Row labels: push(..., labels=...) in every accepted form reaches the daemon beside the
tensor (the .npy sink writes them), wrong labels are refused and counted with their
reason, a gated push never reads them, track_model(labels=...) sends the batch's labels
with the outputs and gradients whose rows are the batch's, and the separation table says
how well the classes of pca and tsne frames separate (high for clustered rows, near 0
for the same rows with shuffled labels)."""

import os

import numpy as np
import pytest
import torch
from torch import nn

import tensorscope
from conftest import Daemon
from tensorscope import PushResult
from tensorscope._dumps import labels_dump_path


def labels_of(daemon, stream, step=0):
    """The labels the .npy sink wrote beside `stream`'s dump, and the class names (or None)."""
    path = os.path.join(daemon.session_dir, labels_dump_path(stream, step, 0))
    if not os.path.exists(path):
        return None, None
    names_path = path[: -len(".npy")] + ".txt"
    names = open(names_path).read().splitlines() if os.path.exists(names_path) else None
    return np.load(path), names


def test_labels_in_every_form_arrive_beside_the_tensor(daemon):
    h = torch.randn(6, 4)
    with tensorscope.Client(**daemon.client_options()) as scope:
        assert scope.push("ints", h, labels=torch.tensor([0, 1, 2, 0, 1, 2])) == PushResult.PUSHED
        assert scope.push("int8", h, labels=torch.tensor([3, 3, 3, 4, 4, 4], dtype=torch.int8)) == PushResult.PUSHED
        assert scope.push("numpy", h, labels=np.array([5, 5, 6, 6, 7, 7], dtype=np.int32)) == PushResult.PUSHED
        assert scope.push("names", h, labels=["cat", "dog", "cat", "bird", "dog", "cat"]) == PushResult.PUSHED
        assert scope.push("text_array", h, labels=np.array(["b", "a", "b", "a", "b", "a"])) == PushResult.PUSHED
        assert scope.push("list", h, labels=[1, 2, 3, 4, 5, 6]) == PushResult.PUSHED
        assert scope.push("strided", h, labels=torch.arange(12)[::2]) == PushResult.PUSHED
        assert scope.push("plain", h) == PushResult.PUSHED
        assert scope.stats().refused == 0
    daemon.stop()
    expected = {
        "ints": ([0, 1, 2, 0, 1, 2], None),
        "int8": ([3, 3, 3, 4, 4, 4], None),
        "numpy": ([5, 5, 6, 6, 7, 7], None),
        "names": ([1, 2, 1, 0, 2, 1], ["bird", "cat", "dog"]),
        "text_array": ([1, 0, 1, 0, 1, 0], ["a", "b"]),
        "list": ([1, 2, 3, 4, 5, 6], None),
        "strided": ([0, 2, 4, 6, 8, 10], None),
    }
    for stream, (values, names) in expected.items():
        got, got_names = labels_of(daemon, stream)
        assert got is not None, stream
        assert got.dtype == np.int64 and got.tolist() == values, stream
        assert got_names == names, stream
        assert np.array_equal(daemon.npy(stream, 0), h.numpy()), stream
    assert labels_of(daemon, "plain") == (None, None)


def test_wrong_labels_are_refused_and_counted(daemon, capfd):
    h = torch.randn(6, 4)
    cases = {
        "count": torch.tensor([0, 1, 2, 3, 4]),  # 5 labels, 6 rows
        "floats": torch.rand(6),
        "matrix": torch.zeros(6, 2, dtype=torch.int64),
        "mixed": [1, "two", 3, 4, 5, 6],
        "object": object(),
        "long_name": ["x" * 80] * 6,
    }
    with tensorscope.Client(**daemon.client_options()) as scope:
        for stream, labels in cases.items():
            assert scope.push(stream, h, labels=labels) == PushResult.REFUSED, stream
        assert scope.push("scalar", torch.tensor(1.0), labels=[0]) == PushResult.REFUSED
        assert scope.stats().refused == len(cases) + 1
        assert scope.stats().pushed == 0
    err = capfd.readouterr().err
    assert "5 labels for a tensor of 6 rows" in err
    assert "labels must be integers, not float32" in err
    assert "longer than 63 bytes" in err
    assert "no rows (0-d)" in err
    daemon.stop()
    for stream in cases:
        assert labels_of(daemon, stream) == (None, None)


class Untouchable:
    """Labels that fail the moment they are read."""

    def __len__(self):
        raise AssertionError("gated push read its labels")


def test_a_gated_push_does_not_read_its_labels(daemon):
    with tensorscope.Client(**daemon.client_options(every_n=2)) as scope:
        assert scope.push("g", torch.zeros(3, 2), labels=[0, 1, 2]) == PushResult.PUSHED
        assert scope.push("g", torch.zeros(3, 2), labels=Untouchable()) == PushResult.GATED
        assert scope.stats().refused == 0


def test_track_model_sends_the_batch_labels_with_batch_shaped_tensors(daemon):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x = torch.randn(5, 8)
    y = torch.tensor([0, 2, 1, 2, 0])
    with tensorscope.Client(**daemon.client_options()) as scope:
        handle = scope.track_model("m", model, kinds=["output", "gradient"], labels=lambda: y)
        assert handle.ok
        nn.functional.cross_entropy(model(x), y).backward()
        scope.next_step()
        # A callable that fails, or labels of another length: the tensors go without.
        handle.remove()
        handle = scope.track_model("bad", model, labels=lambda: 1 / 0)
        model(x)
        scope.next_step()
        handle.remove()
        handle = scope.track_model("short", model, labels=lambda: y[:4])
        model(x)
        scope.next_step()
        handle.remove()
        assert scope.stats().refused == 0
    daemon.stop()
    for stream in ("m.0", "m.2", "m.0.grad", "m.2.grad"):
        got, names = labels_of(daemon, stream)
        assert got is not None and got.tolist() == y.tolist(), stream
        assert names is None
    assert labels_of(daemon, "bad.0", step=1) == (None, None)
    assert daemon.npy("bad.0", 1).shape == (5, 16)
    assert labels_of(daemon, "short.2", step=2) == (None, None)
    assert daemon.npy("short.2", 2).shape == (5, 3)


def test_two_calls_of_the_model_in_a_step_keep_their_own_labels(daemon):
    # A siamese step: the model runs on two batches of the same size, the labels callable
    # following the batch, then one backward: each call's output and gradient keep their
    # own batch's labels (the gradients arrive after both forwards). Step 0 goes through
    # the window that holds values until the first next_step(), step 1 straight out.
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    xa, xb = torch.randn(4, 8), torch.randn(4, 8)
    ya, yb = torch.tensor([0, 1, 2, 0]), torch.tensor([2, 2, 1, 1])
    current = {"y": ya}
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("m", model, kinds=["output", "gradient"], labels=lambda: current["y"])
        for _ in range(2):
            current["y"] = ya
            a = model(xa)
            current["y"] = yb
            b = model(xb)
            (nn.functional.cross_entropy(a, ya) + nn.functional.cross_entropy(b, yb)).backward()
            scope.next_step()
        assert scope.stats().refused == 0
    daemon.stop()
    for step in (0, 1):
        for stream, want in [("m.0", ya), ("m.2", ya), ("m.0.grad", ya), ("m.2.grad", ya),
                             ("m.0#1", yb), ("m.2#1", yb), ("m.0#1.grad", yb), ("m.2#1.grad", yb)]:
            got, _ = labels_of(daemon, stream, step)
            assert got is not None and got.tolist() == want.tolist(), (stream, step)


def test_track_model_refuses_labels_that_are_not_callable():
    scope = tensorscope.Client("labels-noconn", enabled=False, autostart=False)
    with pytest.raises(TypeError, match="labels must be a callable"):
        scope.track_model("m", nn.Linear(2, 2), labels=[0, 1])
    scope.close()


def test_the_separation_table_scores_clustered_classes_high_and_shuffled_ones_low(tmp_path):
    daemon = Daemon(str(tmp_path), "sep-" + os.urandom(4).hex(), video="^emb").start()
    try:
        torch.manual_seed(0)
        labels = torch.arange(240) % 4
        centres = torch.randn(4, 32) * 8
        rows = centres[labels] + torch.randn(240, 32)
        shuffled = labels[torch.randperm(240)]
        with tensorscope.Client(**daemon.client_options()) as scope:
            for mode in ("pca", "tsne"):
                scope.set_render_mode(f"emb.{mode}.clustered", mode)
                scope.set_render_mode(f"emb.{mode}.shuffled", mode)
            for step in range(3):
                for mode in ("pca", "tsne"):
                    assert scope.push(f"emb.{mode}.clustered", rows, labels=labels) == PushResult.PUSHED
                    assert scope.push(f"emb.{mode}.shuffled", rows, labels=shuffled) == PushResult.PUSHED
                scope.next_step()
        daemon.stop()
        table = tensorscope.read_separation(daemon.session_dir)
    finally:
        daemon.stop()
    assert list(table.columns) == list(tensorscope._separation.SEPARATION_COLUMNS)
    assert len(table) == 12
    for mode in ("pca", "tsne"):
        clustered = table[table.stream == f"emb.{mode}.clustered"]
        shuffled_rows = table[table.stream == f"emb.{mode}.shuffled"]
        assert clustered["step"].tolist() == [0, 1, 2]
        assert (clustered["mode"] == mode).all() and (clustered["classes"] == 4).all()
        assert (clustered["points"] == 240).all()
        assert (clustered["silhouette"] > 0.7).all(), clustered
        assert (shuffled_rows["silhouette"].abs() < 0.15).all(), shuffled_rows


def test_read_separation_without_tables_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no separation tables"):
        tensorscope.read_separation(tmp_path)

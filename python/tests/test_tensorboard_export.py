"""Findings in TensorBoard (the daemon's export.tensorboard): a model trained with a NaN
at step 9; TensorBoard's own reader (tensorboard.backend.event_processing) finds a run
per training process with a scalar per chosen metric and tracked tensor at every step,
equal to the summary table's, and the run "anomalies" with the NaN's report, linked to
the live page at that stream, rank and step. Skips without the tensorboard package (the
first run of the Python suite)."""

import os
import urllib.parse

import pytest
import torch
from torch import nn

import tensorscope
from conftest import Daemon, wait_until

STEPS, NAN_STEP = 14, 9
LIVE = "http://view.example:8080/"


def test_summaries_and_anomalies_are_read_back_by_tensorboard(tmp_path):
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    daemon = Daemon(str(tmp_path), "tb-export")
    with open(daemon.config, "a") as f:
        f.write(f'export:\n  tensorboard: true\n  tensorboard_metrics: "l2|max_abs|update_ratio"\n'
                f'  tensorboard_streams: "net\\\\.[02].*"\n  live_url: "{LIVE}"\n')
    daemon.start()
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        with tensorscope.Client(**daemon.client_options()) as scope:
            scope.track_model("net", model, every_n=100, kinds=("output", "parameter"))
            for step in range(STEPS):
                x = torch.randn(4, 8) * (float("nan") if step == NAN_STEP else 1.0)
                model(x).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
                scope.next_step()
            assert wait_until(lambda: scope.anomalies(), 60), daemon.log()
    finally:
        daemon.stop()
    logdir = os.path.join(daemon.session_dir, "tensorboard")
    runs = sorted(os.listdir(logdir))
    assert runs == ["anomalies", f"rank0_pid{os.getpid()}"], runs

    acc = ea.EventAccumulator(os.path.join(logdir, runs[1]), size_guidance={ea.SCALARS: 0}).Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"l2/net.0", "max_abs/net.0", "l2/net.2", "l2/net.0.weight", "update_ratio/net.0.weight"} <= tags, tags
    assert not any(t.startswith(("mean/", "std/")) for t in tags) and "l2/net.1" not in tags, tags  # (not chosen)
    table = tensorscope.read_summaries(daemon.session_dir)
    for tag in ("l2/net.0", "max_abs/net.2", "l2/net.2.weight"):
        metric, stream = tag.split("/", 1)
        rows = table[table.stream == stream].sort_values("step")
        # A step where the tensor has no finite element has no value (not a 0): the NaN
        # step's output, and the weights from the step after it.
        rows = rows[rows.nan_count + rows.inf_count < rows.numel]
        events = acc.Scalars(tag)
        assert [e.step for e in events] == list(rows.step), tag
        assert [e.value for e in events] == pytest.approx(list(rows[metric]), rel=1e-6)
    assert NAN_STEP not in [e.step for e in acc.Scalars("l2/net.0")]

    anomalies = ea.EventAccumulator(os.path.join(logdir, "anomalies"), size_guidance={ea.TENSORS: 0}).Reload()
    texts = anomalies.Tensors("tensorscope/anomalies")
    first = texts[0]
    text = first.tensor_proto.string_val[0].decode()
    assert first.step == NAN_STEP and text.startswith(f"**non_finite** at step {NAN_STEP}, rank 0: `net.0`"), text
    link = text[text.index("(" + LIVE) + 1:text.rindex(")")]
    fragment = urllib.parse.parse_qs(urllib.parse.urlparse(link).fragment)
    assert fragment == {"q": ["^net\\.0$"], "rank": ["0"], "step": [str(NAN_STEP)], "page": ["tiles"]}, fragment

"""Findings in Weights & Biases (tensorscope.export_wandb, python -m tensorscope.wandb):
a session's summaries and anomalies logged into an offline W&B run by a reader, after
the training and as it grows; read back from the run's own file (.wandb: LevelDB log
records of wandb's Record protocol buffers). Skips without the wandb package (the first
run of the Python suite)."""

import glob
import json
import os
import struct
import subprocess
import sys
import threading

import pytest
import torch
from torch import nn

import tensorscope
from conftest import Daemon, wait_until

STEPS, NAN_STEP = 10, 6
LIVE = "http://view.example:8080/"


def read_offline_run(run_dir):
    """(history: [{key: value}], summary: {key: value}) of an offline run's .wandb file."""
    from wandb.proto import wandb_internal_pb2

    data = open(glob.glob(os.path.join(run_dir, "run-*.wandb"))[0], "rb").read()
    assert data[:4] == b":W&B", data[:7]
    block, at, pieces, history, summary = 32768, 7, b"", [], {}
    while at + 7 <= len(data):
        if block - at % block < 7:  # (a block's tail too short for a header: padding)
            at += block - at % block
            continue
        _, length, kind = struct.unpack("<IHB", data[at:at + 7])
        pieces += data[at + 7:at + 7 + length]
        at += 7 + length
        if kind in (1, 4):  # FULL, LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            pieces = b""
            if record.HasField("history"):
                history.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item})
            if record.HasField("summary"):
                summary.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.summary.update})
    return history, summary


def is_anomalies(history_row):
    """The anomalies' log (a table: keys under tensorscope/anomalies/; with a step too)."""
    return any(k.startswith("tensorscope/anomalies") for k in history_row)


def train_with_a_nan(daemon):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with tensorscope.Client(**daemon.client_options()) as scope:
        scope.track_model("net", model, kinds=("output", "parameter"))
        for step in range(STEPS):
            model(torch.randn(4, 8) * (float("nan") if step == NAN_STEP else 1.0)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
            scope.next_step()
        assert wait_until(lambda: scope.anomalies(), 60), daemon.log()


@pytest.fixture
def offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    return tmp_path


def test_summaries_and_anomalies_go_into_an_offline_run(daemon, offline):
    train_with_a_nan(daemon)
    daemon.stop()
    run = tensorscope.export_wandb(daemon.session_dir, project="tensorscope-test", metrics=("l2", "update_ratio"),
                                   streams=r"net\.0.*", live_url=LIVE)
    history, summary = read_offline_run(os.path.dirname(run.dir))
    steps = [h for h in history if not is_anomalies(h)]
    assert [h["tensorscope/step"] for h in steps] == list(range(STEPS))
    table = tensorscope.read_summaries(daemon.session_dir)
    for h in steps:
        rows = table[table.step == h["tensorscope/step"]].set_index("stream")
        for stream in ("net.0", "net.0.weight"):
            key, row = f"tensorscope/l2/{stream}", rows.loc[stream]
            if row["nan_count"] + row["inf_count"] < row["numel"]:  # the norm of its finite values
                assert h[key] == pytest.approx(row["l2"], rel=1e-9)
            else:  # nothing finite: no norm (not a 0 that would look like a vanished tensor)
                assert key not in h, (h, row)
        assert not any(k.startswith(("tensorscope/l2/net.2", "tensorscope/max_abs/")) for k in h), h  # not chosen
    # The NaN step's output is NaN through and through; the weights become NaN after it.
    assert "tensorscope/l2/net.0" in steps[NAN_STEP - 1] and "tensorscope/l2/net.0" not in steps[NAN_STEP]
    assert "tensorscope/update_ratio/net.0.weight" in steps[1] and "tensorscope/update_ratio/net.0.weight" not in steps[0]
    assert summary["tensorscope/anomalies"] >= 1
    assert summary["tensorscope/first_anomaly"].startswith(f"tensorscope: ") and \
        f"first non_finite: step {NAN_STEP}, rank 0, net.0" in summary["tensorscope/first_anomaly"], summary
    tables = glob.glob(os.path.join(run.dir, "media", "table", "tensorscope", "anomalies_*.table.json"))
    assert len(tables) == 1, tables
    anomalies = json.load(open(tables[0]))
    first = dict(zip(anomalies["columns"], anomalies["data"][0]))
    assert (first["type"], first["step"], first["stream"]) == ("non_finite", NAN_STEP, "net.0"), first
    assert first["link"] == f"{LIVE}#q=%5Enet%5C.0%24&rank=0&step={NAN_STEP}&page=tiles"


def test_the_command_follows_a_session_as_it_grows(tmp_path, offline):
    daemon = Daemon(str(tmp_path), "wb-follow").start()
    follower = None
    try:
        os.makedirs(daemon.session_dir, exist_ok=True)
        follower = subprocess.Popen([sys.executable, "-m", "tensorscope.wandb", daemon.session_dir, "--project", "t",
                                     "--follow", "--interval", "0.2", "--streams", r"net\.0"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        train_with_a_nan(daemon)
        # Every step and the anomalies logged while it runs: it says how many logs it made.
        said = []
        threading.Thread(target=lambda: said.extend(follower.stdout), daemon=True).start()
        logged = lambda: max([int(line.split()[1]) for line in said if line.endswith(" logged\n")], default=0)
        assert wait_until(lambda: logged() >= STEPS + 1, 120), said
    finally:
        if follower is not None:
            follower.send_signal(2)  # ^C: the run is finished
            follower.wait(timeout=120)
            err = follower.stderr.read()
            assert follower.returncode == 0, err
        daemon.stop()
    history, summary = read_offline_run(glob.glob(os.path.join(str(offline), "wandb", "offline-run-*"))[0])
    assert [h["tensorscope/step"] for h in history if not is_anomalies(h)] == list(range(STEPS))
    assert [h["tensorscope/step"] for h in history if "tensorscope/l2/net.0" in h] == list(range(NAN_STEP))
    assert summary["tensorscope/anomalies"] >= 1


def test_unknown_metrics_are_refused(tmp_path, offline):
    r = subprocess.run([sys.executable, "-m", "tensorscope.wandb", str(tmp_path), "--metrics", "l2,norm"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "['norm'] are not among" in r.stderr, r.stderr

"""In a notebook: anomaly reports say themselves in one line and render as an escaped
table (AnomalyReports, what Client.anomalies() and read_anomalies() return); a client
shows its session, outputs, the live page its daemon serves (a link and an inline
frame) and the anomalies so far (Client._repr_html_, what Jupyter displays); the
TensorBoard export links its anomalies to that page."""

import glob
import os

import torch
from torch import nn

import tensorscope
from conftest import Daemon, wait_until
from tensorscope._anomaly_reports import MAX_ROWS, AnomalyReports


def report(type_, step, rank, stream, message="m"):
    return {"type": type_, "step": step, "rank": rank, "stream": stream, "kind": "activation", "message": message}


def test_reports_say_the_first_of_each_type_and_render_escaped():
    reports = AnomalyReports([report("non_finite", 7, 1, "net.<b>", "NaN & more"), report("explosion", 8, 0, "net.2"),
                              report("non_finite", 9, 0, "net.3")])
    assert reports == [report("non_finite", 7, 1, "net.<b>", "NaN & more"), report("explosion", 8, 0, "net.2"),
                       report("non_finite", 9, 0, "net.3")]  # still a list of dicts
    assert reports.summary("exp1") == ("tensorscope: 3 anomalies (first non_finite: step 7, rank 1, net.<b>; first "
                                       "explosion: step 8, rank 0, net.2); see them with: tensorscope view --session exp1")
    assert AnomalyReports().summary("exp1") == "tensorscope: no anomaly (session exp1)"
    page = reports._repr_html_()
    assert "<td>net.&lt;b&gt;</td>" in page and "NaN &amp; more" in page and "<b>" not in page.replace("<b>tensorscope", "")
    assert page.count("<tr>") == 4 and "node" not in page  # header + 3
    many = AnomalyReports([report("dead_units", s, 0, "net.1") for s in range(MAX_ROWS + 50)])
    assert many._repr_html_().count("<tr>") == MAX_ROWS + 1 and "… and 50 more" in many._repr_html_()


def test_a_client_shows_its_live_page_and_anomalies(tmp_path):
    daemon = Daemon(str(tmp_path), "nb")
    with open(daemon.config, "a") as f:
        f.write("live:\n  serve: true\n  port: 0\nexport:\n  tensorboard: true\n")
    daemon.start()
    try:
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        with tensorscope.Client(**daemon.client_options()) as scope:
            scope.track_model("net", model)
            for step in range(4):
                model(torch.randn(2, 4) * (float("nan") if step == 2 else 1.0))
                scope.next_step()
            assert wait_until(lambda: scope.anomalies(), 60), daemon.log()
            page = scope._repr_html_()
            assert scope.anomalies()._repr_html_() in page
    finally:
        daemon.stop()
    assert "session <code>nb</code> · rank 0 · connected" in page, page
    assert f"outputs in <code>{daemon.session_dir}</code>" in page
    assert '<iframe src="http://127.0.0.1:' in page and "/#t=" in page, page
    assert "<td>non_finite</td>" in page and "<td>net.0</td>" in page and "<td>2</td>" in page, page
    # Without export.live_url, the TensorBoard export links to the page the daemon serves,
    # without its token.
    start = page.index('<iframe src="') + len('<iframe src="')
    address = page[start:page.index("/#t=", start)]
    events = b"".join(open(p, "rb").read() for p in glob.glob(os.path.join(daemon.session_dir, "tensorboard",
                                                                            "anomalies", "events.out.tfevents.*")))
    assert f"[open it in the live page]({address}/#q=%5Enet%5C.0%24&rank=0&step=2&page=tiles)".encode() in events
    assert b"#t=" not in events

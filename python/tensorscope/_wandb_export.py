"""Findings in Weights & Biases: a session's per-step summaries (the chosen metrics of the
chosen tensors) and every anomaly report, logged into a W&B run by a reader, never by
the training process's hot path: after the run, or beside it (`follow`), in a process of
its own (`python -m tensorscope.wandb`) or at the end of a fit.

What the run gets:
- per summary table (a training process) and summarised step, one log call:
  {"tensorscope/step": step, "tensorscope/<metric>/<stream>": value, ...} (with
  "/rank<r>" after "tensorscope" when the session has several processes); the
  "tensorscope/*" keys are plotted against "tensorscope/step" (wandb.define_metric), so
  the run's own step is left alone and several ranks need no common order;
- the anomalies as the table "tensorscope/anomalies" (step, rank, type, stream, kind,
  message, link: the live page at that stream, rank and step, as the TensorBoard export
  links it), logged again as reports come, and in the run's summary
  "tensorscope/anomalies" (the count) and "tensorscope/first_anomaly" (one line).
The metrics are named as the summary table's columns (EXPORT_METRICS, the vocabulary the
daemon's TensorBoard export uses)."""

from __future__ import annotations

import glob
import math
import os
import re
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _native
from ._anomalies import read_anomalies
from ._anomaly_reports import AnomalyReports

EXPORT_METRICS: Tuple[str, ...] = tuple(_native.EXPORT_METRICS)
DEFAULT_METRICS = ("l2", "max_abs", "update_ratio", "nan_count")
STEP_KEY = "tensorscope/step"
ANOMALY_KEY = "tensorscope/anomalies"
_ANOMALY_COLUMNS = ["step", "rank", "type", "stream", "kind", "message", "link"]


class _Table:
    """One summary table followed as it grows: whole lines from where the last read
    stopped (read again from the start when a compaction replaced the file; steps already
    logged are passed over)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.inode = None
        self.logged_step = -1

    def new_rows(self) -> List[Tuple[int, int, str, int, Tuple[Optional[float], ...]]]:
        """(step, rank, stream, steps, values of EXPORT_METRICS) of each new line."""
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_ino != self.inode or st.st_size < self.offset:
                    self.inode, self.offset = st.st_ino, 0
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        rows = (_native.export_row(line) for line in data[:end].decode("utf-8", "replace").split("\n"))
        return [row for row in rows if row is not None]  # (headers, and lines not the table's: None)


class WandbExport:
    """Logs a session's summaries and anomalies into a W&B run (see the module's doc).
    `poll()` logs what the tables and the anomaly log gained since the last poll."""

    def __init__(self, session_dir: str, run: Any, metrics: Sequence[str] = DEFAULT_METRICS,
                 streams: str = ".*", live_url: str = "") -> None:
        unknown = [m for m in metrics if m not in EXPORT_METRICS]
        if unknown:
            raise ValueError(f"metrics: {unknown} are not among {EXPORT_METRICS}")
        self.session_dir = session_dir
        self.run = run
        self.metric_columns = [(m, EXPORT_METRICS.index(m)) for m in metrics]  # (in export_row's values)
        self.streams = re.compile(streams)
        self.live_url = live_url
        self.tables: Dict[str, _Table] = {}
        self.anomaly_count = -1
        run.define_metric(STEP_KEY)
        run.define_metric("tensorscope/*", step_metric=STEP_KEY)

    def poll(self) -> int:
        """Logs what is new; returns how many log calls it made."""
        for path in sorted(glob.glob(os.path.join(self.session_dir, "summaries", "rank*_pid*.csv"))):
            self.tables.setdefault(path, _Table(path))
        several = len(self.tables) > 1
        calls = 0
        for table in self.tables.values():
            by_step: Dict[int, Dict[str, float]] = {}
            for step, rank, stream, steps, row_values in table.new_rows():
                if step <= table.logged_step or steps != 1 or not self.streams.fullmatch(stream):
                    continue  # logged already, a compacted row, or not chosen
                prefix = f"tensorscope/rank{rank}/" if several else "tensorscope/"
                values = by_step.setdefault(step, {})
                for metric, at in self.metric_columns:
                    value = row_values[at]
                    if value is not None and math.isfinite(value):
                        values[f"{prefix}{metric}/{stream}"] = value
            for step in sorted(by_step):
                self.run.log({STEP_KEY: step, **by_step[step]})
                table.logged_step = step
                calls += 1
        return calls + self._anomalies()

    def _anomalies(self) -> int:
        try:
            reports = read_anomalies(self.session_dir)
        except ValueError:
            return 0
        if len(reports) == self.anomaly_count:
            return 0
        self.anomaly_count = len(reports)
        import wandb

        session = os.path.basename(os.path.normpath(self.session_dir))
        rows = [[a.get("step"), a.get("rank"), a.get("type"), a.get("stream"), a.get("kind"), a.get("message"),
                 _native.live_page_link(self.live_url, str(a.get("stream", "")), int(a.get("rank", 0)),
                                        int(a.get("step", 0)))] for a in reports]
        self.run.log({ANOMALY_KEY: wandb.Table(columns=_ANOMALY_COLUMNS, data=rows)})
        self.run.summary[ANOMALY_KEY] = len(reports)
        self.run.summary["tensorscope/first_anomaly"] = AnomalyReports(reports).summary(session)
        return 1


def export_wandb(session_dir: str, run: Any = None, *, project: Optional[str] = None,
                 metrics: Sequence[str] = DEFAULT_METRICS, streams: str = ".*", live_url: str = "",
                 follow: bool = False, interval: float = 2.0,
                 stop: Optional[Callable[[], bool]] = None,
                 progress: Optional[Callable[[int], None]] = None) -> Any:
    """Logs the session at `session_dir` into the W&B run `run` (None: a new run of
    `project`, named after the session, job_type "tensorscope"; finished at the end). With
    `follow`, polls every `interval` seconds until `stop()` says so (default: never; ^C
    ends it), else logs what there is once; `progress(n)` hears the log calls made so far
    after each poll that made some. Returns the run. Needs the `wandb` package."""
    import wandb

    own = run is None
    if own:
        name = os.path.basename(os.path.normpath(session_dir))
        run = wandb.init(project=project, name=f"{name} (tensorscope)", job_type="tensorscope")
    export = WandbExport(session_dir, run, metrics, streams, live_url)
    logged = 0

    def poll() -> None:
        nonlocal logged
        made = export.poll()
        logged += made
        if made and progress is not None:
            progress(logged)

    try:
        poll()
        while follow and not (stop is not None and stop()):
            time.sleep(interval)
            poll()
    except KeyboardInterrupt:
        pass
    finally:
        if own:
            run.finish()
    return run

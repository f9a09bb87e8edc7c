"""Reading what the daemon made of the per-step summaries of tracked tensors (a track's
stats_every): the summary tables (summaries/rank<r>_pid<p>.csv, recording/summary_table.h)
and the anomaly log (anomalies.jsonl, daemon/src/supervisor/anomaly_log.h), of one
session folder or of many nodes' folders read as one run (_sessions.py). Needs neither
torch nor a running daemon; read_summaries needs pandas.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any, Dict, List

from . import _native
from ._anomaly_reports import AnomalyReports
from ._sessions import Where, session_folders
from ._tables import read_csv_tables

# The summary table's columns (recording/summary_table.h).
SUMMARY_COLUMNS = tuple(_native.SUMMARY_TABLE_HEADER.split(","))
_TEXT_COLUMNS = ("track", "stream", "kind", "cast_format", "shard", "dtype")
_INTEGER_COLUMNS = ("step", "rank", "order", "numel", "nan_count", "inf_count", "steps")
# What a table written before a column was added holds in it.
_ADDED = {"steps": 1, "cast_format": "", "dynamic_range": float("nan"), "underflow_fraction": float("nan"),
          "overflow_fraction": float("nan"), "shard": "", "whole_numel": float("nan"), "dtype": ""}
_SHARDS = ("both", "local", "whole")
_ANOMALY_HEADER = {"tensorscope": "anomalies", "version": 1}


def read_summaries(session_dir: Where, shards: str = "both") -> Any:
    """Every summarised tensor of a session as a pandas DataFrame (one row per tensor and
    step; columns SUMMARY_COLUMNS, "pid" and "node"), sorted by step, rank and order. Empty
    cells (no finite value, no update ratio) are NaN. "steps" is 1 but in the older part of
    a long run's table that the daemon compacted (record.summary_table_max_bytes): there a
    row stands for `steps` summarised steps from `step` on (the largest l2, max_abs, std,
    zero_fraction and update_ratio, the mean of the means, the sums of the NaN/Inf
    counts); each tensor's first NaN/Inf and every step with an anomaly stay a row of
    their own. The low-precision numerics (a track's cast_format) fill cast_format (the
    format's name), dynamic_range (log2 of max |x| over the smallest non-zero |x|),
    underflow_fraction and overflow_fraction (of all elements: the values a cast to the
    format would make 0, or Inf/NaN); "" and NaN for tracks without one (a compacted row:
    the dynamic range of its steps together, the largest fractions).

    Many nodes: `session_dir` may name several session folders — a folder that holds
    them (the common parent the nodes' daemons wrote to), a glob pattern, or a list —
    read as one run; "node" is the host each row's daemon ran on (with the folder's path
    under the parent where two share a host).

    A DTensor (FSDP2's parameters and gradients, a tensor-parallel layer's weights) is
    summarized by each rank on its local part: "shard" says where that part sits
    ("S0@1/4": the second of 4 shards along dim 0; "R@0/2|S0@3/4" on a 2-D mesh; "" for a
    tensor that is not sharded) and "whole_numel" is the whole tensor's element count.
    With `shards` "both" (the default) the table also has, for each sharded tensor and
    step whose parts are all in (across the folders read), the whole tensor's row merged
    from them (rank and pid -1, shard and node ""): its counts, norms, mean, std and
    update ratio those of the whole tensor, exactly, with no collective in the training
    step. The ranks of each job are merged apart (their run_info's rendezvous, split where
    a rank repeats): an earlier run in the same parent folder is never mixed in.
    "local": the rows as the ranks wrote them; "whole": the whole tensors' rows in place
    of their parts. A tensor whose parts are Partial sums has no whole row.

    Raises FileNotFoundError when no summary table is found, ValueError for a file that
    is not one or an unknown `shards`."""
    import io

    if shards not in _SHARDS:
        raise ValueError(f"shards must be one of {_SHARDS}, not {shards!r}")
    folders = session_folders(session_dir)
    node_of, files = {}, []
    for folder, node in folders:
        for path in sorted(glob.glob(os.path.join(folder, "summaries", "rank*_pid*.csv"))):
            node_of[path] = node
            files.append(path)
    if not files:
        raise FileNotFoundError(f"{session_dir}: no summary tables (summaries/*.csv; tracks send summaries every "
                                "stats_every steps)")
    options = dict(dtype={c: str for c in _TEXT_COLUMNS}, keep_default_na=False,
                   na_values={c: [""] for c in SUMMARY_COLUMNS if c not in _TEXT_COLUMNS})
    out = read_csv_tables(
        files, SUMMARY_COLUMNS, "summary table", added=_ADDED,
        extra=lambda path: {"pid": int(os.path.basename(path).split("_pid")[1].split(".")[0]),
                            "node": node_of[path]}, **options)
    if shards != "local" and (out["shard"] != "").any():
        import pandas as pd

        tables = []
        for path in files:
            with open(path, encoding="utf-8", errors="replace") as f:
                tables.append((os.path.abspath(path), f.read()))
        lines = _native.whole_summary_rows(tables)[0]  # (the ranks of each job merged apart)
        whole = pd.read_csv(io.StringIO(",".join(SUMMARY_COLUMNS) + "\n" + lines), **options)
        whole["pid"] = -1
        whole["node"] = ""
        parts = out[out["shard"] == ""] if shards == "whole" else out
        out = pd.concat([parts, whole], ignore_index=True)
    for column in _INTEGER_COLUMNS:
        out[column] = out[column].astype("int64")
    out["whole_numel"] = out["whole_numel"].astype("Int64")
    return out.sort_values(["step", "rank", "pid", "order"], kind="stable").reset_index(drop=True)


def read_anomalies(session_dir: Where) -> AnomalyReports:
    """The anomalies the daemon reported for a session, in the order it reported them: a
    list of dicts with type ("non_finite", "explosion", "dead_units", "divergence"), step, rank, pid,
    track, stream, kind, message, details (with "order", the tensor's place in its step's
    forward order) and node (the host its daemon ran on). [] when there is none yet.
    Several nodes' session folders (see read_summaries) are read as one run: their
    anomalies by step, then forward order, then rank, so the first is the run's earliest.
    Raises ValueError for a file that is not an anomaly log (a last line cut by a crash is
    skipped). In a notebook the list shows as a table."""
    folders = session_folders(session_dir)
    out = AnomalyReports()
    for folder, node in folders:
        for item in _anomalies_of(os.path.join(folder, "anomalies.jsonl")):
            item["node"] = node
            out.append(item)
    if len(folders) > 1:
        out.sort(key=_run_order)
    return out


def _run_order(item):
    """The order of recording/anomaly_firsts.h's earlier_anomaly: step, forward order, rank."""
    details = item.get("details") if isinstance(item.get("details"), dict) else {}
    numbers = [item.get("step"), details.get("order"), item.get("rank")]
    return tuple(n if isinstance(n, (int, float)) else float("inf") for n in numbers)


def _anomalies_of(path):
    """The anomalies of one anomaly log ([] without the file)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return []
    try:
        header = json.loads(lines[0])
    except ValueError:
        header = None
    if header != _ANOMALY_HEADER:
        raise ValueError(f"{path}: not a tensorscope anomaly log (first line {lines[0][:80]!r})")
    out = []
    for line in lines[1:]:
        if not line:
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a line a killed daemon did not finish
        if isinstance(item, dict):
            out.append(item)
    return out

"""Reading how well the classes of projected streams separate: the daemon's separation
tables (separation/<stream>__<device>__rank<r>__pid<p>__<mode>.csv,
recording/separation_table.h), a row per pca or tsne frame of a tensor pushed with row
labels. Needs neither torch nor a running daemon; read_separation needs pandas.
"""

from __future__ import annotations

import glob
import os
from typing import Any, Union

from . import _native
from ._tables import read_csv_tables

SEPARATION_COLUMNS = tuple(_native.SEPARATION_TABLE_HEADER.split(","))
_INTEGER_COLUMNS = ("step", "rank", "pid", "classes", "points")


def read_separation(session_dir: Union[str, "os.PathLike[str]"]) -> Any:
    """Every frame of the session's projections of labelled rows as a pandas DataFrame,
    one row per frame: step, stream, device, rank, pid, mode ("pca", "tsne"), classes
    (different labels shown), points, silhouette (of the labels on the frame's 2-D points,
    -1 to 1; NaN with fewer than two classes). Sorted by stream, rank, pid, mode, step:
    `frame[frame.stream == "probe.fc1"].plot(x="step", y="silhouette")` shows when the
    classes came apart. Raises FileNotFoundError when the session has no separation
    table, ValueError for a file that is not one."""
    session_dir = os.fspath(session_dir)
    files = sorted(glob.glob(os.path.join(session_dir, "separation", "*.csv")))
    if not files:
        raise FileNotFoundError(f"{session_dir}: no separation tables (separation/*.csv; written for pca and tsne "
                                "frames of tensors pushed with labels)")
    out = read_csv_tables(files, SEPARATION_COLUMNS, "separation table", dtype={"stream": str, "device": str, "mode": str},
                          keep_default_na=False, na_values={"silhouette": [""]})
    for column in _INTEGER_COLUMNS:
        out[column] = out[column].astype("int64")
    out["silhouette"] = out["silhouette"].astype("float64")
    return out.sort_values(["stream", "rank", "pid", "mode", "step"], kind="stable").reset_index(drop=True)

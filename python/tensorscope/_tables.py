"""Reading the CSV tables the daemon writes (summaries, separation): each file checked
against its header, all of them as one pandas DataFrame. pandas is imported when a table
is read."""

from __future__ import annotations

import csv
from typing import Any, Callable, Dict, Optional, Sequence


def read_csv_tables(files: Sequence[str], columns: Sequence[str], what: str,
                    extra: Optional[Callable[[str], Dict[str, Any]]] = None,
                    added: Optional[Dict[str, Any]] = None, **read_csv: Any) -> Any:
    """The tables in `files` as one DataFrame, file after file. Each file must start with
    the header `columns` (else ValueError: "<path>: not a tensorscope <what> (header ...)"),
    or with it less last columns that `added` names (columns a later version added: a
    file written before gets them with the value given). `extra(path)` gives columns every
    row of that file gets (e.g. the pid in its name); `read_csv` goes to pandas.read_csv."""
    import pandas as pd

    added = added or {}
    frames = []
    for path in files:
        with open(path, newline="") as f:
            header = next(csv.reader(f), None)
        missing = tuple(columns[len(header):]) if header is not None else ()
        if header is None or tuple(header) != tuple(columns[:len(header)]) or any(c not in added for c in missing):
            raise ValueError(f"{path}: not a tensorscope {what} (header {header!r})")
        frame = pd.read_csv(path, **read_csv)
        for name in missing:
            frame[name] = added[name]
        for name, value in (extra(path) if extra is not None else {}).items():
            frame[name] = value
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)

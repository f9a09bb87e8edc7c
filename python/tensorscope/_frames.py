"""Tables of tensor values for notebooks: the columns a Capture's to_frame() and
read_stats() share, and read_stats itself (the daemon's statistics CSVs as the same
DataFrame), so an analysis reads the same either way.

pandas is imported only when a frame is asked for: the package works without it.

The columns (one row per tensor):
  step    the training step
  module  the module's qualified path ("" for the root); None for a tensor that is no
          module's (a push, a track_tensor gradient, a stream of an unknown track)
  type    the module's class name ("Linear"); None when unknown
  kind    "output", "gradient", "input", "parameter", "buffer", "parameter_gradient",
          "tensor" (a push)
  leaf    which tensor of the call: "" for a lone output, "[0]", "[1][0]", "[key]" inside
          a structured output; for inputs the argument ("[0]", "[mask]"); the parameter
          or buffer name for those kinds
  call    the module's call number in the step (0 first; "#<call>" in stream names); -1
          for a step's calls stacked into one matrix ("#calls", _call_stacks.py)
  rank, pid  the training process
  stream  the stream name the daemon uses for it ("net.fc", "net.fc.grad", "net.fc.in[0]")
then either
  value   what the capture's `stash` returned (0-d tensors as Python numbers)
or the statistics columns of the daemon's table (recording/stats_table.h):
  dtype ("float32"), shape (a tuple), device ("cpu", "cuda0"), mean, std (population),
  min, max, l2_norm (over the finite elements; NaN when there are none), nan_count,
  inf_count, zero_fraction (zeros over all elements; NaN for an empty tensor).
"""

from __future__ import annotations

import csv
import glob
import math
import os
import re
from typing import Any, Optional, Union

from ._call_stacks import STACK_SUFFIX

KEY_COLUMNS = ["step", "module", "type", "kind", "leaf", "call", "rank", "pid", "stream"]
STATS_COLUMNS = [
    "dtype", "shape", "device", "mean", "std", "min", "max", "l2_norm", "nan_count", "inf_count", "zero_fraction",
]
STASH_COLUMNS = ["value"]

# The daemon's record kinds (wire::tensor_kind_name) as the kinds of a frame.
_WIRE_KINDS = {
    "activation": "output",
    "gradient": "gradient",
    "parameter": "parameter",
    "parameter_gradient": "parameter_gradient",
    "tensor": "tensor",
}
_STATS_HEADER = [
    "step", "stream", "kind", "rank", "device", "dtype", "shape", "mean", "std", "min", "max", "l2_norm",
    "nan_count", "inf_count", "zero_fraction",
]
_CSV_NAME = re.compile(r"^rank(\d+)_pid(\d+)\.csv$")
_MODULE_PART = re.compile(r"^((?:\.[^.#\[]+)*)(?:#(\d+|" + re.escape(STACK_SUFFIX[1:]) + r"))?(.*)$", re.S)
STACKED_CALL = -1  # the call of "<stream>#calls": a step's calls stacked (_call_stacks.py)


def pandas():
    """The pandas module; ImportError saying how to get it when it is missing."""
    try:
        import pandas as pd
    except ImportError as e:
        raise ImportError(
            "tensorscope: DataFrames need pandas (Debian: apt-get install python3-pandas)"
        ) from e
    return pd


def make_frame(rows, columns):
    """A DataFrame of `rows` (tuples in `columns` order), with integer columns typed as
    such (also when empty)."""
    pd = pandas()
    frame = pd.DataFrame.from_records(rows, columns=columns)
    for column in ("step", "call", "rank", "pid", "nan_count", "inf_count"):
        if column in frame.columns:
            frame[column] = frame[column].astype("int64")
    for column in ("mean", "std", "min", "max", "l2_norm", "zero_fraction"):
        if column in frame.columns:
            frame[column] = frame[column].astype("float64")
    return frame


def split_stream(stream, kind, tracks):
    """(track, module, kind, leaf, call) of stream `stream` whose record kind is `kind`
    (a frame kind), for the track names `tracks` (longest first); track and module None
    when the stream is no track's. The inverse of how tracks name their streams:
    <track>[.<path>][#<call>|#calls][<leaf>] and then ".grad" (gradients), ".in<leaf>"
    (inputs), ".<parameter>" and ".<parameter>.grad"."""
    rest = owner = None
    for track in tracks:
        if stream == track or (stream.startswith(track) and stream[len(track)] in ".#["):
            owner, rest = track, stream[len(track) :]
            break
    none = (None, None, kind, "", 0)
    if owner is None:
        return none
    leaf = ""
    if kind in ("gradient", "parameter_gradient"):
        if not rest.endswith(".grad"):
            return none
        rest = rest[: -len(".grad")]
    if kind in ("parameter", "parameter_gradient"):
        dot = rest.rfind(".")
        if dot < 0:
            return none
        rest, leaf = rest[:dot], rest[dot + 1 :]
    elif kind == "output":
        at = rest.find(".in[")
        if at >= 0:
            kind, rest, leaf = "input", rest[:at], rest[at + len(".in") :]
    m = _MODULE_PART.match(rest)
    if m is None or (m.group(3) and kind not in ("output", "gradient")):
        return none
    if kind in ("output", "gradient"):
        leaf = m.group(3)
    call = m.group(2) or "0"
    return owner, m.group(1)[1:], kind, leaf, STACKED_CALL if call == STACK_SUFFIX[1:] else int(call)


def _shape(text):
    if text == "scalar":
        return ()
    return tuple(int(d) for d in text.split("x"))


def _number(text):
    return math.nan if text == "" else float(text)


def tree_log_types(session_dir):
    """({track: {module path: type}}) from the module tree logs of a session (the
    daemon's tree/*.log): which tracks there were and their modules' classes."""
    types = {}
    for path in sorted(glob.glob(os.path.join(session_dir, "tree", "*.log"))):
        track = None
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("== step "):
                    parts = line.split(" | ")
                    track = parts[1] if len(parts) >= 3 else None
                    if track is not None:
                        types.setdefault(track, {})
                    continue
                if track is None or len(line) < 5 or line.startswith("#") or line.startswith("..."):
                    continue
                tokens = line[4:].split()
                if tokens and tokens[0] == "[thread" and len(tokens) >= 2:
                    tokens = tokens[2:]
                if len(tokens) < 2 or tokens[1].startswith("("):
                    continue  # a nesting line, or a call that is gone
                name = tokens[0].split("#", 1)[0]
                if name == track:
                    types[track][""] = tokens[1]
                elif name.startswith(track + "."):
                    types[track][name[len(track) + 1 :]] = tokens[1]
    return types


def read_stats(session_dir: Union[str, "os.PathLike[str]"], track: Optional[str] = None) -> Any:
    """The statistics table(s) of a daemon's session directory (stats/rank<r>_pid<p>.csv,
    written with `record.stats`) as a DataFrame with the columns of Capture.to_frame()
    (statistics mode), rows in step order (per step: by rank and pid, then as recorded).

    `track`: the track name(s) whose streams are split into module, kind, leaf and call
    (a str or a list of them); by default the tracks named in the session's module tree
    logs (tree/*.log, which also give each module's type). Differences from a capture:
    buffers are "parameter" (the daemon's records do not tell them apart) and modules
    no tree log names have type None. Raises FileNotFoundError when the directory holds
    no statistics table, ValueError for a file that is not one."""
    session_dir = os.fspath(session_dir)
    files = glob.glob(os.path.join(session_dir, "stats", "*.csv"))
    if not files:
        raise FileNotFoundError(f"{session_dir}: no statistics tables (stats/*.csv; the daemon writes them "
                                "for the streams its record.stats expression matches)")
    types = tree_log_types(session_dir)
    if track is None:
        tracks = list(types)
    elif isinstance(track, str):
        tracks = [track]
    else:
        tracks = list(track)
    tracks.sort(key=len, reverse=True)

    def owner(path):
        m = _CSV_NAME.match(os.path.basename(path))
        return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)

    rows = []
    for path in sorted(files, key=lambda p: (owner(p), p)):
        _, pid = owner(path)
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header != _STATS_HEADER:
                raise ValueError(f"{path}: not a tensorscope statistics table (header {header!r})")
            for line, cells in enumerate(reader, start=2):
                if not cells:
                    continue
                if len(cells) != len(_STATS_HEADER):
                    continue  # a line a killed worker left unfinished
                (step, stream, wire_kind, rank, device, dtype, shape, mean, std, lo, hi, l2, nans, infs,
                 zeros) = cells
                kind = _WIRE_KINDS.get(wire_kind, wire_kind)
                owner_track, module, kind, leaf, call = split_stream(stream, kind, tracks)
                type_name = None if module is None else types.get(owner_track, {}).get(module)
                try:
                    rows.append((
                        int(step), module, type_name, kind, leaf, call, int(rank), pid, stream, dtype, _shape(shape),
                        device, _number(mean), _number(std), _number(lo), _number(hi), _number(l2), int(nans),
                        int(infs), _number(zeros),
                    ))
                except ValueError as e:
                    raise ValueError(f"{path}:{line}: {e}") from None
    order = sorted(range(len(rows)), key=lambda i: rows[i][0])  # stable: files, then lines
    return make_frame([rows[i] for i in order], KEY_COLUMNS + STATS_COLUMNS)

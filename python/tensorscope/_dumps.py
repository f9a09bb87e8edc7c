"""Dumps without a daemon: tensorscope.init_dumps(folder) and tensorscope.dump(tensor,
name, step=None) write .npy files laid out exactly as the daemon's .npy sink lays out a
session directory, so `tensorscope compare` (and tensorscope.compare) pair them with each
other and with a daemon's dumps:

    <folder>/run_info.json                                 once per folder (the first writer)
    <folder>/dumps/step_<step>/<stream made safe>_rank<rank>.npy

The file name and the file are the daemon's own: the extension runs the recording
library's recording::npy_dump_path and recording::write_npy (recording/npy_file.h: format
1.0 unless the header needs 2.0, data on a 64-byte boundary, bfloat16 as a structured
uint16 field named "bfloat16"), so a dump is byte for byte what the daemon writes for the
same tensor. Each file is written synchronously and atomically: into a temporary file
".tmp-npy-<pid>-<n>-<name>" in the same directory (which compare ignores), fsync,
rename, fsync of the directory. A dump of the same name, step and rank replaces the
earlier one.

Nothing here raises into the training loop: dump() returns a DumpResult (its `error`
says what went wrong; the first failure of each stream is also printed on stderr).
Only bad arguments to init_dumps (a folder that is not a path, a bad rank) raise.
Thread safety: dump() may be called from several threads; files of one folder may be
written by several processes (ranks) at once.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import sys
import threading
from typing import Any, NamedTuple, Optional, Union

import torch

from . import _native

try:
    import numpy as _np
except ImportError:  # pragma: no cover - Debian's python3-torch depends on numpy
    _np = None

TEMP_PREFIX = ".tmp-npy-"  # recording::kTempNpyPrefix
RUN_INFO = "run_info.json"
_temp_numbers = itertools.count()


class DumpResult(NamedTuple):
    """What dump() did: `path` of the file written (None when nothing was), `error` why
    not ("" when it was). True when the file was written."""

    path: Optional[str]
    error: str

    def __bool__(self) -> bool:
        return not self.error


def dump_path(stream: str, step: int, rank: int) -> str:
    """The daemon's .npy file of `stream` at `step` and `rank`, relative to a run folder:
    "dumps/step_<step>/<stream made safe>_rank<rank>.npy" (recording::npy_dump_path)."""
    return _native.dump_path(stream, int(step), int(rank))


def labels_dump_path(stream: str, step: int, rank: int) -> str:
    """Beside it, the .npy file of the row labels the tensor was pushed with (int64, one per
    row; class names, if any, one per line in the same path ending ".labels.txt")."""
    return _native.labels_dump_path(stream, int(step), int(rank))


def prepared(value):
    """(DLPack capsule of a contiguous CPU copy or view of `value`, as_bool, its dtype in
    words) for the .npy writer; a refusal str for a tensor or array it does not take; None
    for anything else."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:
            return f"only dense (strided) tensors are supported, not {value.layout}"
        if value.is_complex() or value.is_quantized:
            return f"dtype {value.dtype} is not supported by the .npy sink"
        t = value.detach()
        if t.is_conj():
            t = t.resolve_conj()
        if t.is_neg():
            t = t.resolve_neg()
        if t.device.type != "cpu":
            t = t.cpu()  # synchronous: waits for the tensor's stream
        t = t.contiguous()
        as_bool = t.dtype == torch.bool
        if as_bool:
            t = t.view(torch.uint8)
        what = f"dtype {value.dtype}"
    elif _np is not None and isinstance(value, (_np.ndarray, _np.generic)):
        array = _np.asarray(value)
        if not array.dtype.isnative or array.dtype.kind not in "biuf":
            return f"numpy dtype {array.dtype} is not supported by the .npy sink"
        as_bool = array.dtype.kind == "b"
        t = _np.ascontiguousarray(array.view(_np.uint8) if as_bool else array)
        what = f"numpy dtype {array.dtype}"
    else:
        return None
    try:
        return t.__dlpack__(), as_bool, what
    except Exception as e:  # a dtype DLPack does not carry
        return f"{what} is not supported by the .npy sink ({type(e).__name__}: {e})"


def write_npy(path, value):
    """Writes `value` (prepared()'s result) as an .npy file at `path`; raises OSError (the
    writer's message) when it cannot, ValueError for a dtype the .npy sink does not take."""
    capsule, as_bool, what = value
    try:
        _native.write_npy(os.fspath(path), capsule, as_bool)
    except ValueError as e:
        raise ValueError(f"{what} is not supported by the .npy sink ({e})") from None


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path, chunks, exclusive=False):
    """Writes `chunks` (bytes-like) to `path` through a temporary file in its directory:
    fsync, rename (with `exclusive`, a hard link that fails with FileExistsError when
    `path` exists), fsync of the directory. The temporary file never stays behind."""
    directory, name = os.path.split(path)
    temp = os.path.join(directory, f"{TEMP_PREFIX}{os.getpid()}-{next(_temp_numbers)}-{name}"[: len(directory) + 250])
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            os.link(temp, path)
            os.unlink(temp)
        else:
            os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    _fsync_dir(directory or ".")


class Dumps:
    """A run folder that dump() writes to (what init_dumps returns)."""

    def __init__(self, folder: Union[str, "os.PathLike[str]"], rank: int) -> None:
        self.folder = folder
        self.rank = rank
        self._lock = threading.Lock()
        self._counts = {}  # stream -> dumps so far (the default step)
        self._reported = set()  # streams whose failure was printed
        self._made = set()  # step directories known to exist
        self.error = self._start()

    def _start(self):
        try:
            os.makedirs(os.path.join(self.folder, "dumps"), exist_ok=True)
            info = json.loads(_native.run_info(self.rank, _versions()))
            info["dumps"] = {"layout": "dumps/step_<step>/<stream>_rank<rank>.npy", "written_by": "tensorscope.dump"}
            text = json.dumps(info, indent=2, sort_keys=True) + "\n"
            try:
                write_atomically(os.path.join(self.folder, RUN_INFO), [text.encode("utf-8")], exclusive=True)
            except FileExistsError:
                pass  # another process (rank) of the run wrote it
            return ""
        except Exception as e:
            message = f"cannot use {self.folder!r} for dumps: {type(e).__name__}: {e}"
            _print(message)
            return message

    def dump(self, tensor: Any, name: str, step: Optional[int] = None) -> DumpResult:
        """Writes `tensor` as stream `name` at `step` (default: how many times `name` was
        dumped before by this process). Never raises: see DumpResult."""
        try:
            if not isinstance(name, str) or not name:
                return self._fail(repr(name)[:100], "a dump name must be a non-empty str")
            with self._lock:
                count = self._counts.get(name, 0)
                self._counts[name] = count + 1
            if step is None:
                step = count
            elif isinstance(step, bool) or not isinstance(step, int) or step < 0:
                return self._fail(name, f"step must be a non-negative int, not {step!r}")
            data = prepared(tensor)
            if data is None:
                data = f"cannot dump an object of type {type(tensor).__name__}: expected a torch.Tensor or numpy.ndarray"
            if isinstance(data, str):
                return self._fail(name, data)
            path = os.path.join(self.folder, dump_path(name, step, self.rank))
            directory = os.path.dirname(path)
            if directory not in self._made:
                os.makedirs(directory, exist_ok=True)
                self._made.add(directory)
            write_npy(path, data)
            return DumpResult(path, "")
        except ValueError as e:
            return self._fail(name, str(e))
        except Exception as e:
            return self._fail(name if isinstance(name, str) else "?", f"{type(e).__name__}: {e}")

    def _fail(self, name, why):
        with self._lock:
            first = name not in self._reported
            self._reported.add(name)
        if first:
            _print(f"dump {name!r} failed: {why}")
        return DumpResult(None, why)

    def __repr__(self):
        return f"tensorscope.Dumps({self.folder!r}, rank={self.rank})"


def _versions():
    versions = {"python": platform.python_version(), "torch": str(torch.__version__)}
    if _np is not None:
        versions["numpy"] = str(_np.__version__)
    return versions


def _print(message):
    try:
        sys.stderr.write(f"tensorscope: {message}\n")
    except Exception:
        pass


_current = None
_current_lock = threading.Lock()


def init_dumps(folder: Union[str, "os.PathLike[str]"], *, rank: Optional[int] = None) -> Dumps:
    """Sets the run folder dump() writes to (created when missing) and writes its
    run_info.json (command line, host, pid, rank, versions, a few environment variables:
    what the daemon keeps in run_info/) unless the folder has one. `rank` defaults to
    $RANK, else 0. Returns the Dumps object (its .dump() writes there too)."""
    global _current
    if isinstance(folder, os.PathLike):
        folder = os.fspath(folder)
    if not isinstance(folder, str) or not folder or "\0" in folder:
        raise TypeError(f"folder must be a path (str or os.PathLike), not {folder!r}")
    if rank is None:
        try:
            rank = int(os.environ.get("RANK", "0"))
        except ValueError:
            rank = 0
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank must be a non-negative int, not {rank!r}")
    dumps = Dumps(os.path.abspath(folder), rank)
    with _current_lock:
        _current = dumps
    return dumps


def dump(tensor: Any, name: str, step: Optional[int] = None) -> DumpResult:
    """Writes `tensor` (a torch tensor, any device, or a numpy array) as
    <folder>/dumps/step_<step>/<name made safe>_rank<rank>.npy in the folder of the last
    init_dumps(), synchronously and atomically. `step` defaults to how many times this
    process dumped `name` before (0, 1, 2, ...). Returns a DumpResult; never raises."""
    dumps = _current
    if dumps is None:
        why = "tensorscope.init_dumps(folder) was not called"
        if "init" not in _reported_globally:
            _reported_globally.add("init")
            _print(f"dump {name!r} failed: {why}")
        return DumpResult(None, why)
    return dumps.dump(tensor, name, step)


_reported_globally = set()

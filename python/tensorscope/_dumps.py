"""Dumps without a daemon: tensorscope.init_dumps(folder) and tensorscope.dump(tensor,
name, step=None) write .npy files laid out exactly as the daemon's .npy sink lays out a
session directory, so `tensorscope compare` (and tensorscope.compare) pair them with each
other and with a daemon's dumps:

    <folder>/run_info.json                                 once per folder (the first writer)
    <folder>/dumps/step_<step>/<stream made safe>_rank<rank>.npy

The file name is the daemon's (tensorscope/_naming.py); the file is byte for byte what
the daemon writes for the same tensor (recording/npy_file.h: format 1.0 unless the header
needs 2.0, data on a 64-byte boundary, bfloat16 as a structured uint16 field named
"bfloat16"). Each file is written synchronously and atomically: into a temporary file
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
from ._naming import dump_path

try:
    import numpy as _np
except ImportError:  # pragma: no cover - Debian's python3-torch depends on numpy
    _np = None

TEMP_PREFIX = ".tmp-npy-"  # recording::kTempNpyPrefix
RUN_INFO = "run_info.json"
_MAGIC = b"\x93NUMPY"
_ALIGN = 64
_V1_MAX_HEADER = 65535
_TORCH_DESCR = {
    torch.float32: "'<f4'",
    torch.float64: "'<f8'",
    torch.float16: "'<f2'",
    torch.bfloat16: "[('bfloat16', '<u2')]",
    torch.int8: "'|i1'",
    torch.int16: "'<i2'",
    torch.int32: "'<i4'",
    torch.int64: "'<i8'",
    torch.uint8: "'|u1'",
    torch.bool: "'|b1'",
}
_NUMPY_DESCR = {
    ("f", 2): "'<f2'", ("f", 4): "'<f4'", ("f", 8): "'<f8'",
    ("i", 1): "'|i1'", ("i", 2): "'<i2'", ("i", 4): "'<i4'", ("i", 8): "'<i8'",
    ("u", 1): "'|u1'", ("b", 1): "'|b1'",
}
_temp_numbers = itertools.count()


class DumpResult(NamedTuple):
    """What dump() did: `path` of the file written (None when nothing was), `error` why
    not ("" when it was). True when the file was written."""

    path: Optional[str]
    error: str

    def __bool__(self) -> bool:
        return not self.error


def npy_header(descr, shape):
    """The .npy header recording::write_npy writes for `descr` and `shape` (bytes)."""
    dims = ", ".join(str(int(d)) for d in shape)
    if len(shape) == 1:
        dims += ","
    text = "{'descr': " + descr + ", 'fortran_order': False, 'shape': (" + dims + "), }"
    body = text.encode("latin-1")

    def padded(prefix):
        unpadded = prefix + len(body) + 1
        return len(body) + 1 + (_ALIGN - unpadded % _ALIGN) % _ALIGN

    major, length_bytes = 1, 2
    length = padded(len(_MAGIC) + 2 + 2)
    if length > _V1_MAX_HEADER:
        major, length_bytes = 2, 4
        length = padded(len(_MAGIC) + 2 + 4)
    padding = length - len(body) - 1
    return _MAGIC + bytes([major, 0]) + length.to_bytes(length_bytes, "little") + body + b" " * padding + b"\n"


def _tensor_bytes(value):
    """(descr, shape, buffer) of `value` (a torch tensor or numpy array), or a refusal str."""
    if isinstance(value, torch.Tensor):
        descr = _TORCH_DESCR.get(value.dtype)
        if descr is None:
            return f"dtype {value.dtype} is not supported (the .npy sink's dtypes: {', '.join(map(str, _TORCH_DESCR))})"
        if value.layout != torch.strided:
            return f"only dense (strided) tensors are supported, not {value.layout}"
        t = value.detach()
        if t.is_conj():
            t = t.resolve_conj()
        if t.is_neg():
            t = t.resolve_neg()
        if t.device.type != "cpu":
            t = t.cpu()  # synchronous: waits for the tensor's stream
        t = t.contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        array = t.numpy()
        return descr, tuple(value.shape), array.reshape(-1).view(_np.uint8)
    if _np is not None and isinstance(value, (_np.ndarray, _np.generic)):
        array = _np.asarray(value)
        descr = _NUMPY_DESCR.get((array.dtype.kind, array.dtype.itemsize))
        if descr is None or not array.dtype.isnative:
            return f"numpy dtype {array.dtype} is not supported"
        shape = array.shape
        return descr, shape, _np.ascontiguousarray(array).reshape(-1).view(_np.uint8)
    return f"cannot dump an object of type {type(value).__name__}: expected a torch.Tensor or numpy.ndarray"


def npy_file_parts(value):
    """[header, data] of the .npy file for `value` (a torch tensor or numpy array), a
    refusal str for a tensor or array the .npy sink does not take, None for anything else."""
    if not isinstance(value, torch.Tensor) and not (_np is not None and isinstance(value, (_np.ndarray, _np.generic))):
        return None
    data = _tensor_bytes(value)
    if isinstance(data, str):
        return data
    descr, shape, buffer = data
    return [npy_header(descr, shape), buffer]


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
            data = _tensor_bytes(tensor)
            if isinstance(data, str):
                return self._fail(name, data)
            descr, shape, buffer = data
            path = os.path.join(self.folder, dump_path(name, step, self.rank))
            directory = os.path.dirname(path)
            if directory not in self._made:
                os.makedirs(directory, exist_ok=True)
                self._made.add(directory)
            write_atomically(path, [npy_header(descr, shape), buffer])
            return DumpResult(path, "")
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

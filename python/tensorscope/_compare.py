"""tensorscope.compare(a, b, atol=..., rtol=...): the `tensorscope compare` command's
engine (tools/compare: .npy files and dump folders, HDF5 recordings, PyTorch files),
run as a subprocess with --json, its report as a CompareResult. There is no second
implementation: the verdicts, metrics, pairing and exit codes are the tool's.

The command is found, in order: the `cli` argument, else $TENSORSCOPE_CLI (either, when
set, is the only one tried); else the first that exists of: the one built or installed
with this package (the build tree's bin/tensorscope, or <prefix>/bin/tensorscope of
`cmake --install`), $TENSORSCOPE_BUILD_DIR/bin/tensorscope, `tensorscope` on PATH.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

try:
    from ._build_info import CLI as _PACKAGE_CLI
except ImportError:  # pragma: no cover - a package without build info
    _PACKAGE_CLI = ""

# The tool's exit codes.
EXIT_MATCH = 0  # every tensor matches
EXIT_DIFFER = 1  # something differs (values, shapes, a tensor on one side only)
EXIT_ERROR = 2  # bad input: a missing path, a file against a folder, an unreadable file
VERDICTS = {EXIT_MATCH: "match", EXIT_DIFFER: "differ", EXIT_ERROR: "error"}


class CompareEntry(NamedTuple):
    """One pair of tensors (or one side's tensor alone), as the tool reports it."""

    name: str  # relative path (dump folders), tensor name, or "A vs B" for two files
    verdict: str  # "MATCH", "DIFFER", "SHAPE", "ONLY_A", "ONLY_B", "ERROR"
    step: Optional[int]  # from the last step_<n> path component
    stream: str
    dtype_a: Optional[str] = None
    dtype_b: Optional[str] = None
    shape_a: Optional[Tuple[int, ...]] = None
    shape_b: Optional[Tuple[int, ...]] = None
    total: Optional[int] = None  # elements compared
    mismatches: Optional[int] = None  # elements not close
    nonfinite_mismatches: Optional[int] = None
    max_abs_error: Optional[float] = None  # NaN where the tool wrote null (an overflowing difference)
    max_rel_error: Optional[float] = None
    cosine: Optional[float] = None
    first_mismatch: Optional[int] = None  # flat index of the first element not close
    error: Optional[str] = None  # for "ERROR"


def _entry(doc):
    def number(key):
        if key not in doc:
            return None
        value = doc[key]
        return math.nan if value is None else float(value)

    def shape(key):
        return tuple(doc[key]) if key in doc else None

    return CompareEntry(
        name=doc.get("name", ""),
        verdict=doc.get("verdict", ""),
        step=doc.get("step"),
        stream=doc.get("stream", ""),
        dtype_a=doc.get("dtype_a"),
        dtype_b=doc.get("dtype_b"),
        shape_a=shape("shape_a"),
        shape_b=shape("shape_b"),
        total=doc.get("total"),
        mismatches=doc.get("mismatches"),
        nonfinite_mismatches=doc.get("nonfinite_mismatches"),
        max_abs_error=number("max_abs_error"),
        max_rel_error=number("max_rel_error"),
        cosine=number("cosine"),
        first_mismatch=doc.get("first_mismatch"),
        error=doc.get("error"),
    )


class CompareResult:
    """The report of one comparison. True when everything matched.

    exit_code    the tool's: 0 match, 1 something differs, 2 bad input (see `error`)
    verdict      "match", "differ" or "error" (the exit code in words)
    entries      CompareEntry per pair, ordered by step, then name
    matched, differed, only_in_a, only_in_b, unreadable   the tool's counts
    first_divergence   the first entry that is not a match, or None
    error        what the tool said on stderr ("" when nothing)
    """

    def __init__(self, exit_code: int, doc: Optional[Dict[str, Any]], error: str, command: List[str]) -> None:
        self.exit_code: int = exit_code
        self.verdict: str = VERDICTS.get(exit_code, "error")
        self.error: str = error
        self.command: List[str] = command  # the argv that ran
        doc = doc or {}
        self.atol: Optional[float] = doc.get("atol")
        self.rtol: Optional[float] = doc.get("rtol")
        self.directories: bool = doc.get("directories", False)
        self.entries: List[CompareEntry] = [_entry(e) for e in doc.get("entries", [])]
        self.matched: int = doc.get("matched", 0)
        self.differed: int = doc.get("differed", 0)
        self.only_in_a: int = doc.get("only_in_a", 0)
        self.only_in_b: int = doc.get("only_in_b", 0)
        self.unreadable: int = doc.get("unreadable", 0)
        name = doc.get("first_divergence")
        self.first_divergence: Optional[CompareEntry] = next((e for e in self.entries if e.name == name), None) if name else None

    @property
    def ok(self) -> bool:
        """True when everything matched (exit code 0)."""
        return self.exit_code == EXIT_MATCH

    def __bool__(self) -> bool:
        return self.ok

    def to_frame(self) -> Any:
        """The entries as a pandas DataFrame (one row per entry, CompareEntry's fields)."""
        from ._frames import pandas

        return pandas().DataFrame.from_records(self.entries, columns=CompareEntry._fields)

    def __repr__(self) -> str:
        if self.exit_code == EXIT_ERROR and not self.entries:
            return f"CompareResult(error, {self.error!r})"
        first = f", first divergence {self.first_divergence.name!r}" if self.first_divergence else ""
        return (f"CompareResult({self.verdict}: {self.matched} matched, {self.differed} differed, "
                f"{self.only_in_a} only in A, {self.only_in_b} only in B, {self.unreadable} unreadable{first})")


def find_cli(cli: Optional[str] = None) -> str:
    """The path of the `tensorscope` command (see the top of this file); FileNotFoundError
    naming the places looked at when there is none."""
    tried = []
    if cli is not None:
        candidates = [("cli", cli)]
    elif os.environ.get("TENSORSCOPE_CLI"):
        candidates = [("$TENSORSCOPE_CLI", os.environ["TENSORSCOPE_CLI"])]
    else:
        build = os.environ.get("TENSORSCOPE_BUILD_DIR")
        candidates = [
            ("the package's build", _PACKAGE_CLI),
            ("$TENSORSCOPE_BUILD_DIR", os.path.join(build, "bin", "tensorscope") if build else None),
            ("PATH", shutil.which("tensorscope")),
        ]
    for where, path in candidates:
        if not path:
            continue
        path = os.fspath(path)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        tried.append(f"{where}: {path}")
    raise FileNotFoundError(
        "tensorscope.compare needs the `tensorscope` command (cli=, $TENSORSCOPE_CLI, the package's build, "
        "$TENSORSCOPE_BUILD_DIR/bin, PATH); " + ("not usable: " + "; ".join(tried) if tried else "none found")
    )


def _side(value, temp, name):
    """The command-line argument for one side: a path, or a tensor or array written to an
    .npy file in the folder `temp()` makes."""
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        return "./" + path if path.startswith("-") else path  # never taken for an option
    from ._dumps import prepared, write_npy  # (imports torch: only for a tensor or array)

    data = prepared(value)
    if data is None:
        raise TypeError(
            f"{name} must be a path, a torch.Tensor or a numpy.ndarray, not {type(value).__name__}")
    if isinstance(data, str):
        raise TypeError(f"cannot compare this {name}: {data}")
    path = os.path.join(temp(), f"{name}.npy")
    write_npy(path, data)
    return path


def compare(a: Any, b: Any, *, atol: float = 1e-8, rtol: float = 1e-5, cli: Optional[str] = None,
            timeout: Optional[float] = None, hdf5_timeout: Optional[float] = None) -> CompareResult:
    """Compares `a` with `b`: two .npy files, two folders of them (dump folders, e.g. two
    init_dumps folders or daemon session directories, paired by relative path), HDF5
    recordings or PyTorch files, exactly as `tensorscope compare A B --atol X --rtol Y`
    does (allclose |a-b| <= atol + rtol*|b| per element). A side may also be a tensor or
    numpy array (written to a temporary .npy file first), compared with a tensor, an .npy
    file or a .pt file holding one tensor. Returns a CompareResult (its exit_code and
    verdict are the tool's). Raises FileNotFoundError when the command cannot be found,
    TypeError for a side that is none of these, subprocess.TimeoutExpired after
    `timeout` seconds."""
    for what, value in (("atol", atol), ("rtol", rtol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{what} must be a number, not {type(value).__name__}")
    cli = find_cli(cli)
    temp = []

    def temp_dir():
        if not temp:
            temp.append(tempfile.mkdtemp(prefix="tensorscope-compare-"))
        return temp[0]

    try:
        command = [cli, "compare", _side(a, temp_dir, "a"), _side(b, temp_dir, "b"), "--atol", repr(float(atol)),
                   "--rtol", repr(float(rtol)), "--json"]
        if hdf5_timeout is not None:
            command += ["--hdf5-timeout", repr(float(hdf5_timeout))]
        r = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    finally:
        if temp:
            shutil.rmtree(temp[0], ignore_errors=True)
    doc = None
    if r.stdout.strip():
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            doc = None
    error = r.stderr.strip()
    if r.returncode not in VERDICTS:
        error = error or f"tensorscope compare exited with status {r.returncode}"
        return CompareResult(EXIT_ERROR, doc, error, command)
    return CompareResult(r.returncode, doc, error, command)

"""The console commands a pip-installed tensorscope puts on PATH: `tensorscope` and
`tensorscoped`, the executables that came with the package (tensorscope/bin/), run in
place of this Python process with the same arguments."""

import os
import sys
from typing import NoReturn


def _run(which: str) -> NoReturn:
    from . import _build_info

    path: str = getattr(_build_info, which)
    try:
        os.execv(path, [path] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write(f"tensorscope: cannot run {path}: {e}\n")
        sys.exit(127)


def cli() -> NoReturn:
    """`tensorscope ...`: status, view, compare (see `tensorscope --help`)."""
    _run("CLI")


def daemon() -> NoReturn:
    """`tensorscoped ...`: the daemon (see `tensorscoped --help`)."""
    _run("DAEMON")

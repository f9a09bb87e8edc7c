"""Session folders read as one run: a job on many nodes has a daemon per node, each writing
its own session folder (to the cluster's shared storage, as TensorBoard's log
directories are); the readers (read_summaries, read_anomalies) take them together. What
names them: a session folder, a folder that holds session folders (a common parent: as
`tensorscope view --dir` finds them), a glob pattern, or a list of any of these. Each folder's node is
the host its daemon ran on (run_info/), or, where two folders have the same host (two
daemons on one machine), the host and the folder's path under their common parent."""

from __future__ import annotations

import glob
import json
import os
from typing import List, Sequence, Tuple, Union

from . import _native

PathLike = Union[str, "os.PathLike[str]"]
Where = Union[PathLike, Sequence[PathLike]]


def _host(session: str) -> str:
    for path in sorted(glob.glob(os.path.join(session, "run_info", "*.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                info = json.load(f)
            host = (info.get("daemon") or {}).get("hostname") or info.get("hostname")
            if isinstance(host, str) and host:
                return host
        except (OSError, ValueError, AttributeError):
            continue
    return ""


def session_folders(where: Where) -> List[Tuple[str, str]]:
    """[(session folder, node)] of `where`, in path order; [] when it names none."""
    items = [where] if isinstance(where, (str, os.PathLike)) else list(where)
    folders = []
    for item in items:
        path = os.fspath(item)
        candidates = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
        for candidate in candidates:
            for session in _native.session_dirs_under(candidate):  # (shared/output_dir.h, as `tensorscope view`)
                session = os.path.normpath(session)
                if session not in folders:
                    folders.append(session)
    hosts = [_host(f) for f in folders]
    parent = os.path.commonpath(folders) if len(folders) > 1 else ""
    out = []
    for folder, host in zip(folders, hosts):
        shared = hosts.count(host) > 1 or not host
        relative = os.path.relpath(folder, parent) if parent else os.path.basename(folder)
        out.append((folder, f"{host}:{relative}" if shared and host else (host or relative)))
    return out

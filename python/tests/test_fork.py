"""A forked child (a DataLoader worker, os.fork()) does not hold its parent's connection:
when the parent is killed or closes its client, the daemon lets the producer go while the
child lives on; the child's own pushes are counted as not_connected and say why."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import wait_until

SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    import tensorscope

    options = dict(session=sys.argv[1], runtime_dir=sys.argv[2], connect_timeout_ms=5000)
    scope = tensorscope.Client(**options)
    assert scope.push("x", np.ones(4, dtype=np.float32)).name == "PUSHED", scope.stats()
    child = os.fork()
    if child == 0:
        stats_before = scope.stats()
        result = scope.push("x", np.ones(4, dtype=np.float32))
        note = scope.stats().connection_note
        with open(sys.argv[4] + ".tmp", "w") as f:  # apart from the parent's stdout
            f.write(f"child {os.getpid()} {result.name} {note!r}")
        os.rename(sys.argv[4] + ".tmp", sys.argv[4])
        time.sleep(120)
        os._exit(0)
    print(f"parent {os.getpid()} forked {child}", flush=True)
    if sys.argv[3] == "close":
        scope.close()
        print("closed", flush=True)
    time.sleep(120)
    """
)


def producers(daemon):
    s = daemon.status()
    return [p for p in (s or {}).get("producers", []) if p.get("connected", True)]


@pytest.mark.parametrize("how", ["kill", "close"])
def test_a_forked_child_does_not_keep_its_parent_registered(daemon, how, tmp_path):
    child_file = str(tmp_path / "child.txt")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, daemon.session, daemon.runtime_dir, how, child_file],
                            stdout=subprocess.PIPE, text=True)
    child_pid = None
    try:
        lines = []
        while not lines or (how == "close" and lines[-1] != "closed"):
            line = proc.stdout.readline()
            assert line, f"the script ended early: {lines}\n{daemon.log()}"
            lines.append(line.strip())
        assert wait_until(lambda: os.path.exists(child_file), 30), lines
        with open(child_file) as f:
            child_line = f.read()
        child_pid = int(child_line.split()[1])
        assert "NOT_CONNECTED" in child_line and "fork" in child_line, child_line
        if how == "kill":
            assert wait_until(lambda: len(producers(daemon)) == 1, 30), daemon.status()
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        # The parent is gone (or closed): the daemon lets its producer go, the child alive.
        assert wait_until(lambda: len(producers(daemon)) == 0, 20), daemon.status()
        os.kill(child_pid, 0)  # still running
    finally:
        if child_pid is not None:
            try:
                os.kill(child_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.kill()
        proc.wait(timeout=30)

"""A new user's first run, as the README gives it: autostart writes under
./tensorscope_runs/<session>, close() says once where the outputs are and the command
that views them (not a forked child, not the other ranks), and `tensorscope view` with no
argument afterwards opens that session."""

import os
import subprocess
import sys
import tempfile

from conftest import BUILD, CLI, DAEMON, wait_until

SCRIPT = r"""
import os, sys
import torch
from torch import nn
import tensorscope

model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scope = tensorscope.Client(session=sys.argv[1], autostart=True, rank=int(sys.argv[2]), autostart_idle_exit_ms=1000)
scope.track_model("net", model)
for _ in range(5):
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    scope.next_step()
child = os.fork()
if child == 0:  # a DataLoader worker's shape: forked after the client exists
    scope.close()
    os._exit(0)
os.waitpid(child, 0)
scope.close()
scope.close()
"""


def daemon_gone(runtime, session):
    """Whether the session's daemon has exited (its files finished). Asked every 2 s: a
    question is a visitor, and the daemon exits after 1 s without any."""
    return wait_until(lambda: subprocess.run([CLI, "status", "--session", session, "--runtime-dir", runtime],
                                             capture_output=True).returncode != 0, 120, interval=2)


def run(cwd, runtime, session, rank=0):
    env = dict(os.environ, TENSORSCOPE_RUNTIME_DIR=runtime, TENSORSCOPE_DAEMON=DAEMON,
               PYTHONPATH=os.path.join(BUILD, "python"))
    return subprocess.run([sys.executable, "-c", SCRIPT, session, str(rank)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_close_says_where_the_outputs_are_and_view_opens_the_latest(tmp_path):
    runtime = tempfile.mkdtemp(prefix="tsfirst-", dir="/tmp")
    first = run(tmp_path, runtime, "exp1")
    assert first.returncode == 0, first.stderr
    session_dir = os.path.join(tmp_path, "tensorscope_runs", "exp1")
    said = [line for line in first.stderr.splitlines() if "outputs in" in line]
    assert len(said) == 1, first.stderr
    assert said[0].endswith(f"outputs in {session_dir}; view them with: tensorscope view --dir {session_dir}"), said
    # Another rank says nothing (rank 0 does); its outputs go to the same place.
    other = run(tmp_path, runtime, "exp1", rank=1)
    assert other.returncode == 0 and "outputs in" not in other.stderr, other.stderr
    assert daemon_gone(runtime, "exp1")
    # A later run is the latest; view with no argument opens it, by name.
    second = run(tmp_path, runtime, "exp2")
    assert second.returncode == 0, second.stderr
    assert daemon_gone(runtime, "exp2")
    env = dict(os.environ, TENSORSCOPE_RUNTIME_DIR=tempfile.mkdtemp(prefix="tsfirst-", dir="/tmp"))
    viewer = subprocess.Popen([CLI, "view"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        address = viewer.stdout.readline()
        assert address.startswith("http://127.0.0.1:"), (address, viewer.stderr.read() if viewer.poll() else "")
    finally:
        viewer.terminate()
        _, err = viewer.communicate(timeout=60)
    assert "the latest session under tensorscope_runs: exp2" in err, err


def test_view_without_a_session_says_what_it_looked_for(tmp_path):
    env = dict(os.environ, TENSORSCOPE_RUNTIME_DIR=tempfile.mkdtemp(prefix="tsfirst-", dir="/tmp"))
    r = subprocess.run([CLI, "view"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "no session under tensorscope_runs" in r.stderr, r.stderr
    assert "--dir" in r.stderr

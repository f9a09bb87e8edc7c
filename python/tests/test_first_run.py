"""A new user's first run, as the README gives it: autostart writes under
./tensorscope_runs/<session>, close() says once where the outputs are and the command
that views them (not a forked child, not the other ranks), and `tensorscope view` with no
argument afterwards opens that session (a running daemon of session "default" first)."""

import os
import shutil
import subprocess
import sys
import tempfile

from conftest import BUILD, CLI, DAEMON, Daemon, built, wait_until

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


def run(cwd, runtime, session, rank=0, script=SCRIPT):
    env = dict(os.environ, TENSORSCOPE_RUNTIME_DIR=runtime, TENSORSCOPE_DAEMON=DAEMON,
               PYTHONPATH=os.path.join(BUILD, "python"))
    return subprocess.run([sys.executable, "-c", script, session, str(rank)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def view_without_arguments(cwd, runtime):
    """`tensorscope view` run in `cwd`: (its first line on stdout, its stderr), stopped
    once it serves."""
    viewer = subprocess.Popen([CLI, "view"], cwd=cwd, env=dict(os.environ, TENSORSCOPE_RUNTIME_DIR=runtime),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        address = viewer.stdout.readline()
    finally:
        viewer.terminate()
        _, err = viewer.communicate(timeout=60)
    return address, err


def test_close_says_where_the_outputs_are_and_view_opens_the_latest(tmp_path):
    built(DAEMON), built(CLI)  # autostarts the daemon, then runs `tensorscope view`
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
    address, err = view_without_arguments(tmp_path, tempfile.mkdtemp(prefix="tsfirst-", dir="/tmp"))
    assert address.startswith("http://127.0.0.1:"), (address, err)
    assert "the latest session under tensorscope_runs: exp2" in err, err
    assert "showing tensorscope_runs/exp2\n" in err, err


# A client of a daemon it did not start: the session's folder from the daemon's status.
CONNECT = r"""
import os, sys
import torch
import tensorscope

scope = tensorscope.Client(session=sys.argv[1], connect_timeout_ms=5000)
assert scope.connected
scope.push("x", torch.ones(3))
scope.close()
"""


def test_a_running_default_daemon_comes_first_and_its_clients_say_where(tmp_path):
    daemon = Daemon(str(tmp_path), "default").start()
    try:
        client = run(tmp_path, daemon.runtime_dir, "default", script=CONNECT)
        assert client.returncode == 0, client.stderr
        said = [line for line in client.stderr.splitlines() if "outputs in" in line]
        assert len(said) == 1 and said[0].endswith(
            f"outputs in {daemon.session_dir}; view them with: tensorscope view --dir {daemon.session_dir}"), said
        # An older run in the working directory: the running daemon is shown, not it.
        os.makedirs(os.path.join(tmp_path, "tensorscope_runs", "exp1"))
        address, err = view_without_arguments(tmp_path, daemon.runtime_dir)
        assert address.startswith("http://127.0.0.1:"), (address, err)
        assert "the running daemon of session 'default'" in err and f"showing {daemon.session_dir}" in err, err
    finally:
        daemon.stop()
        shutil.rmtree(daemon.runtime_dir, ignore_errors=True)


def test_view_without_a_session_says_what_it_looked_for(tmp_path):
    built(CLI)
    runtime = tempfile.mkdtemp(prefix="tsfirst-", dir="/tmp")
    env = dict(os.environ, TENSORSCOPE_RUNTIME_DIR=runtime)
    r = subprocess.run([CLI, "view"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    looked_in = os.path.join(os.path.realpath(tmp_path), "tensorscope_runs")
    assert f"no daemon runs for session 'default' (runtime directory {runtime})" in r.stderr, r.stderr
    assert f"no session directory is under {looked_in}" in r.stderr, r.stderr
    assert "--dir" in r.stderr

"""Fixtures of the Python package's tests: the package from the build tree and a real
tensorscoped per test (its own runtime directory, session and output), stopped at the
end of the test so every file is finalized before it is read."""

import csv
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("TENSORSCOPE_BUILD_DIR", os.path.join(REPO, "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))

DAEMON = os.path.join(BUILD, "bin", "tensorscoped")
CLI = os.path.join(BUILD, "bin", "tensorscope")

RECORDING_CONFIG = """workers: 2
log_level: info
record:
  video: "{video}"
  stats: ".*"
  npy: "{npy}"
"""


def built(path):
    """path, a program of the build; a test that needs it skips where a client-only build
    (scripts/gpu_check.sh, TENSORSCOPE_TESTS_WITHOUT_DAEMON=1) has not built it."""
    if os.environ.get("TENSORSCOPE_TESTS_WITHOUT_DAEMON") == "1" and not os.path.exists(path):
        pytest.skip(f"needs {os.path.basename(path)}, which a client-only build has not")
    return path


def wait_until(predicate, timeout, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()



def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(worker, args, world, timeout=300):
    """Runs `world` ranks of script `worker` (with `args`) as torchrun's environment
    starts them, on one free port; each must exit 0 and print JSON last: those, by rank
    order of start."""
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, worker, *args], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err[-4000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results

class Daemon:
    """A tensorscoped for one test, recording statistics of every stream (and .npy values
    of the streams `npy` matches)."""

    def __init__(self, root, session, npy=".*", video="", args=()):
        built(DAEMON)
        self.root = root
        self.session = session
        self.args = list(args)  # more of tensorscoped's options
        # Short: the session socket's path must fit in sockaddr_un.
        self.runtime_dir = tempfile.mkdtemp(prefix="tsrun-", dir="/tmp")
        self.output = os.path.join(root, "out")
        self.config = os.path.join(root, "daemon.yaml")
        self.log_path = os.path.join(root, "tensorscoped.log")
        with open(self.config, "w") as f:
            f.write(RECORDING_CONFIG.format(video=video, npy=npy))
        self.process = None

    def start(self, timeout=30):
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [DAEMON, "--config", self.config, "--output", self.output, "--session", self.session,
             "--runtime-dir", self.runtime_dir, *self.args],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if not wait_until(lambda: self.status() is not None or self.process.poll() is not None, timeout):
            raise RuntimeError(f"tensorscoped did not start:\n{self.log()}")
        if self.process.poll() is not None:
            raise RuntimeError(f"tensorscoped exited ({self.process.returncode}):\n{self.log()}")
        return self

    def status(self):
        r = subprocess.run([CLI, "status", "--session", self.session, "--runtime-dir", self.runtime_dir, "--json"],
                           capture_output=True, text=True, timeout=30)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def client_options(self, **extra):
        options = {"session": self.session, "runtime_dir": self.runtime_dir, "connect_timeout_ms": 5000}
        options.update(extra)
        return options

    def kill(self):
        self.process.kill()
        self.process.wait(timeout=30)

    def stop(self, timeout=120):
        """SIGTERM and wait: the daemon drains every ring and finalizes every file."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"tensorscoped did not stop in {timeout} s:\n{self.log()}")

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-20000:]
        except OSError:
            return ""

    @property
    def session_dir(self):
        return os.path.join(self.output, self.session)

    def stats_rows(self):
        """Every row of every statistics table (dicts keyed by the CSV header)."""
        rows = []
        for path in sorted(glob.glob(os.path.join(self.session_dir, "stats", "*.csv"))):
            with open(path, newline="") as f:
                rows.extend(csv.DictReader(f))
        return rows

    def frames(self):
        """{(stream, rank): frames received}."""
        counts = {}
        for row in self.stats_rows():
            key = (row["stream"], int(row["rank"]))
            counts[key] = counts.get(key, 0) + 1
        return counts

    def npy(self, stream, step, rank=0):
        """The .npy sink's dump of `stream` (its file name made safe as the daemon does)."""
        from tensorscope._dumps import dump_path

        return np.load(os.path.join(self.session_dir, dump_path(stream, step, rank)))


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(str(tmp_path), "py-" + uuid.uuid4().hex[:8]).start()
    yield d
    if d.process.poll() is None:
        d.stop()
    shutil.rmtree(d.runtime_dir, ignore_errors=True)

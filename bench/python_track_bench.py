#!/usr/bin/env python3
"""python_track_bench — what tensorscope's Python tracks add to a CPU training step.

The Python twin of track_bench: the same CNN (examples/cnn_model.py), MLP and tiny MLP,
trained from Python (zero_grad, forward, cross-entropy, backward, SGD step, next_step)
under each configuration:
  none                 no track: the baseline every ratio is taken against
  none (control)       the baseline again: the ratio shows the run's noise floor
  summaries            track_model and track_layer with every_n 10^6 and stats_every 1: a
                       summary of every module output and its gradient, every step
  summaries+n=100      the same with full tensors every 100 steps on top
  detect_anomaly       no track; each step under torch.autograd.detect_anomaly()
  isfinite().item()    no track; a hand-written check of every module output and its
                       gradient, torch.isfinite(t).all().item() (a host sync each)
  track_model n=100    track_model on the model, every_n 100, stats_every 0 (hooks only on
                       1 step in 100)
  track_model n=1      every module output copied every step (and the module tree log)
  no tree n=1          the same with tree_log=False: what the module tree log costs
  model+layer n=1      track_model and track_layer, every_n 1: outputs and their gradients
(the last four without summaries: stats_every=0).
Blocks of 100 steps, interleaved in rounds (each round starts with a different
configuration) after one untimed round; tracks are made and removed outside the timed
steps. A real tensorscoped (started here, recording nothing) drains the ring, so every
admitted tensor is copied into shared memory. Then: the cost of a gated push() call, of a
forward of a tracked model on a step its track does not send, and the frames and bytes
delivered per second per stream with model+layer n=1, and an LSTM cell called 1,000
times a step with its calls stacked ("auto") or a stream each ("separate").

  PYTHONPATH=build/python /usr/bin/python3 bench/python_track_bench.py [--rounds R] [--quick]
"""

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.environ.get("TENSORSCOPE_BUILD_DIR", os.path.join(REPO, "build"))
MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
          "MALLOC_TOP_PAD_": str(64 << 20)}  # as track_bench's mallopt: steady CNN step times

if any(os.environ.get(k) != v for k, v in MALLOC.items()) and "--glibc-malloc" not in sys.argv:
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **MALLOC))

sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.join(REPO, "examples"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tensorscope  # noqa: E402
from cnn_model import Cnn  # noqa: E402

STEPS_PER_BLOCK = 100
CONFIGS = ["none", "none (control)", "summaries", "summaries+n=100", "detect_anomaly", "isfinite().item()",
           "track_model n=100", "track_model n=1", "no tree n=1", "model+layer n=1"]


class Mlp(nn.Module):
    def __init__(self, inputs, hidden):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(inputs, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def start_daemon(root, session):
    config = os.path.join(root, "bench.yaml")
    with open(config, "w") as f:
        f.write('workers: 2\nlog_level: warn\nrecord:\n  video: ""\n')
    runtime = os.path.join(root, "run")
    log = open(os.path.join(root, "daemon.log"), "wb")
    daemon = subprocess.Popen([os.path.join(BUILD, "bin", "tensorscoped"), "--config", config, "--output",
                               os.path.join(root, "out"), "--session", session, "--runtime-dir", runtime],
                              stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        if os.path.exists(os.path.join(runtime, session + ".sock")):
            break
        time.sleep(0.02)
    return daemon, runtime


class IsfiniteCheck:
    """What people write instead: every module output and its gradient checked with
    isfinite().all().item() (each a host synchronisation on a GPU)."""

    def __init__(self, model):
        self.bad = 0
        self.hooks = [m.register_forward_hook(self.on_output) for m in model.modules()
                      if any(True for _ in m.parameters(recurse=False))]

    def check(self, t):
        if not torch.isfinite(t).all().item():
            self.bad += 1

    def on_output(self, module, inputs, output):
        self.check(output)
        if output.requires_grad:
            output.register_hook(self.check)

    def remove(self):
        for h in self.hooks:
            h.remove()


def make_tracks(scope, config, model):
    """(handles to remove after the block, a context each step runs in)."""
    step_context = contextlib.nullcontext
    if config.startswith("none") or config == "detect_anomaly":
        if config == "detect_anomaly":
            step_context = torch.autograd.detect_anomaly
        return [], step_context
    if config == "isfinite().item()":
        return [IsfiniteCheck(model)], step_context
    if config.startswith("summaries"):
        every_n = 100 if "n=100" in config else 1_000_000
        return [scope.track_model("m", model, every_n=every_n, stats_every=1),
                scope.track_layer("m", model, every_n=every_n, stats_every=1)], step_context
    every_n = 100 if "n=100" in config else 1
    tracks = [scope.track_model("m", model, every_n=every_n, tree_log=not config.startswith("no tree"),
                                stats_every=0)]
    if config.startswith("model+layer"):
        tracks.append(scope.track_layer("m", model, every_n=every_n, stats_every=0))
    return tracks, step_context


def bench_model(label, scope, model, x, y, rounds):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    samples = {c: [] for c in CONFIGS}
    counts = {c: [0, 0, 0] for c in CONFIGS}  # pushes, bytes, dropped

    def block(config, timed):
        tracks, step_context = make_tracks(scope, config, model)
        before = scope.stats()
        times = []
        for _ in range(STEPS_PER_BLOCK):
            t0 = time.perf_counter()
            with step_context():
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            scope.next_step()
            times.append(time.perf_counter() - t0)
        after = scope.stats()
        for t in tracks:
            t.remove()
        if timed:
            samples[config].extend(times)
            c = counts[config]
            c[0] += after.pushed - before.pushed
            c[1] += after.bytes - before.bytes
            c[2] += after.dropped_full - before.dropped_full

    for config in CONFIGS:  # warm-up round
        block(config, False)
    for r in range(rounds):
        for i in range(len(CONFIGS)):
            block(CONFIGS[(r + i) % len(CONFIGS)], True)
    base = statistics.median(samples["none"])
    rows = {}
    for config in CONFIGS:
        med = statistics.median(samples[config])
        steps = len(samples[config])
        pushes, nbytes, dropped = counts[config]
        rows[config] = med
        print(f"{label:<5} {config:<18} {med * 1e3:9.3f} {med / base:7.3f} {(med - base) * 1e6:+9.0f} "
              f"{pushes / steps:11.2f} {nbytes / steps:12.0f} {dropped:8d}")
    return rows


def gated_push_cost(scope):
    """Seconds per gated push(): the client's (its gate in C, Core.push_gate), the Python
    method it falls back to, and a no-op Python call; each the best of 5 runs."""
    t = torch.zeros(4)
    scope.push("gated", t)  # the first call is admitted
    n = 200_000

    def noop(name, tensor):
        return None

    def per_call(call):
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                call("gated", t)
            best = min(best, (time.perf_counter() - t0) / n)
        return best

    return per_call(scope.push), per_call(type(scope).push.__get__(scope)), per_call(noop)


def gated_forward_cost(scope, rounds):
    """A forward of the tiny MLP on a step its track does not send vs untracked."""
    model = Mlp(32, 64)
    x = torch.randn(16, 32)
    n = 2000 * rounds
    with torch.no_grad():
        def timed():
            t0 = time.perf_counter()
            for _ in range(n):
                model(x)
            return (time.perf_counter() - t0) / n

        timed()
        untracked = timed()
        handle = scope.track_model("g", model, every_n=1_000_000, stats_every=0)
        scope.next_step()  # now on a gated step: no module hook of the track is installed
        tracked = timed()
        handle.remove()
    return untracked, tracked


def many_calls_cost(scope, rounds):
    """An LSTM cell called 1,000 times a step (batch 8, 32 -> 64; loss on the last state,
    backward, SGD), outputs and gradients tracked every step: untracked, calls "auto" (4
    calls of their own, all stacked into "#calls"), and "separate" (a stream per call).
    Blocks of 3 steps, interleaved. Rows: median step, ratio, pushes and streams per step."""
    torch.manual_seed(0)
    cell = nn.LSTMCell(32, 64)
    opt = torch.optim.SGD(cell.parameters(), lr=0.01)
    xs = torch.randn(1000, 8, 32)
    configs = ("none", "calls auto", "calls separate")
    samples = {c: [] for c in configs}
    pushes = {c: 0 for c in configs}

    def block(config, timed):
        handle = None
        if config != "none":
            handle = scope.track_model("lstm", cell, kinds=["output", "gradient"], stats_every=0,
                                       calls=config.split()[1])
        before = scope.stats()
        for _ in range(3):
            t0 = time.perf_counter()
            h = c = torch.zeros(8, 64)
            for x in xs:
                h, c = cell(x, (h, c))
            opt.zero_grad()
            h.pow(2).mean().backward()
            opt.step()
            scope.next_step()
            if timed:
                samples[config].append(time.perf_counter() - t0)
        if handle is not None:
            handle.remove()
        if timed:
            pushes[config] += scope.stats().pushed - before.pushed

    for config in configs:
        block(config, False)
    for r in range(rounds):
        for i in range(len(configs)):
            block(configs[(r + i) % len(configs)], True)
    base = statistics.median(samples["none"])
    print("LSTM cell called 1,000 times a step (outputs h, c and their gradients, every step):")
    for config in configs:
        med = statistics.median(samples[config])
        print(f"  {config:<15} {med * 1e3:8.2f} ms/step  ratio {med / base:6.3f}  "
              f"{pushes[config] / len(samples[config]):7.1f} pushes/step")


def main():
    parser = argparse.ArgumentParser(description="Python tracking overhead on CPU training steps")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="2 rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--glibc-malloc", action="store_true", help="keep glibc's malloc thresholds")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    root = tempfile.mkdtemp(prefix="ts-pybench-")
    session = "pybench"
    daemon, runtime = start_daemon(root, session)
    try:
        scope = tensorscope.Client(session, runtime_dir=runtime, connect_timeout_ms=5000, every_n=1)
        if not scope.connected:
            sys.exit(f"python_track_bench: no daemon ({scope.stats().connection_note})")
        print(f"python_track_bench: torch {torch.__version__}, Python {sys.version.split()[0]}, "
              f"{torch.get_num_threads()} torch threads, {rounds} rounds x {STEPS_PER_BLOCK} steps per "
              f"configuration, interleaved; ratios to \"none\" of the same model")
        print(f"{'':5} {'configuration':<18} {'median ms':>9} {'ratio':>7} {'+us':>9} {'pushes/step':>11} "
              f"{'bytes/step':>12} {'dropped':>8}")
        cnn = Cnn()
        cnn_rows = bench_model("cnn", scope, cnn, torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,)), rounds)
        for label, batch, inputs, hidden in (("mlp", 64, 784, 256), ("tiny", 16, 32, 64)):
            bench_model(label, scope, Mlp(inputs, hidden), torch.randn(batch, inputs),
                        torch.randint(0, 10, (batch,)), rounds)
        print("cnn: batch 32 of 1x28x28, conv-bn-relu-pool x2, fc 784-64-10 (6 tracked modules); "
              "mlp: batch 64, fc 784-256-256-10; tiny: batch 16, fc 32-64-64-10 (3 tracked modules each).")

        gated = tensorscope.Client(session, runtime_dir=runtime, connect_timeout_ms=5000, every_n=1_000_000)
        per_push, per_method, per_call = gated_push_cost(gated)
        gated.close()
        print(f"gated push(): {per_push * 1e9:.0f} ns per call (the Python method without the native gate: "
              f"{per_method * 1e9:.0f} ns; a no-op Python function call: {per_call * 1e9:.0f} ns)")
        untracked, tracked = gated_forward_cost(scope, rounds)
        print(f"tiny MLP forward on a step its track does not send: {tracked * 1e6:.1f} us vs {untracked * 1e6:.1f} us "
              f"untracked ({(tracked - untracked) * 1e9:+.0f} ns)")

        step = cnn_rows["model+layer n=1"]
        streams = 12  # 6 outputs + 6 gradients
        handle = [scope.track_model("c", cnn, stats_every=0), scope.track_layer("c", cnn, stats_every=0)]
        before = scope.stats()
        x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
        opt = torch.optim.SGD(cnn.parameters(), lr=0.01)
        t0 = time.perf_counter()
        for _ in range(STEPS_PER_BLOCK):
            opt.zero_grad()
            nn.functional.cross_entropy(cnn(x), y).backward()
            opt.step()
            scope.next_step()
        seconds = time.perf_counter() - t0
        after = scope.stats()
        for h in handle:
            h.remove()
        frames = after.pushed - before.pushed
        cnn_bytes = after.bytes - before.bytes
        print(f"cnn model+layer n=1: {frames / seconds / streams:.1f} frames/s per stream "
              f"({cnn_bytes / seconds / streams / 1e6:.2f} MB/s per stream, {frames} frames of {streams} streams in "
              f"{seconds:.2f} s; median step {step * 1e3:.2f} ms), dropped {after.dropped_full - before.dropped_full}")
        many_calls_cost(scope, rounds)
        s = scope.stats()
        print(f"client: pushed {s.pushed} ({s.bytes / 1e6:.1f} MB), dropped {s.dropped_full}, refused {s.refused}")
        scope.close()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

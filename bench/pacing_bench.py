#!/usr/bin/env python3
"""pacing_bench — a Python training process that offers far more tensors than the daemon
can draw, with the client's pacing (client/core/pacer.h) and without it, in one run.

A 49-module MLP (24 Linear+ReLU pairs and a head, 128 wide, batch 64) is trained with
track_model + track_layer at every_n 2 (each Linear's output and its gradient: 64x128
floats), against the default daemon (2 workers, every stream drawn into videos). Phases
of SECONDS alternate pacing off / on, each against a fresh daemon and session, which is
stopped (its videos finalized) at the phase's end. Per phase it prints the steps per
second, the calls the tracks offered, what was pushed, dropped_full (and its share of the
pushes tried), paced, the frames the daemon drew while training ran (its status) and in
all (after it drained the ring), and per stream (fewest, median, most; activations and
gradients apart, from index.json); then the ratio of the median step times, on / off.

  PYTHONPATH=build/python /usr/bin/python3 bench/pacing_bench.py [--seconds S] [--rounds R]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("TENSORSCOPE_BUILD_DIR", os.path.join(os.path.dirname(HERE), "build"))

import torch  # noqa: E402

import tensorscope  # noqa: E402


def start_daemon(root, session):
    runtime = tempfile.mkdtemp(prefix="tspace-", dir="/tmp")  # short: sockaddr_un
    log = open(os.path.join(root, "daemon.log"), "wb")
    daemon = subprocess.Popen([os.path.join(BUILD, "bin", "tensorscoped"), "--output", os.path.join(root, "out"),
                               "--session", session, "--runtime-dir", runtime],
                              stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(runtime, session + ".sock")) and time.monotonic() < deadline:
        time.sleep(0.02)
    return daemon, runtime


def frames_per_stream(session_dir):
    """{(stream, kind): frames drawn} from index.json (the videos of tensors)."""
    try:
        with open(os.path.join(session_dir, "index.json")) as f:
            files = json.load(f).get("files", [])
    except (OSError, ValueError):
        return {}
    frames = {}
    for entry in files:
        if entry.get("kind") == "summary" or not entry.get("path", "").endswith(".mp4"):
            continue
        key = (entry["stream"], entry.get("kind", ""))
        frames[key] = frames.get(key, 0) + int(entry.get("frames", 0))
    return frames


def phase(pacing, seconds, index):
    root = tempfile.mkdtemp(prefix="tspace-out-")
    session = f"pace{index}"
    daemon, runtime = start_daemon(root, session)
    torch.manual_seed(0)
    layers = []
    for _ in range(24):
        layers += [torch.nn.Linear(128, 128), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
    step_times = []
    with tensorscope.Client(session, runtime_dir=runtime, connect_timeout_ms=10000, pacing=pacing) as client:
        client.track_model("mlp", model, every_n=2, stats_every=0)
        client.track_layer("mlp", model, every_n=2, stats_every=0)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            client.next_step()
            step_times.append(time.perf_counter() - t0)
        stats = client.stats()
        during = frames_drawn_now(runtime, session)
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(timeout=300)
    except subprocess.TimeoutExpired:
        daemon.kill()
    frames = frames_per_stream(os.path.join(root, "out", session))
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(runtime, ignore_errors=True)
    return stats, step_times, frames, during


def frames_drawn_now(runtime, session):
    """Frames the daemon has drawn so far (its status), before it drains what is left."""
    r = subprocess.run([os.path.join(BUILD, "bin", "tensorscope"), "status", "--session", session, "--runtime-dir",
                        runtime, "--json"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return 0
    status = json.loads(r.stdout)
    return sum(int(s.get("frames", 0)) for w in status.get("workers", [])
               for s in w.get("stats", {}).get("streams", []))


def spread(values):
    if not values:
        return "none"
    return f"{min(values)} / {statistics.median(values):g} / {max(values)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=25.0, help="training per phase (default 25)")
    parser.add_argument("--rounds", type=int, default=1, help="off/on pairs (default 1)")
    args = parser.parse_args()
    medians = {False: [], True: []}
    index = 0
    for _ in range(args.rounds):
        for pacing in (False, True):
            stats, times, frames, during = phase(pacing, args.seconds, index)
            index += 1
            tried = stats.pushed + stats.dropped_full
            acts = [n for (_, kind), n in frames.items() if kind == "activation"]
            grads = [n for (_, kind), n in frames.items() if kind == "gradient"]
            medians[pacing].append(statistics.median(times))
            print(f"pacing {'on ' if pacing else 'off'}: {len(times) / args.seconds:6.1f} steps/s; "
                  f"pushed {stats.pushed}, dropped_full {stats.dropped_full} "
                  f"({100.0 * stats.dropped_full / max(1, tried):.1f} % of pushes tried), paced {stats.paced}, "
                  f"stride {stats.pace_stride}")
            print(f"           frames drawn while training {during}, in all {sum(frames.values())} "
                  f"(the rest: the ring drained after training) over {len(frames)} streams; per stream "
                  f"(fewest / median / most): activations {spread(acts)}, gradients {spread(grads)}")
            sys.stdout.flush()
    off, on = statistics.median(medians[False]), statistics.median(medians[True])
    print(f"median step: off {off * 1e3:.3f} ms, on {on * 1e3:.3f} ms; on/off {on / off:.3f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""python_cuda_track_bench — what a Python track adds to a training step on a GPU.

The Python twin of cuda_push_bench's step ratio: an MLP (1024-2048-2048-10, batch 256)
trained on cuda:0, tracked by track_model and track_layer (outputs and their gradients)
under each configuration, over the untracked step, with phases interleaved:
  every_n=100              full tensors every 100 steps, summaries every step
  every_n=1                full tensors and summaries every step
  every_n=100, no summ.    stats_every 0: the hooks alone, on 1 step in 100
  every_n=1, no summ.      stats_every 0: hooks and copies every step
Each step is synchronised before and after it (the step's own time on host and device).
The daemon is ipc_sink (built with the CUDA tests), which reads CUDA IPC payloads as a
worker does; --pinned makes it refuse them (the pinned-host fallback).

  PYTHONPATH=build/python python3 bench/python_cuda_track_bench.py [--pinned] [--steps N] [--profile]

--profile instead prints where a tracked step's host time goes (torch.profiler, every_n=100
with summaries every step): the operations and CUDA calls by their own host time.

Without a CUDA device or without ipc_sink it says so and exits 0.
"""

import argparse
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("TENSORSCOPE_BUILD_DIR", os.path.join(os.path.dirname(HERE), "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tensorscope  # noqa: E402

CONFIGS = [("every_n=100", 100, 1), ("every_n=1", 1, 1), ("every_n=100, no summ.", 100, 0),
           ("every_n=1, no summ.", 1, 0)]


def start_sink(runtime_dir, pinned):
    argv = [os.path.join(BUILD, "bin", "ipc_sink"), runtime_dir, "bench", os.devnull] + (["--host-only"] * pinned)
    sink = subprocess.Popen(argv, stdout=subprocess.PIPE)
    ready, _, _ = select.select([sink.stdout], [], [], 30)
    if not ready or sink.stdout.readline().decode().strip() != "ready":
        sink.kill()
        raise SystemExit("python_cuda_track_bench: ipc_sink did not start")
    return sink


def profile(client, net, run):
    """torch.profiler's table of the tracked steps (every_n=100, summaries every step) by
    their operations' own host time, beside the untracked step's median."""
    from torch.profiler import ProfilerActivity, profile as profiled
    untracked, tracked = [], []
    run(untracked)
    client.track_model("mlp", net, every_n=100, stats_every=1)
    client.track_layer("mlp", net, every_n=100, stats_every=1)
    run([])  # warm-up of the tracked step
    with profiled(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        run(tracked)
    print(f"python_cuda_track_bench --profile: {len(tracked)} tracked steps (every_n=100, summaries every step),"
          f" median {statistics.median(tracked) * 1e3:.3f} ms under the profiler;"
          f" untracked {statistics.median(untracked) * 1e3:.3f} ms")
    print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=48))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pinned", action="store_true", help="the pinned-host fallback instead of CUDA IPC")
    parser.add_argument("--steps", type=int, default=100, help="steps per phase (8 phases per configuration)")
    parser.add_argument("--profile", action="store_true", help="where a tracked step's host time goes, instead")
    args = parser.parse_args()
    if not torch.cuda.is_available() or not os.path.exists(os.path.join(BUILD, "bin", "ipc_sink")):
        print("python_cuda_track_bench: needs a CUDA device and ipc_sink; nothing measured")
        return
    runtime_dir = tempfile.mkdtemp(prefix="tscb-", dir="/tmp")
    sink = start_sink(runtime_dir, args.pinned)
    try:
        client = tensorscope.Client(session="bench", runtime_dir=runtime_dir, connect_timeout_ms=5000,
                                    shm_budget=256 << 20, cuda_staging_bytes=256 << 20)
        torch.manual_seed(1)
        net = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                            nn.Linear(2048, 10)).cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        x = torch.randn(256, 1024, device="cuda")
        y = torch.randint(0, 10, (256,), device="cuda")
        step = 0

        def run(phase_steps, times):
            nonlocal step
            for _ in range(phase_steps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                client.set_step(step)
                opt.zero_grad()
                nn.functional.cross_entropy(net(x), y).backward()
                opt.step()
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
                step += 1

        run(50, [])  # warm-up
        if args.profile:
            profile(client, net, lambda times: run(args.steps, times))
            client.close()
            return
        print(f"python_cuda_track_bench ({'pinned host' if args.pinned else 'CUDA IPC'}; torch {torch.__version__},"
              f" {torch.cuda.get_device_name()}): tracked / untracked step, medians")
        for label, every_n, stats_every in CONFIGS:
            tracked, untracked = [], []
            for phase in range(8):
                if phase % 2:
                    tracks = [client.track_model("mlp", net, every_n=every_n, stats_every=stats_every),
                              client.track_layer("mlp", net, every_n=every_n, stats_every=stats_every)]
                    run(args.steps, tracked)
                    for t in tracks:
                        t.remove()
                else:
                    run(args.steps, untracked)
            base = statistics.median(untracked)
            print(f"  {label:24s} {statistics.median(tracked) / base:6.3f}   (untracked {base * 1e3:.3f} ms)")
        s = client.stats()
        print(f"transport {s.cuda_transport}; pushed {s.pushed}, dropped_full {s.dropped_full}, refused {s.refused}")
        client.close()
    finally:
        sink.terminate()
        sink.wait()
        shutil.rmtree(runtime_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

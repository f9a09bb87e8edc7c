"""python_tree_log_parts — where the module tree log's time goes on the tiny MLP.

Trains python_track_bench's tiny MLP (fc 32-64-64-10, batch 16, 3 tracked modules) with
track_model at every_n 1, and takes the tree log's pieces away one at a time for a block:
everything but the hooks (`nothing logged`: the log's stamp says "not this step", so its
native pre-hooks run and return), and the step's record (`no send`: formatted natively,
not pushed). Blocks of 350 timed steps are interleaved over the rounds; prints the median
step of each variant, its difference to the untracked one, and the records pushed per
step (a run the client paced pushes fewer than the variant offers: its times mean
little). The differences between variants are the pieces (e.g. `tree` - `no send` = the
record's push).

  PYTHONPATH=build/python /usr/bin/python3 bench/python_tree_log_parts.py [--rounds R]

Runs a tensorscoped of its own (no video), like python_track_bench.
"""

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if "--glibc-malloc" not in sys.argv:
    sys.argv.append("--glibc-malloc")  # python_track_bench's import would re-execute this script
import python_track_bench as bench  # noqa: E402  (its malloc settings, daemon and model)

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tensorscope  # noqa: E402
from tensorscope import _module_track  # noqa: E402

VARIANTS = ["none", "no tree", "tree", "nothing logged", "no send"]
PATCHES = {  # variant -> (owner, attribute) made a no-op for its blocks
    "nothing logged": (_module_track.ModuleTrack, "_tree_stamp"),
    "no send": (_module_track.ModuleTrack, "_send_tree"),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--glibc-malloc", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if any(os.environ.get(k) != v for k, v in bench.MALLOC.items()):
        env = dict(os.environ, **bench.MALLOC)
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), "--rounds", str(args.rounds)], env)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    root = tempfile.mkdtemp(prefix="ts-treeparts-")
    daemon, runtime = bench.start_daemon(root, "treeparts")
    try:
        scope = tensorscope.Client("treeparts", runtime_dir=runtime, connect_timeout_ms=5000, every_n=1)
        model = bench.Mlp(32, 64)
        x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        samples = {v: [] for v in VARIANTS}
        pushed = {v: 0 for v in VARIANTS}  # records pushed per variant: a paced run shows here
        for _ in range(args.rounds):
            for variant in VARIANTS:
                saved = None
                if variant in PATCHES:
                    owner, attr = PATCHES[variant]
                    saved = getattr(owner, attr)
                    setattr(owner, attr, lambda *a, **k: None)
                tracks = [] if variant == "none" else [
                    scope.track_model("m", model, every_n=1, tree_log=variant != "no tree", stats_every=0)]
                before = scope.stats().pushed
                for i in range(400):
                    t0 = time.perf_counter()
                    opt.zero_grad()
                    nn.functional.cross_entropy(model(x), y).backward()
                    opt.step()
                    scope.next_step()
                    if i >= 50:
                        samples[variant].append(time.perf_counter() - t0)
                pushed[variant] += scope.stats().pushed - before
                for t in tracks:
                    t.remove()
                if saved is not None:
                    setattr(owner, attr, saved)
        base = statistics.median(samples["none"])
        print(f"python_tree_log_parts: tiny MLP, {args.rounds} rounds x 350 steps per variant, torch {torch.__version__}")
        for variant in VARIANTS:
            m = statistics.median(samples[variant])
            per_step = pushed[variant] / (400 * args.rounds)
            print(f"  {variant:<15} {m * 1e6:8.1f} us  ratio {m / base:.3f}  {(m - base) * 1e6:+7.1f} us  "
                  f"{per_step:.2f} records/step")
        stats = scope.stats()
        if stats.pace_note:
            print(f"  (paced: {stats.pace_note}; the tracked rows sent less than they offered)")
        scope.close()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""python_before_after — two builds of the Python package, timed in one process.

The VM's speed changes from minute to minute, so two runs of python_track_bench, one per
build, often differ by more than the change being measured. This bench imports the
package of an older build directory as `tensorscope_before` beside the current one and
trains one model (python_track_bench's tiny MLP, MLP or CNN) with track_model (and with
--layer track_layer, with --stats summaries every step) at
every_n 1 from each in turn: blocks interleaved over the rounds (each round starts with
a different variant), each package with a tensorscoped of its own (no video), so every
admitted tensor is copied into shared memory. Prints the median step of each variant,
its ratio and difference to the untracked step, and the records pushed per step (a
paced run pushes fewer: its times mean little).

  # the older build, e.g. from a worktree of the commit before the change:
  git worktree add /tmp/before <commit>
  cmake -S /tmp/before -B /tmp/before-build -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build /tmp/before-build -j2 --target tensorscope_python tensorscope_python_files
  PYTHONPATH=build/python /usr/bin/python3 bench/python_before_after.py --before /tmp/before-build \\
      [--model tiny|mlp|cnn] [--rounds R] [--steps S] [--layer] [--stats]

The older build needs no daemon of its own: the current build's tensorscoped serves both
when the older directory has none (the ring's format is checked at registration).
"""

import argparse
import importlib
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
import python_track_bench as bench  # noqa: E402  (its malloc settings, daemon and models)

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tensorscope  # noqa: E402
from cnn_model import Cnn  # noqa: E402

VARIANTS = ["none", "before, no tree", "after, no tree", "before", "after", "none (control)"]


def import_before(build, scratch):
    """The package of `build` imported as tensorscope_before (a copy under `scratch`)."""
    source = os.path.join(build, "python", "tensorscope")
    if not os.path.isfile(os.path.join(source, "__init__.py")):
        sys.exit(f"python_before_after: no package at {source} (build tensorscope_python there)")
    shutil.copytree(source, os.path.join(scratch, "tensorscope_before"))
    sys.path.insert(0, scratch)
    return importlib.import_module("tensorscope_before")


def start_daemon(build, root, session):
    """A tensorscoped of `build` (or of the current build when it has none)."""
    os.makedirs(root)
    saved = bench.BUILD
    if os.path.exists(os.path.join(build, "bin", "tensorscoped")):
        bench.BUILD = build
    try:
        return bench.start_daemon(root, session)
    finally:
        bench.BUILD = saved


def make_model(name):
    if name == "tiny":
        return bench.Mlp(32, 64), torch.randn(16, 32), torch.randint(0, 10, (16,))
    if name == "mlp":
        return bench.Mlp(784, 256), torch.randn(64, 784), torch.randint(0, 10, (64,))
    return Cnn(), torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="build directory of the older package")
    parser.add_argument("--model", choices=["tiny", "mlp", "cnn"], default="tiny")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=300, help="timed steps per block (after 30 untimed)")
    parser.add_argument("--layer", action="store_true", help="track_layer too (the gradients at the outputs)")
    parser.add_argument("--stats", action="store_true", help="tracks summarise every step too (stats_every 1, "
                                                             "track_model's default)")
    parser.add_argument("--glibc-malloc", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if any(os.environ.get(k) != v for k, v in bench.MALLOC.items()):
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                  dict(os.environ, **bench.MALLOC))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    scratch = tempfile.mkdtemp(prefix="ts-before-after-")
    daemons = []
    try:
        before_package = import_before(os.path.abspath(args.before), scratch)
        daemon, runtime_after = start_daemon(bench.BUILD, os.path.join(scratch, "after"), "after")
        daemons.append(daemon)
        daemon, runtime_before = start_daemon(os.path.abspath(args.before), os.path.join(scratch, "before"), "before")
        daemons.append(daemon)
        after = tensorscope.Client("after", runtime_dir=runtime_after, connect_timeout_ms=5000, every_n=1)
        before = before_package.Client("before", runtime_dir=runtime_before, connect_timeout_ms=5000, every_n=1)
        model, x, y = make_model(args.model)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        samples = {v: [] for v in VARIANTS}
        pushed = {v: 0 for v in VARIANTS}
        for r in range(args.rounds):
            for variant in VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]:
                client = None if variant.startswith("none") else before if variant.startswith("before") else after
                stats_every = 1 if args.stats else 0
                tracks = [] if client is None else [client.track_model(
                    "m", model, every_n=1, tree_log="no tree" not in variant, stats_every=stats_every)]
                if client is not None and args.layer:
                    tracks.append(client.track_layer("m", model, every_n=1, stats_every=stats_every))
                start = client.stats().pushed if client is not None else 0
                for i in range(30 + args.steps):
                    t0 = time.perf_counter()
                    opt.zero_grad()
                    nn.functional.cross_entropy(model(x), y).backward()
                    opt.step()
                    if client is not None:
                        client.next_step()
                    if i >= 30:
                        samples[variant].append(time.perf_counter() - t0)
                if client is not None:
                    pushed[variant] += client.stats().pushed - start
                    for track in tracks:
                        track.remove()
        base = statistics.median(samples["none"])
        print(f"python_before_after: {args.model}{', model+layer' if args.layer else ''}"
              f"{' with summaries' if args.stats else ''}, before = "
              f"{os.path.abspath(args.before)}, {args.rounds} rounds x {args.steps} steps per variant, "
              f"torch {torch.__version__}")
        for variant in VARIANTS:
            m = statistics.median(samples[variant])
            print(f"  {variant:<16} {m * 1e6:9.1f} us  ratio {m / base:.3f}  {(m - base) * 1e6:+8.1f} us  "
                  f"{pushed[variant] / ((30 + args.steps) * args.rounds):.2f} records/step")
        for label, client in (("before", before), ("after", after)):
            note = getattr(client.stats(), "pace_note", "")
            if note:
                print(f"  ({label} paced: {note}; its rows sent less than they offered)")
        after.close()
        before.close()
    finally:
        for daemon in daemons:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

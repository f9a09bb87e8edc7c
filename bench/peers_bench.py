#!/usr/bin/env python3
"""peers_bench — tensorscope beside the tools people watch tensors with today, in one run.

The same model trained from Python (zero_grad, forward, cross-entropy, backward, SGD
step) under each configuration, in blocks of steps interleaved in rounds after one untimed
round (each round starts with another configuration), on the CPU with 1 torch thread:
  none                  no watching: the baseline every ratio is taken against
  none (control)        the baseline again: the run's noise floor
  wandb.watch n=N       wandb.watch(model, log="all", log_freq=N) in an offline run: the
                        histograms of every parameter and gradient every N steps (and a
                        wandb.log each N steps, which sends them)
  tensorboard n=N       SummaryWriter.add_histogram of every parameter and its gradient
                        every N steps (torch.utils.tensorboard)
  tensorscope outputs   track_model + track_layer: a summary of every module output and
                        the gradient at it every step (stats_every 1), whole tensors every
                        N (every_n N)
  tensorscope all       the same with the parameters and their gradients too (kinds
                        output, parameter, parameter_gradient: the update ratio needs the
                        last step's copy of each parameter)
  tensorscope all n=N   all of them, summaries every N steps too: the peers' coverage
(tensorscope to a real tensorscoped, started here: it records the summary tables and
draws no video).
For each: the mean step time (a cost every N steps shows there, amortized; the median
hides it) and the median, their ratios to `none`, and what it gives: the tensors it
covers and the share of steps it covers (a summary or a histogram of them).

  PYTHONPATH=build/python build/torch2-venv/bin/python bench/peers_bench.py [--rounds R] [--every N] [--quick]
Needs wandb and tensorboard (the torch2 venv has both: python/tests/requirements-torch2.txt).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.environ.get("TENSORSCOPE_BUILD_DIR", os.path.join(REPO, "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.join(REPO, "examples"))
sys.path.insert(0, HERE)

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tensorscope  # noqa: E402
from cnn_model import Cnn  # noqa: E402
from python_track_bench import start_daemon  # noqa: E402  (and its pinned malloc thresholds)

STEPS_PER_BLOCK = 100
TS_OUTPUTS = "tensorscope outputs"  # outputs and their gradients, summaries every step
TS_ALL = "tensorscope all"          # and the parameters and their gradients
TS_EVERY_N = "tensorscope all n=N"  # all of them, summaries every N steps (the peers' coverage)


class Mlp(nn.Module):
    def __init__(self, inputs=784, hidden=512, layers=4):
        super().__init__()
        sizes = [inputs] + [hidden] * layers
        self.body = nn.Sequential(*[m for a, b in zip(sizes, sizes[1:]) for m in (nn.Linear(a, b), nn.ReLU())])
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.head(self.body(x.flatten(1)))


class Watch:
    """One configuration's watching of a model: set up before a block, `after_step`
    after each step, removed after the block; `covers` = (tensors, share of steps)."""

    def __init__(self, config, model, every, scope, run, writer):
        self.config, self.model, self.every, self.scope, self.run, self.writer = config, model, every, scope, run, writer
        self.tracks = []
        params = len(list(model.parameters()))
        if config.startswith("wandb"):
            import wandb

            wandb.watch(model, log="all", log_freq=every)
            self.covers = (2 * params, 1 / every)
        elif config.startswith("tensorboard"):
            self.covers = (2 * params, 1 / every)
        elif config.startswith("tensorscope"):
            kinds = ("output",) if config == TS_OUTPUTS else ("output", "parameter", "parameter_gradient")
            stats_every = every if config == TS_EVERY_N else 1
            self.tracks = [scope.track_model("m", model, every_n=every, stats_every=stats_every, kinds=kinds),
                           scope.track_layer("m", model, every_n=every, stats_every=stats_every)]
            self.covers = (sum(len(t.streams) for t in self.tracks), 1.0 / stats_every)
        else:
            self.covers = (0, 0.0)

    def after_step(self, step):
        if step % self.every != 0:
            return
        if self.config.startswith("wandb"):
            self.run.log({"bench/step": step})  # sends what watch gathered
        elif self.config.startswith("tensorboard"):
            for name, p in self.model.named_parameters():
                self.writer.add_histogram(name, p, step)
                if p.grad is not None:
                    self.writer.add_histogram(name + ".grad", p.grad, step)

    def remove(self):
        if self.config.startswith("wandb"):
            import wandb

            wandb.unwatch(self.model)
        for t in self.tracks:
            t.remove()


def bench_model(label, model, x, y, configs, rounds, every, scope, run, writer):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    samples = {c: [] for c in configs}
    covers = {}
    step = 0

    def block(config, timed):
        nonlocal step
        watch = Watch(config, model, every, scope, run, writer)
        covers[config] = watch.covers
        times = []
        for _ in range(STEPS_PER_BLOCK):
            t0 = time.perf_counter()
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            watch.after_step(step)
            scope.next_step()
            step += 1
            times.append(time.perf_counter() - t0)
        watch.remove()
        if timed:
            samples[config].extend(times)

    for config in configs:  # warm-up round
        block(config, False)
    for r in range(rounds):
        for i in range(len(configs)):
            block(configs[(r + i) % len(configs)], True)
    base, base_mean = statistics.median(samples["none"]), statistics.fmean(samples["none"])
    print(f"\n{label}: mean step time (what a periodic cost adds, amortized) and its ratio to none; median and "
          "its ratio; tensors covered; share of steps covered")
    for config in configs:
        med, mean = statistics.median(samples[config]), statistics.fmean(samples[config])
        tensors, share = covers[config]
        print(f"  {config:<22} {mean * 1e3:8.3f} ms {mean / base_mean:6.3f}   {med * 1e3:8.3f} ms {med / base:6.3f}"
              f"   {tensors:4d} tensors {share:7.2%} of steps")


def main():
    parser = argparse.ArgumentParser(description="tensorscope beside wandb.watch and TensorBoard histograms")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--every", type=int, default=50, help="the peers' log_freq and tensorscope's every_n")
    parser.add_argument("--quick", action="store_true", help="2 rounds")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    torch.set_num_threads(1)
    torch.manual_seed(0)
    import wandb
    from torch.utils.tensorboard import SummaryWriter

    root = tempfile.mkdtemp(prefix="ts-peers-")
    os.environ.update(WANDB_MODE="offline", WANDB_DIR=root, WANDB_SILENT="true")
    session = f"peers{os.getpid()}"
    daemon, runtime = start_daemon(root, session)
    try:
        scope = tensorscope.Client(session, runtime_dir=runtime, connect_timeout_ms=5000)
        run = wandb.init(project="peers-bench")
        writer = SummaryWriter(os.path.join(root, "tb"))
        n = args.every
        configs = ["none", "none (control)", f"wandb.watch n={n}", f"tensorboard n={n}", TS_OUTPUTS, TS_ALL,
                   TS_EVERY_N]
        print(f"peers_bench: torch {torch.__version__}, wandb {wandb.__version__}, 1 torch thread, {rounds} rounds x "
              f"{STEPS_PER_BLOCK} steps per configuration and model, N = {n}")
        bench_model("cnn", Cnn(), torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,)), configs, rounds, n,
                    scope, run, writer)
        bench_model("mlp", Mlp(), torch.randn(64, 784), torch.randint(0, 10, (64,)), configs, rounds, n, scope, run,
                    writer)
        stats = scope.stats()
        print(f"\ntensorscope: {stats.pushed} pushed, {stats.dropped_full} dropped (ring full), "
              f"{stats.dropped_by_daemon} dropped by the daemon")
        scope.close()
        writer.close()
        run.finish()
    finally:
        daemon.terminate()
        daemon.wait(timeout=120)
        print(open(os.path.join(root, "daemon.log")).read()[-3000:]) if os.environ.get("PEERS_DAEMON_LOG") else None
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""What tracking costs a compiled model's training step, against what it costs in eager mode
(CPU, PyTorch 2).

    PYTHONPATH=build/python build/torch2-venv/bin/python bench/python_compiled_bench.py   # --rounds R, --steps S

The same model (the examples' CNN; a GPT-2-style transformer from a `transformers` config
when that package is installed) trained in four copies with the same weights: eager and
torch.compile(model) (Inductor), each untracked and tracked (track_model + track_layer,
summaries every step, whole tensors every 100th). Blocks of S steps of each configuration are
interleaved in R rounds after one untimed round (which compiles); the median step time of
each, and the ratio of tracked to untracked in eager and in compiled mode. The goal: the
compiled ratio no worse than the eager one, with no graph break added (Dynamo's counters).
A real tensorscoped (recording no video) drains the ring.
"""

import argparse
import os
import shutil
import statistics
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

import tensorscope  # noqa: E402
from cnn_model import Cnn, make_dataset  # noqa: E402
from python_track_bench import start_daemon  # noqa: E402

CONFIGS = ["eager", "eager tracked", "compiled", "compiled tracked"]


def cnn():
    images, labels = make_dataset(32, torch.Generator().manual_seed(0))

    def loss(model):
        return torch.nn.functional.cross_entropy(model(images), labels)

    return Cnn, loss


def gpt2():
    try:
        import transformers
    except ImportError:
        return None
    config = transformers.GPT2Config(n_layer=4, n_head=4, n_embd=128, vocab_size=1000, n_positions=64)
    tokens = torch.randint(0, 1000, (8, 64), generator=torch.Generator().manual_seed(0))

    def make():
        model = transformers.GPT2LMHeadModel(config)
        model.config.use_cache = False
        return model

    def loss(model):
        out = model(tokens)
        return torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), tokens.flatten())

    return make, loss


def graph_breaks():
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def bench(name, make, loss_of, scope, rounds, steps):
    torch.manual_seed(0)
    reference = make()
    models, runs, optimizers = {}, {}, {}
    for config in CONFIGS:
        model = make()
        model.load_state_dict(reference.state_dict())
        model.train()
        models[config] = model
        if config.endswith("tracked"):
            scope.track_model(f"{name}{len(models)}", model, every_n=100, stats_every=1)
            scope.track_layer(f"{name}{len(models)}", model, every_n=100, stats_every=1)
        runs[config] = torch.compile(model) if config.startswith("compiled") else model
        optimizers[config] = torch.optim.SGD(model.parameters(), lr=1e-3)
    times = {config: [] for config in CONFIGS}
    breaks = {}
    for round_ in range(rounds + 1):
        for config in CONFIGS:
            before = graph_breaks()
            run, opt = runs[config], optimizers[config]
            for _ in range(steps):
                start = time.perf_counter()
                loss = loss_of(run)
                opt.zero_grad()
                loss.backward()
                opt.step()
                scope.next_step()
                if round_ > 0:
                    times[config].append(time.perf_counter() - start)
            breaks[config] = breaks.get(config, 0) + graph_breaks() - before
    median = {config: statistics.median(t) for config, t in times.items()}
    for config in CONFIGS:
        base = median["eager" if config.startswith("eager") else "compiled"]
        print(f"{name:6s} {config:18s} {median[config] * 1e3:9.3f} ms  ratio {median[config] / base:6.3f}  "
              f"graph breaks {breaks[config]}")
    eager_ratio = median["eager tracked"] / median["eager"]
    compiled_ratio = median["compiled tracked"] / median["compiled"]
    print(f"{name:6s} tracked/untracked: eager {eager_ratio:.3f}, compiled {compiled_ratio:.3f}; "
          f"compiled step {median['compiled'] / median['eager']:.3f} of eager's")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=50, help="steps per block")
    args = parser.parse_args()
    torch.set_num_threads(1)
    root = tempfile.mkdtemp(prefix="ts-compiled-bench-")
    daemon, runtime = start_daemon(root, "compiledbench")
    try:
        with tensorscope.Client(session="compiledbench", runtime_dir=runtime, connect_timeout_ms=10000) as scope:
            print(f"torch {torch.__version__}, 1 thread, {args.rounds} rounds of {args.steps} steps per configuration")
            for name, model in (("cnn", cnn()), ("gpt2", gpt2())):
                if model is not None:
                    bench(name, *model, scope, args.rounds, args.steps)
            stats = scope.stats()
            print(f"client: pushed {stats.pushed}, dropped {stats.dropped_full}, refused {stats.refused}")
    finally:
        daemon.terminate()
        daemon.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

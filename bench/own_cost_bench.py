"""own_cost_bench — does the client's own cost meter (stats().own_time, client/core/
cost_meter.h) see what tracking costs? For a tiny model every layer of which is tracked
with every kind and a wide one with its outputs summarized, the step time untracked and
tracked (summaries every step, no daemon: the hooks run all the same), the share of the
tracked step that tracking took by that difference (1 - untracked / tracked), and the
share the meter measured over its last window.

    /usr/bin/python3 bench/own_cost_bench.py            # (or a torch 2 venv's python)
    PYTHONPATH=build/python ... --seconds 12            # each timed run (at least 11: a window of 5 s ends twice)
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tensorscope  # noqa: E402

KINDS = ("output", "gradient", "parameter", "parameter_gradient")


def models():
    """(name, model, batch rows, track_model keywords) of each case."""
    return [
        ("tiny MLP, 12 layers of 8x8, every kind", nn.Sequential(*[nn.Linear(8, 8) for _ in range(12)]), 2,
         {"kinds": KINDS}),
        ("wide MLP, 2 layers of 1024x1024, outputs", nn.Sequential(nn.Linear(1024, 1024), nn.Linear(1024, 1024)), 256,
         {"kinds": "output"}),
    ]


def step_time(model, rows, seconds, scope=None):
    """Seconds per training step over `seconds` (after 5 warm-up steps)."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(rows, model[0].in_features)
    steps, start = -5, None
    while start is None or time.perf_counter() - start < seconds:
        if steps == 0:
            start = time.perf_counter()
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if scope is not None:
            scope.next_step()
        steps += 1
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=12.0)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {args.seconds:.0f} s per timed run\n")
    print("| model | untracked step | tracked step | ratio | share by the difference | own_time measured |")
    print("|---|---|---|---|---|---|")
    for i, (name, model, rows, keywords) in enumerate(models()):
        plain = step_time(model, rows, args.seconds)
        with tensorscope.Client(session=f"own-cost-{i}", connect_timeout_ms=0, autostart=False) as scope:
            scope.track_model("m", model, every_n=1_000_000, stats_every=1, **keywords)
            tracked = step_time(model, rows, args.seconds, scope)
            measured = scope.stats().own_time
        print(f"| {name} | {plain * 1e3:.3f} ms | {tracked * 1e3:.3f} ms | {tracked / plain:.2f}x | "
              f"{1 - plain / tracked:.1%} | {measured:.1%} |")


if __name__ == "__main__":
    main()

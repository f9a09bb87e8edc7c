#!/usr/bin/env python3
"""anomaly_suite — how far the daemon's anomaly reports can be trusted: healthy and
faulty training runs, each against a daemon of its own, and what it reported.

Four models train on synthetic data with learnable structure, tracked as the README
tracks a model (track_model + track_layer, summaries every step, whole tensors every
1000): a CNN whose batches are now and then much harder (an easy batch's gradients near
zero, a hard one's 100x larger: the healthy run that once gave false "explosions"), an
LSTM language model shaped like pytorch/examples' word_language_model (dropout, gradient
clipping, lr 20), a GAN (a generator and a discriminator called three times a step) and a
small transformer language model. Each trains healthy, and the CNN and the LSTM with a
fault put in at step FAULT_STEP in a known module: a NaN, an Inf (a forward pre-hook
writes one into the module's input: its output is the first tensor that holds it), a
weight x1e30, the learning rate x1e6, a dead layer (a bias that keeps its ReLU at zero).

What counts: a fault is found (recall) when the first report at or after its step is of
an expected type, at its module (the lr fault: any module) and within its steps. A false
alarm (against precision) is any report of a healthy run, or of a faulty run before its
fault; reports after a fault are its consequences and count neither way. Prints a line
per run, then a Markdown table per anomaly type. Exit status 0 unless the suite breaks.

  PYTHONPATH=build/python /usr/bin/python3 bench/anomaly_suite.py [--steps N] [--only NAME] [--keep DIR]
"""

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from typing import Callable, List, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

import tensorscope

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("TENSORSCOPE_BUILD_DIR", os.path.join(os.path.dirname(HERE), "build"))
FAULT_STEP = 200
TYPES = ("non_finite", "explosion", "dead_units")


# -- models and their training steps: (model, step(i) -> None, its optimizers) --

def cnn():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    patterns = torch.randn(10, 1, 16, 16)

    def step(i):
        g = torch.Generator().manual_seed(i)
        y = torch.randint(0, 10, (32,), generator=g)
        noise = 3.0 if i % 37 == 36 else 0.3  # every 37th batch much harder
        x = patterns[y] + noise * torch.randn(32, 1, 16, 16, generator=g)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return model, step, [opt]


class WordLanguageModel(nn.Module):
    def __init__(self, tokens=64, width=32):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(tokens, width)
        self.rnn = nn.LSTM(width, width, 2, dropout=0.2)
        self.decoder = nn.Linear(width, tokens)

    def forward(self, x):
        output, _ = self.rnn(self.drop(self.encoder(x)))
        return self.decoder(self.drop(output))


def token_stream(tokens=64, length=40000):
    """Tokens that follow a fixed, noisy successor table: something to learn."""
    g = torch.Generator().manual_seed(1)
    successor = torch.randint(0, tokens, (tokens,), generator=g)
    out = torch.empty(length, dtype=torch.long)
    out[0] = 0
    noise = torch.rand(length, generator=g) < 0.2
    random_tokens = torch.randint(0, tokens, (length,), generator=g)
    for t in range(1, length):
        out[t] = random_tokens[t] if noise[t] else successor[out[t - 1]]
    return out


def lstm():
    torch.manual_seed(1)
    model = WordLanguageModel()
    opt = torch.optim.SGD(model.parameters(), lr=20)
    data = token_stream()

    def step(i):
        start = (i * 35 * 8) % (len(data) - 35 * 8 - 1)
        x = data[start:start + 35 * 8].view(8, 35).t()
        y = data[start + 1:start + 1 + 35 * 8].view(8, 35).t()
        loss = F.cross_entropy(model(x).reshape(-1, 64), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()

    return model, step, [opt]


def gan():
    torch.manual_seed(2)
    gen = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 2))
    disc = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3, betas=(0.5, 0.999))
    centres = torch.tensor([[math.cos(a), math.sin(a)] for a in torch.arange(8) * (2 * math.pi / 8)]) * 2

    def step(i):
        g = torch.Generator().manual_seed(i)
        real = centres[torch.randint(0, 8, (64,), generator=g)] + 0.05 * torch.randn(64, 2, generator=g)
        fake = gen(torch.randn(64, 8, generator=g))
        ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)
        d_loss = (F.binary_cross_entropy_with_logits(disc(real), ones)
                  + F.binary_cross_entropy_with_logits(disc(fake.detach()), zeros))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = F.binary_cross_entropy_with_logits(disc(fake), ones)
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()

    return nn.ModuleDict({"G": gen, "D": disc}), step, [opt_g, opt_d]


class TinyTransformer(nn.Module):
    def __init__(self, tokens=64, width=32):
        super().__init__()
        self.embed = nn.Embedding(tokens, width)
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(width, tokens)
        self.register_buffer("mask", torch.triu(torch.full((32, 32), float("-inf")), 1))

    def forward(self, x):
        return self.head(self.encoder(self.embed(x), mask=self.mask))


def transformer():
    torch.manual_seed(3)
    model = TinyTransformer()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = token_stream()

    def step(i):
        start = (i * 32 * 16) % (len(data) - 32 * 16 - 1)
        x = data[start:start + 32 * 16].view(16, 32)
        y = data[start + 1:start + 1 + 32 * 16].view(16, 32)
        loss = F.cross_entropy(model(x).reshape(-1, 64), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()

    return model, step, [opt]


MODELS = {"cnn": cnn, "lstm": lstm, "gan": gan, "transformer": transformer}


# -- faults: put in at FAULT_STEP; (what is expected, at which module, within how many steps) --

class Fault(NamedTuple):
    name: str
    module: Optional[str]  # the module it is put into (a path in the model); None: none
    types: Tuple[str, ...]  # the report types that find it
    within: int  # steps after FAULT_STEP that still count (a consequence one step later)
    apply: Callable  # (model, optimizers) -> None, called once before step FAULT_STEP


def poison(value):
    """From now on the module's first input has `value` in its last dimension's first
    column (a pre-hook: the module's own output is the first tensor that holds it)."""
    def how(model, optimizers, module):
        module.register_forward_pre_hook(
            lambda m, args: (args[0].index_fill(-1, torch.tensor([0]), value),) + tuple(args[1:]))
    return how


def fault(name, model_module, types, within, how):
    def apply(model, optimizers):
        how(model, optimizers, model.get_submodule(model_module) if model_module else None)
    return Fault(name, model_module, types, within, apply)


def scale_weight(model, optimizers, module):
    with torch.no_grad():
        module.weight.mul_(1e30)


def raise_lr(model, optimizers, module):
    for opt in optimizers:
        for group in opt.param_groups:
            group["lr"] *= 1e6


def kill_units(model, optimizers, module):
    """A bias far below any output: the ReLU after the module gives zeros, so no gradient
    reaches the bias to bring it back (a dying ReLU layer). The jump of the module's own
    output is an explosion at its step: found too."""
    with torch.no_grad():
        module.bias.fill_(-50.0)


FAULTS = {
    "cnn": [
        fault("nan", "2", ("non_finite",), 0, poison(float("nan"))),
        fault("inf", "2", ("non_finite",), 0, poison(float("inf"))),
        fault("weight_x1e30", "6", ("explosion", "non_finite"), 0, scale_weight),
        fault("lr_x1e6", None, ("explosion", "non_finite"), 2, raise_lr),
        fault("dead_layer", "0", ("dead_units", "explosion"), 60, kill_units),
    ],
    "lstm": [
        fault("nan", "rnn", ("non_finite",), 0, poison(float("nan"))),
        fault("inf", "decoder", ("non_finite",), 0, poison(float("inf"))),
        fault("weight_x1e30", "decoder", ("explosion", "non_finite"), 0, scale_weight),
        fault("lr_x1e6", None, ("explosion", "non_finite"), 2, raise_lr),
    ],
}
# Where a fault's report may name it: the module, or what follows it at once (a dead
# Conv2d's zeros show in the ReLU after it).
NEXT_MODULE = {("cnn", "0"): "1"}


class Outcome(NamedTuple):
    model: str
    fault: Optional[str]
    reports: List[dict]
    found: Optional[bool]  # None for a healthy run
    finder: Optional[dict]  # the report that found the fault
    false_alarms: List[dict]
    seconds: float


def stream_module(stream, track):
    """The module path of a stream "<track>.<path>[...]" ("" for the root)."""
    rest = stream[len(track):].split("#")[0]
    if rest.endswith(".grad"):
        rest = rest[: -len(".grad")]
    rest = rest.split("[")[0]
    return rest[1:] if rest.startswith(".") else rest


def judge(model_name, f, reports):
    """(found, the report that found it, the false alarms); found is None for a healthy run."""
    if f is None:
        return None, None, list(reports)
    before = [a for a in reports if a["step"] < FAULT_STEP]
    after = [a for a in reports if a["step"] >= FAULT_STEP]
    if not after:
        return False, None, before
    first_step = min(a["step"] for a in after)
    modules = {f.module, NEXT_MODULE.get((model_name, f.module))} if f.module is not None else None
    finder = next((a for a in after if a["step"] == first_step and a["type"] in f.types
                   and (modules is None or stream_module(a["stream"], a["track"]) in modules)), None)
    found = finder is not None and first_step <= FAULT_STEP + f.within
    return found, finder if found else None, before


def run(model_name, f, steps, root, config=None):
    session = f"{model_name}-{f.name if f else 'healthy'}".replace("_", "-")
    model, step, optimizers = MODELS[model_name]()
    started = time.monotonic()
    scope = tensorscope.Client(session=session, autostart=True, autostart_output=os.path.join(root, "out"),
                               autostart_config=config or "", runtime_dir=os.path.join(root, "rt"),
                               autostart_idle_exit_ms=2000)
    scope.track_model("net", model, every_n=1000, containers=True)
    scope.track_layer("net", model, every_n=1000, containers=True)
    for i in range(steps):
        if f is not None and i == FAULT_STEP:
            f.apply(model, optimizers)
        step(i)
        scope.next_step()
    reports = scope.anomalies(timeout=120)
    scope.close()
    found, finder, false_alarms = judge(model_name, f, reports)
    return Outcome(model_name, f.name if f else None, reports, found, finder, false_alarms, time.monotonic() - started)


def describe(a):
    d = a.get("details", {})
    extra = ""
    if a["type"] == "explosion":
        extra = f" (ratio {d.get('ratio', float('nan')):.3g}, rms {d.get('rms', float('nan')):.3g})"
    return f"{a['type']}@{a['step']}:{a['stream']}{extra}"


def tables(outcomes):
    """Markdown: per fault, how many runs had it and found it (recall); per report type,
    the reports that found a fault and the false alarms (precision)."""
    lines = ["| fault | runs | found | recall |", "|---|---|---|---|"]
    faulty = [o for o in outcomes if o.fault is not None]
    for name in dict.fromkeys(o.fault for o in faulty):
        runs = [o for o in faulty if o.fault == name]
        found = sum(1 for o in runs if o.found)
        lines.append(f"| {name} | {len(runs)} | {found} | {found / len(runs):.2f} |")
    found = sum(1 for o in faulty if o.found)
    lines.append(f"| all | {len(faulty)} | {found} | {found / len(faulty):.2f} |" if faulty else "| all | 0 | 0 | – |")
    lines += ["", "| report | found a fault | false alarms | precision |", "|---|---|---|---|"]
    for t in TYPES + ("all",):
        true = sum(1 for o in faulty if o.finder is not None and t in (o.finder["type"], "all"))
        false = sum(1 for o in outcomes for a in o.false_alarms if t in (a["type"], "all"))
        precision = f"{true / (true + false):.2f}" if true + false else "–"
        lines.append(f"| {t} | {true} | {false} | {precision} |")
    healthy = sum(1 for o in outcomes if o.fault is None)
    lines.append(f"\n{healthy} healthy runs, {len(faulty)} faulty runs; a false alarm is a report of a healthy run "
                 f"or of a faulty run before its fault.")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per run (the faults come at %d)" % FAULT_STEP)
    parser.add_argument("--only", help="runs whose name (model or model-fault) starts with this")
    parser.add_argument("--keep", help="keep the sessions' folders here")
    parser.add_argument("--config", help="the daemons' config file (other anomalies.* thresholds)")
    args = parser.parse_args()
    if args.steps <= FAULT_STEP + 60:
        parser.error(f"--steps must be above {FAULT_STEP + 60} (a dead layer shows after 50 steps)")
    os.environ.setdefault("TENSORSCOPE_DAEMON", os.path.join(BUILD, "bin", "tensorscoped"))
    root = args.keep or tempfile.mkdtemp(prefix="tsanom-", dir="/tmp")
    os.makedirs(os.path.join(root, "rt"), mode=0o700, exist_ok=True)
    plan = [(m, None) for m in MODELS] + [(m, f) for m, faults in FAULTS.items() for f in faults]
    if args.only:
        plan = [(m, f) for m, f in plan if f"{m}-{f.name if f else 'healthy'}".startswith(args.only)]
    outcomes = []
    started = time.monotonic()
    try:
        for model_name, f in plan:
            o = run(model_name, f, args.steps, root, args.config and os.path.abspath(args.config))
            outcomes.append(o)
            verdict = "healthy" if f is None else ("found" if o.found else "MISSED")
            shown = ", ".join(describe(a) for a in o.reports[:4]) + (" ..." if len(o.reports) > 4 else "")
            print(f"{model_name:12s} {o.fault or '-':13s} {verdict:8s} {len(o.false_alarms)} false  "
                  f"{o.seconds:5.1f} s  {shown or 'no report'}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n{len(outcomes)} runs of {args.steps} steps in {time.monotonic() - started:.0f} s; faults at step "
          f"{FAULT_STEP}\n")
    print(tables(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What Client.track_model / track_layer / track_tensor return: TrackHandle, and the
hooks behind it.

Module hooks are PyTorch's own. A track is installed only for the steps it sends: on a
gated step no module of the model carries a hook of ours, so it costs nothing. Outputs
are sent from forward hooks; inputs from forward pre-hooks (what the module receives,
before it runs); the gradient at a module's output comes from a hook the forward hook
puts on the output tensor (exactly d(loss)/d(output), in-place activations after the
module included). Nothing here raises into the training loop: a failure in a hook is
counted as a refused push.

A track sends through its owner: a Client (to the daemon) or a Capture (kept in
memory). Every value goes with what it is (module path, module type, kind, leaf, call
number), which the Client ignores and the Capture records.
"""

from __future__ import annotations

import functools
import inspect
import re
import threading
import warnings
import weakref
from typing import Any, List, NamedTuple

import torch
from torch import nn

from . import _native
from . import _results as R
from . import _compiled
from ._call_stacks import CallStacks, stacked_name
from ._outputs import input_leaves, tensor_leaves
from ._step_zero import HOLD_BYTES, StepZeroWindow, call_name, trainable_version
from ._summaries import OnTheWay, StepSummaries, from_native, summarize
from ._tensors import output_hooks
from ._tree import make_tree_log, record

# The kinds a track may send, by name, and their TrackedStream kind.
KINDS = {
    "output": "activation",
    "gradient": "gradient",
    "parameter": "parameter",
    "parameter_gradient": "parameter_gradient",
    "buffer": "buffer",
    "input": "input",
}
MAX_CALLS_PER_STEP = 1024  # separate calls of one module beyond this in one step are refused
# What a track does with an evaluation forward (tensorscope/evaluation_calls.h): "skip"
# (default) or "track".
EVALUATION_MODES = tuple(_native.EVALUATION_CALLS)
# What follows a module's stream for one call's value, by kind name (_call_stacks.py).
_STACKED_WHAT = {"output": lambda leaf: leaf, "gradient": lambda leaf: leaf + ".grad", "input": lambda leaf: ".in" + leaf}
# PyTorch 2 gives forward pre-hooks the keyword arguments too (with_kwargs=True); before
# it, a pre-hook sees the positional arguments only.
PRE_HOOK_KWARGS = "with_kwargs" in inspect.signature(nn.Module.register_forward_pre_hook).parameters


def _register_pre_hook(module, hook):
    if PRE_HOOK_KWARGS:
        return module.register_forward_pre_hook(hook, with_kwargs=True)
    return module.register_forward_pre_hook(hook)


def _inert(*args):
    """What a hook of ours becomes in a copy of the model (deepcopy, pickle, torch.save):
    the copy is not tracked."""
    return None


class _Hook(functools.partial):
    """A hook registered with PyTorch: calls `fn(*bound, *hook_args)` (a partial: no
    Python frame of its own). Copies and pickles of a model that carries it (an EMA copy,
    torch.save of the module) get `_inert`."""

    __slots__ = ()

    def __deepcopy__(self, memo):
        return _inert

    def __reduce__(self):
        return (_inert_hook, ())


def _inert_hook():
    return _inert


class ValueMeta(NamedTuple):
    """What a value a track sends is (a Capture's Stash keeps it; the stacked calls of a
    module are told apart by it): the module's path and type, what of the module it is
    ("output", "gradient", "input", "parameter", "buffer", "parameter_gradient"), its leaf
    (the "[0]" of a tuple output, a parameter's name) and the module's call in the step."""

    path: str
    module_type: str
    what: str
    leaf: str
    call: int = 0


class TrackedStream(NamedTuple):
    """One stream a handle may send."""

    name: str  # e.g. "net.features.0", "net.fc.weight.grad", "net.fc.in[0]"
    kind: str  # "activation", "gradient", "parameter", "parameter_gradient", "buffer", "input"
    module: str  # qualified module path ("" for the root or a tracked tensor)


def parse_kinds(kinds, default):
    """A frozenset of kind names from `kinds` (a name, an iterable of names, or None)."""
    if kinds is None:
        return frozenset([default])
    if isinstance(kinds, str):
        kinds = [kinds]
    try:
        chosen = frozenset(kinds)
    except TypeError:
        raise TypeError(f"kinds must be a str or an iterable of str, not {type(kinds).__name__}") from None
    for kind in chosen:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}: expected some of {', '.join(KINDS)}")
    if not chosen:
        raise ValueError("kinds is empty")
    return chosen


def compile_pattern(pattern, what):
    """None, a compiled regular expression, or a callable path -> bool, from `pattern` (a
    regular expression as a str or compiled, or such a callable)."""
    if pattern is None or pattern == "":
        return None
    if isinstance(pattern, re.Pattern) or callable(pattern):
        return pattern
    if not isinstance(pattern, str):
        raise TypeError(
            f"{what} must be a str (a regular expression) or a callable path -> bool, not {type(pattern).__name__}"
        )
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f"{what} {pattern!r} is not a valid regular expression: {e}") from None


def unwrap(module):
    """The module a DataParallel / DistributedDataParallel wrapper or torch.compile's
    OptimizedModule runs."""
    while True:
        if isinstance(module, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
            module = module.module
        elif _is_compiled_wrapper(module):
            module = module._orig_mod
        else:
            return module


def _chosen(reading, step, auto, client_target):
    """The target (stream, step, call) a value of step 0's window has under the known
    `reading`, its step filled in (the client reading's: `step`); None: not sent."""
    target = auto if reading == "auto" else client_target
    if target is None:
        return None
    name, at, call = target
    return name, step if at is None else at, call


def _warn_reset(name):
    """A track made after torch.compile traced something: Dynamo does not guard on module
    hooks, so a graph traced before would never call this track's; its caches were reset
    (the next call of each compiled function traces again, with the hooks)."""
    warnings.warn(
        f"tensorscope: track {name!r} was made after torch.compile traced a graph; the compiled graphs were reset "
        "(torch.compiler.reset()) so that the next calls compile again with the track's hooks",
        RuntimeWarning,
        stacklevel=5,  # the script's track_model/track_layer call
    )


def _is_compiled_wrapper(module):
    """Whether `module` is torch.compile's OptimizedModule (its `_orig_mod` is the model)."""
    return type(module).__name__ == "OptimizedModule" and isinstance(getattr(module, "_orig_mod", None), nn.Module)


def _uncompiled_path(path):
    """A module's path with the OptimizedModule wrappers of blocks compiled one by one left
    out ("blocks.0._orig_mod.attn" -> "blocks.0.attn"): the stream names of eager mode."""
    if "_orig_mod" not in path:
        return path
    return ".".join(part for part in path.split(".") if part != "_orig_mod")


class TrackHandle:
    """Stands for one track. remove() (or leaving a `with` block) removes every hook."""

    def __init__(self, track: Any = None, error: str = "") -> None:
        self._track = track
        self._error = error

    @property
    def ok(self) -> bool:
        """False when the track could not be set up; `error` says why."""
        return self._track is not None

    @property
    def error(self) -> str:
        """Why the track could not be set up ("" when it was)."""
        return self._error

    @property
    def streams(self) -> List[TrackedStream]:
        """The streams this handle may send (calls after the first of a step add "#<k>")."""
        return self._track.streams() if self._track is not None else []

    def remove(self) -> None:
        """Removes every hook this handle installed; the handle becomes inert."""
        track, self._track = self._track, None
        if track is not None:
            track.stop()

    def __enter__(self) -> TrackHandle:
        return self

    def __exit__(self, *exc: object) -> bool:
        self.remove()
        return False

    def __repr__(self) -> str:
        if self._track is None:
            return f"TrackHandle(ok=False, error={self._error!r})" if self._error else "TrackHandle(removed)"
        return f"TrackHandle({self._track.name!r}, {len(self.streams)} streams)"


class _Track:
    """Shared by the tracks: the client (weakly), the gate, sending."""

    def __init__(self, client, name, every_n, transform, render_mode):
        self._client = weakref.ref(client)
        self.name = name
        self._every_n = every_n
        self._transform = transform
        self._hint = render_mode
        self._stopped = False

    def _send(self, stream, tensor, kind, step=None, meta=None, labels=None):
        """meta: the ValueMeta of the value."""
        client = self._client()
        if client is None or self._stopped:
            return
        client._send_tracked(stream, tensor, kind, self._hint, self._transform, step, meta, labels)

    def step_changed(self):
        return False

    def steps_became_explicit(self, step):
        """The script called next_step()/set_step() for the first time; `step` is the
        client's step until then."""

    def stop(self):
        self._stopped = True


class ModuleTrack(_Track):
    """track_model / track_layer: the selected modules of one model."""

    def __init__(self, client, name, root, entries, kinds, every_n, transform, render_mode, tree_log,
                 tree_log_tolerance=None, stats_every=0, calls="auto", labels=None, evaluation="skip", cast=0):
        super().__init__(client, name, every_n, transform, render_mode)
        # Evaluation forwards — gradients off, or the model in eval() mode — are left out
        # unless tracked as training's. The native hooks (output hooks, tree log) read
        # `_training` (py_args.h evaluation_call); the Python ones ask _evaluating().
        self._training = (root, torch.is_grad_enabled) if evaluation == "skip" else None
        self._labels = labels  # () -> the batch's labels, or None
        # Modules called many times a step: their calls stacked into one picture.
        self._stacks = CallStacks(calls)
        # Summaries (_summaries.py) every stats_every steps (0: none), beside full tensors
        # every every_n steps; whether the step in progress has each.
        self._stats_every = stats_every
        self._cast = cast  # the numerics' cast format (_native.CAST_FORMATS value; 0: none)
        self._summaries = StepSummaries()
        self._previous = {}  # parameter stream -> its value at the last summarised step
        self._full_on = self._stats_on = False
        self._root = root
        self._entries = entries  # [(path, module, stream)]
        self._paths = {stream: path for path, _, stream in entries}
        self._types = {stream: type(module).__name__ for _, module, stream in entries}
        self._streams_of = {path: stream for path, _, stream in entries}
        self._kinds = kinds
        self._values_kinds = bool(kinds & {"parameter", "buffer"})
        self._input_calls = {}  # stream -> calls whose inputs were seen in this step
        self._input_streams = {}  # path -> input streams seen so far (first calls)
        # The step's module calls, for the daemon's tree log (outputs tracked only, as in C++);
        # with tree_log="values", whether each output's values changed (see _tree.py).
        self._tree = None
        if tree_log and "output" in kinds:
            values = tree_log_tolerance if tree_log == "values" else None
            self._tree = make_tree_log(client._core, root, self._tree_stamp, _inert_hook, values, self._training)
        self._lock = threading.Lock()
        self._calls = {}  # stream -> calls in this step
        self._hooks = []
        # The output hooks: a module's first call in a sent or summarised step, and the
        # gradient at its output, are taken in C when they need nothing only _on_output and
        # _on_grad do (_sync_output_hooks says when).
        self._outputs = output_hooks(_inert_hook, cast)
        self._auto_step = 0  # steps counted from the root's training forwards
        self._auto_started = False
        # Step 0 before the first next_step()/set_step() (see _step_zero.py): the reading
        # ("auto" or "client") once known, the window holding values until then.
        self._reading = None
        self._window = None
        self._step_zero = 0  # the client's step the window was in
        self._trainable = [p for p in root.parameters() if p.requires_grad]
        self._first_version = 0
        # Module hooks torch.compile can trace (_compiled.py): registered once, for the life
        # of the track, and turned on for the steps it listens to: {(id(module), role):
        # CompilableHook}, role "root", "tree", "input" or "output", and their handles.
        self._compilable = {}
        self._compilable_handles = []
        if _compiled.SUPPORTED and _compiled.reset_if_compiled():
            _warn_reset(name)
        self._root_hook = self._module_hook(root, "pre", "root", _Hook(self._on_root_forward))
        self._full_on, self._stats_on = self._gates(client)
        if self._full_on or self._stats_on:
            self._install()
        self._sync_output_hooks(client)

    # -- steps --

    def _on_root_forward(self, module, inputs, kwargs=None):
        """Without next_step()/set_step(), each training forward of the root is a step."""
        client = self._client()
        if client is None or client._explicit_steps or not module.training or not torch.is_grad_enabled():
            return
        if not self._auto_started:
            self._first_version = trainable_version(self._trainable)
        elif self._reading is None:
            self._watch_step_zero()
        if self._auto_started:
            self._auto_step += 1
            listed = set(self._compilable)  # (registered before, turned on now: they run)
            if self.step_changed():
                # PyTorch already listed this call's pre-hooks: the root's own tree and
                # input hooks, registered just now, would miss the call they are in.
                for path, entry, stream in self._entries:
                    if entry is module:
                        if self._tree is not None and (id(module), "tree") not in listed:
                            self._tree.begin(path, type(module).__name__, module, inputs)
                        if "input" in self._kinds and (id(module), "input") not in listed:
                            self._on_inputs(stream, path, module, inputs, kwargs)
        self._auto_started = True

    def steps_became_explicit(self, step):
        """From the script's first next_step()/set_step() on, the track follows the client's
        steps: the training forwards it saw before (several calls of the model in step 0: a
        GAN's discriminator, micro-batches) were step `step`'s later calls (_step_zero.py)."""
        self._settle("client", step)
        with self._lock:
            self._sync_output_hooks(self._client())

    def _watch_step_zero(self):
        """A second or later training forward with no next_step() yet: from now on the
        hooks hold their values until the reading of step 0 is known."""
        version = trainable_version(self._trainable)
        with self._lock:
            if self._window is None:
                self._window = StepZeroWindow(self._first_version, self._calls, self._input_calls, self._stats_on)
                self._outputs.off()  # (the window holds what the hooks take)
            certain = self._window.forward(version)
        if certain:
            self._settle("auto")

    def _settle(self, reading, step=0):
        """The reading of step 0 is known: what the window held is sent as it names and
        stamps it (the client reading's values at `step`)."""
        with self._lock:
            if self._reading is not None:
                return
            window, self._window = self._window, None
            self._reading, self._step_zero = reading, step
            trees = []
            if window is not None and reading == "client":
                # Step 0 goes on (set_step to the same step): its calls counted so far.
                self._calls, self._input_calls = window.calls, window.input_calls
            elif window is not None and self._tree is not None:
                # The log of the auto reading's steps, the sent ones (the last, current one too).
                ends = [end for end, _ in window.marks]
                sent = [was_sent for _, was_sent in window.marks] + [window.open]
                for auto_step, ((calls, omitted), was_sent) in enumerate(zip(self._tree.take_parts(ends), sent)):
                    if was_sent and (calls or omitted):
                        trees.append(record(calls, omitted, auto_step))
            self._sync_output_hooks(self._client())
        if window is None:
            return
        for tensor, kind, meta, auto, client_target, labels in window.held:
            target = _chosen(reading, step, auto, client_target)
            if target is not None:
                name, at, call = target
                self._send(name, tensor, kind, at, meta._replace(call=call), labels)
        client = self._client()
        for summary, kind, auto, client_target in window.summaries:
            target = _chosen(reading, step, auto, client_target)
            if target is not None:
                name, at, _ = target
                self._summarize(client, name, None, kind, at, summary=summary)
        for tree in trees:
            self._send_tree(tree)

    def _route(self, auto, client_target, tensor, kind, meta, labels=None, summaries=(None, None)):
        """A value taken in step 0's window (see _step_zero.py): held while the reading is
        unknown, else sent as the known reading names it. A target: (stream, step, call).
        `summaries`: the (auto, client) targets of its summary, taken now."""
        self._route_summary(*summaries, tensor, kind)
        with self._lock:
            window = self._window
            if window is not None:
                kept = window.hold(tensor, kind, meta, auto, client_target, labels)
            reading, step = self._reading, self._step_zero
        if window is not None:
            if not kept:
                name = (client_target or auto)[0]
                self._client_refuse(name, f"taken before the first next_step(), and over the {HOLD_BYTES >> 20} MiB "
                                          "kept until the step is known")
            return
        target = _chosen(reading, step, auto, client_target)
        if target is not None:
            name, at, call = target
            self._send(name, tensor, kind, at, meta._replace(call=call), labels)

    def _route_summary(self, auto, client_target, tensor, kind):
        """The summary of a value taken in step 0's window: held with its targets while the
        reading is unknown (summaries are small: only their count is bounded), else added
        to the step the known reading names."""
        if auto is None and client_target is None:
            return
        summary = summarize(tensor, cast=self._cast)
        with self._lock:
            window = self._window
            if window is not None:
                kept = window.hold_summary(summary, kind, auto, client_target)
            reading, step = self._reading, self._step_zero
        if window is not None:
            if not kept:
                self._client_refuse((client_target or auto)[0], "summary taken before the first next_step(), and over "
                                                                "the summaries kept until the step is known")
            return
        target = _chosen(reading, step, auto, client_target)
        if target is not None:
            name, at, _ = target
            self._summarize(self._client(), name, tensor, kind, at, summary=summary)

    def _client_refuse(self, stream, why):
        client = self._client()
        if client is not None:
            client._refuse(stream, why)

    def _gates(self, client):
        """(full, summarised) of the step now beginning: whether its tensors are sent whole
        (a multiple of every_n) and summarised (a multiple of stats_every), counted in the
        client's steps (or, before any next_step()/set_step(), the track's own count), so
        tracks with the same every_n send the same steps, however late they were made, and
        a run resumed with set_step() sends the steps it would have sent."""
        step = client.step if client is not None and client._explicit_steps else self._auto_step
        full = step % self._every_n == 0 or (client is not None and client._capturing(step))
        return full, self._stats_every > 0 and step % self._stats_every == 0

    def step_changed(self):
        """A new step begins; True when the track's hooks were installed for it just now."""
        installed = False
        client = self._client()
        with self._lock:
            if self._stopped:
                return False
            self._calls.clear()
            self._input_calls.clear()
            ready = self._summaries.take_ready() if self._window is None else {}
            if ready and client is not None and client._capture_until is None:
                # A GPU summary is read a step late: its NaN starts the capture from here.
                bad = StepSummaries.first_non_finite_step(ready)
                if bad is not None:
                    client._non_finite_seen(max(bad, client.step - 1))
            send, stats = self._gates(client)
            if self._window is not None:
                # The auto reading's step: the hooks stay for the client reading's step 0.
                self._window.auto_step_began(send, stats, self._tree)
                return False
            tree = self._take_tree()
            self._full_on, self._stats_on = send, stats
            listen = send or stats
            if listen and not self._hooks:
                self._install()
                installed = True
            elif not listen and self._hooks:
                self._uninstall()
            self._sync_output_hooks(client)
        self._send_tree(tree)
        self._send_summaries(ready)
        self._send_stacks(self._stacks.take_all())
        return installed

    def _record_step(self, client):
        return None if client._explicit_steps else self._auto_step

    def _sync_output_hooks(self, client):
        """Turns the output hooks' native path (output_hook.h) on for the step now on when a
        module's first call needs nothing only _on_output does: no step 0 window,
        parameter, buffer, labels, transform, stacking or values log, and a client (not a
        Capture) with a core. Off, every call goes to _on_output."""
        core = getattr(client, "_core", None)
        tree, kinds = self._tree, self._kinds
        full, stats = self._full_on, self._stats_on
        if (core is None or self._stopped or not self._hooks or self._window is not None or not (full or stats)
                or not kinds & {"output", "gradient"} or kinds & {"parameter", "buffer"} or self._labels is not None
                or self._transform is not None or client._transform is not None or self._stacks.may_take(0)
                or not (tree is None or isinstance(tree, _native.TreeLog))):
            self._outputs.off()
        else:
            gradients = "gradient" in kinds
            self._outputs.on(core, self._calls, tree, None if client._explicit_steps else self._auto_step,
                             self._hint or 0, "output" in kinds, gradients, full,
                             self._summarize_native if stats else None, self._grad_fallback if gradients else None,
                             self._training)

    def _summarize_native(self, stream, tensor, values, kind, step):
        """The summary of a value the native hooks took (`values`: _native.summarize's)."""
        try:
            summary = values if isinstance(values, str) else from_native(values)
            self._summarize(self._client(), stream, tensor, kind, step, summary=summary)
        except Exception as e:  # never into the training loop
            _refuse_quietly(self._client(), stream, e)

    def _grad_fallback(self, stream, step, full, stats, grad):
        """A gradient at the output of a call the native hooks took, which they cannot send
        (not a plain CPU tensor of a dtype sent as it is)."""
        meta = ValueMeta(self._paths.get(stream, ""), self._types.get(stream, ""), "gradient", "")
        self._on_grad(f"{stream}.grad", step, meta, full, stats, None, grad)

    # -- hooks (installed only on sent steps) --

    def _install(self):
        hooks = []
        for path, module, stream in self._entries:
            if self._tree is not None:
                hooks.append(self._module_hook(module, "pre", "tree", self._tree.hook(path, type(module).__name__)))
            if "input" in self._kinds:
                hooks.append(self._module_hook(module, "pre", "input", _Hook(self._on_inputs, stream, path)))
            if self._kinds & {"output", "gradient", "parameter", "buffer"}:
                fallback = _Hook(self._on_output, stream)
                hooks.append(self._module_hook(module, "output", "output", self._outputs.hook(stream, fallback), fallback))
            if "parameter_gradient" in self._kinds:
                for pname, param in module._parameters.items():
                    if param is not None and param.requires_grad:
                        meta = ValueMeta(path, type(module).__name__, "parameter_gradient", pname)
                        hooks.append(param.register_hook(_Hook(self._on_param_grad, f"{stream}.{pname}.grad", meta)))
        self._hooks = hooks

    def _uninstall(self):
        hooks, self._hooks = self._hooks, []
        for h in hooks:
            h.remove()

    def _module_hook(self, module, kind, key, hook, runtime=None):
        """Registers a forward pre-hook (kind "pre") or forward hook ("output") on
        `module` for role `key`, and returns what removes it. Where torch.compile exists, a
        CompilableHook registered once and turned on now (its Activation turns it off);
        `runtime` is what it runs in a compiled graph (default `hook`)."""
        if not _compiled.SUPPORTED:
            if kind == "pre":
                return _register_pre_hook(module, hook)
            return module.register_forward_hook(hook)
        compilable = self._compilable.get((id(module), key))
        if compilable is None:
            compilable = _compiled.CompilableHook(kind, module, hook, runtime or hook, _inert_hook)
            self._compilable[(id(module), key)] = compilable
            if kind == "pre":
                self._compilable_handles.append(_register_pre_hook(module, compilable))
            else:
                self._compilable_handles.append(module.register_forward_hook(compilable))
        else:
            compilable.eager, compilable.runtime = hook, runtime or hook
        return _compiled.Activation(compilable)

    def _tree_stamp(self):
        """The step the tree log of a step is stamped with, asked by the log at the step's
        first call; None: the step is not logged (the log asks again after the step ends)."""
        client = self._client()
        # PyTorch runs the pre-hooks it listed when the call began: the root's, just
        # removed by a step change that call made, still runs once.
        if client is None or self._stopped or not self._full_on or not self._hooks:
            return None
        return client.step if client._explicit_steps else self._auto_step

    def _on_inputs(self, stream, path, module, args, kwargs=None):
        """The tensors a call of `module` receives, before it runs: "<stream>.in[<i>]" for
        positional argument i, "<stream>.in[<name>]" for a keyword argument (PyTorch 2),
        with "[j]"/"[key]" further for the tensors inside a tuple, list or dict argument."""
        try:
            client = self._client()
            # The root's pre-hook may run once after a step change removed it (see _tree_stamp).
            if client is None or self._stopped or not self._hooks or self._evaluating():
                return
            call = self._input_calls.get(stream, 0)
            self._input_calls[stream] = call + 1
            window = self._window
            call0 = self._count_in_window("input_calls", stream) if window is not None else call
            if self._over_calls(call, call0, window):
                client._refuse(stream + ".in", "more calls of this module in one step than are tracked")
                return
            step = self._record_step(client)
            type_name = type(module).__name__
            leaves = input_leaves(args, kwargs)
            if call == 0 and path not in self._input_streams:
                self._input_streams[path] = [f"{stream}.in{leaf}" for leaf, _ in leaves]
            if window is not None:
                for leaf, tensor in leaves:
                    auto, client_target = self._targets(window, stream, f".in{leaf}", call, call0, step)
                    summaries = self._targets(window, stream, f".in{leaf}", call, call0, step, summaries=True)
                    meta = ValueMeta(path, type_name, "input", leaf)
                    self._route(auto, client_target, tensor, R.KIND_ACTIVATION, meta, None, summaries)
                return
            named = call_name(stream, call)
            full, stats = self._full_on, self._stats_on and self._stacks.alone(call)
            for leaf, tensor in leaves:
                if full:
                    meta = ValueMeta(path, type_name, "input", leaf, call)
                    self._send(f"{named}.in{leaf}", tensor, R.KIND_ACTIVATION, step, meta)
                if stats:
                    self._summarize(client, f"{named}.in{leaf}", tensor, R.KIND_ACTIVATION, step)
        except Exception as e:  # never into the training loop
            _refuse_quietly(self._client(), stream, e)

    def _on_output(self, stream, module, inputs, output):
        # Runs for every call of every tracked module on a sent step: kept to the few
        # lookups each call needs (python_track_bench, "Where a hook's time goes").
        try:
            client = self._client()
            if client is None or self._stopped or self._evaluating():
                return
            if self._tree is not None:
                self._tree.end(module, output)  # (native, under the GIL: no lock needed)
            calls = self._calls
            call = calls.get(stream, 0)
            calls[stream] = call + 1
            window = self._window
            if call >= MAX_CALLS_PER_STEP or window is not None:
                call0 = self._count_in_window("calls", stream) if window is not None else call
                if self._over_calls(call, call0, window):
                    client._refuse(stream, "more calls of this module in one step than are tracked")
                    return
            step = None if client._explicit_steps else self._auto_step
            kinds = self._kinds
            path = self._paths.get(stream, "")
            type_name = type(module).__name__
            if window is not None:
                self._output_in_window(window, stream, path, type_name, module, output, call, call0, step)
                return
            named = stream if call == 0 else call_name(stream, call)
            stacks = self._stacks
            full, stats = self._full_on, self._stats_on and stacks.alone(call)
            if "output" in kinds or "gradient" in kinds:
                leaves = (("", output),) if isinstance(output, torch.Tensor) else tensor_leaves(output)
                own = not stacks.may_take(call)  # (else _send decides: a row of a stack, or both)
                for suffix, tensor in leaves:
                    # The batch's labels are read here, in the forward that computed this
                    # output, for its gradient too: by backward another call of the model
                    # (a siamese pair, a GAN's real and fake batches) may have replaced them.
                    labels = None if self._labels is None or not full else self._labels_for(tensor)
                    if "output" in kinds:
                        if full:
                            meta = ValueMeta(path, type_name, "output", suffix, call)
                            if own:
                                client._send_tracked(named + suffix, tensor, R.KIND_ACTIVATION, self._hint,
                                                     self._transform, step, meta, labels)
                            else:
                                self._send(named + suffix, tensor, R.KIND_ACTIVATION, step, meta, labels)
                        if stats:
                            self._summarize(client, named + suffix, tensor, R.KIND_ACTIVATION, step)
                    if "gradient" in kinds and _compiled.wants_gradient(tensor):
                        meta = ValueMeta(path, type_name, "gradient", suffix, call)
                        _compiled.gradient_hook(tensor, _Hook(self._on_grad, f"{named}{suffix}.grad", step, meta, full,
                                                              stats, labels))
            if call == 0 and self._values_kinds:
                stats = self._stats_on  # (with every call stacked, the first has no summary of its own)
                for kind, values in (("parameter", module._parameters), ("buffer", module._buffers)):
                    if kind not in kinds:
                        continue
                    for vname, value in values.items():
                        if value is None:
                            continue
                        if full:
                            meta = ValueMeta(path, type_name, kind, vname)
                            self._send(f"{stream}.{vname}", value, R.KIND_PARAMETER, step, meta)
                        if stats:
                            self._summarize(client, f"{stream}.{vname}", value, R.KIND_PARAMETER, step, ratio=True)
        except Exception as e:  # never into the training loop
            _refuse_quietly(self._client(), stream, e)

    def _evaluating(self):
        """Whether the call now is an evaluation forward this track leaves out."""
        training = self._training
        return training is not None and not (training[0].training and torch.is_grad_enabled())

    def _over_calls(self, call, call0, window):
        """Whether a call is past what is tracked: MAX_CALLS_PER_STEP separate calls (the
        stacked ones have no such limit, except in step 0's window)."""
        over = call >= MAX_CALLS_PER_STEP and call0 >= MAX_CALLS_PER_STEP
        return over and (window is not None or not self._stacks.stacking())

    # -- calls stacked (_call_stacks.py) --

    def _labels_for(self, tensor):
        """The batch's labels (track_model's `labels`) when `tensor`'s rows are the batch's
        (its first dimension has their length); else None (sent without labels)."""
        try:
            labels = self._labels()
            if isinstance(tensor, torch.Tensor) and tensor.dim() > 0:
                count = len(labels) if isinstance(labels, (list, tuple)) else labels.shape[0] if labels.ndim == 1 else -1
                if count == tensor.shape[0]:
                    return labels
        except Exception:
            pass  # (a callable that fails: sent without labels)
        return None

    def _send(self, stream, tensor, kind, step=None, meta=None, labels=None):
        """A value of one call: to its own stream, or (a module called many times a step)
        as a row of the module's stacked calls, or both."""
        if meta is not None and meta.what in _STACKED_WHAT and self._stacks.may_take(meta.call):
            client = self._client()
            if client is None or self._stopped:
                return
            path, _, what, leaf, call = meta
            module_stream = self._streams_of.get(path)
            if module_stream is not None:
                name = stacked_name(module_stream, _STACKED_WHAT[what](leaf))
                at = client.step if step is None else step
                self._send_stacks(self._stacks.take(name, tensor, kind, at, call, meta))
                if not self._stacks.alone(call):
                    return
        super()._send(stream, tensor, kind, step, meta, labels)

    def _send_stacks(self, stacks):
        """Sends a step's stacked calls, each as one calls x features matrix (a heatmap
        unless the track names a render mode)."""
        client = self._client()
        if client is None:
            return
        for stack in stacks:
            if not stack.calls:
                continue
            try:
                matrix = stack.matrix()
                hint = self._hint or R.RENDER_MODES["heatmap"]
                client._send_tracked(stack.name, matrix, stack.kind, hint, None, stack.step,
                                     stack.meta._replace(call=stack.first_call))
                if stack.dropped:
                    client._refuse(stack.name, f"{stack.dropped} calls past the {len(stack.calls)} stacked in one step")
                if stack.changed:
                    client._refuse(stack.name, f"{stack.changed} calls' tensors were written in place after the call "
                                               "(their rows are NaN)")
            except Exception as e:  # never into the training loop
                _refuse_quietly(client, stack.name, e)

    def _on_grad(self, stream, step, meta, full, stats, labels, grad):
        """The gradient at an output; `labels`: the batch's, read in the forward."""
        try:
            if full:
                self._send(stream, grad, R.KIND_GRADIENT, step, meta, labels)
            if stats and self._stacks.alone(meta.call):
                self._summarize(self._client(), stream, grad, R.KIND_GRADIENT, step)
        except Exception as e:
            _refuse_quietly(self._client(), stream, e)

    def _on_param_grad(self, stream, meta, grad):
        try:
            client = self._client()
            if client is None:
                return
            window = self._window
            if window is not None:
                auto = (stream, self._auto_step, 0) if window.open else None
                self._route(auto, (stream, None, 0), grad, R.KIND_PARAMETER_GRADIENT, meta)
                return
            step = self._record_step(client)
            if self._full_on:
                self._send(stream, grad, R.KIND_PARAMETER_GRADIENT, step, meta)
            if self._stats_on:
                self._summarize(client, stream, grad, R.KIND_PARAMETER_GRADIENT, step)
        except Exception as e:
            _refuse_quietly(self._client(), stream, e)

    # -- summaries (_summaries.py) --

    def _summarize(self, client, name, tensor, kind, step, ratio=False, summary=None):
        """Adds the summary of `tensor` (stream `name`) to the step's; for a parameter, with
        its update ratio since the previous summarised step. `summary`: summarize()'s
        result when the caller computed it."""
        if client is None or self._stopped or not client.enabled:
            return
        before = None
        if ratio:
            b = self._previous.get(name)
            if b is not None and (b.shape, b.dtype, b.device) == (tensor.shape, tensor.dtype, tensor.device):
                before = b
        if summary is None:
            summary = summarize(tensor, before, self._cast)
        if ratio:
            self._previous[name] = tensor.detach().clone()
        if isinstance(summary, str):
            client._refuse(name, f"no summary: {summary}")
            return
        if isinstance(summary, tuple) and not isinstance(summary, OnTheWay) and (summary[0][1] or summary[0][2]) \
                and client._capture_until is None:
            # The first NaN/Inf this client sees (on the CPU, known now): this tensor whole
            # at once, unless the step sends it anyway, and every track whole for the next
            # anomaly_capture_steps steps.
            at = client.step if step is None else step
            client._non_finite_seen(at)
            if not self._full_on and tensor is not None:
                self._send(name, tensor, kind, step, ValueMeta(self._paths.get(name, ""), "", "", ""))
        with self._lock:
            kept = self._summaries.add(client.step if step is None else step, name, kind, summary)
        if not kept:
            client._refuse(name, "summary not kept: too many waiting for their GPU copies")

    def _send_summaries(self, ready):
        """Sends {step: [entry]} as one summary record per step."""
        client = self._client()
        if not ready or client is None or client._core is None:
            return
        for step, entries in ready.items():
            try:
                client._core.send_summaries(self.name, entries, step)
            except Exception as e:
                _refuse_quietly(client, self.name, e)

    # -- step 0's window (see _step_zero.py) --

    def _count_in_window(self, counts, stream):
        """The call's number under the client reading (step 0 not yet over)."""
        with self._lock:
            window = self._window
            return window.count(getattr(window, counts), stream) if window is not None else 0

    def _targets(self, window, stream, suffix, call, call0, step, first_only=False, summaries=False):
        """Where a value of a call goes under each reading: (auto, client) targets; with
        `summaries`, where its summary goes (the client reading's step 0 is summarised
        whenever the track summarises)."""
        auto = client_target = None
        auto_open = window.summarizing if summaries else window.open
        if auto_open and call < MAX_CALLS_PER_STEP and (call == 0 or not first_only):
            auto = (call_name(stream, 0 if first_only else call) + suffix, step, call)
        client_open = self._stats_every > 0 if summaries else True
        if client_open and call0 < MAX_CALLS_PER_STEP and (call0 == 0 or not first_only):
            client_target = (call_name(stream, 0 if first_only else call0) + suffix, None, call0)
        return auto, client_target

    def _output_in_window(self, window, stream, path, type_name, module, output, call, call0, step):
        kinds = self._kinds
        if "output" in kinds or "gradient" in kinds:
            for suffix, tensor in tensor_leaves(output):
                labels = None if self._labels is None else self._labels_for(tensor)  # (as _on_output reads them)
                if "output" in kinds:
                    auto, client_target = self._targets(window, stream, suffix, call, call0, step)
                    summaries = self._targets(window, stream, suffix, call, call0, step, summaries=True)
                    meta = ValueMeta(path, type_name, "output", suffix)
                    self._route(auto, client_target, tensor, R.KIND_ACTIVATION, meta, labels, summaries)
                if "gradient" in kinds and _compiled.wants_gradient(tensor):
                    auto, client_target = self._targets(window, stream, suffix + ".grad", call, call0, step)
                    summaries = self._targets(window, stream, suffix + ".grad", call, call0, step, summaries=True)
                    meta = ValueMeta(path, type_name, "gradient", suffix)
                    _compiled.gradient_hook(tensor, _Hook(self._on_window_grad, auto, client_target, meta, labels,
                                                          summaries))
        for kind, values in (("parameter", module._parameters), ("buffer", module._buffers)):
            if kind in kinds:
                for vname, value in values.items():
                    if value is not None:
                        auto, client_target = self._targets(window, stream, f".{vname}", call, call0, step, True)
                        summaries = self._targets(window, stream, f".{vname}", call, call0, step, True, True)
                        meta = ValueMeta(path, type_name, kind, vname)
                        self._route(auto, client_target, value, R.KIND_PARAMETER, meta, None, summaries)

    def _on_window_grad(self, auto, client_target, meta, labels, summaries, grad):
        try:
            self._route(auto, client_target, grad, R.KIND_GRADIENT, meta, labels, summaries)
        except Exception as e:
            _refuse_quietly(self._client(), (client_target or auto or (self.name,))[0], e)

    # -- handle --

    def streams(self):
        if self._stopped:
            return []
        out = []
        for path, module, stream in self._entries:
            if "input" in self._kinds:
                # Known once the module was called on a sent step (they depend on the call).
                out.extend(TrackedStream(name, "input", path) for name in self._input_streams.get(path, ()))
            if "output" in self._kinds:
                out.append(TrackedStream(stream, "activation", path))
            if "gradient" in self._kinds:
                out.append(TrackedStream(stream + ".grad", "gradient", path))
            for pname, param in module._parameters.items():
                if param is None:
                    continue
                if "parameter" in self._kinds:
                    out.append(TrackedStream(f"{stream}.{pname}", "parameter", path))
                if "parameter_gradient" in self._kinds and param.requires_grad:
                    out.append(TrackedStream(f"{stream}.{pname}.grad", "parameter_gradient", path))
            if "buffer" in self._kinds:
                for bname, buf in module._buffers.items():
                    if buf is not None:
                        out.append(TrackedStream(f"{stream}.{bname}", "buffer", path))
        for name, meta in self._stacks.seen():  # modules called many times a step
            out.append(TrackedStream(name, KINDS[meta.what], meta.path))
        return out

    # -- tree log --

    def _take_tree(self):
        """The step's record (payload, step), if any calls were logged (with the lock held)."""
        return None if self._tree is None else self._tree.take()

    def _send_tree(self, tree):
        client = self._client()
        if tree is None or client is None or client._core is None:
            return
        payload, step = tree
        try:
            client._core.send_module_tree(self.name, payload, step)
        except Exception as e:
            _refuse_quietly(client, self.name, e)

    def stop(self):
        self._settle("auto")  # step 0's window, still open: as the forwards counted steps
        self._send_stacks(self._stacks.take_all())
        with self._lock:
            tree = self._take_tree()
            ready = self._summaries.take_ready(wait=True)
            self._stopped = True
            self._uninstall()
            self._outputs.stop()
            self._root_hook.remove()
            for handle in self._compilable_handles:
                handle.remove()
            for compilable in self._compilable.values():
                compilable.release()
            self._compilable_handles, self._compilable = [], {}
        self._send_tree(tree)
        self._send_summaries(ready)


class TensorTrack(_Track):
    """track_tensor: the gradient of one tensor, every n-th time backward computes it."""

    def __init__(self, client, name, tensor, every_n, transform, render_mode):
        super().__init__(client, name, every_n, transform, render_mode)
        self._calls = 0
        self._hook = tensor.register_hook(_Hook(self._on_grad))

    def _on_grad(self, grad):
        try:
            call, self._calls = self._calls, self._calls + 1
            if call % self._every_n != 0:
                client = self._client()
                if client is not None:
                    client._count_gated()
                return
            self._send(self.name, grad, R.KIND_GRADIENT)
        except Exception as e:
            _refuse_quietly(self._client(), self.name, e)

    def streams(self):
        return [] if self._stopped else [TrackedStream(self.name, "gradient", "")]

    def stop(self):
        self._stopped = True
        self._hook.remove()


def _refuse_quietly(client, stream, error):
    if client is not None:  # Client._refuse never raises
        client._refuse(stream, f"tracking failed: {type(error).__name__}: {error}")


def select_modules(name, root, include, exclude, containers=False):
    """[(path, module, stream)] of the modules of `root` to track, and warnings.

    As in the C++ client: a module is tracked when it registers parameters or buffers
    itself (or, with `containers`, whatever it registers: the root, Sequential, ReLU, ...)
    and its qualified path matches `include` and not `exclude`; `include` and `exclude`
    are compiled regular expressions (searched) or callables path -> bool. TorchScript
    submodules are skipped with a warning (hooks on them never fire).
    """
    entries, scripted = [], []
    skip_prefixes = []
    for path, module in root.named_modules():
        if _is_compiled_wrapper(module):
            continue  # its _orig_mod is listed next, under the wrapper's path
        path = _uncompiled_path(path)
        if any(path == p or path.startswith(p + ".") for p in skip_prefixes):
            continue
        if isinstance(module, torch.jit.ScriptModule):
            scripted.append(path or "<root>")
            skip_prefixes.append(path)
            if path == "":
                break
            continue
        owns = any(p is not None for p in module._parameters.values()) or any(
            b is not None for b in module._buffers.values()
        )
        if not owns and not containers:
            continue
        if include is not None and not _matches(include, path):
            continue
        if exclude is not None and _matches(exclude, path):
            continue
        entries.append((path, module, name if path == "" else f"{name}.{path}"))
    if scripted:
        warnings.warn(
            f"tensorscope: track {name!r}: TorchScript modules cannot be hooked (their forward hooks never "
            f"fire) and are not tracked: {', '.join(scripted[:10])}{' ...' if len(scripted) > 10 else ''}",
            RuntimeWarning,
            stacklevel=3,
        )
    return entries


def _matches(pattern, path):
    return bool(pattern(path)) if callable(pattern) else pattern.search(path) is not None

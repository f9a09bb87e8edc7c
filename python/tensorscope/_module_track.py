"""ModuleTrack: what Client.track_model / track_layer (and Capture) set up on one model:
its hooks, installed for the steps it sends; outputs, inputs, gradients, parameters and
buffers of the selected modules; a module's many calls stacked; the tree log; the streams
it may send. Its step 0 routing is _step_zero_routing.py, its summaries
_track_summaries.py; the bookkeeping both clients share is the client core's (_native)."""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable, FrozenSet, List, Optional, Tuple, Union

import torch
from torch import nn

from . import _native
from . import _results as R
from . import _compiled
from ._call_stacks import CallStacks, stacked_name
from ._hook_objects import _Hook, _inert_hook, _register_pre_hook
from ._module_selection import KINDS
from ._outputs import input_leaves, tensor_leaves
from ._owner import TrackOwner
from ._sharding import is_dtensor
from ._step_zero import call_name, trainable_version
from ._step_zero_routing import StepZeroRouting
from ._summaries import StepSummaries
from ._tensors import output_hooks
from ._track_handle import TrackedStream
from ._track_summaries import GATHER_CPU, TrackSummaries
from ._tracks import _REFUSALS, _STACKED_WHAT, MAX_CALLS_PER_STEP, ValueMeta, _refuse_quietly, _Track
from ._tree import make_tree_log


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


class ModuleTrack(StepZeroRouting, TrackSummaries, _Track):
    """track_model / track_layer: the selected modules of one model."""

    def __init__(self, client: TrackOwner, name: str, root: nn.Module, entries: List[Tuple[str, nn.Module, str]],
                 kinds: FrozenSet[str], every_n: int, transform: Any, render_mode: int, tree_log: Union[bool, str],
                 tree_log_tolerance: Optional[Tuple[float, float]] = None, stats_every: int = 0, calls: str = "auto",
                 labels: Optional[Callable[[], Any]] = None, evaluation: str = "skip", cast: int = 0) -> None:
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
        self._at_once = set()  # streams summarized at once: written in place before a flush
        self._gather_cpu = GATHER_CPU  # CPU tensors into the fused pass too (TENSORSCOPE_SUMMARY_PASS)
        self._flush_queued = False  # a flush at the end of the backward now running
        self._gather_failed = False  # a pass failed: every summary is taken at once from then on
        self._previous = {}  # parameter stream -> its last summarized value (a PreviousValues or a tensor)
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
        """Without next_step()/set_step(), each training forward of the root is a step.
        What the last forward and backward gathered is flushed first."""
        if self._summaries.gathered():
            self._flush_gathered()
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

    def _gates(self, client):
        """(full, summarized) of the step now beginning: whether its tensors are sent whole
        (a multiple of every_n) and summarised (a multiple of stats_every), counted in the
        client's steps (or, before any next_step()/set_step(), the track's own count), so
        tracks with the same every_n send the same steps, however late they were made, and
        a run resumed with set_step() sends the steps it would have sent."""
        step = client.step if client is not None and client._explicit_steps else self._auto_step
        return _native.step_gates(step, self._every_n, self._stats_every,
                                  client is not None and client._capturing(step))

    def step_changed(self):
        """A new step begins; True when the track's hooks were installed for it just now."""
        installed = False
        client = self._client()
        with self._lock:
            if self._stopped:
                return False
            self._calls.clear()
            self._input_calls.clear()
            written = self._summaries.flush()
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
        self._refuse_written(client, written)
        self._refuse_failed(client)
        self._send_tree(tree)
        self._send_summaries(ready)
        self._send_stacks(self._stacks.take_all())
        return installed

    def _record_step(self, client):
        return None if client._explicit_steps else self._auto_step

    def _sync_output_hooks(self, client):
        """Turns the output hooks' native path (output_hook.h) on for the step now on when a
        module's first call needs nothing only _on_output does: no step 0 window,
        parameter, buffer, labels, transform, stacking or values log, summaries of CPU
        tensors not gathered (TENSORSCOPE_SUMMARY_PASS=host), and a client (not a Capture)
        with a core. Off, every call goes to _on_output."""
        core = getattr(client, "_core", None)
        tree, kinds = self._tree, self._kinds
        full, stats = self._full_on, self._stats_on
        if (core is None or self._stopped or not self._hooks or self._window is not None or not (full or stats)
                or not kinds & {"output", "gradient"} or kinds & {"parameter", "buffer"} or self._labels is not None
                or self._transform is not None or client._transform is not None or self._stacks.may_take(0)
                or not (tree is None or isinstance(tree, _native.TreeLog)) or (stats and self._gather_cpu)):
            self._outputs.off()
        else:
            gradients = "gradient" in kinds
            self._outputs.on(core, self._calls, tree, None if client._explicit_steps else self._auto_step,
                             self._hint or 0, "output" in kinds, gradients, full,
                             self._summarize_native if stats else None, self._grad_fallback if gradients else None,
                             self._training)

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
                        name = f"{stream}.{pname}.grad"
                        if is_dtensor(param):  # FSDP2 gives a sharded parameter its .grad after reducing it
                            hooks.append(param.register_post_accumulate_grad_hook(
                                _Hook(self._on_param_accumulated, name, meta)))
                        else:
                            hooks.append(param.register_hook(_Hook(self._on_param_grad, name, meta)))
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
                client._refuse(stream + ".in", _REFUSALS["over_calls"])
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
                    client._refuse(stream, _REFUSALS["over_calls"])
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
                    client._refuse(stack.name, _REFUSALS["stack_dropped"].format(stack.dropped, len(stack.calls)))
                if stack.changed:
                    client._refuse(stack.name, _REFUSALS["stack_changed"].format(stack.changed))
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

    def _on_param_accumulated(self, stream, meta, param):
        """A sharded parameter's gradient, once FSDP2 reduced it into its .grad (this rank's
        part, accumulated over the steps that did not reduce, as the optimizer sees it)."""
        grad = param.grad
        if grad is not None:
            self._on_param_grad(stream, meta, grad)

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
            written = self._summaries.flush()
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
        self._refuse_written(self._client(), written)
        self._refuse_failed(self._client())
        self._send_tree(tree)
        self._send_summaries(ready)

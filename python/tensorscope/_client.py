"""tensorscope.Client: the Python client of tensorscope.

Same daemon, shared-memory ring, streams and videos as the C++ client (ClientOptions's
fields are its keywords). Nothing that happens while training raises: a push returns a
PushResult and every outcome is counted in stats(). Bad use (a wrong option type, a
module that is not an nn.Module) raises TypeError/ValueError at the call.
"""

from __future__ import annotations

import html
import json
import os
import platform
import threading
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Pattern, Tuple, Union

import torch
from torch import nn

from . import _native
from . import _results as R
from ._anomalies import read_anomalies
from ._anomaly_reports import AnomalyReports
from ._call_stacks import CALL_MODES
from ._stats import ClientStats
from ._summaries import cast_format_value
from ._tensors import export, export_torch, row_labels
from ._module_selection import compile_pattern, parse_kinds, select_modules, unwrap
from ._module_track import ModuleTrack
from ._track_handle import TrackedStream, TrackHandle
from ._tracks import EVALUATION_MODES, TensorTrack

_GATED = R.PushResult.GATED  # a gated push returns it without another call
_SPAN = _native.CostSpan()  # a with-block of it is time in tensorscope (stats().own_time)

# A module path filter: a regular expression searched in the path, or a callable.
PathFilter = Union[str, Pattern[str], Callable[[str], bool], None]
# A callable applied to a tensor before it is copied: (stream name, tensor) -> tensor.
Transform = Optional[Callable[[str, Any], Any]]

try:
    from ._build_info import DAEMON as _DEFAULT_DAEMON
except ImportError:  # pragma: no cover - a package without build info
    _DEFAULT_DAEMON = ""


def _check_int(name, value, low=None, high=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{name} must be {bounds}, not {value}")
    return value


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


def _check_tolerance(value):
    """(rtol, atol) as floats from `value`, a pair of finite non-negative numbers."""
    try:
        rtol, atol = value
    except (TypeError, ValueError):
        raise TypeError(f"tree_log_tolerance must be a pair (rtol, atol), not {value!r}") from None
    for what, number in (("rtol", rtol), ("atol", atol)):
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise TypeError(f"tree_log_tolerance's {what} must be a number, not {type(number).__name__}")
        if not (0 <= number < float("inf")):
            raise ValueError(f"tree_log_tolerance's {what} must be finite and at least 0, not {number}")
    return float(rtol), float(atol)


class Client:
    """A tensorscope client: pushes tensors to the daemon of `session`.

    Usable as a context manager: leaving it (or close()) removes every hook of its tracks
    and disconnects.
    """

    def __init__(
        self,
        session: str = "default",
        *,
        every_n: int = 1,
        max_hz: float = 0.0,
        rank: Optional[int] = None,
        shm_budget: int = 128 << 20,
        ring_slots: int = 1024,
        max_tensor_bytes: int = 0,
        transform: Transform = None,
        runtime_dir: str = "",
        reconnect_interval_ms: int = 200,
        connect_timeout_ms: int = 500,
        autostart: bool = False,
        autostart_config: str = "",
        autostart_output: str = _native.CLIENT_OPTIONS["autostart_output"],  # shared/output_dir.h
        autostart_idle_exit_ms: int = 30000,
        daemon_executable: str = "",
        enabled: bool = True,
        cuda_staging_bytes: int = 256 << 20,
        cuda_ipc: bool = True,
        anomaly_capture_steps: int = 2,
        pacing: bool = True,
        reference: str = "",
    ) -> None:
        # Every keyword but the transform, as the signature has them (test_push.py checks
        # that the signature is the table), checked (types, bounds) and completed by the
        # one table of client options the C++ client uses too (client/core/
        # core_option_table.h): the same option, the same error.
        given = {name: value for name, value in locals().items() if name in _native.CLIENT_OPTIONS}
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable (name, tensor) -> tensor, not {type(transform).__name__}")
        options = _native.resolve_options(given)
        if not options["daemon_executable"] and not os.environ.get("TENSORSCOPE_DAEMON"):
            if _DEFAULT_DAEMON and os.access(_DEFAULT_DAEMON, os.X_OK):
                options["daemon_executable"] = _DEFAULT_DAEMON
        self._options = dict(options)
        self._options["transform"] = transform
        self._transform = transform
        self._every_n = every_n
        # After the first non-finite summary: every track sends whole tensors for this
        # many steps (the step after it to _capture_until; None until then).
        self._anomaly_capture_steps = options["anomaly_capture_steps"]
        self._capture_until = None
        self._explicit_steps = False  # set by next_step()/set_step()
        self._tracks = []
        self._tracks_lock = threading.Lock()
        self._cuda_usable = None
        self._core = None
        self._core = _native.Core(
            {**options, "framework_versions": {"python": platform.python_version(), "torch": str(torch.__version__)}}
        )
        # push() with its gate in C (Core.push_gate): a call the gate holds back returns
        # without a Python frame; the method below is what it falls back to.
        setattr(self, "push", self._core.push_gate(self._push_admitted, Client.push.__get__(self, Client), R.RESULTS))

    # ---- explicit pushes ----

    def push(self, name: str, tensor: Any, labels: Any = None) -> R.PushResult:
        """Pushes `tensor` (a torch tensor or numpy array) as stream `name`, gated by every_n /
        max_hz. Never raises and never blocks: returns a PushResult.

        `labels`: a class for each row of `tensor` (its first dimension), so pca and tsne
        frames colour the points by class: a 1-D integer tensor or array, or a list of str
        (class names, numbered in sorted order). A count other than the rows refuses the push."""
        core = self._core
        if core is None:
            return R.PushResult.NOT_CONNECTED
        try:
            with _SPAN:
                admitted = core.admit(name)  # the gate and whether a send can go now, in one call
                if admitted < 0:
                    return _GATED if admitted == -1 else R.not_admitted(admitted)
                return self._send(name, tensor, R.KIND_TENSOR, admitted, self._transform, None, labels)
        except Exception as e:
            return self._refuse(name if isinstance(name, str) else repr(name)[:100], f"push failed: {e}")

    def _push_admitted(self, name, tensor, hint):
        """push() for a call its gate admitted (Core.push_gate): transform, export, send."""
        try:
            return self._send(name, tensor, R.KIND_TENSOR, hint, self._transform, None)
        except Exception as e:
            return self._refuse(name, f"push failed: {e}")

    def _send(self, name, tensor, kind, hint, transform, step, labels=None):
        """Transforms, exports and sends a tensor that core.admit or core.admit_tracked admitted."""
        core = self._core
        if core is None:
            return R.PushResult.NOT_CONNECTED
        try:
            if transform is not None:
                tensor = transform(name, tensor)
        except Exception as e:
            return R.RESULTS[core.refuse(name, f"transform raised {type(e).__name__}: {e}")]
        return self._deliver(core, name, tensor, kind, hint, step, labels)

    def _deliver(self, core, name, tensor, kind, hint, step, labels=None):
        """Exports and sends an admitted (and transformed) tensor, with its row labels."""
        try:
            exported = export_torch(tensor, self) if type(tensor) is torch.Tensor else export(tensor, self)
            if labels is not None:
                labels = row_labels(labels, self)
                if type(labels) is str:
                    return R.RESULTS[core.refuse(name, labels)]
        except Exception as e:
            return R.RESULTS[core.refuse(name, f"could not read the tensor: {type(e).__name__}: {e}")]
        if type(exported) is str:
            return R.RESULTS[core.refuse(name, exported)]
        if labels is not None:
            return R.RESULTS[core.send(name, exported.capsule, kind, hint, step, exported.as_bool, exported.cuda_stream,
                                       labels)]
        return R.RESULTS[core.send(name, exported.capsule, kind, hint, step, exported.as_bool, exported.cuda_stream)]

    def _send_tracked(self, name, tensor, kind, hint, transform, step, meta=None, labels=None):
        """A track's push: the track gated its steps; max_hz still applies per stream.
        (`meta`, what the value is, matters to a Capture only; `labels`, the rows' labels.)"""
        core = self._core
        if core is None:
            return R.PushResult.NOT_CONNECTED
        admitted = core.admit_tracked(name)  # max_hz per stream, and the stream's render hint
        if admitted < 0:
            return R.not_admitted(admitted)
        if not hint:
            hint = admitted
        if transform is None:
            transform = self._transform
            if transform is None:  # (a hook's tensor as it is: one call fewer)
                return self._deliver(core, name, tensor, kind, hint, step, labels)
        return self._send(name, tensor, kind, hint, transform, step, labels)

    def _refuse(self, name, why):
        core = self._core
        if core is None:
            return R.PushResult.NOT_CONNECTED
        try:
            return R.RESULTS[core.refuse(name, why)]
        except Exception:
            return R.PushResult.REFUSED

    def _count_gated(self):
        core = self._core
        if core is not None:
            core.count_gated()

    # used by _tensors.export for CUDA tensors
    def _cuda_staging_usable(self):
        if self._cuda_usable is None:
            core = self._core
            self._cuda_usable = bool(core is not None and core.cuda_staging_usable())
        return self._cuda_usable

    def _count_sync_copy(self, why):
        core = self._core
        if core is not None:
            core.count_sync_copy(why)

    # ---- tracks ----

    def track_model(
        self,
        name: str,
        module: nn.Module,
        *,
        every_n: Optional[int] = None,
        include: PathFilter = None,
        exclude: PathFilter = None,
        kinds: Optional[Iterable[str]] = None,
        transform: Transform = None,
        render_mode: Optional[str] = None,
        tree_log: Union[bool, str] = True,
        containers: bool = False,
        tree_log_tolerance: Tuple[float, float] = (1e-5, 1e-8),
        stats_every: int = 1,
        calls: str = "auto",
        labels: Optional[Callable[[], Any]] = None,
        evaluation: str = "skip",
        cast_format: Optional[str] = None,
    ) -> TrackHandle:
        """Tracks the forward output of every submodule of `module` that registers
        parameters or buffers itself, as stream "<name>.<qualified path>" ("<name>" for the
        root; "#<k>" for the k-th further call in a step; "[i]"/"[key]" for each tensor
        of a tuple, list, dict or dataclass output). `containers=True` tracks every
        module, those without parameters of their own too (the root, Sequential, ReLU).
        `include`/`exclude`: a regular expression searched in the module's path (or a
        callable path -> bool). `kinds`: some of "output", "gradient", "parameter",
        "parameter_gradient", "buffer", "input" (default "output"); inputs are
        "<stream>.in[<i>]" for the i-th positional argument (and "in[<name>]" for keyword
        arguments, on PyTorch 2), taken before the module runs. `tree_log`: with outputs
        tracked, each sent step's module calls (in order, with their input and output
        shapes) go to the daemon's module tree log; "values" also marks the calls whose
        output values changed since the previous logged step beyond `tree_log_tolerance`
        (rtol, atol), judged on a fingerprint of each output (tensorscope/_tree.py).
        `stats_every`: every this many steps (default 1; 0: never) each tracked tensor is
        also summarised where it lives (numel, L2 norm, max |x|, mean, std, NaN/Inf counts,
        fraction of zeros; for parameters the update ratio), one record per step, for the
        daemon's summary table and anomaly reports (scope.anomalies()).
        `cast_format`: a name from tensorscope.CAST_FORMATS (e.g. "bf16", "fp8_e4m3") adds
        the low-precision numerics to every summary: the dynamic range (log2 of max |x|
        over the smallest non-zero |x|) and the fractions of values a cast to that format
        would turn to zero (underflow) or to Inf/NaN (overflow). None (default): none (on a
        GPU they cost a few more reductions per tensor).
        `calls`: for a module called many times a step (an RNN cell over timesteps):
        "auto" (default) keeps the first 4 calls of a step as streams of their own and
        stacks every call of the step, one row each (batch mean), into one calls x
        features heatmap "<stream>#calls"; "stacked" stacks all calls only; "separate"
        sends every call as its own stream (tensorscope/_call_stacks.py).
        `labels`: a callable returning the current batch's class labels (e.g.
        `labels=lambda: y`; what push() takes as labels); each tracked tensor whose first
        dimension is the batch's size is sent with them, so pca and tsne frames colour
        its rows by class. Called once per tensor sent; an error in it sends the tensor
        without labels.
        `evaluation`: what becomes of an evaluation forward, one run under
        torch.no_grad()/torch.inference_mode() or with `module` in eval() mode (validation
        between steps, a metric): "skip" (default) leaves it out, so it takes none of the
        step's call numbers and the next training forward keeps the step's first call,
        its summaries and gradients; "track" tracks it as a call of the step in progress
        (a model that is only ever evaluated: an inference script)."""
        options = {key: value for key, value in locals().items() if key in _native.TRACK_OPTIONS}
        return self._track_module(name, module, "output", **options)

    def track_layer(
        self,
        name: str,
        module: nn.Module,
        *,
        every_n: Optional[int] = None,
        include: PathFilter = None,
        exclude: PathFilter = None,
        kinds: Optional[Iterable[str]] = None,
        transform: Transform = None,
        render_mode: Optional[str] = None,
        tree_log: Union[bool, str] = True,
        containers: bool = False,
        tree_log_tolerance: Tuple[float, float] = (1e-5, 1e-8),
        stats_every: int = 1,
        calls: str = "auto",
        labels: Optional[Callable[[], Any]] = None,
        evaluation: str = "skip",
        cast_format: Optional[str] = None,
    ) -> TrackHandle:
        """Tracks the gradient at each selected module's output ("<name>.<path>.grad"):
        d(loss)/d(output). Same selection and options as track_model (kinds defaults to
        "gradient"; the tree log needs "output" among the kinds)."""
        options = {key: value for key, value in locals().items() if key in _native.TRACK_OPTIONS}
        return self._track_module(name, module, "gradient", **options)

    def track_tensor(self, name: str, tensor: torch.Tensor, *, every_n: Optional[int] = None,
                     transform: Transform = None, render_mode: Optional[str] = None) -> TrackHandle:
        """Sends the gradient of `tensor` (which must require grad) as stream `name` each
        n-th time backward computes it. The handle does not keep `tensor` alive."""
        self._check_track_name(name)
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"track_tensor needs a torch.Tensor, not {type(tensor).__name__}")
        if not tensor.requires_grad:
            raise ValueError(f"track_tensor({name!r}): the tensor does not require grad, so it has no gradient")
        every_n, transform, hint = self._track_options(every_n, transform, render_mode)
        return self._add(TensorTrack(self, name, tensor, every_n, transform, hint))

    def _track_module(
        self, name, module, default_kind, *, every_n, include, exclude, kinds, transform, render_mode, tree_log,
        containers, tree_log_tolerance, stats_every, calls, labels, evaluation, cast_format,
    ):
        """track_model and track_layer: every keyword of _native.TRACK_OPTIONS (a test
        checks that both pass each one on)."""
        self._check_track_name(name)
        if labels is not None and not callable(labels):
            raise TypeError(f"labels must be a callable returning the batch's labels, not {type(labels).__name__}")
        if not isinstance(calls, str) or calls not in CALL_MODES:
            raise ValueError(f"calls must be one of {', '.join(map(repr, CALL_MODES))}, not {calls!r}")
        if not isinstance(evaluation, str) or evaluation not in EVALUATION_MODES:
            raise ValueError(f"evaluation must be one of {', '.join(map(repr, EVALUATION_MODES))}, not {evaluation!r}")
        if not isinstance(module, nn.Module):
            raise TypeError(f"expected a torch.nn.Module, not {type(module).__name__}")
        if not isinstance(tree_log, bool) and tree_log != "values":
            raise TypeError(f'tree_log must be a bool or "values", not {tree_log!r}')
        tolerance = _check_tolerance(tree_log_tolerance)
        _check_int("stats_every", stats_every, 0)
        cast = cast_format_value(cast_format)
        if not isinstance(containers, bool):
            raise TypeError(f"containers must be a bool, not {type(containers).__name__}")
        chosen = parse_kinds(kinds, default_kind)
        include_re = compile_pattern(include, "include")
        exclude_re = compile_pattern(exclude, "exclude")
        every_n, transform, hint = self._track_options(every_n, transform, render_mode)
        root = unwrap(module)
        entries = select_modules(name, root, include_re, exclude_re, containers)
        if not entries:
            what = "no module" if containers else "no module registers parameters or buffers and"
            return TrackHandle(error=f"track {name!r}: {what} matches include/exclude")
        return self._add(
            ModuleTrack(self, name, root, entries, chosen, every_n, transform, hint, tree_log, tolerance, stats_every,
                        calls, labels, evaluation=evaluation, cast=cast)
        )

    def _check_track_name(self, name):
        if not isinstance(name, str):
            raise TypeError(f"a track name must be a str, not {type(name).__name__}")
        if not name:
            raise ValueError("a track name must not be empty")
        why = _native.stream_name_error(name)
        if why is not None:
            raise ValueError(f"a track name starts its streams' names: {why}")
        if self._core is None:
            raise ValueError("the tensorscope client is closed")

    def _track_options(self, every_n, transform, render_mode):
        if every_n is None:
            every_n = self._every_n
        _check_int("every_n", every_n, 1)
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable (name, tensor) -> tensor, not {type(transform).__name__}")
        return every_n, transform, R.render_hint(render_mode)

    def _add(self, track):
        with self._tracks_lock:  # (a new list: _live_tracks() reads the old one without the lock)
            self._tracks = [t for t in self._tracks if t() is not None and not t()._stopped] + [weakref.ref(track)]
        return TrackHandle(track)

    def _live_tracks(self):
        """The live tracks, one after the other (no lock and no list: _add replaces the list
        of tracks, never changes it, so every step reads it cheaply)."""
        for ref in self._tracks:
            track = ref()
            if track is not None and not track._stopped:
                yield track

    def tracked(self) -> List[TrackedStream]:
        """Every stream the live handles of this client may send."""
        return [s for track in self._live_tracks() for s in track.streams()]

    # ---- steps, state ----

    @property
    def step(self) -> int:
        """The training step stamped on every record."""
        return self._core.step() if self._core is not None else 0

    def set_step(self, step: int) -> None:
        """Sets the step; tracks start a new step (their every_n counts steps)."""
        _check_int("step", step, -(2**63), 2**63 - 1)  # a 64-bit step, as from C++
        core = self._core
        if core is None:
            return
        first = not self._explicit_steps
        self._explicit_steps = True
        before = core.step()
        core.set_step(step)
        for track in self._live_tracks():
            if first:
                track.steps_became_explicit(before)
            if step != before:
                track.step_changed()

    def next_step(self) -> int:
        """Advances the step by one and returns it."""
        core = self._core
        if core is None:
            return 0
        with _SPAN:
            first = not self._explicit_steps
            self._explicit_steps = True
            step = core.next_step()
            for track in self._live_tracks():
                if first:
                    track.steps_became_explicit(step - 1)
                track.step_changed()
            return step

    def _non_finite_seen(self, step):
        """A summary showed the first NaN/Inf (at `step`): every track sends whole tensors
        for the next anomaly_capture_steps steps, so the videos, dumps and compare have
        the steps around it."""
        if self._capture_until is None:
            self._capture_until = step + self._anomaly_capture_steps
            if self._core is not None:  # the evidence: held, not dropped, by a full ring
                self._core.hold_evidence(step, self._capture_until)

    def _capturing(self, step):
        return self._capture_until is not None and step <= self._capture_until

    def anomalies(self, timeout: float = 2.0) -> AnomalyReports:
        """What the session's daemon flagged so far in the tracks' per-step summaries (the
        first non-finite value, explosions, dead units; every rank's), as
        tensorscope.read_anomalies gives them: a list of dicts with type, step, rank, pid,
        track, stream, kind, message and details. [] when no daemon answers.

        First waits, at most `timeout` seconds (0: not at all), until the daemon has read
        everything this client sent, so that what it pushed before the call is in the
        answer (a step's summaries are sent when the step ends: next_step()). Milliseconds
        while the daemon keeps up; a daemon that is behind costs the whole wait (a loop that
        asks every few steps passes timeout=0), and the answer is then what it has flagged
        so far."""
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout >= 0:
            raise ValueError(f"timeout: seconds >= 0, not {timeout!r}")
        core = self._core
        if core is not None and timeout > 0:
            core.wait_until_read(int(min(timeout, 3600.0) * 1000))
        text = _native.daemon_status(self._options["runtime_dir"], self._options["session"], 2000)
        if text is None:
            return []
        output = json.loads(text).get("output_dir")
        return read_anomalies(output) if isinstance(output, str) and output else AnomalyReports()

    def set_label(self, text: str) -> None:
        """Text shown on every frame from now on (at most 127 bytes are kept)."""
        if not isinstance(text, str):
            raise TypeError(f"a label must be a str, not {type(text).__name__}")
        if self._core is not None:
            self._core.set_label(text)

    @property
    def enabled(self) -> bool:
        """Checked by every push and hook; disabled pushes count as gated."""
        return self._core.enabled() if self._core is not None else False

    @enabled.setter
    def enabled(self, value: bool) -> None:
        _check_bool("enabled", value)
        if self._core is not None:
            self._core.set_enabled(value)

    def set_enabled(self, value: bool) -> None:
        """Turns every push and track on or off (the `enabled` property)."""
        self.enabled = value

    def set_render_mode(self, stream: str, mode: Optional[str]) -> None:
        """How the daemon should draw `stream` from its next push on: a name in
        tensorscope.RENDER_MODES ("default": the daemon's choice; docs/user/render_modes.md
        shows each)."""
        if not isinstance(stream, str):
            raise TypeError(f"a stream name must be a str, not {type(stream).__name__}")
        hint = R.render_hint(mode, "mode")
        if self._core is not None:
            self._core.set_render_hint(stream, hint)

    def stats(self) -> ClientStats:
        """The client's counters and notes (a ClientStats)."""
        if self._core is None:
            return ClientStats(closed=True)
        return ClientStats(**self._core.stats())

    @property
    def connected(self) -> bool:
        """A daemon holds this client's segment right now."""
        return self._core is not None and self._core.connected()

    @property
    def rank(self) -> int:
        """The rank the client sends as (its `rank` option, else $RANK, else 0)."""
        return self._core.rank() if self._core is not None else self._options["rank"] or 0

    @property
    def options(self) -> Dict[str, Any]:
        """The options this client was made with (a copy)."""
        return dict(self._options)

    def close(self) -> None:
        """Removes every track's hooks and disconnects (finished records stay with the
        daemon). Later pushes return NOT_CONNECTED. A connected client of rank 0 (not a
        forked child) says once, on stderr, where the session's outputs are and the command
        that views them."""
        for track in self._live_tracks():
            track.stop()
        core, self._core = self._core, None
        self.__dict__.pop("push", None)  # the gate: push() is the method again
        if core is not None:
            core.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> bool:
        self.close()
        return False

    def _repr_html_(self) -> str:
        """In a notebook: the session, its state, where the outputs go, the live page (an
        inline frame and a link, when the daemon serves one; else the command that opens
        it) and the anomalies so far, as a table. Asks the daemon (at most 1 s)."""
        options = self._options
        session = html.escape(options["session"])
        state = "closed" if self._core is None else ("connected" if self.connected else "not connected")
        text = _native.daemon_status(options["runtime_dir"], options["session"], 1000)
        status = json.loads(text) if text else {}
        parts = [f"<p><b>tensorscope.Client</b> session <code>{session}</code> · rank {self.rank} · {state}</p>"]
        output = status.get("output_dir")
        if isinstance(output, str) and output:
            parts.append(f"<p>outputs in <code>{html.escape(output)}</code></p>")
        live = status.get("live_url")
        if isinstance(live, str) and live.startswith(("http://", "https://")):
            url = html.escape(live, quote=True)
            parts.append(f'<p><a href="{url}" target="_blank">the live page</a></p>'
                         f'<iframe src="{url}" width="100%" height="520" style="border:0"></iframe>')
        else:
            parts.append(f"<p>the live page: <code>tensorscope view --session {session}</code></p>")
        if isinstance(output, str) and output:
            try:
                parts.append(read_anomalies(output)._repr_html_())
            except ValueError as e:  # not an anomaly log
                parts.append(f"<p>anomalies: {html.escape(str(e))}</p>")
        return "".join(parts)

    def __repr__(self) -> str:
        state = "closed" if self._core is None else ("connected" if self.connected else "not connected")
        return f"tensorscope.Client(session={self._options['session']!r}, rank={self.rank}, {state})"

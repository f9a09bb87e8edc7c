"""tensorscope.capture: module outputs, gradients, inputs, parameters and buffers kept in
memory, for a notebook or a test; no daemon, no files.

    with tensorscope.capture(model, grad=True, stash=lambda t: t.std()) as cap:
        model(x).sum().backward()
    cap[0]            # Stash(step=0, module='0', type='Linear', kind='output', ...)
    cap.to_frame()    # a pandas DataFrame, one row per captured tensor

The hooks are those of Client.track_model (tensorscope/_tracks.py): the same modules, the
same stream names, the same steps. Without `stash`, each tensor is kept as its statistics
(the daemon's statistics table's: mean, std, min, max, L2 norm, NaN/Inf counts, zero
fraction), computed on the tensor's device without waiting for it; they are read (one
transfer per tensor) when first looked at. Nothing raises into the training loop: a
stash function or a hook that fails is counted in `errors` (the last message in
`last_error`), and tensors beyond `max_entries` are counted in `dropped`.

Thread safety: the hooks may run on autograd's threads; entries are appended under a lock.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Pattern, Tuple, Union

import torch
from torch import nn

from . import _frames
from ._module_selection import compile_pattern, parse_kinds, select_modules, unwrap
from ._module_track import ModuleTrack
from ._track_handle import TrackedStream

_STAT_FIELDS = ("mean", "std", "min", "max", "l2_norm", "nan_count", "inf_count", "zero_fraction")
_DTYPE_NAMES = {}


def _dtype_name(dtype):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "", 1)
    return name


def _device_name(device):
    if device.type == "cuda":
        return f"cuda{device.index if device.index is not None else torch.cuda.current_device()}"
    return device.type


class TensorStats:
    """The statistics of one tensor, as the daemon's statistics table has them: mean, std
    (population), min, max and l2_norm over the finite elements (NaN when there are
    none), nan_count, inf_count, zero_fraction (NaN for an empty tensor); and its dtype,
    shape and device. Computed where the tensor is; read when first looked at."""

    __slots__ = ("dtype", "shape", "device", "_pending", "_values")

    def __init__(self, dtype: str, shape: Tuple[int, ...], device: str, pending: Any) -> None:
        self.dtype = dtype  # "float32", ...
        self.shape = shape  # a tuple
        self.device = device  # "cpu", "cuda0", ...
        self._pending = pending  # float64 tensor of the 8 values, until read
        self._values = None

    def _read(self) -> Tuple[Any, ...]:
        if self._values is None:
            values = self._pending.tolist()
            values[5] = int(values[5])
            values[6] = int(values[6])
            self._values = tuple(values)
            self._pending = None
        return self._values

    @property
    def mean(self) -> float:
        """Mean of the finite elements (NaN when there is none)."""
        return float(self._read()[0])

    @property
    def std(self) -> float:
        """Population standard deviation of the finite elements."""
        return float(self._read()[1])

    @property
    def min(self) -> float:
        """Smallest finite element."""
        return float(self._read()[2])

    @property
    def max(self) -> float:
        """Largest finite element."""
        return float(self._read()[3])

    @property
    def l2_norm(self) -> float:
        """L2 norm of the finite elements."""
        return float(self._read()[4])

    @property
    def nan_count(self) -> int:
        """How many elements are NaN."""
        return int(self._read()[5])

    @property
    def inf_count(self) -> int:
        """How many elements are +Inf or -Inf."""
        return int(self._read()[6])

    @property
    def zero_fraction(self) -> float:
        """Fraction of elements that are exactly zero (NaN for an empty tensor)."""
        return float(self._read()[7])

    def as_tuple(self) -> Tuple[Any, ...]:
        """(dtype, shape, device, mean, std, min, max, l2_norm, nan_count, inf_count, zero_fraction)."""
        return (self.dtype, self.shape, self.device) + self._read()

    def as_dict(self) -> Dict[str, Any]:
        """The statistics table's columns (dtype, shape, device, mean, ...) as a dict."""
        return dict(zip(_frames.STATS_COLUMNS, self.as_tuple()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorStats) and self.as_tuple() == other.as_tuple()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        values = ", ".join(f"{k}={v!r}" for k, v in zip(_STAT_FIELDS, self._read()))
        return f"TensorStats({self.dtype}{list(self.shape)}@{self.device}, {values})"


def tensor_stats(tensor: torch.Tensor) -> TensorStats:
    """TensorStats of `tensor` (any real or bool dtype, any device), computed in float64
    on its device. Squares and sums are scaled by the binade of the largest finite
    magnitude, so values near the float64 range neither overflow nor vanish."""
    t = tensor.detach()
    shape = tuple(t.shape)
    dtype, device = _dtype_name(t.dtype), _device_name(t.device)
    if t.is_complex():
        raise TypeError(f"statistics of complex tensors are not supported ({t.dtype})")
    n = t.numel()
    if n == 0:
        nan = float("nan")
        pending = torch.tensor([nan, nan, nan, nan, nan, 0.0, 0.0, nan], dtype=torch.float64)
        return TensorStats(dtype, shape, device, pending)
    x = t.reshape(-1)
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)
    x = x.to(torch.float64)
    finite = torch.isfinite(x)
    nan_count = torch.isnan(x).sum()
    finite_count = finite.sum()
    inf_count = n - finite_count - nan_count
    lo = torch.where(finite, x, float("inf")).min()
    hi = torch.where(finite, x, float("-inf")).max()
    none_finite = finite_count == 0
    max_abs = torch.where(none_finite, torch.zeros_like(lo), torch.maximum(lo.abs(), hi.abs()))
    _, exponent = torch.frexp(max_abs)  # max_abs = m * 2^exponent, 0.5 <= m < 1 (0 for 0)
    binade = torch.where(max_abs > 0, exponent - 1, torch.zeros_like(exponent)).to(torch.float64)
    scale = torch.pow(2.0, -binade)
    unscale = torch.pow(2.0, binade)
    scaled = torch.where(finite, x * scale, torch.zeros_like(x))
    count = finite_count.to(torch.float64)
    mean_scaled = scaled.sum() / count
    centered = torch.where(finite, scaled - mean_scaled, torch.zeros_like(x))
    std = torch.sqrt((centered * centered).sum() / count) * unscale
    l2 = torch.sqrt((scaled * scaled).sum()) * unscale
    nan = torch.full_like(lo, float("nan"))
    pending = torch.stack([
        mean_scaled * unscale,
        std,
        torch.where(none_finite, nan, lo),
        torch.where(none_finite, nan, hi),
        torch.where(none_finite, nan, l2),
        nan_count.to(torch.float64),
        inf_count.to(torch.float64),
        (x == 0).sum().to(torch.float64) / n,
    ])
    return TensorStats(dtype, shape, device, pending)


class Stash(NamedTuple):
    """One captured tensor (see tensorscope/_frames.py for the fields' meaning)."""

    step: int
    module: str  # qualified path, "" for the root
    type: str  # the module's class name
    kind: str  # "output", "gradient", "input", "parameter", "buffer", "parameter_gradient"
    leaf: str  # "", "[0]", "[mask]", "weight", ...
    call: int  # the module's call number in the step
    rank: int
    pid: int
    stream: str  # the daemon's stream name for it
    value: Any  # what `stash` returned, or a TensorStats


class Capture:
    """What tensorscope.capture returns: a list of Stash entries, filled by hooks on the
    model until remove() (or the end of the `with` block); iterable, indexable, len()."""

    def __init__(
        self,
        model: nn.Module,
        *,
        name: str = "model",
        grad: bool = True,
        kinds: Optional[Iterable[str]] = None,
        include: Union[str, Pattern[str], Callable[[str], bool], None] = None,
        exclude: Union[str, Pattern[str], Callable[[str], bool], None] = None,
        every_n: int = 1,
        stash: Optional[Callable[[torch.Tensor], Any]] = None,
        max_entries: int = 100_000,
        containers: bool = True,
        rank: Optional[int] = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"expected a torch.nn.Module, not {type(model).__name__}")
        if not isinstance(name, str) or not name:
            raise ValueError("name must be a non-empty str (the track name of the stream names)")
        for what, value in (("grad", grad), ("containers", containers)):
            if not isinstance(value, bool):
                raise TypeError(f"{what} must be a bool, not {type(value).__name__}")
        for what, value, low in (("every_n", every_n, 1), ("max_entries", max_entries, 0)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{what} must be an int, not {type(value).__name__}")
            if value < low:
                raise ValueError(f"{what} must be at least {low}, not {value}")
        if stash is not None and not callable(stash):
            raise TypeError(f"stash must be callable (tensor) -> value, not {type(stash).__name__}")
        if rank is None:
            try:
                rank = int(os.environ.get("RANK", "0"))
            except ValueError:
                rank = 0
        elif isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(f"rank must be a non-negative int, not {rank!r}")
        chosen = set(parse_kinds(kinds, "output"))
        if grad:
            chosen.add("gradient")
        self.name = name
        self.stashes = []
        self.dropped = 0  # tensors not kept: max_entries was reached
        self.errors = 0  # stash functions or hooks that failed
        self.last_error = ""
        self.enabled = True
        self._stash = stash
        self._max_entries = max_entries
        self._rank = rank
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._explicit_steps = False
        self._step = 0
        # What else a track may use of its owner (_owner.py): no daemon, no transform, no
        # anomaly capture (no summaries here).
        self._core = None
        self._transform = None
        self._capture_until = None
        root = unwrap(model)
        entries = select_modules(
            name, root, compile_pattern(include, "include"), compile_pattern(exclude, "exclude"), containers
        )
        self._track = None
        if entries:
            # Every forward in the block is captured, those under torch.no_grad() too.
            self._track = ModuleTrack(self, name, root, entries, frozenset(chosen), every_n, None, 0, False,
                                      calls="separate", evaluation="track")

    # ---- what the track calls (_owner.TrackOwner, which Client gives too) ----

    def _send_tracked(self, stream, tensor, kind, hint, transform, step, meta=None, labels=None):
        if not self.enabled:
            return None
        if len(self.stashes) >= self._max_entries:
            with self._lock:
                self.dropped += 1
            return None
        path, type_name, kind_name, leaf, call = meta if meta is not None else ("", "", "tensor", "", 0)
        try:
            value = self._stash(tensor.detach()) if self._stash is not None else tensor_stats(tensor)
        except Exception as e:
            self._refuse(stream, f"{'stash' if self._stash is not None else 'statistics'} failed: "
                                 f"{type(e).__name__}: {e}")
            return None
        entry = Stash(
            self._step if step is None else step, path, type_name, kind_name, leaf, call, self._rank, self._pid,
            stream, value,
        )
        with self._lock:
            if len(self.stashes) >= self._max_entries:
                self.dropped += 1
            else:
                self.stashes.append(entry)
        return None

    def _capturing(self, step):
        return False  # (no summaries here: nothing starts an anomaly capture)

    def _non_finite_seen(self, step):
        return None

    def _count_gated(self):
        return None

    def _count_sync_copy(self, why):
        return None  # (a stash function gets the tensor where it is)

    def _cuda_staging_usable(self):
        return False

    def _refuse(self, stream, why):
        with self._lock:
            self.errors += 1
            self.last_error = f"{stream}: {why}"
        return None

    # ---- steps ----

    @property
    def step(self) -> int:
        """The step the next captured tensors get: set by next_step()/set_step(); until
        either is called, each training-mode forward of the model is a step (as for a
        Client's tracks)."""
        if self._explicit_steps or self._track is None:
            return self._step
        return self._track._auto_step

    def _begin_explicit_steps(self):
        if not self._explicit_steps and self._track is not None:
            self._track.steps_became_explicit(self._step)  # as a Client's tracks: no offset from step 0
        self._explicit_steps = True

    def next_step(self) -> int:
        """Advances the step by one and returns it (every_n counts steps)."""
        self._begin_explicit_steps()
        self._step += 1
        if self._track is not None:
            self._track.step_changed()
        return self._step

    def set_step(self, step: int) -> None:
        """Sets the step the next captured tensors get (every_n counts from it)."""
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"step must be an int, not {type(step).__name__}")
        self._begin_explicit_steps()
        changed = step != self._step
        self._step = step
        if changed and self._track is not None:
            self._track.step_changed()

    # ---- reading ----

    @property
    def streams(self) -> List[TrackedStream]:
        """The streams the capture may record (TrackedStream tuples, as a track handle's)."""
        return self._track.streams() if self._track is not None else []

    def __iter__(self) -> Iterator[Stash]:
        return iter(list(self.stashes))

    def __len__(self) -> int:
        return len(self.stashes)

    def __getitem__(self, index: int) -> Stash:
        return self.stashes[index]

    def clear(self) -> None:
        """Forgets every entry (the counters stay)."""
        with self._lock:
            self.stashes = []

    def to_frame(self) -> Any:
        """A pandas DataFrame, one row per entry, in capture order: the columns of
        tensorscope/_frames.py (statistics columns without `stash`, else `value`, with
        0-d tensors as Python numbers). The same frame as tensorscope.read_stats()
        gives for a daemon's run, but buffers are "buffer" here."""
        entries = list(self.stashes)
        if self._stash is None:
            rows = [e[:9] + e.value.as_tuple() for e in entries]
            return _frames.make_frame(rows, _frames.KEY_COLUMNS + _frames.STATS_COLUMNS)
        rows = [e[:9] + (_plain(e.value),) for e in entries]
        return _frames.make_frame(rows, _frames.KEY_COLUMNS + _frames.STASH_COLUMNS)

    # ---- lifetime ----

    @property
    def tracking(self) -> bool:
        """Whether the capture's hooks are still on the model."""
        return self._track is not None and not self._track._stopped

    def remove(self) -> None:
        """Removes every hook; the entries stay."""
        if self._track is not None:
            self._track.stop()

    close = remove

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: object) -> bool:
        self.remove()
        return False

    def __repr__(self):
        extra = f", dropped={self.dropped}" if self.dropped else ""
        extra += f", errors={self.errors}" if self.errors else ""
        return f"Capture(stashes={len(self.stashes)}, tracking={self.tracking}{extra})"


def _plain(value):
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        return value.item()
    return value


def capture(
    model: nn.Module,
    *,
    name: str = "model",
    grad: bool = True,
    kinds: Optional[Iterable[str]] = None,
    include: Union[str, Pattern[str], Callable[[str], bool], None] = None,
    exclude: Union[str, Pattern[str], Callable[[str], bool], None] = None,
    every_n: int = 1,
    stash: Optional[Callable[[torch.Tensor], Any]] = None,
    max_entries: int = 100_000,
    containers: bool = True,
    rank: Optional[int] = None,
) -> Capture:
    """Captures the tensors of `model`'s modules in memory (see Capture); use as a
    context manager, or call remove() when done.

    Every module is captured, the root ("" in `module`) and modules without parameters
    included (`containers=False`: only those with parameters or buffers of their own, as
    track_model). `kinds` as track_model's (default "output"; `grad=True` adds
    "gradient": d(loss)/d(output)); `include`/`exclude`: a regular expression searched in
    the module path, or a callable path -> bool; `every_n`: steps captured (0, n, 2n, ...). `stash(tensor) -> value` is called with each tensor (detached; clone
    it to keep values a later in-place operation changes); without it, the tensor's
    statistics are kept (a TensorStats). `max_entries` bounds the entries; later tensors
    are counted in `dropped`. `name` prefixes the stream names (as a track's name).
    `rank` defaults to $RANK, else 0."""
    return Capture(
        model,
        name=name,
        grad=grad,
        kinds=kinds,
        include=include,
        exclude=exclude,
        every_n=every_n,
        stash=stash,
        max_entries=max_entries,
        containers=containers,
        rank=rank,
    )

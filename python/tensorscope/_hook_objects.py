"""The hooks a track registers with PyTorch: forward pre-hooks with or without keyword
arguments, and hook objects that turn inert in a copy or pickle of the model (an EMA copy,
torch.save of the module), so a copy is never tracked."""

from __future__ import annotations

import inspect

from torch import nn

from . import _native

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


class _Hook(_native.TimedCall):
    """A hook registered with PyTorch: calls `fn(*bound, *hook_args)` (no Python frame of
    its own) as one span of the client's cost meter (stats().own_time). Copies and pickles
    of a model that carries it (an EMA copy, torch.save of the module) get `_inert`."""

    __slots__ = ()

    def __deepcopy__(self, memo):
        return _inert

    def __reduce__(self):
        return (_inert_hook, ())


def _inert_hook():
    return _inert

"""Which modules of a model a track takes, and what of them: the kinds by name, include and
exclude patterns, the modules under DataParallel / DistributedDataParallel / torch.compile
wrappers, and the selected (path, module, stream) entries."""

from __future__ import annotations

import re
import warnings

import torch
from torch import nn

# The kinds a track may send, by name, and their TrackedStream kind.
KINDS = {
    "output": "activation",
    "gradient": "gradient",
    "parameter": "parameter",
    "parameter_gradient": "parameter_gradient",
    "buffer": "buffer",
    "input": "input",
}


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


def _is_compiled_wrapper(module):
    """Whether `module` is torch.compile's OptimizedModule (its `_orig_mod` is the model)."""
    return type(module).__name__ == "OptimizedModule" and isinstance(getattr(module, "_orig_mod", None), nn.Module)


def _uncompiled_path(path):
    """A module's path with the OptimizedModule wrappers of blocks compiled one by one left
    out ("blocks.0._orig_mod.attn" -> "blocks.0.attn"): the stream names of eager mode."""
    if "_orig_mod" not in path:
        return path
    return ".".join(part for part in path.split(".") if part != "_orig_mod")


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

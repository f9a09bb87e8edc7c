"""Tracks on compiled models: the module hooks of a track as torch.compile sees them.

torch.compile (Dynamo) traces a module's forward hooks into its graph. The hooks of a
track call into the native extension, which Dynamo cannot trace: a graph break at every
tracked module, and state (steps, calls, gates) read once, when the graph was traced. So
on a PyTorch that has custom operators (2.4 and later) a track registers each module hook
as a CompilableHook:

- called eagerly it runs the track's hook as before (`eager`);
- traced, it becomes one opaque, side-effecting custom op, tensorscope::observe, that hands
  the call's tensors (its inputs or its output, as named leaves) to the track's Python
  hook (`runtime`) each time the compiled graph runs: steps, call numbers and gates are
  decided then, exactly as in eager mode. The gradient at an output comes from a tensor
  hook Dynamo traces into the backward graph, which calls the same op with the gradient.

No graph break (tests count them with Dynamo's own counters), and not
torch.compiler.disable, which would run the whole module uncompiled.

Dynamo does not guard on a module's hooks (skip_nnmodule_hook_guards), so a hook added or
removed after a graph was traced would be silently missing from it or silently stale: a
CompilableHook stays registered for the life of its track and is turned on and off
instead (`active`), and a track made after something was compiled resets Dynamo's caches
(ModuleTrack) so the next call traces the hooks in.
"""

import functools
import itertools
import threading
import weakref

import torch

from ._outputs import Leaves, input_leaves, tensor_leaves

OP = "tensorscope::observe"
# The op and the hooks need torch.library.custom_op and torch.compiler.is_compiling.
SUPPORTED = hasattr(torch, "library") and hasattr(torch.library, "custom_op") and hasattr(
    torch, "compiler") and hasattr(torch.compiler, "is_compiling")

_SEPARATOR = "\x1f"  # between the leaf names of one call, in the op's one str argument
# Before each name: whether the backward graph hands that leaf's gradient to the op.
_TAPPED, _UNTAPPED = "g", "-"
_FORWARD = -1  # the op's `leaf` for a forward call (>= 0: the gradient of that leaf)
MAX_PENDING_CALLS = 4096  # compiled calls of one hook whose gradients are awaited
_ids = itertools.count(1)
_hooks = {}  # id -> CompilableHook: the op's target while its track lives
_local = threading.local()  # .sink: the gradient hooks of the call the op runs now


def _observe(tensors, hook, names, grad_enabled, leaf):
    """tensorscope::observe when a compiled graph runs: the call's tensors to the hook."""
    target = _hooks.get(hook)
    if target is None or not target.active:
        return
    _local.before_return = []
    try:
        with torch.set_grad_enabled(grad_enabled):
            if leaf == _FORWARD:
                target.run(tensors, names.split(_SEPARATOR))
            else:
                target.gradient(leaf, tensors[0])
    except Exception:  # never into the training loop (the hooks count their own refusals)
        pass
    finally:
        calls, _local.before_return = _local.before_return, None
        for call in calls:
            try:
                call()
            except Exception:
                pass


def before_return(call):
    """Runs `call` before the compiled call now running returns to its graph: the graph's
    next kernels may write over the memory of the tensors it handed to the hooks (Inductor
    reuses a buffer after its last reader, and such writes leave no trace on the tensor), so
    what reads them later must be queued by then. False outside a compiled call."""
    calls = getattr(_local, "before_return", None)
    if calls is None:
        return False
    if call not in calls:
        calls.append(call)
    return True


def _define_op():
    """Defines tensorscope::observe; False where it cannot be (then the hooks stay eager)."""
    try:
        # CUDA graphs (mode="reduce-overhead") replay kernels only: a graph captured with
        # the op would skip the hooks at every replay. Tagged, Inductor runs the op between
        # the captured partitions instead (where the tag exists: PyTorch 2.8 and later).
        unsafe = getattr(torch.Tag, "cudagraph_unsafe", None)

        @torch.library.custom_op(OP, mutates_args=(), tags=(unsafe,) if unsafe is not None else ())
        def _observe_op(tensors: list[torch.Tensor], hook: int, names: str, grad_enabled: bool, leaf: int) -> None:
            _observe(tensors, hook, names, grad_enabled, leaf)

        @_observe_op.register_fake
        def _observe_fake(tensors, hook, names, grad_enabled, leaf):
            return None

        # Kept by every dead-code elimination (FX, AOTAutograd, Inductor): it returns nothing.
        torch.fx.node.has_side_effect(torch.ops.tensorscope.observe.default)
        return True
    except Exception:  # (another copy of the package defined it first, a PyTorch without the API)
        return False


SUPPORTED = SUPPORTED and _define_op()


def _observed_gradient(hook, leaf, grad):
    """The tensor hook traced on an output that requires grad: the op in the backward graph."""
    torch.ops.tensorscope.observe([grad], hook, "", True, leaf)


class _GradientSink:
    """The gradient hooks the track's hook asks for during one compiled call (it cannot
    register them: the graph's tensors do not require grad), by the leaf they belong to."""

    __slots__ = ("index", "hooks")

    def __init__(self, tensors, tapped):
        self.index = {id(t): i for i, (t, g) in enumerate(zip(tensors, tapped)) if g}
        self.hooks = {}

    def add(self, tensor, hook):
        leaf = self.index.get(id(tensor))
        if leaf is not None:
            self.hooks.setdefault(leaf, []).append(hook)


def wants_gradient(tensor):
    """Whether a hook should ask for the gradient at `tensor` (gradient_hook)."""
    return tensor.requires_grad or getattr(_local, "sink", None) is not None


def gradient_hook(tensor, hook):
    """tensor.register_hook(hook) — or, inside a compiled call, the same hook called with the
    gradient the backward graph hands to tensorscope::observe."""
    sink = getattr(_local, "sink", None)
    if sink is None:
        tensor.register_hook(hook)
    else:
        sink.add(tensor, hook)


class CompilableHook:
    """A module hook of a track that torch.compile traces into tensorscope::observe.

    kind "pre" (hook(module, args[, kwargs])) or "output" (hook(module, args, output));
    `eager` runs in eager mode, `runtime` the compiled graph runs,
    with the call's tensors as Leaves (or the output tensor itself). Copies and pickles of
    a model that carries it get `inert_hook()`."""

    __slots__ = ("eager", "runtime", "kind", "id", "active", "module", "pending", "inert", "__weakref__")

    def __init__(self, kind, module, eager, runtime, inert_hook):
        self.kind = kind
        self.eager = eager
        self.runtime = runtime
        self.module = weakref.ref(module)
        self.inert = inert_hook
        self.active = False
        self.pending = []  # per compiled call, latest last: {leaf: [gradient hooks]}
        self.id = next(_ids)
        _hooks[self.id] = self

    def __call__(self, module, *args):
        if torch.compiler.is_compiling():
            return self._traced(args)
        if self.active:
            return self.eager(module, *args)
        return None

    def _traced(self, args):
        if self.kind == "pre":
            leaves = input_leaves(args[0], args[1] if len(args) > 1 else None)
        else:
            output = args[1]
            leaves = [("", output)] if isinstance(output, torch.Tensor) else tensor_leaves(output)
        tensors = [t for _, t in leaves]
        grad_enabled = torch.is_grad_enabled()
        tapped = [self.kind == "output" and grad_enabled and t.requires_grad for t in tensors]
        names = _SEPARATOR.join((_TAPPED if g else _UNTAPPED) + name for (name, _), g in zip(leaves, tapped))
        torch.ops.tensorscope.observe(tensors, self.id, names, grad_enabled, _FORWARD)
        for leaf, tensor in enumerate(tensors):
            if tapped[leaf]:
                tensor.register_hook(functools.partial(_observed_gradient, self.id, leaf))
        return None

    def run(self, tensors, marked):
        """The compiled graph ran this hook's call: `marked`, the leaves' names, each after
        _TAPPED or _UNTAPPED."""
        module = self.module()
        if module is None:
            return
        names = [m[1:] for m in marked]
        if self.kind == "pre":
            self.runtime(module, Leaves(zip(names, tensors)))
            return
        output = tensors[0] if names == [""] else Leaves(zip(names, tensors))
        _local.sink = sink = _GradientSink(tensors, [m[:1] == _TAPPED for m in marked])
        try:
            self.runtime(module, (), output)
        finally:
            _local.sink = None
        if sink.hooks:
            # Kept across steps (auto steps change between a forward and its backward);
            # the oldest go first when forwards whose backward never came pile up.
            if len(self.pending) >= MAX_PENDING_CALLS:
                del self.pending[0]
            self.pending.append(sink.hooks)

    def gradient(self, leaf, grad):
        """The backward graph reached leaf `leaf` of one of this hook's calls: the latest
        call still waiting for that gradient (backward runs the calls in reverse)."""
        for index in range(len(self.pending) - 1, -1, -1):
            hooks = self.pending[index].pop(leaf, None)
            if hooks is not None:
                if not self.pending[index]:
                    del self.pending[index]
                for hook in hooks:
                    hook(grad)
                return

    def release(self):
        """The track stopped: a graph that still calls this hook's op does nothing."""
        self.active = False
        self.pending.clear()
        _hooks.pop(self.id, None)

    def __deepcopy__(self, memo):
        return self.inert()

    def __reduce__(self):
        return (self.inert, ())


class Activation:
    """The handle of a CompilableHook for one listened step: remove() turns it off (the
    hook itself stays registered, see the module docstring)."""

    __slots__ = ("hook",)

    def __init__(self, hook):
        self.hook = hook
        hook.active = True

    def remove(self):
        self.hook.active = False


_graphs_at_reset = [0]  # Dynamo's count of graphs when reset_if_compiled last reset


def _graphs_compiled():
    """How many graphs Dynamo has traced in this process (0 before it is imported)."""
    import sys

    if sys.modules.get("torch._dynamo") is None:
        return 0
    try:
        from torch._dynamo.utils import counters

        return counters["stats"]["unique_graphs"]
    except Exception:
        return _graphs_at_reset[0] + 1  # unknown: as if something was compiled


def reset_if_compiled():
    """Resets Dynamo's caches when it traced a graph since the last reset (a model compiled
    before it was tracked would never call the track's hooks); whether it did."""
    graphs = _graphs_compiled()
    if graphs == 0 or graphs == _graphs_at_reset[0]:  # (!=: the counters may have been cleared)
        return False
    torch.compiler.reset()
    _graphs_at_reset[0] = graphs
    return True

"""Turning what a user pushes into what the native core copies: DLPack capsules.

torch tensors (any dtype the C++ client takes, CPU or CUDA, any strides, requiring grad
or not) and numpy arrays are accepted; anything else is refused with a reason. Nothing
here raises for a bad tensor: `export` returns a refusal string instead.
"""

import torch
from torch.utils.dlpack import to_dlpack

from . import _native
from ._sharding import local_tensor

try:  # numpy is optional for the package (torch does not require it)
    import numpy as _np
except ImportError:  # pragma: no cover - Debian's python3-torch depends on numpy
    _np = None

_TORCH_DTYPES = frozenset(
    [
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
    ]
)
_NUMPY_KINDS = {"f": (2, 4, 8), "i": (1, 2, 4, 8), "u": (1,), "b": (1,)}


class Exported:
    """A tensor ready for the native core: a DLPack capsule and how to read it."""

    __slots__ = ("capsule", "as_bool", "cuda_stream")

    def __init__(self, capsule, as_bool=False, cuda_stream=0):
        self.capsule = capsule  # keeps the memory it describes alive
        self.as_bool = as_bool  # uint8 bytes of a bool tensor
        self.cuda_stream = cuda_stream  # the producer's cudaStream_t (CUDA tensors)


def _torch_refusal(t):
    if t.is_complex():
        return f"complex dtype {t.dtype} is not supported: push torch.view_as_real(t) or t.abs() instead"
    if t.dtype not in _TORCH_DTYPES:
        return f"dtype {t.dtype} is not supported"
    if t.layout != torch.strided:
        return f"only dense (strided) tensors are supported, not {t.layout}"
    if t.dim() > 8:
        return f"tensor has {t.dim()} dimensions; at most 8 are supported"
    return None


def _exports_requiring_grad():
    """Whether this torch's to_dlpack takes a tensor that requires grad (1.13 does): then
    no detach() is made per push (a new tensor, about 1 us)."""
    try:
        to_dlpack(torch.zeros(1, requires_grad=True))
        return True
    except Exception:  # pragma: no cover - depends on the torch version
        return False


_DETACH = not _exports_requiring_grad()


def export_torch(tensor, client):
    """An Exported for torch tensor `tensor`, or a refusal string. `client` says whether
    CUDA staging is usable and counts host copies of device tensors. Values only: the
    tensor's autograd history is neither kept nor touched."""
    dtype = tensor.dtype
    if dtype not in _TORCH_DTYPES or tensor.layout is not torch.strided or tensor.dim() > 8:
        return _torch_refusal(tensor)
    t = tensor
    if t.is_neg():  # (a conjugate bit exists only on complex tensors, refused above)
        t = t.resolve_neg()
    as_bool = dtype is torch.bool
    if as_bool:  # DLPack before 0.8 has no bool: send the bytes, say they are bool
        t = t.view(torch.uint8)
    if t.is_cuda:
        t = t.detach()  # __dlpack__ refuses tensors that require grad
        if not client._cuda_staging_usable():
            client._count_sync_copy("the CUDA runtime is not usable by tensorscope's staging")
            t = t.cpu()
        else:
            # On the GPU, on the tensor's current stream: a contiguous copy if needed,
            # and the caching allocator keeps the memory for that stream, which waits
            # for tensorscope's copy before anything later runs on it.
            if not t.is_contiguous():
                t = t.contiguous()
            stream = torch.cuda.current_stream(t.device)
            t.record_stream(stream)
            return Exported(t.__dlpack__(stream=-1), as_bool, stream.cuda_stream)
    elif not t.is_cpu:
        client._count_sync_copy(f"tensors on {t.device.type} are copied to the host first")
        t = t.cpu()
    return Exported(to_dlpack(t.detach() if _DETACH else t), as_bool)


def output_hooks(inert_hook, cast=0):
    """A track's _native.OutputHooks (output_hook.h): forward hooks, and hooks on the
    gradients at the outputs, that read plain CPU tensors where they are and send them as
    export_torch's capsules would be (bool, negative views and the rest go to the track's
    Python hooks). The dtypes they take come with a sample capsule each, which says their
    wire dtype. `inert_hook()` gives what a hook is in a copy of the model; `cast` is the
    summaries' cast format (a CAST_FORMATS value, 0: none)."""
    samples = {dtype: to_dlpack(torch.zeros(1, dtype=dtype)) for dtype in _TORCH_DTYPES - {torch.bool}}
    return _native.OutputHooks(torch.Tensor, torch.strided, samples, inert_hook, cast, torch.nn.Parameter)


def export_numpy(array):
    """An Exported for numpy array `array`, or a refusal string."""
    kind, size = array.dtype.kind, array.dtype.itemsize
    if kind == "c":
        return f"complex dtype {array.dtype} is not supported: push its .real/.imag or abs() instead"
    if size not in _NUMPY_KINDS.get(kind, ()) or not array.dtype.isnative:
        return f"numpy dtype {array.dtype} is not supported"
    if array.ndim > 8:
        return f"array has {array.ndim} dimensions; at most 8 are supported"
    a = array
    as_bool = kind == "b"
    if as_bool:
        a = a.view(_np.uint8)
    if not a.flags.writeable:  # numpy's DLPack export refuses read-only arrays
        a = a.copy()
    return Exported(a.__dlpack__(), as_bool)


def export(value, client):
    """An Exported for `value` (a torch tensor or numpy array; a DTensor's local part), or a
    refusal string."""
    if isinstance(value, torch.Tensor):
        return export_torch(local_tensor(value), client)
    if _np is not None and isinstance(value, _np.ndarray):
        return export_numpy(value)
    if _np is not None and isinstance(value, _np.generic):
        return export_numpy(_np.asarray(value))
    return f"cannot push an object of type {type(value).__name__}: expected a torch.Tensor or numpy.ndarray"


def row_labels(labels, client):
    """What the native core takes for push(..., labels=...): a list of str (class names,
    one per row), or a DLPack capsule of a 1-D int64 CPU tensor (one class per row); else
    a refusal string. A CUDA tensor is copied to the host (counted as a synchronous copy)."""
    if isinstance(labels, (list, tuple)):
        if all(isinstance(v, str) for v in labels):
            return list(labels)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in labels):
            return to_dlpack(torch.tensor(labels, dtype=torch.int64))
        return "labels must be integers or strings, one per row"
    if _np is not None and isinstance(labels, _np.ndarray):
        if labels.dtype.kind in "UO":
            values = labels.tolist()
            if labels.ndim == 1 and all(isinstance(v, str) for v in values):
                return values
        if labels.dtype.kind not in "iu":
            return f"labels must be an integer or string array, not {labels.dtype}"
        labels = torch.from_numpy(_np.ascontiguousarray(labels, dtype=_np.int64))
    if isinstance(labels, torch.Tensor):
        if labels.dim() != 1:
            return f"labels must be 1-D (one per row), not {labels.dim()}-D"
        if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
            return f"labels must be integers, not {str(labels.dtype).replace('torch.', '')}"
        if labels.is_cuda:
            client._core.count_sync_copy("row labels on a CUDA device are copied to the host")
        return to_dlpack(labels.detach().to("cpu", torch.int64).contiguous())
    return f"labels must be a 1-D integer tensor or array, or a list of str, not {type(labels).__name__}"

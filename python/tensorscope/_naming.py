"""File names of the daemon's .npy sink, reproduced exactly (recording/file_naming.h):
dumps/step_<step>/<stream made safe>_rank<rank>.npy.

A stream name becomes one safe path component: bytes outside [A-Za-z0-9._-] become '_',
a leading '.' or '-' becomes '_', an empty name "_"; a name that changed (or is longer
than 96 bytes) is cut and gets "~" and 8 hex digits of its 64-bit FNV-1a hash (the two
halves xor-ed), so two streams never share a file.
"""

MAX_STREAM_COMPONENT = 96  # kMaxStreamComponentLength
_HASH_SUFFIX = 9  # "~" + 8 hex digits
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_MASK = (1 << 64) - 1


def fnv1a_64(data):
    """64-bit FNV-1a of `data` (bytes, or a str taken as UTF-8)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & _MASK
    return h


def sanitize_stream_name(name):
    """The safe file-name component the daemon uses for stream `name` (a str)."""
    raw = name.encode("utf-8", "surrogatepass") if isinstance(name, str) else bytes(name)
    out = bytearray()
    for byte in raw:
        out.append(byte if byte in _SAFE else 0x5F)  # '_'
        if len(out) > MAX_STREAM_COMPONENT:
            break
    if not out:
        out = bytearray(b"_")
    if out[0] in (0x2E, 0x2D):  # '.' or '-'
        out[0] = 0x5F
    if bytes(out) == raw and len(out) <= MAX_STREAM_COMPONENT:
        return out.decode("ascii")
    keep = MAX_STREAM_COMPONENT - _HASH_SUFFIX
    del out[keep:]
    h = fnv1a_64(raw)
    return out.decode("ascii") + "~%08x" % ((h ^ (h >> 32)) & 0xFFFFFFFF)


def dump_path(stream, step, rank):
    """The path of stream `stream`'s dump at `step` and `rank`, relative to a run folder
    (a session directory of the daemon, or a folder given to init_dumps)."""
    return f"dumps/step_{int(step)}/{sanitize_stream_name(stream)}_rank{int(rank)}.npy"

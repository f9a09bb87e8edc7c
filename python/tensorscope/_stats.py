"""ClientStats: the client's counters (the C++ ClientStats fields) as attributes."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ClientStats:
    pushed: int = 0  # records copied into shared memory
    gated: int = 0  # skipped by every_n / max_hz or while disabled
    dropped_full: int = 0  # the ring had no room (daemon slow)
    paced: int = 0  # held back (also in gated) while the daemon is behind: see pace_note
    pace_stride: float = 1.0  # one call in pace_stride of each stream is sent (1: no pacing; 2.5: 2 in 5)
    pace_note: str = ""  # pacing in words ("" when not pacing)
    not_connected: int = 0  # no daemon at the time
    refused: int = 0  # bad input: type, dtype, size, name, failed transform or hook
    bytes: int = 0  # payload bytes pushed
    dropped_by_daemon: int = 0  # pushed, received, but not drawn (the daemon's stream limit)
    summaries_held: int = 0  # summary records waiting in the client for room in the ring (sent in order)
    evidence_held: int = 0  # whole tensors after the first NaN waiting for room in the ring (sent in order)
    evidence_lost: int = 0  # of those, the oldest past 256 MiB held (also in dropped_full)
    summaries_lost: int = 0  # summary records thinned past 32 MiB held (each tensor's first NaN and largest value kept)
    connected: bool = False  # a daemon holds this client's segment now
    connections: int = 0  # registrations so far (reconnects included)
    connection_note: str = ""  # why not connected, in words
    shm_bytes: int = 0  # the shared-memory segment in use
    shm_note: str = ""  # why the segment is smaller than shm_budget
    autostart: str = ""  # what autostart did
    cuda_transport: str = ""  # "cuda-ipc", "pinned-host", "sync-copy" or "" (no CUDA push yet)
    cuda_note: str = ""  # why CUDA IPC is not used
    cuda_ipc_pushed: int = 0
    cuda_host_pushed: int = 0
    cuda_failed: int = 0
    own_time: float = -1.0  # share of the wall time spent in tensorscope over the last 5 s (-1: not yet)
    own_time_note: str = ""  # said once when a window went over 5% (also logged)
    closed: bool = False  # the client was closed

    def __repr__(self) -> str:
        counters = (
            f"pushed={self.pushed}, gated={self.gated}, dropped_full={self.dropped_full}, "
            f"not_connected={self.not_connected}, refused={self.refused}, bytes={self.bytes}"
        )
        if self.closed:
            state = "closed"
        elif self.connected:
            state = f"connected ({self.connections} registration{'s' if self.connections != 1 else ''})"
        else:
            state = "not connected" + (f": {self.connection_note}" if self.connection_note else "")
        notes = [n for n in (self.pace_note, self.shm_note, self.autostart, self.own_time_note) if n]
        if self.summaries_held:
            notes.append(f"{self.summaries_held} summary records waiting for the daemon")
        if self.summaries_lost:
            notes.append(f"{self.summaries_lost} summary records thinned while the daemon was behind")
        if self.dropped_by_daemon:
            notes.append(f"{self.dropped_by_daemon} not drawn by the daemon (its stream limit)")
        if self.cuda_transport:
            notes.append(f"CUDA by {self.cuda_transport}" + (f" ({self.cuda_note})" if self.cuda_note else ""))
        extra = "".join(f"; {n}" for n in notes)
        return f"ClientStats({counters}; {state}{extra})"

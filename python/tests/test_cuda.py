"""CUDA tensors from Python (PyTorch's own CUDA build, handed over through DLPack) to a
daemon stand-in in another process: ipc_sink, built with the C++ CUDA tests, reads every
ring and fetches CUDA IPC payloads as a worker does, and logs what it received
(tests/integration/record_log.h). Byte for byte by CUDA IPC and by pinned host memory;
a tracked training step on the GPU that never waits for it, summaries included.

Skips without a CUDA device or without ipc_sink (a build without the CUDA toolkit)."""

import os
import select
import shutil
import struct
import subprocess
import tempfile
import time
import warnings

import pytest

from conftest import BUILD, wait_until

torch = pytest.importorskip("torch")

IPC_SINK = os.path.join(BUILD, "bin", "ipc_sink")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or not os.path.exists(IPC_SINK),
                                reason="needs a CUDA device and ipc_sink")

import tensorscope  # noqa: E402
from tensorscope import _native  # noqa: E402


class Record:
    __slots__ = ("name", "device", "step", "dtype", "kind", "by_ipc", "payload")


def read_records(path):
    """Every complete record of ipc_sink's log (a torn last one is ignored)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    records, at = [], 0
    while True:
        try:
            r = Record()
            (n,) = struct.unpack_from("<I", data, at)
            r.name = data[at + 4:at + 4 + n].decode()
            at += 4 + n
            (n,) = struct.unpack_from("<I", data, at)
            r.device = data[at + 4:at + 4 + n].decode()
            at += 4 + n
            r.step, r.dtype, r.kind, by_ipc, size = struct.unpack_from("<qBBBQ", data, at)
            at += struct.calcsize("<qBBBQ")
            if at + size > len(data):
                break
            r.by_ipc = by_ipc != 0
            r.payload = data[at:at + size]
            at += size
        except struct.error:
            break
        records.append(r)
    return records


class Sink:
    """ipc_sink for one session, logging to `log`; stopped by close()."""

    def __init__(self, root, session, host_only):
        self.runtime_dir = tempfile.mkdtemp(prefix="tscu-", dir="/tmp")  # short: sockaddr_un
        self.session = session
        self.log = os.path.join(root, session + ".log")
        argv = [IPC_SINK, self.runtime_dir, session, self.log] + (["--host-only"] if host_only else [])
        self.err_path = os.path.join(root, "sink.err")
        with open(self.err_path, "ab") as err:
            self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
        ready, _, _ = select.select([self.process.stdout], [], [], 30)
        line = self.process.stdout.readline().decode().strip() if ready else ""
        if line != "ready":
            self.close()
            raise RuntimeError(f"ipc_sink did not start: {self.errors()}")

    def errors(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()[-4000:]

    def records(self):
        return read_records(self.log)

    def client(self):
        return tensorscope.Client(session=self.session, runtime_dir=self.runtime_dir, connect_timeout_ms=5000,
                                  reconnect_interval_ms=10, shm_budget=64 << 20, cuda_staging_bytes=64 << 20)

    def close(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)


@pytest.fixture(params=[True, False], ids=["cuda_ipc", "pinned_host"])
def sink(request, tmp_path):
    s = Sink(str(tmp_path), "cu-" + ("ipc" if request.param else "host"), host_only=not request.param)
    s.ipc = request.param
    yield s
    s.close()


def host_bytes(t):
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def test_pushed_tensors_arrive_byte_for_byte(sink):
    client = sink.client()
    assert wait_until(lambda: client.connected, 10)
    expected = {}
    cuda = torch.device("cuda", 0)
    torch.manual_seed(7)

    def push(name, t):
        assert client.push(name, t) == tensorscope.PushResult.PUSHED, name
        expected[name] = host_bytes(t)

    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
                  torch.int32, torch.int64, torch.uint8, torch.bool):
        t = torch.randint(-100, 100, (37, 129), device=cuda)
        t = t.gt(0) if dtype == torch.bool else t.abs().to(dtype) if dtype == torch.uint8 else t.to(dtype)
        if dtype.is_floating_point:
            t = t * 0.37
        push(f"dtype.{str(dtype).split('.')[-1]}", t)
    m = torch.randn(2048, 2048, device=cuda)
    for _ in range(20):  # still running when pushed: the push orders its copy after them
        m = torch.tanh(m @ m * 1e-3)
    push("still_computing", m)
    push("strided", torch.randn(64, 48, device=cuda).t())
    push("sliced", torch.randn(100, 100, device=cuda)[:, 3:90:2])
    t = torch.randn(1 << 20, device=cuda)
    expected["changed_after_push"] = host_bytes(t)
    assert client.push("changed_after_push", t) == tensorscope.PushResult.PUSHED
    t.mul_(3).add_(1)  # what arrives is the value at push
    push("freed_after_push", torch.randn(1 << 20, device=cuda))
    for _ in range(8):  # the caching allocator hands the freed block on
        torch.full((1 << 20,), 42.0, device=cuda).sum().item()

    assert wait_until(lambda: len(sink.records()) >= len(expected), 20), \
        f"{len(sink.records())} of {len(expected)} records arrived; {sink.errors()}"
    records = sink.records()
    assert sorted(r.name for r in records) == sorted(expected)
    for r in records:
        assert r.device == "cuda0", r.name
        assert r.by_ipc == sink.ipc, r.name
        assert r.payload == expected[r.name], f"{r.name}: payload differs"
    s = client.stats()
    assert s.cuda_transport == ("cuda-ipc" if sink.ipc else "pinned-host"), s.cuda_note
    assert (s.cuda_ipc_pushed if sink.ipc else s.cuda_host_pushed) == len(expected)
    assert s.cuda_failed == 0 and s.dropped_full == 0
    client.close()


def test_tracked_step_never_waits_for_the_gpu(sink):
    """With about a second of matrix products queued ahead of it, a tracked step (full
    tensors and summaries every step) returns to Python long before the GPU has run it,
    and PyTorch's sync debug mode sees no synchronizing call in it."""
    client = sink.client()
    assert wait_until(lambda: client.connected, 10)
    cuda = torch.device("cuda", 0)
    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(cuda)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    client.track_model("net", net, stats_every=1)
    client.track_layer("net", net, stats_every=1)
    x = torch.randn(64, 256, device=cuda)
    y = torch.randint(0, 10, (64,), device=cuda)

    def step(s):
        client.set_step(s)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()

    for s in range(4):  # warm-up: staging pools, pinned blocks, kernels
        step(s)
    torch.cuda.synchronize()

    m = torch.randn(8192, 8192, device=cuda) / 90.5
    a = m
    t = time.perf_counter()
    for _ in range(4):
        a = a @ m
    torch.cuda.synchronize()
    products = min(400, max(8, int(1.0 / ((time.perf_counter() - t) / 4))))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        for _ in range(products):
            a = a @ m
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step(4)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        host = time.perf_counter() - t
    torch.cuda.synchronize()
    gpu = time.perf_counter() - t
    print(f"{products} products queued; the tracked step returned at {host * 1e3:.1f} ms, "
          f"the GPU finished at {gpu * 1e3:.1f} ms")
    # PyTorch's words for a synchronizing call ("called a synchronizing CUDA operation");
    # not its note that the mode is a prototype.
    syncs = [str(w.message) for w in caught if "called a synchronizing" in str(w.message)]
    assert not syncs, syncs
    assert gpu > 0.3, "the queued work was too short to tell"
    assert host < gpu / 2, "the tracked step waited for the GPU"

    summary = _native.RECORD_KINDS["summary"]
    tensor_kinds = set(_native.TENSOR_KINDS.values())
    assert wait_until(lambda: sum(r.kind == summary for r in sink.records()) >= 5, 20), sink.errors()
    full = [r for r in sink.records() if r.kind in tensor_kinds]
    assert all(r.by_ipc == sink.ipc and r.device == "cuda0" for r in full)
    assert len(full) >= 5 * 4  # outputs of net.0 and net.2 and their gradients, 5 steps
    s = client.stats()
    assert s.cuda_failed == 0 and s.dropped_full == 0
    client.close()


def test_native_hooks_with_this_torch(sink, monkeypatch):
    """The tracks' output hooks in C (python/native/output_hook.h) with this machine's
    PyTorch: a CPU model's outputs and gradients go native and arrive byte for byte; a CUDA
    model's go to the Python hooks and arrive from the GPU."""
    from test_output_hooks import Probe, mlp, outputs_of, reference_grads

    probe = Probe(monkeypatch)  # by_root: model -> [outputs, gradients] the Python hooks took
    client = sink.client()
    assert wait_until(lambda: client.connected, 10)
    cpu_model, gpu_model = mlp(), mlp().cuda()
    for model, name in ((cpu_model, "m"), (gpu_model, "g")):
        client.track_model(name, model)  # outputs, every step whole and summarised
        client.track_layer(name, model)  # and their gradients
    inputs = [torch.randn(4, 6) for _ in range(4)]
    for step, x in enumerate(inputs):
        if step == 1:  # step 0 may take the Python hooks (tensorscope/_step_zero.py)
            probe.by_root.clear()
        client.set_step(step)
        cpu_model(x).sum().backward()
        gpu_model(x.cuda()).sum().backward()
    torch.cuda.synchronize()
    assert probe.by_root.get(cpu_model, [0, 0]) == [0, 0]
    assert probe.by_root[gpu_model][0] >= 3 * 2 and probe.by_root[gpu_model][1] >= 3 * 2

    expected = {}
    for step, x in enumerate(inputs):
        first, last = outputs_of(cpu_model, x)
        g_first, g_last = reference_grads(cpu_model, x)
        for name, values in (("m.0", first), ("m.2", last), ("m.0.grad", g_first), ("m.2.grad", g_last)):
            expected[(name, step)] = values.tobytes()
    tensor_kinds = set(_native.TENSOR_KINDS.values())

    def tensors(prefix):
        return [r for r in sink.records() if r.kind in tensor_kinds and r.name.startswith(prefix)]

    assert wait_until(lambda: len(tensors("m.")) >= len(expected) and len(tensors("g.")) >= len(expected), 20), \
        f"{len(tensors('m.'))} CPU and {len(tensors('g.'))} GPU records of {len(expected)} each: " \
        f"{sorted((r.name, r.step) for r in tensors('m.'))}; {client.stats()}; {sink.errors()}"
    cpu = {(r.name, r.step): r for r in tensors("m.")}
    assert sorted(cpu) == sorted(expected)
    for key, r in cpu.items():
        assert r.device == "cpu" and r.payload == expected[key], key
    gpu = tensors("g.")
    assert sorted((r.name, r.step) for r in gpu) == sorted(("g" + name[1:], step) for name, step in expected)
    assert all(r.device == "cuda0" and r.by_ipc == sink.ipc for r in gpu)
    summary = _native.RECORD_KINDS["summary"]
    assert wait_until(lambda: sum(r.kind == summary for r in sink.records()) >= 2 * len(inputs), 20), sink.errors()
    s = client.stats()
    assert s.refused == 0 and s.cuda_failed == 0 and s.dropped_full == 0
    client.close()

"""tensorscope.init_dumps / dump (no daemon) and tensorscope.compare: dump files named and
written byte for byte as the daemon's .npy sink writes them, readable by numpy and by
`tensorscope compare`; compare's result the same as the command's (exit codes
included) on the same files."""

import io
import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import torch

import tensorscope
from tensorscope import _dumps
from conftest import BUILD, CLI, built


def sample(dtype, shape=(3, 5)):
    g = torch.Generator().manual_seed(11)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape, generator=g).to(dtype)


def npy_files(folder):
    """{relative path: bytes} of the .npy files under `folder`."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            if name.endswith(".npy"):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    out[os.path.relpath(path, folder)] = f.read()
    return out


def cli_compare(a, b, *options):
    r = subprocess.run([built(CLI), "compare", str(a), str(b), "--json", *options], capture_output=True, text=True,
                       timeout=120)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr


def test_dumps_equal_the_daemons_files_byte_for_byte(daemon, tmp_path):
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    tensors = {f"t_{str(d).replace('torch.', '')}": sample(d) for d in (
        torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16, torch.int32,
        torch.int64, torch.uint8, torch.bool)}
    tensors.update({
        "model/fc": base.transpose(0, 2),  # a name the daemon makes safe, a view
        "net.fc.in[0]": base[:, 1:3, ::2],
        ".hidden name": torch.tensor(2.5),  # 0-d
        "x" * 120: torch.zeros(0, 3),  # cut and hashed; empty
        "grad": (base * 2).requires_grad_(),
        "neg": torch._neg_view(base),
    })
    run = tensorscope.init_dumps(tmp_path / "run", rank=0)
    with tensorscope.Client(**daemon.client_options()) as scope:
        for name, t in tensors.items():
            assert scope.push(name, t) == tensorscope.PushResult.PUSHED, name
            result = tensorscope.dump(t, name)
            assert result and result.error == "" and os.path.isfile(result.path), (name, result)
        arrays = {"np_f64": np.linspace(0, 1, 7), "np_strided": np.arange(24, dtype=np.int32).reshape(4, 6)[::2, ::-1]}
        for name, a in arrays.items():
            assert scope.push(name, a) == tensorscope.PushResult.PUSHED
            assert run.dump(a, name, step=0)
    daemon.stop()
    ours, theirs = npy_files(tmp_path / "run"), npy_files(daemon.session_dir)
    assert len(ours) == len(tensors) + len(arrays)
    assert sorted(ours) == sorted(theirs)  # the same names: dumps/step_0/<safe stream>_rank0.npy
    for path, data in ours.items():
        assert data == theirs[path], path
    # numpy reads them; the values are the tensors'
    for name, t in tensors.items():
        got = np.load(os.path.join(run.folder, _dumps.dump_path(name, 0, 0)))
        if t.dtype == torch.bfloat16:
            assert np.array_equal(got["bfloat16"], t.view(torch.int16).numpy().view(np.uint16)), name
        else:
            assert np.array_equal(got, t.detach().resolve_neg().numpy()), name
            assert got.dtype == t.detach().resolve_neg().numpy().dtype
    # the command compares them with the daemon's: everything matches
    code, doc, _ = cli_compare(tmp_path / "run", daemon.session_dir)
    assert code == 0 and doc["matched"] == len(ours), doc
    result = tensorscope.compare(tmp_path / "run", daemon.session_dir, atol=0, rtol=0)
    assert result and result.exit_code == 0 and result.matched == len(ours)


def test_header_steps_run_info_and_failures(tmp_path, capfd):
    t = torch.arange(15, dtype=torch.float32).reshape(3, 5)
    buf = io.BytesIO()
    np.save(buf, t.numpy())
    _dumps.write_npy(tmp_path / "t.npy", _dumps.prepared(t))
    assert (tmp_path / "t.npy").read_bytes() == buf.getvalue()  # numpy's own layout, from the C++ writer
    for shape in [(), (7,), (2, 3, 4)]:
        _dumps.write_npy(tmp_path / "s.npy", _dumps.prepared(torch.zeros(shape, dtype=torch.int64)))
        data = (tmp_path / "s.npy").read_bytes()
        header = data[: len(data) - 8 * max(1, int(np.prod(shape)))]
        assert len(header) % 64 == 0 and header.endswith(b"\n") and np.load(tmp_path / "s.npy").shape == shape

    run = tensorscope.init_dumps(tmp_path / "a", rank=3)
    for i in range(3):
        assert tensorscope.dump(t + i, "w").path.endswith(f"dumps/step_{i}/w_rank3.npy")
    assert tensorscope.dump(t, "w", step=10).path.endswith("dumps/step_10/w_rank3.npy")
    assert tensorscope.dump(t, "w").path.endswith("dumps/step_4/w_rank3.npy")  # the 5th dump of "w"
    assert np.array_equal(np.load(os.path.join(run.folder, "dumps/step_2/w_rank3.npy")), (t + 2).numpy())
    with open(os.path.join(run.folder, "run_info.json")) as f:
        info = json.load(f)
    assert info["pid"] == os.getpid() and info["rank"] == 3
    assert info["dumps"]["layout"] == "dumps/step_<step>/<stream>_rank<rank>.npy"
    assert {"python", "torch", "numpy", "tensorscope"} <= set(info["versions"])
    before = os.stat(os.path.join(run.folder, "run_info.json"))
    again = tensorscope.init_dumps(tmp_path / "a", rank=4)  # another rank of the run: run_info stays
    after = os.stat(os.path.join(run.folder, "run_info.json"))
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    assert stat.S_IMODE(after.st_mode) & 0o044  # readable like the daemon's .npy files
    assert again.dump(t, "w").path.endswith("dumps/step_0/w_rank4.npy")
    leftovers = [n for _, _, files in os.walk(tmp_path) for n in files if n.startswith(".tmp-")]
    assert leftovers == []

    capfd.readouterr()
    bad = [
        (torch.zeros(2, dtype=torch.complex64), "complex64 is not supported"),
        ("text", "cannot dump an object of type str"),
        (np.zeros(2, dtype=np.uint16), "numpy dtype uint16 is not supported"),
        (torch.eye(2).to_sparse(), "only dense"),
    ]
    for value, why in bad:
        result = tensorscope.dump(value, "bad")
        assert not result and result.path is None and why in result.error, result
    assert not tensorscope.dump(t, "")
    assert "must be a non-empty str" in tensorscope.dump(t, 3).error
    assert "step must be" in tensorscope.dump(t, "w", step=-1).error
    (tmp_path / "file").write_text("not a folder")
    blocked = tensorscope.init_dumps(tmp_path / "file" / "run")  # cannot be made: reported, not raised
    assert "cannot use" in blocked.error
    result = blocked.dump(t, "w")
    assert not result and "NotADirectoryError" in result.error
    err = capfd.readouterr().err
    assert err.count("dump 'bad' failed") == 1  # once per stream
    assert "cannot use" in err
    with pytest.raises(TypeError):
        tensorscope.init_dumps(5)
    with pytest.raises(ValueError):
        tensorscope.init_dumps(tmp_path, rank=-1)


def test_dump_before_init_dumps(tmp_path):
    script = "import torch, tensorscope\nr = tensorscope.dump(torch.ones(2), 'x')\nprint(bool(r), r.error)\n"
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "False tensorscope.init_dumps(folder) was not called\n"
    assert "tensorscope: dump 'x' failed: tensorscope.init_dumps(folder) was not called" in r.stderr


def as_cli_entries(result):
    """The result's entries in the command's JSON form (fields it writes only)."""
    out = []
    for e in result.entries:
        d = {k: v for k, v in e._asdict().items() if v is not None}
        for key in ("shape_a", "shape_b"):
            if key in d:
                d[key] = list(d[key])
        out.append(d)
    return out


def test_compare_agrees_with_the_command(tmp_path, monkeypatch):
    a = tensorscope.init_dumps(tmp_path / "A", rank=0)
    b = tensorscope.init_dumps(tmp_path / "B", rank=0)
    x = torch.linspace(-1, 1, 12).reshape(3, 4)
    for step in range(3):
        a.dump(x * step, "fc", step=step)
        a.dump(x + step, "fc.grad", step=step)
        b.dump(x * step, "fc", step=step)
        b.dump(x + step if step < 2 else (x + step).index_put_((torch.tensor(1), torch.tensor(2)),
                                                               torch.tensor(9.0)), "fc.grad", step=step)
    a.dump(x, "only_a", step=1)
    b.dump(x.t(), "shape", step=1)
    a.dump(x, "shape", step=1)
    cases = {
        "folders": (tmp_path / "A", tmp_path / "B", {}),
        "folders_loose": (tmp_path / "A", tmp_path / "B", {"atol": 20.0}),
        "same": (tmp_path / "A", tmp_path / "A", {}),
        "files": (tmp_path / "A/dumps/step_2/fc.grad_rank0.npy", tmp_path / "B/dumps/step_2/fc.grad_rank0.npy",
                  {"atol": 0.5, "rtol": 0.0}),
        "missing": (tmp_path / "A", tmp_path / "nothing", {}),
        "file_vs_folder": (tmp_path / "A/dumps/step_0/fc_rank0.npy", tmp_path / "B", {}),
    }
    results = {}
    for case, (left, right, tol) in cases.items():
        options = []
        for key, value in tol.items():
            options += [f"--{key}", repr(value)]
        code, doc, err = cli_compare(left, right, *options)
        result = tensorscope.compare(left, right, **tol)
        results[case] = result
        assert result.exit_code == code, case
        assert result.verdict == {0: "match", 1: "differ", 2: "error"}[code]
        assert bool(result) == (code == 0)
        if doc is None:
            assert result.entries == [] and result.error == err.strip() and result.error, case
            continue
        assert as_cli_entries(result) == doc["entries"], case
        assert (result.matched, result.differed, result.only_in_a, result.only_in_b, result.unreadable) == (
            doc["matched"], doc["differed"], doc["only_in_a"], doc["only_in_b"], doc["unreadable"]), case
        first = result.first_divergence
        assert (first.name if first else None) == doc.get("first_divergence"), case
        assert (result.atol, result.rtol) == (doc["atol"], doc["rtol"])
    folders = results["folders"]
    assert [(e.name, e.verdict) for e in folders.entries] == [
        ("dumps/step_0/fc.grad_rank0.npy", "MATCH"), ("dumps/step_0/fc_rank0.npy", "MATCH"),
        ("dumps/step_1/fc.grad_rank0.npy", "MATCH"), ("dumps/step_1/fc_rank0.npy", "MATCH"),
        ("dumps/step_1/only_a_rank0.npy", "ONLY_A"), ("dumps/step_1/shape_rank0.npy", "SHAPE"),
        ("dumps/step_2/fc.grad_rank0.npy", "DIFFER"), ("dumps/step_2/fc_rank0.npy", "MATCH"),
    ]
    assert folders.first_divergence.name == "dumps/step_1/only_a_rank0.npy" and folders.first_divergence.step == 1
    grad = folders.entries[6]
    assert (grad.mismatches, grad.first_mismatch, grad.total) == (1, 6, 12)
    assert grad.max_abs_error == pytest.approx(9.0 - (x[1, 2].item() + 2), rel=1e-6)
    assert results["folders_loose"].exit_code == 1  # tolerance does not pair what is missing
    assert results["same"].exit_code == 0 and results["same"].matched == 8
    assert results["files"].exit_code == 1 and results["files"].entries[0].mismatches == 1
    assert results["missing"].exit_code == 2 and "nothing" in results["missing"].error
    assert results["file_vs_folder"].exit_code == 2
    assert repr(folders).startswith("CompareResult(differ: 5 matched, 2 differed, 1 only in A, 0 only in B")

    # An unreadable file in a folder: reported as an entry, exit 2 (the command's meaning).
    bad = tmp_path / "B/dumps/step_0/fc_rank0.npy"
    bad.write_bytes(bad.read_bytes()[:-4])
    code, doc, _ = cli_compare(tmp_path / "A", tmp_path / "B")
    broken = tensorscope.compare(tmp_path / "A", tmp_path / "B")
    assert code == broken.exit_code == 2 and broken.verdict == "error" and broken.unreadable == 1
    assert as_cli_entries(broken) == doc["entries"]
    assert [e.verdict for e in broken.entries if e.name == "dumps/step_0/fc_rank0.npy"] == ["ERROR"]

    # Which command runs: cli= or $TENSORSCOPE_CLI when set, and nothing else.
    with pytest.raises(FileNotFoundError, match="cli"):
        tensorscope.compare(tmp_path / "A", tmp_path / "A", cli=str(tmp_path / "no-such-tool"))
    log = tmp_path / "argv.txt"
    wrapper = tmp_path / "wrapper.sh"
    wrapper.write_text(f'#!/bin/sh\necho "$@" > {log}\nexec {built(CLI)} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("TENSORSCOPE_CLI", str(wrapper))
    monkeypatch.chdir(tmp_path)
    os.rename("A", "-A")  # a path that looks like an option
    assert tensorscope.compare("-A", "-A", rtol=0.5).exit_code == 0
    assert log.read_text() == "compare ./-A ./-A --atol 1e-08 --rtol 0.5 --json\n"
    monkeypatch.setenv("TENSORSCOPE_CLI", str(tmp_path / "no-such-tool"))
    with pytest.raises(FileNotFoundError, match="TENSORSCOPE_CLI"):
        tensorscope.compare("-A", "-A")


def test_compare_tensors_and_arrays(tmp_path, monkeypatch):
    built(CLI)  # tensorscope.compare runs the command
    import tempfile
    temp = tmp_path / "temp"  # (this test's own: other tests running at once make theirs in the system's)
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    x = torch.linspace(0, 1, 6).reshape(2, 3)
    same = tensorscope.compare(x, x.clone())
    assert same and same.exit_code == 0 and same.entries[0].verdict == "MATCH"
    off = tensorscope.compare(x, x + 1, atol=0.5)
    assert off.exit_code == 1 and off.entries[0].mismatches == 6
    assert off.entries[0].max_abs_error == ((x + 1).double() - x.double()).abs().max().item()  # in double
    assert tensorscope.compare(x.t(), x).entries[0].verdict == "SHAPE"
    np.save(tmp_path / "x.npy", x.numpy())
    assert tensorscope.compare(tmp_path / "x.npy", x.double().numpy(), rtol=0).exit_code == 0  # dtypes may differ
    torch.save(x, tmp_path / "x.pt")
    assert tensorscope.compare(x, tmp_path / "x.pt").exit_code == 0
    with pytest.raises(TypeError, match="complex"):
        tensorscope.compare(torch.zeros(2, dtype=torch.complex64), x)
    with pytest.raises(TypeError, match="list"):
        tensorscope.compare([1, 2], x)
    # no temporary file stays behind (and the calls above did make some: a tensor has no file)
    assert not os.listdir(temp)

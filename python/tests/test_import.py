"""`import tensorscope` imports neither torch nor pandas; reading tables and compare on
files work where torch cannot be imported; the names that touch tensors load on use."""

import os
import subprocess
import sys

import numpy as np

from conftest import CLI, built


def run(code, cwd):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_import_loads_neither_torch_nor_pandas(tmp_path):
    r = run("import sys, tensorscope; print('torch' in sys.modules, 'pandas' in sys.modules, "
            "sorted(set(tensorscope.__all__) - set(dir(tensorscope))))", tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[0] == "False False []", r.stdout


def test_compare_and_tables_work_without_torch(tmp_path):
    built(CLI)  # tensorscope.compare runs the command
    np.save(tmp_path / "a.npy", np.arange(6, dtype=np.float32))
    np.save(tmp_path / "b.npy", np.arange(6, dtype=np.float32))
    code = """
import sys
sys.modules['torch'] = None  # import torch raises ImportError from here on
import tensorscope
result = tensorscope.compare('a.npy', 'b.npy')
assert result.ok, result
assert tensorscope.read_anomalies('.') == []
try:
    tensorscope.read_stats('.')
except FileNotFoundError:
    pass
try:
    tensorscope.Client
except ImportError as e:
    print('Client needs torch:', e)
else:
    raise SystemExit('Client imported without torch')
"""
    r = run(code, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Client needs torch" in r.stdout


def test_the_lazy_names_are_the_real_ones():
    import tensorscope
    from tensorscope._client import Client

    assert tensorscope.Client is Client
    assert "Client" in dir(tensorscope)
    try:
        tensorscope.NoSuchName
    except AttributeError as e:
        assert "NoSuchName" in str(e)
    else:
        raise AssertionError("no AttributeError")

"""The package is typed (py.typed, annotations, a stub for _native): a user script that
uses every public name passes `mypy --strict`, a wrong annotation in it is caught, and
the script runs."""

import inspect
import os
import shutil
import subprocess
import sys

import pytest

import tensorscope
from conftest import CLI, built

SCRIPT = os.path.join(os.path.dirname(__file__), "typing", "user_script.py")
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tensorscope.__file__)))


def mypy(path, tmp_path):
    if shutil.which("mypy") is None:
        pytest.skip("mypy is not installed (scripts/install_deps.sh installs Debian's)")
    env = dict(os.environ, MYPYPATH=PACKAGE_PARENT)
    return subprocess.run(["mypy", "--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
                           "--no-error-summary", path], capture_output=True, text=True, env=env, timeout=600)


def test_the_package_is_marked_typed():
    here = os.path.dirname(tensorscope.__file__)
    assert os.path.exists(os.path.join(here, "py.typed"))
    assert os.path.exists(os.path.join(here, "_native.pyi"))


def test_a_user_script_passes_mypy_strict_and_a_mistake_in_it_does_not(tmp_path):
    result = mypy(SCRIPT, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    wrong = tmp_path / "wrong.py"
    with open(SCRIPT) as f:
        text = f.read()
    assert "        rank: int = scope.rank" in text
    wrong.write_text(text.replace("        rank: int = scope.rank", "        rank: str = scope.rank"))
    result = mypy(str(wrong), tmp_path)
    assert result.returncode == 1 and 'has type "int", variable has type "str"' in result.stdout, result.stdout


def test_the_user_script_runs():
    built(CLI)  # the script calls tensorscope.compare, which runs the command
    result = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_public_name_and_method_has_a_docstring():
    missing = []
    for public in tensorscope.__all__:
        obj = getattr(tensorscope, public)
        if callable(obj) and not (obj.__doc__ or "").strip():
            missing.append(public)
        if inspect.isclass(obj):
            for name, member in vars(obj).items():
                function = member.fget if isinstance(member, property) else member
                if not name.startswith("_") and callable(function) and not (function.__doc__ or "").strip():
                    missing.append(f"{public}.{name}")
    assert not missing, f"no docstring: {missing}"
    assert "Tracks the forward output of every submodule" in tensorscope.Client.track_model.__doc__

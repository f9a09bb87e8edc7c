"""docs.examples: the user documentation stays true. Its Python examples run (a page's
blocks in order, after prelude.py, beside a real tensorscoped of session exp1), its YAML
configs load (tensorscoped --check-config), the options its shell lines give exist
(--help of the command), the tables name every render mode, cast format and client
option the code defines, and docs/architecture.md's link graph is the build's. A block is skipped only with a reason (doc_blocks.NOT_RUN)."""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

import pytest

from doc_blocks import NOT_RUN, PAGES, REPO, all_blocks, blocks

BUILD = os.environ.get("TENSORSCOPE_BUILD_DIR", os.path.join(REPO, "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
DAEMON = os.path.join(BUILD, "bin", "tensorscoped")
CLI = os.path.join(BUILD, "bin", "tensorscope")
HERE = os.path.dirname(os.path.abspath(__file__))

# Runs a page's blocks in order in one namespace. Between two blocks it waits (a minute at
# most) until the daemon has read every record the session's producers pushed, as a reader
# of the daemon's tables after a run finds them: a block that reads them follows the one
# that trained.
RUNNER = """
import json, subprocess, sys, time
blocks = json.load(open(sys.argv[1]))
cli = sys.argv[2]

def caught_up():
    r = subprocess.run([cli, "status", "--session", "exp1", "--json"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return False
    return all(p["received"] + p["dropped_invalid"] >= p["pushed"] for p in json.loads(r.stdout)["producers"])

namespace = {"__name__": "__main__"}
for i, (where, code) in enumerate(blocks):
    if i > 1:
        deadline = time.monotonic() + 60
        while not caught_up() and time.monotonic() < deadline:
            time.sleep(0.05)
    exec(compile(code, where, "exec"), namespace)
"""


def python_pages():
    return [p for p in PAGES if any(b.lang == "python" and b.run for b in blocks(p))]


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def daemon(tmp_path):
    """tensorscoped for session exp1, its outputs in tmp_path/tensorscope_runs (where the
    examples look), stopped (every file finalized) after the test."""
    runtime = tempfile.mkdtemp(prefix="tsdoc-", dir="/tmp")
    log = open(tmp_path / "tensorscoped.log", "wb")
    process = subprocess.Popen([DAEMON, "--session", "exp1", "--output", str(tmp_path / "tensorscope_runs"),
                                "--runtime-dir", runtime], stdout=log, stderr=subprocess.STDOUT)
    status = [CLI, "status", "--session", "exp1", "--runtime-dir", runtime, "--json"]
    started = wait_until(lambda: process.poll() is not None or subprocess.run(status, capture_output=True).returncode == 0,
                         60)
    assert started and process.poll() is None, (tmp_path / "tensorscoped.log").read_text()
    yield runtime
    process.terminate()
    process.wait(timeout=120)
    log.close()


def test_every_skipped_block_says_why():
    for block in all_blocks():
        if not block.run:
            previous = open(block.page).read().split("\n")[block.line - 2]
            assert len(previous.strip()) > len(NOT_RUN) + len(" -->") + 3, f"{block.where}: no reason given"


@pytest.mark.parametrize("page", python_pages(), ids=lambda p: os.path.relpath(p, REPO))
def test_python_examples_run(page, tmp_path, daemon):
    code = [("docs/prelude.py", open(os.path.join(HERE, "prelude.py")).read())]
    code += [(b.where, b.code) for b in blocks(page) if b.lang == "python" and b.run]
    (tmp_path / "blocks.json").write_text(json.dumps(code))
    env = dict(os.environ, TENSORSCOPE_RUNTIME_DIR=daemon, TENSORSCOPE_DAEMON=DAEMON,
               PYTHONPATH=os.path.join(BUILD, "python"))
    r = subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path / "blocks.json"), CLI], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=540)
    assert r.returncode == 0, f"{os.path.relpath(page, REPO)}'s examples failed:\n{r.stdout}\n{r.stderr}"


def test_yaml_configs_load(tmp_path):
    configs = [b for b in all_blocks("yaml") if b.run]
    assert configs, "no YAML examples found"
    for block in configs:
        path = tmp_path / "example.yaml"
        path.write_text(block.code)
        r = subprocess.run([DAEMON, "--check-config", "--config", str(path)], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, f"{block.where}: {r.stderr}"


def _help(command):
    r = subprocess.run(command + ["--help"], capture_output=True, text=True, timeout=60)
    return r.stdout + r.stderr


def test_shell_lines_name_real_programs_and_options():
    helps = {}
    checked = 0
    for block in all_blocks("sh"):
        for line in block.code.split("\n"):
            line = line.split(" #")[0].strip()
            if not line or line.startswith("#"):
                continue
            words = shlex.split(line)
            program = os.path.basename(words[0])
            if words[0].startswith(("scripts/", "./scripts/")):
                assert os.path.exists(os.path.join(REPO, words[0])), f"{block.where}: {words[0]} does not exist"
            if words[0].startswith("build/bin/"):
                assert os.path.exists(os.path.join(BUILD, "bin", program)), f"{block.where}: no {words[0]}"
            if program == "tensorscoped":
                command = [DAEMON]
            elif program == "tensorscope" and len(words) > 1:
                command = [CLI, words[1]]
            else:
                continue
            key = " ".join(command)
            if key not in helps:
                helps[key] = _help(command)
            for word in words:
                if word.startswith("--"):
                    flag = word.split("=")[0]
                    assert flag in helps[key], f"{block.where}: {' '.join(words[:2])} has no {flag}"
                    checked += 1
    assert checked >= 10


def test_every_render_mode_has_its_row():
    from tensorscope import _native

    table = open(os.path.join(REPO, "docs", "user", "render_modes.md")).read()
    for mode in _native.RENDER_MODES:
        if mode != "default":
            assert f"| `{mode}` |" in table, f"render mode {mode} has no row in docs/user/render_modes.md"


def test_the_architectures_link_graph_is_the_builds():
    """docs/architecture.md's table of the parts' links against the one the build wrote
    (cmake/link_graph.cmake)."""
    import re

    with open(os.path.join(BUILD, "link_graph.txt")) as f:
        built = {part: set(links.split()) for part, links in (line.split(":") for line in f.read().splitlines())}
    text = open(os.path.join(REPO, "docs", "architecture.md")).read()
    documented = {}
    for row in re.findall(r"^\| `([a-z_]+)` \|([^\n]*)\|$", text, re.M):
        documented[row[0]] = set(re.findall(r"`([a-z_]+)`", row[1]))
    differences = {part: {"documented": documented.get(part), "built": built.get(part)}
                   for part in set(documented) | set(built) if documented.get(part) != built.get(part)}
    assert not differences, differences


def test_every_cast_format_has_its_row():
    from tensorscope import _native

    table = open(os.path.join(REPO, "docs", "user", "summaries.md")).read()
    for name in _native.CAST_FORMATS:
        assert f"| `{name}` |" in table, f"cast format {name} has no row in docs/user/summaries.md"


def test_every_client_option_is_documented():
    from tensorscope import _native

    text = open(os.path.join(REPO, "docs", "user", "cpp.md")).read() + open(
        os.path.join(REPO, "docs", "user", "python.md")).read()
    for option in _native.CLIENT_OPTIONS:
        assert f"`{option}`" in text, f"client option {option} is not named in docs/user/cpp.md or python.md"


def test_every_track_option_is_documented():
    from tensorscope import _native

    text = open(os.path.join(REPO, "docs", "user", "python.md")).read()
    for option in _native.TRACK_OPTIONS:
        assert f"`{option}" in text, f"track option {option} is not named in docs/user/python.md"

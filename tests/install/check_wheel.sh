#!/usr/bin/env bash
# The wheel as a Python user gets it: built from python/ (python3 -m build, reusing the
# configured BUILD_DIR), installed into a fresh --system-site-packages venv, used from
# another directory without PYTHONPATH (autostart starts the bundled daemon; videos with
# the pushed frame counts; the venv's `tensorscope status`, `tensorscope compare` and
# `tensorscoped`), then uninstalled without a trace.
#   check_wheel.sh BUILD_DIR SOURCE_DIR PYTHON
set -euo pipefail
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
python=$3
work=$(mktemp -d /tmp/ts-wheel-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_wheel: $*" >&2; exit 1; }

# 1. The wheel: one file with the package, the extension and both executables.
TENSORSCOPE_CMAKE_BUILD_DIR="$build_dir" "$python" -m build --wheel --no-isolation --outdir "$work/dist" \
  "$source_dir/python" > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; fail "python3 -m build failed"; }
wheel=$(ls "$work"/dist/tensorscope-*.whl)
version=$(sed -n 's/^project(tensorscope VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
case "$(basename "$wheel")" in
  "tensorscope-$version-cp39-abi3-linux_"*.whl) ;;
  *) fail "unexpected wheel name $(basename "$wheel") (version $version, stable ABI, this platform)" ;;
esac
SOURCE_DIR="$source_dir" "$python" - "$wheel" <<'PY' || fail "the wheel's contents"
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
for need in ("tensorscope/__init__.py", "tensorscope/_native.abi3.so", "tensorscope/bin/tensorscoped",
             "tensorscope/bin/tensorscope", "tensorscope/_build_info.py", "tensorscope/py.typed"):
    assert need in names, f"{need} is not in the wheel"
import os
package = os.path.join(os.environ["SOURCE_DIR"], "python", "tensorscope")
sources = {os.path.relpath(os.path.join(d, f), package) for d, _, files in os.walk(package) for f in files
           if f.endswith(".py") and "__pycache__" not in d}
packaged = {n.split("/", 1)[1] for n in names if n.startswith("tensorscope/") and n.endswith(".py")}
assert packaged == sources | {"_build_info.py"}, f"modules not in the sources: {packaged - sources}; missing: {sources - packaged}"
meta = [n for n in names if n.endswith(".dist-info/METADATA")]
text = zipfile.ZipFile(sys.argv[1]).read(meta[0]).decode()
assert "Summary: Watch the tensors" in text and "Requires-Python: >=3.9" in text, text[:800]
entry = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
points = zipfile.ZipFile(sys.argv[1]).read(entry[0]).decode()
assert "tensorscope = tensorscope._commands:cli" in points and "tensorscoped = tensorscope._commands:daemon" in points, points
PY

# 2. A fresh venv that sees the system's torch; the wheel, with no index to reach.
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-index --no-cache-dir "$wheel" > "$work/pip.log" 2>&1 || { cat "$work/pip.log"; fail "pip install"; }
"$work/venv/bin/pip" show tensorscope > "$work/show.txt" || fail "pip show"
grep -q "^Version: $version" "$work/show.txt" || fail "pip show: no version $version: $(cat "$work/show.txt")"

# 3. Training from another directory, no PYTHONPATH: autostart runs the bundled daemon,
#    which writes where the docs say (./tensorscope_runs/<session>).
mkdir -p "$work/run" "$work/rt"
chmod 700 "$work/rt"
session="wheel$$"
(cd "$work/run" && env -u PYTHONPATH TENSORSCOPE_RUNTIME_DIR="$work/rt" "$work/venv/bin/python" - "$session" <<'PY') \
  > "$work/train.json" || fail "the training script"
import json, os, sys
import torch
from torch import nn
import tensorscope
from tensorscope import _build_info
assert os.path.realpath(tensorscope.__file__).startswith(os.path.realpath(sys.prefix)), tensorscope.__file__
assert os.path.realpath(_build_info.DAEMON).startswith(os.path.realpath(sys.prefix)), _build_info.DAEMON
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
with tensorscope.Client(session=sys.argv[1], autostart=True, autostart_idle_exit_ms=60000) as scope:
    scope.track_model("net", model, every_n=1)
    for step in range(20):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        scope.next_step()
    stats = scope.stats()
print(json.dumps({"pushed": stats.pushed, "dropped": stats.dropped_full + stats.refused + stats.not_connected}))
PY
"$python" - "$work/train.json" "$work/run/tensorscope_runs/$session" <<'PY' || fail "the videos"
import json, os, struct, sys, time
result = json.load(open(sys.argv[1]))
assert result["pushed"] > 0 and result["dropped"] == 0, result
session_dir = sys.argv[2]

def listed():
    try:
        return json.load(open(os.path.join(session_dir, "index.json")))["files"]
    except (OSError, ValueError):
        return []

def fragments(path):  # fragmented MP4: one moof box per frame
    count, data = 0, open(path, "rb").read()
    at = 0
    while at + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[at:at + 8])
        if size < 8:
            break
        count += kind == b"moof"
        at += size
    return count

def frames(stream):
    return sum(f["frames"] for f in listed() if f["stream"] == stream and f["path"].endswith(".mp4"))

deadline = time.monotonic() + 120  # (index.json lists each stream's frames as its worker draws them)
while time.monotonic() < deadline:
    if frames("net.0") >= 20 and frames("net.2") >= 20:
        break
    time.sleep(0.2)
videos = [f for f in listed() if f["stream"] in ("net.0", "net.2") and f["path"].endswith(".mp4")]
assert {f["stream"] for f in videos} == {"net.0", "net.2"}, listed()
for stream in ("net.0", "net.2"):
    files = [f for f in videos if f["stream"] == stream]
    assert sum(f["frames"] for f in files) == 20, files
    assert sum(fragments(os.path.join(session_dir, f["path"])) for f in files) == 20, files
PY

# 4. The venv's commands: status (the autostarted daemon), compare, the daemon's help.
TENSORSCOPE_RUNTIME_DIR="$work/rt" "$work/venv/bin/tensorscope" status --session "$session" > "$work/status.txt" \
  || fail "tensorscope status"
grep -q "session $session" "$work/status.txt" || fail "tensorscope status: $(head -3 "$work/status.txt")"
(cd "$work/run" && env -u PYTHONPATH "$work/venv/bin/python" -c '
import numpy as np, tensorscope
np.save("a.npy", np.arange(10, dtype=np.float32)); np.save("b.npy", np.arange(10, dtype=np.float32) * 2)
r = tensorscope.compare("a.npy", "b.npy")
assert len(r.entries) == 1 and r.entries[0].verdict == "DIFFER" and not r, r') || fail "tensorscope.compare"
(cd "$work/run" && "$work/venv/bin/tensorscope" compare a.npy a.npy > /dev/null) || fail "tensorscope compare (identical files)"
"$work/venv/bin/tensorscoped" --help > /dev/null 2>&1 || fail "tensorscoped --help"
# The autostarted daemon would exit when idle; stopped now (SIGTERM: it finalizes and goes).
daemon_pid=$(TENSORSCOPE_RUNTIME_DIR="$work/rt" "$work/venv/bin/tensorscope" status --session "$session" --json \
  | "$python" -c 'import json, sys; print(json.load(sys.stdin)["pid"])')
kill -TERM "$daemon_pid"
for _ in $(seq 300); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done

# 5. pip uninstall leaves nothing of the package.
"$work/venv/bin/pip" uninstall -y tensorscope > /dev/null
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
left=$(find "$site" "$work/venv/bin" -iname 'tensorscope*' 2>/dev/null | head -5)
[ -z "$left" ] || fail "left after pip uninstall: $left"
echo "check_wheel: $(basename "$wheel") built, installed, used and uninstalled"

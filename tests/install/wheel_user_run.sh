#!/usr/bin/env bash
# The installed wheel used as a user uses it, from another directory and without
# PYTHONPATH: the README's example (a model trained 20 steps, autostart running the bundled
# daemon, which writes where the docs say: ./tensorscope_runs/<session>), videos with the
# pushed frame counts, then the venv's `tensorscope status`, `tensorscope compare` and
# `tensorscoped --help`; the autostarted daemon is stopped at the end. Shared by
# check_wheel.sh (the wheel as built) and check_portable_wheel.sh (repaired, with the
# build's libraries hidden).
#   wheel_user_run.sh VENV WORK_DIR PYTHON      (PYTHON: any Python 3 for the checks; stdlib only)
set -euo pipefail
venv=$(cd "$1" && pwd)
work=$(cd "$2" && pwd)
python=$3
fail() { echo "wheel_user_run: $*" >&2; exit 1; }

# Training from another directory, no PYTHONPATH: autostart runs the bundled daemon,
# which writes where the docs say (./tensorscope_runs/<session>).
mkdir -p "$work/run" "$work/rt"
chmod 700 "$work/rt"
session="wheel$$"
(cd "$work/run" && env -u PYTHONPATH TENSORSCOPE_RUNTIME_DIR="$work/rt" "$venv/bin/python" - "$session" <<'PY') \
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
    scope.track_layer("net", model, every_n=1)
    for step in range(20):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        scope.push("loss", loss)
        scope.next_step()
    stats = scope.stats()
    assert len(scope.anomalies()) == 0, scope.anomalies()
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

# The venv's commands: status (the autostarted daemon), compare, the daemon's help.
TENSORSCOPE_RUNTIME_DIR="$work/rt" "$venv/bin/tensorscope" status --session "$session" > "$work/status.txt" \
  || fail "tensorscope status"
grep -q "session $session" "$work/status.txt" || fail "tensorscope status: $(head -3 "$work/status.txt")"
(cd "$work/run" && env -u PYTHONPATH "$venv/bin/python" -c '
import numpy as np, tensorscope
np.save("a.npy", np.arange(10, dtype=np.float32)); np.save("b.npy", np.arange(10, dtype=np.float32) * 2)
r = tensorscope.compare("a.npy", "b.npy")
assert len(r.entries) == 1 and r.entries[0].verdict == "DIFFER" and not r, r') || fail "tensorscope.compare"
(cd "$work/run" && "$venv/bin/tensorscope" compare a.npy a.npy > /dev/null) || fail "tensorscope compare (identical files)"
"$venv/bin/tensorscoped" --help > /dev/null 2>&1 || fail "tensorscoped --help"
# The autostarted daemon would exit when idle; stopped now (SIGTERM: it finalizes and goes).
daemon_pid=$(TENSORSCOPE_RUNTIME_DIR="$work/rt" "$venv/bin/tensorscope" status --session "$session" --json \
  | "$python" -c 'import json, sys; print(json.load(sys.stdin)["pid"])')
kill -TERM "$daemon_pid"
for _ in $(seq 300); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done

echo "wheel_user_run: trained with autostart; videos, status, compare and tensorscoped as expected"

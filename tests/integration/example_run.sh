#!/usr/bin/env bash
# A C++ example program (built against this tree's libtorch) trains beside a real daemon:
# train_cnn for 40 steps, tensors every 5th. SIGTERM finalises the daemon; then the session
# folder must list a video of every tracked layer and its gradient, and hold the summaries of
# every step, each step with the same rows. Run by the main build (Debian's libtorch) and by
# the client-alone build against PyTorch 2's libtorch, whose daemon is the main build's.
#
#   example_run.sh DAEMON_BIN_DIR EXAMPLE_PROGRAM CONFIG
set -euo pipefail
daemon_bin="$1"
example="$2"
config="$3"
steps=40
work=$(mktemp -d /tmp/ts-example-XXXXXX)
export TENSORSCOPE_RUNTIME_DIR="$work/runtime"
mkdir -m 700 "$TENSORSCOPE_RUNTIME_DIR"
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then kill -KILL "$daemon" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "example_run: $*" >&2; exit 1; }

"$daemon_bin/tensorscoped" --config "$config" --output "$work/out" --session example &
daemon=$!
for _ in $(seq 600); do
  [ -S "$TENSORSCOPE_RUNTIME_DIR/example.sock" ] && break
  kill -0 "$daemon" 2>/dev/null || fail "tensorscoped exited before listening"
  sleep 0.1
done
[ -S "$TENSORSCOPE_RUNTIME_DIR/example.sock" ] || fail "tensorscoped did not listen within 60 s"

"$example" --session example --steps "$steps" --every-n 5 --batch 16 >"$work/example.log" 2>&1 ||
  { cat "$work/example.log"; fail "the example failed"; }
grep -q "not_connected 0," "$work/example.log" || { cat "$work/example.log"; fail "the example was not connected"; }
kill -TERM "$daemon"
wait "$daemon" || fail "tensorscoped exited with status $?"
daemon=""

out="$work/out/example"
layers="features.conv1 features.bn1 features.conv2 features.bn2 fc1 fc2"
for layer in $layers; do
  for stream in "cnn.$layer" "cnn.$layer.grad"; do
    grep -q "\"stream\": \"$stream\"" "$out/index.json" || fail "index.json lists no video of $stream"
  done
done
for video in "$out"/*.mp4; do
  [ -s "$video" ] || fail "empty video $video"
done
summaries=("$out"/summaries/rank0_*.csv)
[ -f "${summaries[0]}" ] || fail "no summary table"
# One row per tracked output and gradient (12) at every step 0 .. steps-1.
rows=$(tail -n +2 "${summaries[0]}" | cut -d, -f1 | sort -n | uniq -c | awk '{print $2 ":" $1}')
expected=$(for ((s = 0; s < steps; ++s)); do echo "$s:12"; done)
[ "$rows" = "$expected" ] || fail "summary rows per step (step:rows) differ from 12 at every step: $rows"
echo "example_run: $(basename "$example") beside tensorscoped: $(ls "$out"/*.mp4 | wc -l) videos, $steps steps of summaries"

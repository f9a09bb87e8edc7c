#!/usr/bin/env bash
# The demo: installs dependencies, builds, starts the daemon, trains a small CNN
# (examples/train_cnn.cc) whose layer outputs and gradients are tracked, stops the daemon
# (SIGTERM finalizes every video) and prints where the videos are.
# DEMO_STEPS and DEMO_EVERY_N override the training length and the tracking interval.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BIN=${BUILD_DIR:-build}/bin
OUT=${DEMO_OUTPUT:-tensorscope_runs}
SESSION=demo
RUNTIME_DIR=$(mktemp -d /tmp/tensorscope-demo-XXXXXX)
export TENSORSCOPE_RUNTIME_DIR=$RUNTIME_DIR
rm -rf "$OUT/$SESSION"

"$BIN"/tensorscoped --config configs/default.yaml --output "$OUT" --session "$SESSION" &
DAEMON=$!
cleanup() { kill "$DAEMON" 2>/dev/null || true; rm -rf "$RUNTIME_DIR"; }
trap cleanup EXIT
for _ in $(seq 100); do [ -S "$RUNTIME_DIR/$SESSION.sock" ] && break; sleep 0.1; done

"$BIN"/train_cnn --session "$SESSION" --steps "${DEMO_STEPS:-1000}" --every-n "${DEMO_EVERY_N:-10}" --batch 64
"$BIN"/tensorscope status --session "$SESSION" || true

kill -TERM "$DAEMON"
wait "$DAEMON"
trap - EXIT
rm -rf "$RUNTIME_DIR"
echo
echo "Videos (listed in $OUT/$SESSION/index.json):"
ls -l "$OUT/$SESSION/"*.mp4

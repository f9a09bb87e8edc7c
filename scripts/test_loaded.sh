#!/usr/bin/env bash
# The test command on a saturated machine: LOAD_PER_CORE busy loops per core (default 2)
# run at normal priority beside the whole suite, as data-loader processes do on a training
# machine. Every test must pass like this too (timing assumptions are deadlines with
# margins, or waits on conditions). Extra arguments go to ctest (e.g. -R Integration).
#   scripts/test_loaded.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
per_core=${LOAD_PER_CORE:-2}
loops=()
stop_load() { kill "${loops[@]}" 2>/dev/null || true; }
trap stop_load EXIT
for _ in $(seq $(( $(nproc) * per_core ))); do
  ( while :; do :; done ) &
  loops+=($!)
done
echo "test_loaded: ${#loops[@]} busy loops on $(nproc) cores"
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"${JOBS:-$(nproc)}" --timeout 1200 "$@"

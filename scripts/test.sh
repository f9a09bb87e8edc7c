#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"${JOBS:-$(nproc)}" --timeout 600

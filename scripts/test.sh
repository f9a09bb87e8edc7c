#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test with ctest: the main
# build (Debian's PyTorch 1.13; the Python suite also under PyTorch 2) and the client built
# against PyTorch 2's libtorch (build/libtorch2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"${JOBS:-$(nproc)}" --timeout 600
if [ "${TENSORSCOPE_TORCH2:-1}" != 0 ]; then
  ctest --test-dir "$BUILD_DIR/libtorch2" --output-on-failure -j"${JOBS:-$(nproc)}" --timeout 600
fi

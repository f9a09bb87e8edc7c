#!/usr/bin/env bash
# Installs dependencies (Debian packages) and builds tensorscope into build/.
# Reuses the build directory; BUILD_DIR and JOBS override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
bash scripts/install_deps.sh
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS"

#!/usr/bin/env bash
# Installs dependencies (Debian packages, the PyTorch 2 environment) and builds tensorscope
# into build/ against Debian's PyTorch 1.13; then the client alone (its tests, the examples)
# again into build/libtorch2 against the libtorch inside the torch 2 wheel, beside the main
# build's daemon. Reuses the build directories; BUILD_DIR and JOBS override the defaults;
# TENSORSCOPE_TORCH2=0 leaves PyTorch 2 out (the venv, its Python runs, the second client).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
TORCH2=${TENSORSCOPE_TORCH2:-1}
bash scripts/install_deps.sh
torch2_python=""
if [ "$TORCH2" != 0 ]; then
  bash scripts/torch2_venv.sh "$BUILD_DIR/torch2-venv"
  torch2_python="$(cd "$BUILD_DIR" && pwd)/torch2-venv/bin/python"
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} \
  -DTENSORSCOPE_TORCH2_PYTHON="$torch2_python" >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS"
if [ "$TORCH2" != 0 ]; then
  # Its CMake prefix, and the package folder, so that find_library takes the wheel's lib/
  # before Debian's libtorch.
  torch2_prefix=$("$torch2_python" -c 'import os, torch.utils
print(torch.utils.cmake_prefix_path + ";" + os.path.dirname(torch.__file__))')
  cmake -S . -B "$BUILD_DIR/libtorch2" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} \
    -DTENSORSCOPE_BUILD_DAEMON=OFF -DTENSORSCOPE_BUILD_BENCH=OFF -DTENSORSCOPE_CUDA=OFF \
    -DCMAKE_PREFIX_PATH="$torch2_prefix" -DTENSORSCOPE_DAEMON_BIN="$(cd "$BUILD_DIR" && pwd)/bin" >/dev/null
  cmake --build "$BUILD_DIR/libtorch2" -j"$JOBS"
fi

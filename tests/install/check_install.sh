#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then configures, builds and runs a
# consumer project that uses find_package(tensorscope) and tensorscope::client.
#   check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d /tmp/ts-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
for f in bin/tensorscoped bin/tensorscope include/tensorscope/tensorscope.h \
         lib/cmake/tensorscope/tensorscopeConfig.cmake; do
  [ -e "$work/prefix/$f" ] || { echo "missing after install: $f"; exit 1; }
done
cmake -S "$source_dir/tests/install/consumer" -B "$work/build" \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" -j2 >/dev/null
TENSORSCOPE_RUNTIME_DIR="$work/run" "$work/build/consumer"

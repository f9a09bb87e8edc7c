#!/usr/bin/env bash
# The wheel that installs without the build's libraries (scripts/build_wheel.sh: the wheel
# repaired by auditwheel to a manylinux tag), as a user on another machine gets it: every
# shared library the daemon, the CLI and the extension were linked with, beyond glibc,
# libgcc_s, libstdc++ and what Python itself loads, is hidden from the loader (an empty file
# bind-mounted over it in a mount namespace of its own); the wheel goes into a fresh venv
# (PyTorch 2 and numpy from the PyPI environment of the suite, no -dev package, no
# PYTHONPATH) and the README example runs with autostart (wheel_user_run.sh).
#   check_portable_wheel.sh BUILD_DIR SOURCE_DIR TORCH2_PYTHON
# (TORCH2_PYTHON: the interpreter of scripts/torch2_venv.sh's environment.) Exits 77
# (skipped) where no mount namespace can be made (neither root nor user namespaces).
set -euo pipefail
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
python=/usr/bin/python3
work=$(mktemp -d /tmp/ts-portable-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_portable_wheel: $*" >&2; exit 1; }
torch2_python=$3
[ -x "$torch2_python" ] || fail "no PyTorch 2 environment at $torch2_python (scripts/torch2_venv.sh makes it)"
unshare_cmd=(unshare --mount)
if ! unshare --mount true 2>/dev/null; then
  unshare_cmd=(unshare --mount --map-root-user)
  "${unshare_cmd[@]}" true 2>/dev/null || { echo "check_portable_wheel: no mount namespace here: skipped"; exit 77; }
fi

# 1. The repaired wheel, from this build tree.
wheel=$(TENSORSCOPE_CMAKE_BUILD_DIR="$build_dir" WHEEL_TOOLS_VENV="$build_dir/wheel-venv" \
  bash "$source_dir/scripts/build_wheel.sh" "$work/dist" 2> "$work/build.log") || { tail -40 "$work/build.log"; fail "build_wheel.sh"; }
version=$(sed -n 's/^project(tensorscope VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
case "$(basename "$wheel")" in
  "tensorscope-$version-cp39-abi3-manylinux_"*"_x86_64.whl") ;;
  *) fail "not a manylinux wheel: $(basename "$wheel")" ;;
esac

# The wheel's files need nothing from the system but glibc, libgcc_s and libstdc++
# (repair_wheel.py's list); the rest is in tensorscope.libs/ under names of its own.
system=$("$python" "$source_dir/scripts/repair_wheel.py" --system-libraries)
mkdir "$work/unpacked"
"$python" -m zipfile -e "$wheel" "$work/unpacked"
needed=$(find "$work/unpacked" -type f \( -name '*.so*' -o -path '*/tensorscope/bin/*' \) -exec readelf -d {} + 2>/dev/null \
  | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
carried=$(ls "$work/unpacked/tensorscope.libs")
while read -r lib; do
  [[ -f "$work/unpacked/tensorscope.libs/$lib" ]] && continue
  grep -qxF "$lib" <<< "$system" || fail "the wheel needs $lib from the system"
done <<< "$needed"
for lib in libavcodec- libopencv_core- libhdf5 libX11- libglib-2 libz-; do
  grep -q "^$lib" <<< "$carried" || fail "no $lib* in tensorscope.libs/"
done

# 2. What to hide: the libraries the build's executables and extension load, less those
#    repair_wheel.py leaves to every system and what Python itself loads.
closure() { ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | xargs -r realpath | sort -u; }
closure "$build_dir/bin/tensorscoped" "$build_dir/bin/tensorscope" \
  "$build_dir"/python/tensorscope/_native*.so > "$work/built.txt"
# (the interpreter, its compiled standard modules, torch's and numpy's, and the system's
# tools this test runs)
torch2_site=$("$torch2_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
tools=()
for tool in bash mount grep sed awk env sleep seq cat mkdir chmod head cut sort wc dirname; do
  tools+=("$(command -v "$tool")")
done
closure "$python" "$("$python" -c 'import sysconfig; print(sysconfig.get_path("platstdlib"))')"/lib-dynload/*.so \
  $(find "$torch2_site/torch" "$torch2_site/numpy" -name '*.so*' -type f) "${tools[@]}" > "$work/python.txt"
while read -r lib; do
  [[ $'\n'"$system"$'\n' == *$'\n'"$(basename "$lib")"$'\n'* ]] || echo "$lib"
done < "$work/built.txt" | comm -23 - "$work/python.txt" > "$work/hidden.txt"
hidden=$(wc -l < "$work/hidden.txt")
[ "$hidden" -ge 20 ] || fail "only $hidden libraries to hide; the build links: $(cat "$work/built.txt")"
grep -q libavcodec "$work/hidden.txt" || fail "libavcodec is not among the hidden libraries"

# 3. A fresh venv: torch and numpy seen through a .pth (the suite's PyPI environment), the
#    wheel installed without an index.
"$python" -m venv "$work/venv"
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$torch2_site" > "$site/torch2.pth"
"$work/venv/bin/pip" install --no-index --no-cache-dir --disable-pip-version-check "$wheel" > "$work/pip.log" 2>&1 \
  || { cat "$work/pip.log"; fail "pip install"; }

# 4. In a mount namespace with those libraries hidden: the hiding holds (libavcodec cannot
#    be opened), the installed files find everything they need, and the README example runs.
cat > "$work/hidden_run.sh" <<'SH'
set -euo pipefail
work=$1; python=$2; source_dir=$3
: > "$work/empty"
while read -r lib; do mount --bind "$work/empty" "$lib"; done < "$work/hidden.txt"
"$work/venv/bin/python" - "$work/hidden.txt" <<'PY'
import ctypes, re, sys
hidden = [p for p in open(sys.argv[1]).read().split() if re.search(r"/lib(avcodec|opencv_core|hdf5)", p)]
assert len(hidden) >= 3, hidden
for path in hidden:
    try:
        ctypes.CDLL(path)
    except OSError:
        continue
    raise SystemExit(f"{path} is still loadable: the build's libraries are not hidden")
PY
package=$("$work/venv/bin/python" -c 'import os, tensorscope; print(os.path.dirname(tensorscope.__file__))')
for elf in "$package/bin/tensorscoped" "$package/bin/tensorscope" "$package"/_native*.so; do
  if ldd "$elf" | grep -q "not found"; then ldd "$elf" | grep "not found" >&2; exit 1; fi
done
bash "$source_dir/tests/install/wheel_user_run.sh" "$work/venv" "$work" "$python"
SH
"${unshare_cmd[@]}" bash "$work/hidden_run.sh" "$work" "$python" "$source_dir" \
  || fail "the repaired wheel with $hidden of the build's libraries hidden"
echo "check_portable_wheel: $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) ran the README example with $hidden of the build's libraries hidden"

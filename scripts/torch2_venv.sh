#!/usr/bin/env bash
# Makes (or brings up to date) the virtual environment of PyTorch 2: Debian's Python with the
# pinned packages of python/tests/requirements-torch2.txt. The Python suite runs in it a
# second time, and the client builds a second time against the libtorch inside its torch
# wheel (scripts/build.sh). Idempotent: when the environment matches the file it returns.
#
#   scripts/torch2_venv.sh VENV_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:?usage: torch2_venv.sh VENV_DIR}"
requirements="$root/python/tests/requirements-torch2.txt"
stamp="$venv/.requirements-installed"
if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; then
  echo "torch2_venv: $venv is up to date"
  exit 0
fi
echo "torch2_venv: installing $requirements into $venv"
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements"
"$venv/bin/python" -c 'import torch; assert torch.__version__.startswith("2."), torch.__version__'
cp "$requirements" "$stamp"

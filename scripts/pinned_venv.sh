#!/usr/bin/env bash
# Makes (or brings up to date) a virtual environment of Debian's Python with the pinned
# packages of a requirements file: the PyTorch 2 environment of the Python suite
# (scripts/torch2_venv.sh) and the wheel's repair tools (scripts/build_wheel.sh).
# Idempotent: when the environment was made from the same file it returns at once.
#
#   scripts/pinned_venv.sh VENV_DIR REQUIREMENTS_FILE
set -euo pipefail
venv="${1:?usage: pinned_venv.sh VENV_DIR REQUIREMENTS_FILE}"
requirements="${2:?usage: pinned_venv.sh VENV_DIR REQUIREMENTS_FILE}"
stamp="$venv/.requirements-installed"
if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; then
  echo "pinned_venv: $venv is up to date"
  exit 0
fi
echo "pinned_venv: installing $requirements into $venv"
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements"
cp "$requirements" "$stamp"

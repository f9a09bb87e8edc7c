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
bash "$root/scripts/pinned_venv.sh" "$venv" "$root/python/tests/requirements-torch2.txt"
"$venv/bin/python" -c 'import torch; assert torch.__version__.startswith("2."), torch.__version__'

#!/usr/bin/env bash
# Prepares .gpu/ for scripts/gpu_check.sh on a GPU machine that has no Debian packages and
# no network: the .deb files the client builds against (downloaded here with apt-get) and
# the Python package built here (its extension is abi3 and takes tensors through DLPack,
# so the same build serves that machine's Python and PyTorch).
#
#   scripts/gpu_prepare.sh [BUILD_DIR]      (default: build; run `make tensorscope_python` first)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
mkdir -p "$root/.gpu/debs"
rm -f "$root"/.gpu/debs/*.deb
# Headers and libraries of the client's dependencies (scripts/install_deps.sh names them
# for this machine): Boost.Interprocess, spdlog and fmt, nlohmann-json, GoogleTest.
(cd "$root/.gpu/debs" && apt-get download libboost1.74-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 \
  nlohmann-json3-dev libgtest-dev libgmock-dev)
rm -rf "$root/.gpu/python" && mkdir -p "$root/.gpu/python/tensorscope"
# (the package's modules and subpackages, without compiled bytecode)
tar -C "$root/python" --exclude=__pycache__ -cf - tensorscope | tar -C "$root/.gpu/python" -xf -
extension=("$build"/python/tensorscope/_native*.so)
[ -f "${extension[0]}" ] || { echo "gpu_prepare: no extension in $build/python (make tensorscope_python)" >&2; exit 1; }
cp "${extension[@]}" "$root/.gpu/python/tensorscope/"
strip --strip-debug "$root"/.gpu/python/tensorscope/_native*.so  # the tree that travels is size-limited
du -sh "$root/.gpu"

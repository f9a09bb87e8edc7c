#!/usr/bin/env bash
# Installs every build and test dependency of tensorscope from Debian packages.
# Idempotent: when every package is already installed it only checks and returns.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libtorch-dev
  libboost-dev
  libopencv-dev
  clang libclang-rt-14-dev
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libx264-164
  libeigen3-dev
  libspdlog-dev libfmt-dev
  libyaml-cpp-dev
  nlohmann-json3-dev
  libgtest-dev libgmock-dev
  python3-numpy
  libhdf5-dev python3-h5py
  python3-torch python3-dev python3-pytest
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"

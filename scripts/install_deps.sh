#!/usr/bin/env bash
# Installs every build and test dependency of tensorscope from Debian packages.
# Idempotent: when every package is already installed it only checks and returns.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libtorch-dev
  libboost-dev libboost-program-options-dev
  libopencv-dev libpng-dev libjpeg-dev
  clang libclang-rt-14-dev clang-format
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libx264-164
  libeigen3-dev
  libspdlog-dev libfmt-dev
  libyaml-cpp-dev
  nlohmann-json3-dev
  libgtest-dev libgmock-dev
  python3-numpy python3-pandas
  libhdf5-dev python3-h5py
  python3-torch python3-dev python3-pytest
  python3-setuptools python3-wheel python3-build python3-venv python3-pip mypy
  chromium
)
# Node.js runs the browser tests (tests/browser); any node >= 18 will do, Debian's when none.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
else
  echo "install_deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The browser tests' npm packages, exactly as the lockfile says (puppeteer-core drives
# Debian's chromium; it downloads no browser).
browser_tests="$(dirname "$0")/../tests/browser"
if [ ! -f "$browser_tests/node_modules/.package-lock.json" ] ||
   ! cmp -s "$browser_tests/package-lock.json" "$browser_tests/node_modules/.lock-installed"; then
  echo "install_deps: npm ci in tests/browser"
  (cd "$browser_tests" && npm ci --no-audit --no-fund --loglevel=error &&
   cp package-lock.json node_modules/.lock-installed)
fi

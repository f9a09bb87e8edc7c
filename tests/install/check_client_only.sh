#!/usr/bin/env bash
# The client alone (-DTENSORSCOPE_BUILD_DAEMON=OFF) configures with none of the daemon's
# packages: OpenCV, HDF5, yaml-cpp, Eigen and pkg-config (FFmpeg) are made unfindable, so
# any find_package of them on that path fails the configure. Its targets are the client's,
# its tests and benches (scripts/gpu_check.sh builds this on a GPU machine), not the daemon.
#
#   check_client_only.sh SOURCE_DIR
set -euo pipefail
src="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cmake -S "$src" -B "$dir" -DTENSORSCOPE_BUILD_DAEMON=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_OpenCV=ON -DCMAKE_DISABLE_FIND_PACKAGE_HDF5=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_yaml-cpp=ON -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -Wno-dev >"$dir/configure.log" 2>&1 || {
  cat "$dir/configure.log"
  echo "FAIL: the client alone did not configure without the daemon's packages"
  exit 1
}
targets="$(cmake --build "$dir" --target help)"
for want in tensorscope_client client_unit_tests client_track_tests push_bench; do
  grep -qw "$want" <<<"$targets" || { echo "FAIL: no target $want"; exit 1; }
done
for unwanted in tensorscoped tensorscope_cli tensorscope_python tensorscope_plotting integration_tests; do
  if grep -qw "$unwanted" <<<"$targets"; then echo "FAIL: target $unwanted in the client-only build"; exit 1; fi
done
echo "ok: the client alone configures without OpenCV, HDF5, yaml-cpp, Eigen or pkg-config"

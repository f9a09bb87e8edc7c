#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, on a machine that has one, PyTorch with CUDA (pip:
# its own libtorch and CMake config) and the CUDA toolkit, but none of the Debian packages
# tensorscope builds against and no network. What it needs from Debian comes as .deb files
# in .gpu/debs (scripts/gpu_prepare.sh downloads them and copies the Python package built
# on the Debian machine into .gpu/python), unpacked here into .gpu/deps.
#
#   scripts/gpu_check.sh [OUT_DIR]     (default: $OUT, else ./gpu_out)
#   GPU_CHECK_QUICK=1 scripts/gpu_check.sh ...   benches by CUDA IPC only, and shorter
#
# Builds the client alone (TENSORSCOPE_BUILD_DAEMON=OFF) against PyTorch's libtorch, then
# runs: the CUDA IPC tests (tests/integration/cuda_ipc_test.cc), the fused summary pass on
# the device (tests/unit/client/fused_summary_pass_test.cc), the Python CUDA tests
# (python/tests/test_cuda.py) and the rest of the Python suite that needs no daemon, with
# PyTorch's torch, cuda_push_bench (CUDA IPC and pinned host),
# bench/python_cuda_track_bench.py, and the client's unit tests against that libtorch.
# Logs go to OUT_DIR; the last lines printed are a summary.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-${OUT:-$root/gpu_out}}"
mkdir -p "$out"
deps="$root/.gpu/deps"
build="$root/build-gpu"
python="${PYTHON:-python3}"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

# -- what this machine is ---------------------------------------------------------------
{
  date -u
  nvidia-smi -L 2>&1
  "$python" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__,
"cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1
  cmake --version | head -1
  c++ --version | head -1
  nproc
  ldd --version | head -1
  echo "--- libraries the daemon would need (absent ones are why it is not built here):"
  for l in libopencv_core libavcodec libhdf5 libyaml-cpp libspdlog libfmt; do
    printf '%s: %s\n' "$l" "$(ldconfig -p | grep -c "$l")"
  done
} >"$summary" 2>&1  # (the machine's description heads the summary)
cat "$summary"

# -- the Debian packages, unpacked beside the tree ---------------------------------------
rm -rf "$deps" && mkdir -p "$deps"
unpack() {  # dpkg -x, or ar and tar where there is no dpkg
  if command -v dpkg >/dev/null; then dpkg -x "$1" "$deps"; else
    (cd "$deps" && ar x "$1" && tar -xf data.tar.* && rm -f data.tar.* control.tar.* debian-binary)
  fi
}
for f in "$root"/.gpu/debs/*.deb; do unpack "$f" || note "could not unpack $f"; done
multiarch="$deps/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$multiarch:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"

# -- the client alone, against PyTorch's libtorch --------------------------------------
torch_prefix="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# (an existing build-gpu is reused: a fresh machine has none)
if ! cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTENSORSCOPE_BUILD_DAEMON=OFF -DTENSORSCOPE_CUDA=ON -DTENSORSCOPE_BUILD_EXAMPLES=OFF \
    -DCMAKE_PREFIX_PATH="$deps/usr;$torch_prefix" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DPython_EXECUTABLE="$(command -v "$python")" >"$out/configure.log" 2>&1; then
  tail -40 "$out/configure.log"
  note "configure: FAILED (configure.log)"
  exit 1
fi
note "configure: ok"
# The package built on the Debian machine, where the Python tests' subprocesses look for it
# ($TENSORSCOPE_BUILD_DIR/python).
ln -sfn "$root/.gpu/python" "$build/python"
targets=(ipc_sink cuda_ipc_tests cuda_push_bench client_unit_tests client_track_tests client_core_unit_tests
         client_cuda_unit_tests shared_unit_tests)
keep_going=(-k 0)
[ ${#generator[@]} -eq 0 ] && keep_going=(-k)
start=$(date +%s)
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" -- "${keep_going[@]}" >"$out/build.log" 2>&1
status=$?
note "build: $([ $status -eq 0 ] && echo ok || echo FAILED) in $(( $(date +%s) - start )) s (build.log)"
[ $status -eq 0 ] || grep -E "error|Error" "$out/build.log" | head -40

debugger="$(command -v gdb || command -v cuda-gdb || true)"
backtraces=0
run() {  # run NAME LOG TIMEOUT COMMAND...: runs it, notes how it ended; a crash once under a debugger
  local name="$1" log="$2" limit="$3"
  shift 3
  local t0=$(date +%s)
  timeout "$limit" stdbuf -oL -eL "$@" >"$log" 2>&1
  local rc=$?
  note "$name: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)") in $(( $(date +%s) - t0 )) s"
  if [ $rc -ge 128 ] && [ $rc -ne 137 ] && [ -n "$debugger" ] && [ $backtraces -lt 2 ]; then
    backtraces=$((backtraces + 1))
    echo "=== again under $debugger" >>"$log"
    timeout 120 "$debugger" -q -batch -ex "set pagination off" -ex run -ex "bt 40" \
      -ex "thread apply all bt 12" --args "$@" >>"$log" 2>&1
  fi
  return $rc
}

bin="$build/bin"
[ -x "$bin/cuda_ipc_tests" ] && run "cuda_ipc_tests" "$out/cuda_ipc_tests.log" 120 "$bin/cuda_ipc_tests"
# The fused summary pass's kernel on the device (docs/design/fused_summaries.md).
[ -x "$bin/client_cuda_unit_tests" ] &&
  run "client_cuda_unit_tests (fused summary pass)" "$out/client_cuda_unit_tests.log" 120 "$bin/client_cuda_unit_tests"
if [ -d "$root/.gpu/python/tensorscope" ] && [ -x "$bin/ipc_sink" ]; then
  PYTHONPATH="$root/.gpu/python" TENSORSCOPE_BUILD_DIR="$build" PYTHONDONTWRITEBYTECODE=1 \
    run "python test_cuda.py" "$out/python_cuda.log" 120 \
    "$python" -m pytest -q -s -p no:cacheprovider "$root/python/tests/test_cuda.py"
fi
# The rest of the Python suite with this PyTorch: the tests that need tensorscoped skip
# (not built here), the others run.
if [ -d "$root/.gpu/python/tensorscope" ]; then
  PYTHONPATH="$root/.gpu/python" TENSORSCOPE_BUILD_DIR="$build" PYTHONDONTWRITEBYTECODE=1 \
    TENSORSCOPE_TESTS_WITHOUT_DAEMON=1 run "python suite without a daemon" "$out/python_suite.log" 240 \
    "$python" -m pytest -q -rs -p no:cacheprovider "$root/python/tests" --ignore "$root/python/tests/test_cuda.py"
  tail -3 "$out/python_suite.log" | tee -a "$summary"
fi
if [ "${GPU_CHECK_QUICK:-0}" = 1 ]; then
  push_bench=(bash -c '"$0" --quick' "$bin/cuda_push_bench")
  track_bench=(bash -c '"$0" "$1" --steps 40' "$python" "$root/bench/python_cuda_track_bench.py")
  transports="CUDA IPC, quick"
else
  push_bench=(bash -c '"$0"; echo; "$0" --pinned' "$bin/cuda_push_bench")
  track_bench=(bash -c '"$0" "$1" && echo && "$0" "$1" --pinned' "$python" "$root/bench/python_cuda_track_bench.py")
  transports="CUDA IPC, then pinned host"
fi
[ -x "$bin/cuda_push_bench" ] && run "cuda_push_bench ($transports)" "$out/cuda_push_bench.log" 150 "${push_bench[@]}"
# The tracked GPU step from Python, with and without summaries.
if [ -d "$root/.gpu/python/tensorscope" ] && [ -x "$bin/ipc_sink" ]; then
  PYTHONPATH="$root/.gpu/python" TENSORSCOPE_BUILD_DIR="$build" PYTHONDONTWRITEBYTECODE=1 \
    run "python_cuda_track_bench ($transports)" "$out/python_cuda_track_bench.log" 150 "${track_bench[@]}"
fi
# The client's own tests against this libtorch (CPU tensors), in one log.
for t in client_unit_tests client_track_tests client_core_unit_tests shared_unit_tests; do
  [ -x "$bin/$t" ] || continue
  run "$t" "$out/$t.part" 120 "$bin/$t" --gtest_brief=1
  { echo "=== $t"; cat "$out/$t.part"; } >>"$out/client_tests.log"
  rm -f "$out/$t.part"
done
echo "=== summary"
cat "$summary"

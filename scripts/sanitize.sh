#!/usr/bin/env bash
# Builds tensorscope with sanitizers in its own build directory and runs the C++ test
# suites under them (the Python suites and the install test are left out: the
# interpreter is not instrumented).
#   scripts/sanitize.sh [address,undefined | thread] [ctest -R regex]
# address,undefined (default): every C++ suite. thread: the client, ring and shared
# suites (ThreadSanitizer needs every thread instrumented; libtorch's are not, so the
# suites that train models are skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-address,undefined}
filter=${2:-}
dir=build-${kind//,/-}
cmake -S . -B "$dir" -DTENSORSCOPE_SANITIZE="$kind" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTENSORSCOPE_BUILD_PYTHON=OFF -DTENSORSCOPE_BUILD_BENCH=OFF -DTENSORSCOPE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$dir" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_odr_violation=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp
args=(--output-on-failure -j"$(nproc)" -E '^python\.|^install\.')
if [ "$kind" = thread ] && [ -z "$filter" ]; then filter='RingBuffer|Ring|SharedSegment|MessageChannel|ClientCore|Connection|StreamGate|StagingPool|Sigbus'; fi
if [ -n "$filter" ]; then args+=(-R "$filter"); fi
cd "$dir" && ctest "${args[@]}"

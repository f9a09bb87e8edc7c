#!/usr/bin/env bash
# Builds the fuzz targets with clang and libFuzzer (plus AddressSanitizer and
# UndefinedBehaviorSanitizer) in build-fuzz/ and runs each for a while over a copy of its
# corpus, keeping what it finds. See fuzz/README.md.
#   scripts/fuzz.sh [seconds per target, default 120] [target ...]
# Needs Debian's clang and libclang-rt-14-dev (scripts/install_deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(module_tree message_channel daemon_config ring_reader npy torch_zip pickle video_files hdf5)
fi
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTENSORSCOPE_FUZZ=ON \
  -DTENSORSCOPE_CUDA=OFF -DTENSORSCOPE_BUILD_TESTS=OFF -DTENSORSCOPE_BUILD_PYTHON=OFF \
  -DTENSORSCOPE_BUILD_BENCH=OFF -DTENSORSCOPE_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t
  mkdir -p "$work" build-fuzz/findings/$t
  cp -n fuzz/corpus/$t/* "$work"/ 2>/dev/null || true
  echo "== fuzz_$t for $seconds s"
  build-fuzz/bin/fuzz_$t -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
    -artifact_prefix=build-fuzz/findings/$t/ -print_final_stats=1 "$work" 2>&1 |
    grep -E "^#[0-9]+ +DONE|stat::number_of_executed_units|stat::new_units_added|ERROR|SUMMARY|Test unit written" || true
done

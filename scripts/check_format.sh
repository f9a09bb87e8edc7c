#!/usr/bin/env bash
# Checks that every C++ file of the tree follows .clang-format; --fix formats them instead.
# Exit 0 when they all do, 1 naming those that do not, 77 without clang-format 14 (another
# version formats differently).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1 || ! clang-format --version | grep -q "version 14\."; then
  echo "check_format: clang-format 14 not found; nothing checked"
  exit 77
fi
mapfile -t files < <(git ls-files '*.cc' '*.h')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  echo "check_format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) do not follow .clang-format (scripts/check_format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check_format: ${#files[@]} files follow .clang-format"

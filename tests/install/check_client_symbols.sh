#!/usr/bin/env bash
# The code that runs inside training processes (the libraries a C++ program links, and the
# Python extension) calls no std::filesystem function: libtorch 2.x wheels export their
# own copies of them, a program's calls bind there, and remove_all crashed in one
# (tensorscope/base/posix_path.h says more). Checked on the built artifacts' undefined
# symbols, so a new call anywhere in them fails here.
#
#   check_client_symbols.sh BUILD_DIR
set -euo pipefail
build="$1"
status=0
artifacts=("$build"/lib/libtensorscope_{base,tensor,shared,client_core,client}.a)
artifacts+=("$build"/python/tensorscope/_native*.so)
for a in "${artifacts[@]}"; do
  [ -e "$a" ] || continue
  found="$(nm -C --undefined-only "$a" 2>/dev/null | grep 'std::filesystem' || true)"
  if [ -n "$found" ]; then
    echo "FAIL: $a calls std::filesystem:"
    echo "$found" | sort -u | head -20
    status=1
  else
    echo "ok: $(basename "$a")"
  fi
done
exit $status

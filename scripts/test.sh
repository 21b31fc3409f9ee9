#!/usr/bin/env bash
# Sets everything up (see setup-venv.sh), then runs the whole test suite:
#   1. the C unit tests, built plainly and under AddressSanitizer + UBSan;
#   2. the Python tests on 4 CPU devices (GPU tests skip without GPUs).
# Exits non-zero if anything fails.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup-venv.sh" || { echo "test: setup failed" >&2; exit 1; }
set +e
cd "$root"
status=0
for variant in plain sanitize; do
  build="$root/build/ctest-$variant"
  flags=(-DJAXMG_BUILD_TESTS=ON -DJAXMG_WITH_CUDA=OFF -DPython_EXECUTABLE="$(command -v python)")
  [ "$variant" = sanitize ] && flags+=(-DJAXMG_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
  echo "== C unit tests ($variant)"
  if cmake -S "$root" -B "$build" "${flags[@]}" >"$build.log" 2>&1 &&
     cmake --build "$build" -j "$(nproc)" >>"$build.log" 2>&1; then
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$build/jaxmg_c_tests" || status=1
  else
    cat "$build.log"; echo "C build ($variant) failed"; status=1
  fi
done
echo "== Python tests (4 CPU devices)"
python -m pytest -q -rs tests/python tests/gpu "$@" || status=1
exit $status

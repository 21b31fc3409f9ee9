#!/usr/bin/env bash
# Builds and runs scripts/probe-tridiagonal.c: the host tridiagonal
# eigensolver's time for one n and thread count (threads <= 0: one per CPU),
# with SciPy's OpenBLAS (what jaxmg registers at import) where python finds
# it, else the system's liblapack.so.3. BUILD_DIR is a configured build of
# this repository (its libjaxmg_core.a is built here).
#   scripts/probe-tridiagonal.sh BUILD_DIR N THREADS [CHUNK]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$1"; shift
python="${PYTHON:-python}"
cmake --build "$build" --target jaxmg_core -j "$(nproc)" >/dev/null
lib="$("$python" -c 'import glob, os, scipy; print((glob.glob(os.path.join(os.path.dirname(scipy.__file__), os.pardir, "scipy.libs", "libscipy_openblas*.so")) or [""])[0])' 2>/dev/null || true)"
prefix=scipy_
if [ -z "$lib" ]; then lib=liblapack.so.3; prefix=; fi
out="$(mktemp -d)/probe-tridiagonal"
gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror \
  -I"$root/csrc" "$root/scripts/probe-tridiagonal.c" "$build/libjaxmg_core.a" \
  -o "$out" -lpthread -ldl -lm
echo "LAPACK: $lib"
"$out" "$lib" "$prefix" "$@"

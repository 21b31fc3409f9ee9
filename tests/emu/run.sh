#!/usr/bin/env bash
# Runs the multi-GPU eigensolver's GPU code on the CPU (tests/emu/main.c
# under tests/emu/emu_cuda.cc's emulation of the CUDA calls it makes and of
# its kernels): needs the CUDA toolkit's headers (CUDA_HOME, default
# /usr/local/cuda), no GPU, no CUDA library. EMU_PATHS=replicated|owner runs
# one path of the reduction, EMU_CASES=N the first N cases, EMU_ONE=
# "n,tile,ndev,nb[,pad]" one case; EMU_ASYNC=seed queues the work on its
# streams and runs it in a random order that the streams and events allow
# (a missing wait between GPUs shows); EMU_SANITIZE=1 builds with
# AddressSanitizer and UBSan (each emulated block's threads then POSIX
# threads, much slower than the coroutines of the default build). Then the
# tiled Cholesky and inverse of engine/cusolvermg/ (tests/emu/tiles_main.c),
# a few seconds, every case under the same deferred streams (emu_streams.h)
# with two seeds of its own. EMU_PARTS=tiles runs the tiles part alone (what
# scripts/test.sh runs where the CUDA headers are), EMU_PARTS=eig the
# eigensolver's alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cuda="${CUDA_HOME:-/usr/local/cuda}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# The replicated column's kernels with 2 warps a block instead of 8
# (kernels.h JMG_TRD_CS): every emulated thread costs time here.
inc=(-I"$root/csrc" -I"$cuda/include" -DJMG_TRD_CS="${JMG_TRD_CS:-2}")
san=()
[ "${EMU_SANITIZE:-0}" = 1 ] && san=("-fsanitize=address,undefined" -fno-sanitize-recover=all -g -DEMU_PTHREADS)
parts="${EMU_PARTS:-eig tiles}"
g++ -std=c++17 -O1 -Wall -Wextra -Wno-unknown-pragmas -Wno-unused-function "${inc[@]}" "${san[@]}" \
  -c "$root/tests/emu/emu_cuda.cc" -o "$out/emu_cuda.o"
if [[ " $parts " == *" eig "* ]]; then
for f in tests/emu/main.c csrc/engine/eig_mgpu/sytrd.c csrc/engine/eig_mgpu/sytrd_replicated.c \
         csrc/engine/eig_mgpu/sytrd_owner.c csrc/engine/eig_mgpu/ormtr.c \
         csrc/engine/eig_mgpu/kernels.c csrc/engine/eig_mgpu/host.c csrc/cuda/ptx.c \
         csrc/cuda/check.c csrc/common/error.c; do
  gcc -std=c11 -O1 -Wall -Wextra -Werror "${inc[@]}" "${san[@]}" -c "$root/$f" -o "$out/$(basename "$f").o"
done
g++ "${san[@]}" "$out"/*.o -o "$out/emu" -lpthread -lm
"$out/emu"
fi
[[ " $parts " == *" tiles "* ]] || exit 0

# jaxmg's tiled Cholesky and inverse (engine/cusolvermg/cuda_potrf.c,
# cuda_potri.c) under the same runtime emulation and emu_tiles.cc.
t="$out/tiles"; mkdir -p "$t"
g++ -std=c++17 -O1 -Wall -Wextra "${inc[@]}" "${san[@]}" -c "$root/tests/emu/emu_tiles.cc" -o "$t/emu_tiles.o"
for f in tests/emu/tiles_main.c csrc/engine/cusolvermg/cuda_potrf.c \
         csrc/engine/cusolvermg/cuda_potri.c csrc/engine/cusolvermg/tiles.c csrc/cuda/check.c \
         csrc/common/error.c csrc/common/trace.c csrc/common/config.c; do
  gcc -std=c11 -O1 -Wall -Wextra -Werror "${inc[@]}" "${san[@]}" -c "$root/$f" -o "$t/$(basename "$f").o"
done
g++ "${san[@]}" "$t"/*.o "$out/emu_cuda.o" -o "$t/emu" -lpthread -lm
"$t/emu"

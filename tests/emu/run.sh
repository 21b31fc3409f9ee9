#!/usr/bin/env bash
# Runs the multi-GPU eigensolver's GPU code on the CPU (tests/emu/main.c
# under tests/emu/emu_cuda.cc's emulation of the CUDA calls it makes and of
# its kernels): needs the CUDA toolkit's headers (CUDA_HOME, default
# /usr/local/cuda), no GPU, no CUDA library. About a minute on 2 cores.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cuda="${CUDA_HOME:-/usr/local/cuda}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
inc=(-I"$root/csrc" -I"$cuda/include")
g++ -std=c++17 -O1 -Wall -Wextra -Wno-unknown-pragmas -Wno-unused-function "${inc[@]}" \
  -c "$root/tests/emu/emu_cuda.cc" -o "$out/emu_cuda.o"
for f in tests/emu/main.c csrc/engine/eig_mgpu/sytrd.c csrc/engine/eig_mgpu/ormtr.c \
         csrc/engine/eig_mgpu/kernels.c csrc/engine/eig_mgpu/host.c csrc/cuda/check.c \
         csrc/common/error.c; do
  gcc -std=c11 -O1 -Wall -Wextra -Werror "${inc[@]}" -c "$root/$f" -o "$out/$(basename "$f").o"
done
g++ "$out"/*.o -o "$out/emu" -lpthread -lm
"$out/emu"

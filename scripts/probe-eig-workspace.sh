#!/usr/bin/env bash
# Builds and runs scripts/probe-eig-workspace.c on a GPU machine (issue 25):
# the workspace each one-GPU eigensolver asks for at large N. cuSOLVERMp's
# rows need its wheel unpacked at MP (default /tmp/mp, as
# `pip install --no-deps --target /tmp/mp .whl/nvidia_cusolvermp_cu13-*.whl`
# leaves it) and NCCL's library (found on the machine).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cuda="${CUDA_HOME:-/usr/local/cuda}"
mp="${MP:-/tmp/mp}/nvidia/cu13"
nccl="$(dirname "$(find / -name 'libnccl.so.2' -not -path '/proc/*' 2>/dev/null | head -n 1)")"
out="${1:-/tmp}/probe-eig-workspace"
gcc -std=c11 -O1 -Wall -Wextra -Werror -I"$cuda/include" -I"$mp/include" \
  "$here/probe-eig-workspace.c" -o "$out" -L"$cuda/lib64" -L"$mp/lib" -L"$nccl" \
  -Wl,-rpath,"$cuda/lib64:$mp/lib:$nccl" -l:libcusolverMp.so.0 -lcusolverMg \
  -lcusolver -l:libnccl.so.2 -lcudart
"$out" mp

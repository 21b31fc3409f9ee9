#!/usr/bin/env bash
# Builds and runs scripts/probe-eig-parts.c on a GPU machine (issue 37):
# where cuSOLVERDn's and cuSOLVERMp's eigensolvers spend their time, and
# what the host's band -> tridiagonal reduction costs
# (docs/design/eigensolver-2stage.md). About 150 s on 2 GPUs.
#
#   bash scripts/probe-eig-parts.sh OUTDIR
#
# Writes OUTDIR/probe-eig-parts.csv (every part's lines, also printed) and
# OUTDIR/probe-eig-parts.log (stderr, machine). Each part is its own
# process under `timeout`: a hang inside a library costs that part only.
# cuSOLVERMp: the wheel's libcusolverMp.so.0, found under $MP, then each
# PYTHONPATH entry (nvidia/cu13/lib/), else unpacked from .whl/ into OUTDIR.
# CUDA from CUDA_HOME (default /usr/local/cuda), NCCL wherever
# libnccl.so.2 is, LAPACK SciPy's OpenBLAS (what jaxmg registers) or
# liblapack.so.3.
#
# Environment (defaults): SIZES (8192,16384) for the GPU parts; NB (2048,
# the engine's blocks for both sizes on 1 and 2 GPUs, context.c mp_block);
# NB2 (512: a second 2-rank run at N=16384 with these blocks; empty: none);
# HOST_SIZES (8192,16384), BANDS (32,64,128), HOST_BUDGET_S (45).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-/tmp/probe-eig-parts}"
mkdir -p "$out"
csv="$out/probe-eig-parts.csv"
log="$out/probe-eig-parts.log"
: >"$csv"
: >"$log"
cuda="${CUDA_HOME:-/usr/local/cuda}"
sizes="${SIZES:-8192,16384}"
nb="${NB:-2048}"
nb2="${NB2-512}"
host_sizes="${HOST_SIZES:-8192,16384}"
bands="${BANDS:-32,64,128}"
budget="${HOST_BUDGET_S:-45}"
export NCCL_NVLS_ENABLE=0

note() { echo "# $*" | tee -a "$csv"; }

# cuSOLVERMp's directory (nvidia/cu13 with lib/ and include/).
mpdir=""
for d in ${MP:+"$MP"} ${PYTHONPATH:+$(echo "$PYTHONPATH" | tr ':' ' ')} /tmp/mp; do
  if [ -f "$d/nvidia/cu13/lib/libcusolverMp.so.0" ] && [ -f "$d/nvidia/cu13/include/cusolverMp.h" ]; then
    mpdir="$d/nvidia/cu13"
    break
  fi
done
if [ -z "$mpdir" ]; then
  whl="$(ls "$root"/.whl/nvidia_cusolvermp_cu13-*.whl 2>/dev/null | head -n 1)"
  if [ -n "$whl" ] && python3 -m zipfile -e "$whl" "$out/mp" >>"$log" 2>&1; then
    mpdir="$out/mp/nvidia/cu13"
  fi
fi
nccl=""
for d in "$cuda/lib64" "$cuda/lib"; do [ -z "$nccl" ] && [ -f "$d/libnccl.so.2" ] && nccl="$d"; done
[ -n "$nccl" ] || nccl="$(dirname "$(find / -name 'libnccl.so.2' -not -path '/proc/*' 2>/dev/null | head -n 1)")"
note "machine: $(nproc) CPUs; $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | tr '\n' ';')"
note "cuSOLVERMp: ${mpdir:-not found}; NCCL: $nccl; CUDA: $cuda; CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"
{ nvidia-smi; nvidia-smi topo -m; lscpu; } >>"$log" 2>&1

bin="$out/probe-eig-parts"
inc=(-I"$cuda/include")
[ -n "$mpdir" ] && inc+=(-I"$mpdir/include")
if ! gcc -std=c11 -O2 -Wall -Wextra -Werror "${inc[@]}" "$root/scripts/probe-eig-parts.c" \
    -o "$bin" -L"$cuda/lib64" -L"$nccl" -Wl,-rpath,"$cuda/lib64:$nccl" \
    -lcusolver -lcublas -lcurand -l:libnccl.so.2 -lcudart -lpthread -ldl -lm >>"$log" 2>&1; then
  tail -n 30 "$log"
  note "build failed"
  exit 1
fi
export LD_LIBRARY_PATH="$cuda/lib64:$nccl${mpdir:+:$mpdir/lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# part SECONDS ARGS...: one process, its lines into the csv as they come.
part() {
  local limit="$1"; shift
  local t0=$SECONDS
  note "== $* (limit ${limit} s)"
  timeout -k 5 "$limit" "$bin" "$@" 2>>"$log" | grep --line-buffered -v '^part,' | tee -a "$csv"
  local rc=${PIPESTATUS[0]}
  note "== exit $rc after $((SECONDS - t0)) s$([ "$rc" = 124 ] && echo ' (timed out: its last line says where)')"
}

echo "part,n,ranks,nb,seconds,status,note" | tee -a "$csv"
part 90 dn "$sizes"
if [ -n "$mpdir" ]; then
  part 90 mp 1 "$nb" "$sizes" "$mpdir/lib/libcusolverMp.so.0"
  part 120 mp 2 "$nb" "$sizes" "$mpdir/lib/libcusolverMp.so.0"
  [ -n "$nb2" ] && part 90 mp 2 "$nb2" 16384 "$mpdir/lib/libcusolverMp.so.0"
else
  note "no cuSOLVERMp: its parts skipped"
fi
lapack="$(python3 -c 'import glob, os, scipy; print((glob.glob(os.path.join(os.path.dirname(scipy.__file__), os.pardir, "scipy.libs", "libscipy_openblas*.so")) or [""])[0])' 2>/dev/null || true)"
prefix=scipy_
if [ -z "$lapack" ]; then lapack=liblapack.so.3; prefix=; fi
part $((budget + 40)) host "$lapack" "$prefix" "$host_sizes" "$bands" "$budget"

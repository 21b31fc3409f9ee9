#!/usr/bin/env bash
# Builds and runs scripts/probe-eig-mgpu.c on a GPU machine (issue 37): the
# multi-GPU tridiagonal reduction (csrc/engine/eig_mgpu/) alone on 1 and 2
# GPUs against cusolverDnDsytrd, and its checks (Q's orthogonality and
# A = Q T Q^T at a small N; T's eigenvalues against cusolverDnXsyevd's).
# About 90 s on 2 GPUs.
#
#   bash scripts/probe-eig-mgpu.sh OUTDIR
#
# Writes OUTDIR/probe-eig-mgpu.csv (every line, also printed) and
# OUTDIR/probe-eig-mgpu.log (stderr, the build, the machine). Each part is
# its own process under `timeout`: a hang costs that part only.
#
# Environment (defaults): SIZES (8192,16384), GPUS (1,2), NBS (64: the
# panel; the replicated path takes at most 64), PATHS (replicated,owner: the
# reduction's ways of running a column, trd.h jmg_trd_path), DN (1: the
# cuSOLVERDn baselines too; 0: not), ORTH (1: the small-N checks first; 0:
# not), TILE (256: the column tile of the
# block-cyclic layout), REPS (2
# timed runs after a warm-up), CHECK_MAX (16384: T's eigenvalues are
# checked up to this N; each check costs two cusolverDnXsyevd), CUDA_HOME.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-/tmp/probe-eig-mgpu}"
mkdir -p "$out"
csv="$out/probe-eig-mgpu.csv"
log="$out/probe-eig-mgpu.log"
: >"$csv"
: >"$log"
cuda="${CUDA_HOME:-/usr/local/cuda}"
sizes="${SIZES:-8192,16384}"
gpus="${GPUS:-1,2}"
nbs="${NBS:-64}"
paths="${PATHS:-replicated,owner}"
tile="${TILE:-256}"
reps="${REPS:-2}"
check_max="${CHECK_MAX:-16384}"

note() { echo "# $*" | tee -a "$csv"; }
note "machine: $(nproc) CPUs; $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | tr '\n' ';')"
note "CUDA: $cuda; CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}; commit $(cat "$root/.commit" 2>/dev/null || git -C "$root" rev-parse --short HEAD 2>/dev/null)"
{ nvidia-smi; nvidia-smi topo -m; } >>"$log" 2>&1

bin="$out/probe-eig-mgpu"
if ! gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$cuda/include" -I"$root/csrc" \
    "$root/scripts/probe-eig-mgpu.c" "$root"/csrc/engine/eig_mgpu/sytrd*.c \
    "$root/csrc/engine/eig_mgpu/ormtr.c" "$root/csrc/engine/eig_mgpu/kernels.c" \
    "$root/csrc/cuda/ptx.c" "$root/csrc/cuda/check.c" \
    "$root/csrc/common/error.c" -o "$bin" -L"$cuda/lib64" -Wl,-rpath,"$cuda/lib64" \
    -lcusolver -lcublas -lcurand -lcudart -lpthread -lm >>"$log" 2>&1; then
  tail -n 30 "$log"
  note "build failed"
  exit 1
fi
export LD_LIBRARY_PATH="$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ngpu="$(nvidia-smi -L 2>/dev/null | wc -l)"
echo "part,n,gpus,nb,tile,seconds,status,note" | tee -a "$csv"

# part SECONDS ARGS...: one process, its lines into the csv as they come.
part() {
  local limit="$1"; shift
  local t0=$SECONDS
  timeout -k 5 "$limit" "$bin" "$@" 2>>"$log" | tee -a "$csv"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || note "$* ended with status $rc after $((SECONDS - t0)) s"
}

# Correctness first, small: 1 and 2 GPUs, panels narrower than, equal to
# and cut by the tile, an N that is no multiple of anything.
for path in ${paths//,/ }; do
  [ "${ORTH:-1}" = 1 ] || break
  for g in ${gpus//,/ }; do
    [ "$g" -le "$ngpu" ] || continue
    part 60 orth "$g" 1024 64 256 "$path"
    part 60 orth "$g" 1000 16 48 "$path"
    part 60 orth "$g" 777 32 40 "$path"
  done
done
for n in ${sizes//,/ }; do
  [ "${DN:-1}" = 1 ] && part 120 dn "$n"
  for g in ${gpus//,/ }; do
    [ "$g" -le "$ngpu" ] || { note "skip $g GPUs: $ngpu here"; continue; }
    for path in ${paths//,/ }; do
      for nb in ${nbs//,/ }; do
        chk=0
        [ "$n" -le "$check_max" ] && [ "$nb" = "${nbs%%,*}" ] && chk=1
        part 180 mg "$g" "$n" "$nb" "$tile" "$chk" "$reps" "$path"
      done
    done
  done
done
note "done in $SECONDS s"

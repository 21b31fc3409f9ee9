#!/usr/bin/env bash
# On a GPU machine: build jaxmg against the machine's own python3 (no network,
# no build isolation: jax, scikit-build-core, cmake and ninja must be there),
# then run the GPU tests with timeouts, writing logs to LOGDIR.
#
#   scripts/device-test.sh LOGDIR [extra pytest arguments]
#
# Environment: PYTHON (default python3), JAXMG_TEST_TIMEOUT (seconds for each
# pytest run, default 1500), JAXMG_GPU_SETS (space-separated CUDA_VISIBLE_DEVICES
# values, one pytest run each, e.g. "0,1,2,3 0,1 0"; default: all GPUs once).
# Logs: LOGDIR/pytest-<set>.log, with the set's commas as dashes.
# JAXMG_NO_BUILD=1 reuses an earlier build in JAXMG_SITE (default
# /tmp/jaxmg-site) on the same machine.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
logdir="${1:?usage: scripts/device-test.sh LOGDIR [pytest args]}"
shift
mkdir -p "$logdir"
python="${PYTHON:-python3}"
site="${JAXMG_SITE:-/tmp/jaxmg-site}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
# NVLink multicast stays off on shared machines.
export NCCL_NVLS_ENABLE=0

{ nvidia-smi; nvidia-smi topo -m; } >"$logdir/nvidia-smi.txt" 2>&1
if [ -n "${JAXMG_NO_BUILD:-}" ] && [ -d "$site/jaxmg" ]; then
  echo "== reusing the build in $site"
else
  echo "== build ($python)"
  rm -rf "$site"
  if ! "$python" -m pip install --no-build-isolation --no-deps --no-index \
        --target "$site" -v "$root" >"$logdir/build.log" 2>&1; then
    tail -n 60 "$logdir/build.log"
    echo "device-test: build failed (log: $logdir/build.log)"
    exit 1
  fi
  grep -E "libjaxmg_(cpu|cuda)|Building libjaxmg_cuda" "$logdir/build.log" | head -5
  ls "$site/jaxmg"
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
cd "$root"
status=0
for set in ${JAXMG_GPU_SETS:-all}; do
  label="${set//,/-}"
  if [ "$set" = all ]; then unset CUDA_VISIBLE_DEVICES; else export CUDA_VISIBLE_DEVICES="$set"; fi
  echo "== GPU tests (GPUs: $set)"
  timeout "${JAXMG_TEST_TIMEOUT:-1500}" "$python" -m pytest -q -rs -p no:cacheprovider \
    --timeout 900 --durations=10 tests/gpu "$@" 2>&1 | tee "$logdir/pytest-$label.log" |
    grep -vE "only supports IOTA device assignment"
  rc="${PIPESTATUS[0]}"
  echo "== GPUs $set: pytest exit $rc"
  [ "$rc" = 0 ] || status=1
done
unset CUDA_VISIBLE_DEVICES
exit "$status"

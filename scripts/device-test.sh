#!/usr/bin/env bash
# On a GPU machine: build jaxmg against the machine's own python3 (no network,
# no build isolation: jax, scikit-build-core, cmake and ninja must be there),
# then run the GPU tests with timeouts, writing logs to LOGDIR.
#
#   scripts/device-test.sh LOGDIR [extra pytest arguments]
#
# Environment: PYTHON (default python3), JAXMG_TEST_TIMEOUT (seconds for the
# whole pytest run, default 1500).
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
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
cd "$root"
echo "== GPU tests"
timeout "${JAXMG_TEST_TIMEOUT:-1500}" "$python" -m pytest -q -rs -p no:cacheprovider \
  --timeout 900 --durations=20 tests/gpu "$@" 2>&1 | tee "$logdir/pytest.log"
exit "${PIPESTATUS[0]}"

#!/usr/bin/env bash
# On a GPU machine: build jaxmg against the machine's own python3 (no network,
# no build isolation: jax, scikit-build-core, cmake and ninja must be there),
# then run the GPU tests with timeouts, writing logs to LOGDIR.
#
#   scripts/device-test.sh LOGDIR [extra pytest arguments]
#
# The tests run are tests/gpu, or, where the extra arguments name test files
# or folders (tests/gpu/test_gpu_qr.py, tests/gpu/test_gpu_x.py::test_y),
# those alone (a timeout is spent on what was asked, not on the whole
# folder).
#
# Environment: PYTHON (default python3), JAXMG_TEST_TIMEOUT (seconds for each
# pytest run, default 1500), JAXMG_GPU_SETS (space-separated CUDA_VISIBLE_DEVICES
# values, one pytest run each, e.g. "0,1,2,3 0,1 0"; default: all GPUs once),
# JAXMG_SKIP_BUILD=1 (reuse the build of an earlier call on a machine still
# warm); see also scripts/device-lib.sh. cuSOLVERMp's wheel, carried in .whl/
# (or ../.whl/), is installed first: the cuSOLVERMp tests skip without it.
# Logs: LOGDIR/pytest-<set>.log, with the set's commas as dashes, and
# LOGDIR/progress-<set>.txt (each test's start, outcome and seconds as it
# goes: what a run cut by its bound still tells; python
# tests/gpu/suite_times.py on it makes the seconds per file), and
# LOGDIR/times-<set>.txt (the seconds per test file, tests/gpu/conftest.py's
# table, also at the end of the pytest log, with the 30 dearest tests).
set -uo pipefail
logdir="${1:?usage: scripts/device-test.sh LOGDIR [pytest args]}"
shift
# shellcheck source=scripts/device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
mkdir -p "$logdir"
jaxmg_device_env
jaxmg_machine_info "$logdir"
if [ "${JAXMG_SKIP_BUILD:-0}" = 1 ] && [ -d "$jaxmg_site/jaxmg" ]; then
  echo "== reusing the build in $jaxmg_site"
  jaxmg_use_site
else
  jaxmg_build "$logdir" || { echo "device-test: build failed"; exit 1; }
fi
jaxmg_carried_wheels "$logdir"
cd "$jaxmg_root" || exit 1
status=0
targets=(tests/gpu)
for arg in "$@"; do
  case "$arg" in tests/*) targets=(); break ;; esac
done
for set in ${JAXMG_GPU_SETS:-all}; do
  label="${set//,/-}"
  if [ "$set" = all ]; then unset CUDA_VISIBLE_DEVICES; else export CUDA_VISIBLE_DEVICES="$set"; fi
  echo "== GPU tests (GPUs: $set)"
  export JAXMG_TEST_PROGRESS="$logdir/progress-$label.txt"  # tests/gpu/conftest.py
  export JAXMG_TEST_SUMMARY="$logdir/times-$label.txt"
  timeout "${JAXMG_TEST_TIMEOUT:-1500}" "$jaxmg_python" -m pytest -q -rs -p no:cacheprovider \
    --timeout 900 --durations=30 ${targets[@]+"${targets[@]}"} "$@" 2>&1 | tee "$logdir/pytest-$label.log" |
    grep -vE "only supports IOTA device assignment"
  rc="${PIPESTATUS[0]}"
  echo "== GPUs $set: pytest exit $rc"
  [ "$rc" = 0 ] || status=1
done
unset CUDA_VISIBLE_DEVICES
exit "$status"

#!/usr/bin/env bash
# Session 18, call 4 (2 GPUs, the last ~250 s of device time): never_arrives with the watchdog's
# trace lines (JAXMG_TRACE=1 reaches the worker processes), then sygvd and syevd_tridiagonal
# (not reached in calls 2 and 3). carry [".snap", ".whl"]; run: bash .snap/call4.sh.
set -u
cd "$(dirname "$0")"
DEADLINE=${DEADLINE:-150}
left() { local l=$((DEADLINE - SECONDS)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
python3 -m pip install -q --no-deps --no-compile --target /tmp/mp ../.whl/nvidia_cusolvermp*.whl
export PYTHONPATH=/tmp/mp
source scripts/device-lib.sh; jaxmg_device_env
R=$OUT/r; mkdir -p $R
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
G=tests/gpu/test_gpu_
PYT="python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 100 --durations=10"
export CUDA_VISIBLE_DEVICES=0,1
JAXMG_TRACE=1 NCCL_DEBUG=WARN JAXMG_TEST_PROGRESS=$R/progress-faults.txt timeout $(left 60) $PYT ${G}mpmd_faults.py -k never_arrives > $R/pytest-faults.log 2>&1
echo "faults at ${SECONDS}s" > $R/times.txt
JAXMG_TEST_PROGRESS=$R/progress-rest.txt timeout $(left 120) $PYT ${G}sygvd.py ${G}syevd_tridiagonal.py > $R/pytest-rest.log 2>&1
echo "rest at ${SECONDS}s" >> $R/times.txt
tar czf $OUT/r.tar.gz -C $OUT r
cat $R/times.txt; tail -qn 1 $R/pytest-*.log; grep -h "watchdog\|Timeout\|File \"" $R/progress-faults.txt | cut -c1-250 | head -30

#!/usr/bin/env bash
# Session 19 call 3 (2 GPUs): never_arrives with the quit marks and the arrival check
# (JAXMG_TRACE=1: the watchdog's and the agreement's lines), then, one file at a time,
# the GPU test files that call 2's run did not reach (netket, ops, one_gpu, memory, mpmd,
# polar, qr, gesvd, potrs, shared_gpus). Prepare: .snap = git archive HEAD, this file
# copied into .snap; carry [".snap", ".whl"]; run: bash .snap/call3.sh.
set -u
cd "$(dirname "$0")"
source scripts/device-lib.sh; jaxmg_device_env
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-430}
R=$OUT/r; mkdir -p $R
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
jaxmg_carried_wheels $R >> $R/build.txt 2>&1
export CUDA_VISIBLE_DEVICES=0,1
G=tests/gpu/test_gpu_
PYT="python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 200 --durations=5"
JAXMG_TRACE=1 JAXMG_TEST_PROGRESS=$R/progress-faults.txt \
  timeout $(jaxmg_left 70) $PYT ${G}mpmd_faults.py -k never_arrives > $R/pytest-faults.log 2>&1
for f in netket ops one_gpu memory mpmd polar qr gesvd potrs shared_gpus; do
  l=$(jaxmg_left 200); [ "$l" -gt 15 ] || { echo "$f: not reached" >> $R/summary.txt; continue; }
  JAXMG_TEST_PROGRESS=$R/progress-rest.txt timeout $l $PYT ${G}$f.py > $R/pytest-$f.log 2>&1
  echo "$f: exit $? $(tail -n 1 $R/pytest-$f.log)" >> $R/summary.txt
done
tar czf $OUT/r.tar.gz -C $OUT r
tail -n 1 $R/pytest-faults.log; cat $R/summary.txt
grep -h "jaxmg trace \(watchdog\|agreement\)\|raised after" $R/progress-faults.txt $R/pytest-faults.log | cut -c1-300 | sort -u | head -20

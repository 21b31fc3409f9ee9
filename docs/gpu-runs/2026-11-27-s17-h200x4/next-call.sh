#!/usr/bin/env bash
# Not run (session 17 ran out of device time). Prepare: .snap = git archive HEAD; .snap/la = a merge of main with lu-lookahead, potrf-lookahead and getrs-owner; carry [".snap", ".whl"]; run: bash .snap/next-call.sh (copied to .snap).
# session 17, call 4 (last): GPU 0 TF32 mixed tests, GPU 1 bench/mixed.py, then GPUs 0,1 never_arrives + cusolverdn-local;
# GPUs 2,3: the combined branch (lu + potrf lookahead): lu_solve/potrs tests, bad inputs, potrs/lu_solve rows at 32768
set -u
cd "$(dirname "$0")"
python3 -m pip install -q --no-deps --no-compile --target /tmp/mp ../.whl/nvidia_cusolvermp*.whl
export PYTHONPATH=/tmp/mp
source scripts/device-lib.sh; jaxmg_device_env
R=$OUT/r; mkdir -p $R/a $R/b $R/la
( export JAXMG_SITE=/tmp/la-site PYTHONPATH=/tmp/mp; cd la && source scripts/device-lib.sh && jaxmg_build $R/la > $R/la/build.txt 2>&1; touch $R/la/done ) &
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
PYT="python3 -m pytest -q -p no:cacheprovider -rf"
(
  ( export CUDA_VISIBLE_DEVICES=0 JAXMG_TEST_PROGRESS=$R/a/progress-mixed.txt
    timeout ${T1:-75} $PYT tests/gpu/test_gpu_mixed_precision.py > $R/a/pytest-mixed.log 2>&1 ) &
  ( export CUDA_VISIBLE_DEVICES=1 JAXMG_TRACE=1; cd $R/a
    timeout ${T1:-75} python3 $OLDPWD/bench/mixed.py --n 16384 --kappa 1e2 1e6 1e12 --out mixed.csv > mixed-log.txt 2>&1 ) &
  wait
  export CUDA_VISIBLE_DEVICES=0,1 JAXMG_TEST_PROGRESS=$R/a/progress-mpmd.txt
  timeout ${T2:-85} $PYT tests/gpu/test_gpu_mpmd_faults.py -k "never_arrives" tests/gpu/test_gpu_cusolverdn_local.py > $R/a/pytest-mpmd.log 2>&1
) &
(
  while [ ! -f $R/la/done ]; do sleep 1; [ $SECONDS -gt 120 ] && break; done
  cd la
  export PYTHONPATH=/tmp/la-site:/tmp/mp CUDA_VISIBLE_DEVICES=2,3 JAXMG_TEST_PROGRESS=$R/b/progress.txt
  timeout ${T3:-100} $PYT tests/gpu/test_gpu_lu_solve.py tests/gpu/test_gpu_potrs.py tests/gpu/test_gpu_bad_inputs.py -k "lu_solve or potrs or tiled" > $R/b/pytest.log 2>&1
  unset JAXMG_TEST_PROGRESS
  timeout ${T4:-70} python3 bench/scaling.py --ops potrs,lu_solve --sizes 32768 --gpus 2 --engines default \
    --budget-s 55 --out $R/b/scaling > $R/b/scaling.log 2>&1
) &
wait
tar czf $OUT/r.tar.gz -C $OUT r
tail -n 2 $R/a/pytest-mixed.log $R/a/pytest-mpmd.log $R/b/pytest.log; cat $R/a/mixed.csv; cut -d, -f1-7,13 $R/b/scaling/results.csv

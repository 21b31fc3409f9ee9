#!/usr/bin/env bash
# Session 18, call 1 (4 GPUs). Prepare: .snap = git archive of main; .snap/la = git archive of
# multi-gpu-next (main + lu-lookahead + potrf-lookahead + getrs-owner); carry [".snap", ".whl"];
# run: bash .snap/call1.sh. Every step is bounded by what is left of a 560 s deadline.
# GPUs 0,1 (main): TF32 mixed tests (GPU 0) beside bench/mixed.py 16384 (GPU 1), then never_arrives +
# cusolverdn-local on GPUs 0,1, then bench/mixed.py 32768 (GPU 0) beside the rest of mpmd_faults (GPU 1).
# GPUs 2,3 (multi-gpu-next): lu_solve/potrs/bad_inputs tests, then potrs/lu_solve/potri rows at 32768.
set -u
cd "$(dirname "$0")"
DEADLINE=${DEADLINE:-560}
left() { local l=$((DEADLINE - SECONDS)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
python3 -m pip install -q --no-deps --no-compile --target /tmp/mp ../.whl/nvidia_cusolvermp*.whl
export PYTHONPATH=/tmp/mp
source scripts/device-lib.sh; jaxmg_device_env
R=$OUT/r; mkdir -p $R/a $R/b $R/la
( export JAXMG_SITE=/tmp/la-site PYTHONPATH=/tmp/mp; cd la && source scripts/device-lib.sh && jaxmg_build $R/la > $R/la/build.txt 2>&1; touch $R/la/done ) &
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
echo "main built at ${SECONDS}s" > $R/times.txt
PYT="python3 -m pytest -q -p no:cacheprovider -rf --durations=15"
(
  ( export CUDA_VISIBLE_DEVICES=0 JAXMG_TEST_PROGRESS=$R/a/progress-mixed.txt
    timeout $(left 110) $PYT tests/gpu/test_gpu_mixed_precision.py > $R/a/pytest-mixed.log 2>&1 ) &
  ( export CUDA_VISIBLE_DEVICES=1 JAXMG_TRACE=1; cd $R/a
    timeout $(left 110) python3 $OLDPWD/bench/mixed.py --n 16384 --kappa 1e2 1e6 1e12 --out mixed16k.csv > mixed16k-log.txt 2>&1 ) &
  wait; echo "lane a step 1 done at ${SECONDS}s" >> $R/times.txt
  ( export CUDA_VISIBLE_DEVICES=0,1 JAXMG_TEST_PROGRESS=$R/a/progress-mpmd.txt
    timeout $(left 130) $PYT tests/gpu/test_gpu_mpmd_faults.py -k "never_arrives" tests/gpu/test_gpu_cusolverdn_local.py > $R/a/pytest-mpmd.log 2>&1 )
  echo "lane a step 2 done at ${SECONDS}s" >> $R/times.txt
  ( export CUDA_VISIBLE_DEVICES=0 JAXMG_TRACE=1; cd $R/a
    timeout $(left 300) python3 $OLDPWD/bench/mixed.py --n 32768 --kappa 1e2 1e6 --out mixed32k.csv > mixed32k-log.txt 2>&1 ) &
  ( export CUDA_VISIBLE_DEVICES=1 JAXMG_TEST_PROGRESS=$R/a/progress-one.txt
    timeout $(left 300) $PYT tests/gpu/test_gpu_one_gpu.py tests/gpu/test_gpu_logdet.py tests/gpu/test_gpu_memory.py > $R/a/pytest-one.log 2>&1 ) &
  wait
) &
(
  while [ ! -f $R/la/done ]; do sleep 1; [ $SECONDS -gt 200 ] && break; done
  echo "la built at ${SECONDS}s" >> $R/times.txt
  cd la
  export PYTHONPATH=/tmp/la-site:/tmp/mp CUDA_VISIBLE_DEVICES=2,3 JAXMG_TEST_PROGRESS=$R/b/progress.txt
  timeout $(left 200) $PYT tests/gpu/test_gpu_lu_solve.py tests/gpu/test_gpu_potrs.py tests/gpu/test_gpu_bad_inputs.py -k "lu_solve or potrs or tiled" > $R/b/pytest.log 2>&1
  echo "lane b tests done at ${SECONDS}s" >> $R/times.txt
  unset JAXMG_TEST_PROGRESS
  timeout $(left 170) python3 bench/scaling.py --ops potrs,lu_solve,potri --sizes 32768 --gpus 2 --engines default \
    --budget-s $(( $(left 170) - 10 )) --out $R/b/scaling > $R/b/scaling.log 2>&1
  echo "lane b scaling done at ${SECONDS}s" >> $R/times.txt
) &
wait
tar czf $OUT/r.tar.gz -C $OUT r
cat $R/times.txt; tail -n 3 $R/a/pytest-*.log $R/b/pytest.log; cat $R/a/mixed*.csv; cut -d, -f1-7,13 $R/b/scaling/results.csv

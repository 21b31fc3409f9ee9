#!/usr/bin/env bash
# session 17, call 3: GPUs 0,1: rest of the 2-GPU suite; GPUs 2,3: scaling (main), then the lu-lookahead branch's tests and lu_solve rows
set -u
cd "$(dirname "$0")"
here=$PWD
python3 -m pip install -q --no-deps --no-compile --target /tmp/mp ../.whl/nvidia_cusolvermp*.whl
export PYTHONPATH=/tmp/mp
source scripts/device-lib.sh; jaxmg_device_env
mkdir -p $OUT/r/a $OUT/r/la
jaxmg_build $OUT/r > $OUT/r/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
( export JAXMG_SITE=/tmp/la-site PYTHONPATH=/tmp/mp; cd la && source scripts/device-lib.sh && jaxmg_build $OUT/r/la > $OUT/r/la/build.txt 2>&1 ) &
A="tests/gpu/test_gpu_mpmd_faults.py tests/gpu/test_gpu_logdet.py tests/gpu/test_gpu_lu_solve.py tests/gpu/test_gpu_mixed_precision.py tests/gpu/test_gpu_potrs.py tests/gpu/test_gpu_qr.py tests/gpu/test_gpu_sygvd.py tests/gpu/test_gpu_memory.py tests/gpu/test_gpu_netket.py tests/gpu/test_gpu_syevd_tridiagonal.py tests/gpu/test_gpu_shared_gpus.py"
JAXMG_SKIP_BUILD=1 JAXMG_TEST_TIMEOUT=470 JAXMG_GPU_SETS=0,1 scripts/device-test.sh $OUT/r/a $A > $OUT/r/a.out 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=2,3
  timeout 300 python3 bench/scaling.py --ops potrs,lu_solve,potri,syevd --sizes 16384,32768 --gpus 1,2 \
    --engines default,cusolvermg --budget-s 270 --out $OUT/r/scaling > $OUT/r/scaling.log 2>&1
  wait
  cd la
  export PYTHONPATH=/tmp/la-site:/tmp/mp JAXMG_TEST_PROGRESS=$OUT/r/la/progress.txt
  timeout 90 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gpu_lu_solve.py > $OUT/r/la/pytest.log 2>&1
  unset JAXMG_TEST_PROGRESS
  timeout 100 python3 bench/scaling.py --ops lu_solve --sizes 32768 --gpus 2 --engines default,cusolvermg \
    --budget-s 90 --out $OUT/r/la/scaling > $OUT/r/la/scaling.log 2>&1
) &
wait
tar czf $OUT/r.tar.gz -C $OUT r
tail -n 3 $OUT/r/a/pytest-0-1.log; tail -n 3 $OUT/r/la/pytest.log; grep -h "FAIL\|lu_solve" $OUT/r/scaling/*.csv $OUT/r/la/scaling/*.csv | head -30

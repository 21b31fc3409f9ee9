#!/usr/bin/env bash
# Session 18, call 2 (4 GPUs): the whole GPU suite on 2 GPUs, as two pytest runs at once on
# disjoint pairs (0,1 and 2,3), each half of the files; then, on the pair that ends first with
# time left, potrs at N=32768 on 2 GPUs before (.snap/pre = 7fb18ac) and after the lookahead
# merge (d8d7424), side by side. Prepare: .snap = git archive HEAD, .snap/pre = git archive
# 7fb18ac; carry [".snap", ".whl"]; run: bash .snap/call2.sh. Bounded by a 555 s deadline.
set -u
cd "$(dirname "$0")"
DEADLINE=${DEADLINE:-555}
left() { local l=$((DEADLINE - SECONDS)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
python3 -m pip install -q --no-deps --no-compile --target /tmp/mp ../.whl/nvidia_cusolvermp*.whl
export PYTHONPATH=/tmp/mp
source scripts/device-lib.sh; jaxmg_device_env
R=$OUT/r; mkdir -p $R/h1 $R/h2 $R/pre $R/ab
( export JAXMG_SITE=/tmp/pre-site PYTHONPATH=/tmp/mp; cd pre && source scripts/device-lib.sh && jaxmg_build $R/pre > $R/pre/build.txt 2>&1; touch $R/pre/done ) &
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
jaxmg_machine_info $R > /dev/null 2>&1
echo "built at ${SECONDS}s" > $R/times.txt
G=tests/gpu/test_gpu_
PYT="python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 200 --durations=30"
export OPENBLAS_NUM_THREADS=16 OMP_NUM_THREADS=16
ab() {  # potrs before/after the merge on this lane's pair, once
  mkdir $R/ab/lock 2>/dev/null || return 0
  [ "$(left 999)" -lt 100 ] && { echo "no time for the A/B" > $R/ab/skipped; return 0; }
  echo "A/B on $CUDA_VISIBLE_DEVICES from ${SECONDS}s" >> $R/times.txt
  local half=$(( ($(left 999) - 10) / 2 ))
  ( cd pre && PYTHONPATH=/tmp/pre-site:/tmp/mp timeout $half python3 bench/scaling.py --ops potrs --sizes 32768 --gpus 2 --engines default --budget-s $((half - 5)) --out $R/ab/pre > $R/ab/pre.log 2>&1 )
  timeout $(left $half) python3 bench/scaling.py --ops potrs --sizes 32768 --gpus 2 --engines default --budget-s $((half - 5)) --out $R/ab/post > $R/ab/post.log 2>&1
  echo "A/B done at ${SECONDS}s" >> $R/times.txt
}
( export CUDA_VISIBLE_DEVICES=0,1 JAXMG_TEST_PROGRESS=$R/h1/progress.txt
  timeout $(left 540) $PYT ${G}cusolvermp.py ${G}bad_inputs.py ${G}derivatives.py ${G}errors.py ${G}gather.py \
    ${G}memory.py ${G}cusolverdn_local.py ${G}netket.py > $R/h1/pytest.log 2>&1
  echo "half 1 done at ${SECONDS}s" >> $R/times.txt; ab ) &
( export CUDA_VISIBLE_DEVICES=2,3 JAXMG_TEST_PROGRESS=$R/h2/progress.txt
  timeout $(left 540) $PYT ${G}mpmd_faults.py ${G}mpmd.py ${G}shared_gpus.py ${G}gesvd.py ${G}logdet.py ${G}lu_solve.py \
    ${G}mixed_precision.py ${G}one_gpu.py ${G}ops.py ${G}polar.py ${G}potrs.py ${G}qr.py ${G}syevd_tridiagonal.py \
    ${G}sygvd.py -k "not (tf32_factorization and 1e6)" > $R/h2/pytest.log 2>&1
  echo "half 2 done at ${SECONDS}s" >> $R/times.txt; ab ) &
wait
tar czf $OUT/r.tar.gz -C $OUT r
cat $R/times.txt; tail -n 4 $R/h1/pytest.log $R/h2/pytest.log; grep -h "^FAILED\|^ERROR" $R/h*/pytest.log | cut -c1-250
cut -d, -f1-7,13 $R/ab/pre/results.csv $R/ab/post/results.csv 2>/dev/null

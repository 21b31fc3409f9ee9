#!/usr/bin/env bash
# Session 18, call 3 (2 GPUs: no 4-GPU kind was lent any more). Prepare: .snap = git archive of
# main; .snap/la = git archive of branch potrf-lookahead (d49b842: SM-split lookahead,
# bench/potrs_ab.py); carry [".snap", ".whl"]; run: bash .snap/call3.sh. Steps in order of
# value, each bounded by what is left of a 545 s deadline:
# A (GPUs 0,1): never_arrives with diagnostics; cusolverdn-local (now on by default) and
#   cuSOLVERMp's eigensolver tests; the mixed-precision tests after the fail-fast policy; polar's
#   gather cases, syevd_tridiagonal and sygvd (cut in call 2).
# B (GPUs 0,1): potrs at N=32768 on 2 GPUs, lookahead variants side by side (branch potrf-lookahead).
# C: GPU 0 bench/mixed.py 16384 (TF32) beside GPU 1 the same with JAXMG_MIXED_LOW=bf16x9.
# D (GPUs 0,1): the eigensolver parts probe, with what is left.
set -u
cd "$(dirname "$0")"
DEADLINE=${DEADLINE:-545}
left() { local l=$((DEADLINE - SECONDS)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
python3 -m pip install -q --no-deps --no-compile --target /tmp/mp ../.whl/nvidia_cusolvermp*.whl
export PYTHONPATH=/tmp/mp
source scripts/device-lib.sh; jaxmg_device_env
R=$OUT/r; mkdir -p $R/a $R/b $R/c $R/la
( export JAXMG_SITE=/tmp/la-site PYTHONPATH=/tmp/mp; cd la && source scripts/device-lib.sh && jaxmg_build $R/la > $R/la/build.txt 2>&1; touch $R/la/done ) &
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
jaxmg_machine_info $R > /dev/null 2>&1
echo "built at ${SECONDS}s" > $R/times.txt
G=tests/gpu/test_gpu_
PYT="python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 150 --durations=20"
export CUDA_VISIBLE_DEVICES=0,1
step() { local name=$1 cap=$2; shift 2; [ "$(left 999)" -lt 20 ] && return 0
  JAXMG_TEST_PROGRESS=$R/a/progress-$name.txt timeout $(left $cap) $PYT "$@" > $R/a/pytest-$name.log 2>&1
  echo "$name done at ${SECONDS}s" >> $R/times.txt; }
step faults 60 ${G}mpmd_faults.py -k never_arrives
step local 120 ${G}cusolverdn_local.py ${G}cusolvermp.py -k "cusolverdn_local or local_model or syevd or sygvd or eigh"
step mixed 120 ${G}mixed_precision.py
step rest 120 ${G}polar.py -k gather ${G}sygvd.py ${G}syevd_tridiagonal.py
while [ ! -f $R/la/done ]; do sleep 1; done
( cd la && PYTHONPATH=/tmp/la-site:/tmp/mp timeout $(left 80) python3 bench/potrs_ab.py --n 32768 --gpus 2 \
    --variants JAXMG_POTRF_LOOKAHEAD=0 JAXMG_POTRF_LOOKAHEAD_SMS=16 JAXMG_POTRF_LOOKAHEAD_SMS=32 \
      JAXMG_POTRF_LOOKAHEAD=green,JAXMG_POTRF_LOOKAHEAD_SMS=16 JAXMG_POTRF_LOOKAHEAD=green,JAXMG_POTRF_LOOKAHEAD_SMS=32 \
    > $R/b/potrs_ab.csv 2> $R/b/potrs_ab.log )
echo "B done at ${SECONDS}s" >> $R/times.txt
( export CUDA_VISIBLE_DEVICES=0 JAXMG_TRACE=1; cd $R/c
  timeout $(left 110) python3 $OLDPWD/bench/mixed.py --n 16384 --kappa 1e2 1e6 1e12 --out mixed.csv > mixed-log.txt 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 JAXMG_MIXED_LOW=bf16x9 JAXMG_TRACE=1; cd $R/c
  timeout $(left 110) python3 $OLDPWD/bench/mixed.py --n 16384 --kappa 1e2 1e6 1e12 --out bf16x9.csv > bf16x9-log.txt 2>&1 ) &
wait
echo "C done at ${SECONDS}s" >> $R/times.txt
[ "$(left 999)" -gt 60 ] && SIZES=8192,16384 HOST_SIZES=8192 HOST_BUDGET_S=15 timeout $(left 200) bash scripts/probe-eig-parts.sh $R/d > $R/d.log 2>&1
echo "D done at ${SECONDS}s" >> $R/times.txt
tar czf $OUT/r.tar.gz -C $OUT r
cat $R/times.txt; tail -qn 1 $R/a/pytest-*.log; grep -h "^FAILED\|^ERROR" $R/a/pytest-*.log | cut -c1-250
cat $R/b/potrs_ab.csv; cut -c1-200 $R/c/mixed.csv $R/c/bf16x9.csv 2>/dev/null; grep -v "^#" $R/d/probe-eig-parts.csv 2>/dev/null | head -40

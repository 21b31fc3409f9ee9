#!/usr/bin/env bash
# Session 19, issue 39 (precision="mixed"): the refinement steps at bandwidth (branch
# mixed-fast: blocked triangular solves by gemv, symv residual), never run on a GPU before.
# Prepare: .snap = git archive of branch mixed-fast's HEAD (this file is in it); carry
# [".snap"]; kind nvidia-h200-x2 (the issue's targets are an H200's; nvidia-h100-x2 will do,
# every ratio in the csv files is taken on one machine); run:
#   bash .snap/docs/gpu-runs/2026-11-28-s19/mixed-call.sh
# About 250 s, every step bounded by what is left of JAXMG_DEADLINE (272 s): under $OUT the
# tarball r.tar.gz (every log, csv and progress file) and summary.txt (also on stdout).
#   A (GPU 0): tests/gpu/test_gpu_mixed_precision.py (its one-GPU cases, the new
#      test_refinement_steps_variants_converge_alike among them; about 100 s), then
#      bench/mixed.py --ops potrs at N = 16384, kappa 1e2 1e6 1e12, the default steps
#      beside session 18's (JAXMG_TF32_TRSM=1,JAXMG_REFINE_NB=0,JAXMG_REFINE_RESIDUAL=symm),
#      the trsm panels alone, gemv's residual and solve blocks of 512 (the default reuses
#      the factor's 1024);
#   B (GPU 1, beside A): potrs at N = 32768 beside session 18's steps, then lu_solve
#      (cusolverDnIRSXgesv, unchanged) at N = 32768 and 16384, kappa 1e2 1e6 1e12;
#   C (GPUs 0 and 1, after A and B): bench/mixed.py --gpus 2 (jaxmg's mixed path, which
#      gathers A onto GPU 0, against jaxmg's exact path on both GPUs: the issue's 2-GPU
#      ratio, never measured), N = 32768, kappa 1e2 and 1e12, both ops; then the test file's
#      2-GPU cases with what is left (at least 30 s), but for
#      test_gathered_copy_that_does_not_fit_runs_cusolvermg_s_exact_potrs (22 s, cuSOLVERMg's
#      exact potrs, which this branch does not touch).
# Every mixed row has the trace's split of the refinement (columns solves, solve_ms,
# products, product_ms: the corrections' solves with the factor and the residuals' products
# with A, summed over the call) and invert_ms (the diagonal blocks' inversion).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
for root in "$here" "$here/../../.."; do [ -f "$root/scripts/device-lib.sh" ] && break; done
cd "$root" || exit 1
source scripts/device-lib.sh; jaxmg_device_env
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-272}
# The logs outside $OUT, which brings back 8 files at most: only r.tar.gz and summary.txt
# go there.
W=/tmp/jaxmg-s19; R=$W/r; rm -rf "$W"; mkdir -p "$R"
finish() { tar czf "$OUT/r.tar.gz" -C "$W" r; }
# What is left of the deadline, at most $1 s and at least 1 s (timeout 0 would not bound).
cap() { local l; l=$(jaxmg_left "$1"); [ "$l" -lt 1 ] && l=1; echo "$l"; }
jaxmg_build "$R" > "$R/build.txt" 2>&1 || { cat "$R/build.txt"; finish; exit 1; }
jaxmg_machine_info "$R"
echo "built at ${SECONDS}s" > "$R/times.txt"
PYT="python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 100 --durations=15"
BENCH="python3 $PWD/bench/mixed.py"
S18=JAXMG_TF32_TRSM=1,JAXMG_REFINE_NB=0,JAXMG_REFINE_RESIDUAL=symm
K="--kappa 1e2 1e6 1e12"
(
  export CUDA_VISIBLE_DEVICES=0
  JAXMG_TEST_PROGRESS=$R/progress-mixed.txt timeout "$(cap 120)" \
    $PYT tests/gpu/test_gpu_mixed_precision.py > "$R/pytest-mixed.log" 2>&1
  echo "A tests done at ${SECONDS}s" >> "$R/times.txt"
  cd "$R" && timeout "$(cap 40)" $BENCH --ops potrs --n 16384 $K \
    --variants - $S18 JAXMG_TF32_TRSM=1 JAXMG_REFINE_RESIDUAL=gemv JAXMG_REFINE_NB=512 \
    --out mixed16k-potrs.csv > mixed16k-potrs-log.txt 2>&1
  echo "A potrs done at ${SECONDS}s" >> "$R/times.txt"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  cd "$R" && timeout "$(cap 60)" $BENCH --ops potrs --n 32768 $K \
    --variants - $S18 --out mixed32k-potrs.csv > mixed32k-potrs-log.txt 2>&1
  echo "B potrs done at ${SECONDS}s" >> "$R/times.txt"
  timeout "$(cap 80)" $BENCH --ops lu_solve --n 32768 $K \
    --out mixed32k-lu.csv > mixed32k-lu-log.txt 2>&1
  echo "B lu_solve 32768 done at ${SECONDS}s" >> "$R/times.txt"
  timeout "$(cap 40)" $BENCH --ops lu_solve --n 16384 $K \
    --out mixed16k-lu.csv > mixed16k-lu-log.txt 2>&1
  echo "B lu_solve 16384 done at ${SECONDS}s" >> "$R/times.txt"
) &
wait
export CUDA_VISIBLE_DEVICES=0,1
left=$(jaxmg_left 999)
[ "$left" -gt 50 ] && (cd "$R" && timeout $((left - 30)) $BENCH --gpus 2 \
  --n 32768 --kappa 1e2 1e12 --out mixed-2gpu.csv > mixed-2gpu-log.txt 2>&1)
echo "C bench done at ${SECONDS}s" >> "$R/times.txt"
JAXMG_TEST_PROGRESS=$R/progress-two.txt timeout "$(cap 60)" \
  $PYT tests/gpu/test_gpu_mixed_precision.py -k "two_gpus or distributed_engines" \
  > "$R/pytest-two.log" 2>&1
echo "C tests done at ${SECONDS}s" >> "$R/times.txt"
finish
{
  cat "$R/times.txt"; tail -qn 1 "$R"/pytest-*.log
  grep -h "^FAILED\|^ERROR" "$R"/pytest-*.log | cut -c1-250
  for f in mixed16k-potrs mixed16k-lu mixed32k-potrs mixed32k-lu mixed-2gpu; do
    echo "== $f"; [ -f "$R/$f.csv" ] && cut -d, -f1-5,9-15,17-19,23-29 "$R/$f.csv"
  done
} | tee "$OUT/summary.txt"

#!/usr/bin/env bash
# Session 20: the whole GPU suite (tests/gpu, every file) on 2 GPUs in ONE pytest run, then, with
# the time left, the whole suite on 1 GPU in one pytest run (issue 36 item 1). One device call:
# the tests end by 560 s from the script's start (JAXMG_DEADLINE, build included), the call by
# about 580 s (a test stopped at the bound gets 15 s before it is killed, then the logs' packing).
#
# Prepare (here): .snap = git archive of the tree to test, this file copied into .snap (or left
# where it is: the script finds the tree's root above it); .whl holds cuSOLVERMp's wheel and
# NetKet's with its missing dependencies (docs/gpu-runs/2026-11-28-s19/README.md, "The wheels a
# call carries"); carry [".snap", ".whl"]; run on 2 GPUs (nvidia-h200-x2, or h100-x2):
#   bash .snap/suite-call.sh
#
# Expected (suite-time.md, here): about 950 s of tests on 2 GPUs and 600 s on 1 GPU, estimated
# from sessions 17-19 without the compilation cache: the 2-GPU run may well be cut at its bound
# (its progress file then says how far it came, test by test) and the 1-GPU run get little or
# no time; the per-test times against suite-time.md's tell what the cache and the cuts did.
#
# What comes back: $OUT/r.tar.gz, rewritten every 20 s while the tests run (a call cut by its
# bound still brings the last one), holding r/: build.txt, nvidia-smi.txt, for each GPU set
# (2gpu, 1gpu) pytest-<set>.log (with --durations=30 and tests/gpu/conftest.py's seconds per
# file at its end), progress-<set>.txt (every test's start and outcome as it goes),
# times-<set>.txt (the seconds per file, written at pytest's end) and
# times-from-progress-<set>.txt (the same from the progress file, start to next start: what a
# run cut short still tells, with the 40 dearest tests); summary.txt.
#
# Switches (environment):
#   JAXMG_SUITE_JAX_CACHE=1 (default): JAX's persistent compilation cache in /tmp, every
#     compile kept (JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0), for both runs and every
#     process the tests start: the 1-GPU run and the jobs and children reload what was
#     compiled before instead of compiling it again. Not run with the suite before; 0 turns
#     it off (the estimates of docs/gpu-runs/2026-11-28-s20/suite-time.md are without it).
#   JAXMG_TEST_CHILDREN (default 1): test_gpu_memory.py's children per GPU at once.
#   SUITE_ONE_GPU=0: skip the 1-GPU run; SUITE_TWO_GPU=0: skip the 2-GPU run.
#
# Parallel runs (session 20): on a machine of 4 GPUs the 2-GPU run is one pytest run with two
# pytest-xdist workers, on GPUs 0,1 and 2,3 (JAXMG_GPU_WORKER_SETS, tests/gpu/conftest.py); the
# 1-GPU run four workers, one a GPU (two on a machine of 2). Every test sees its set's GPUs
# alone; the tests that start jobs of processes stay on one worker (xdist_group "processes").
set -u
root="$(cd "$(dirname "$0")" && pwd)"
while [ ! -f "$root/scripts/device-lib.sh" ] && [ "$root" != / ]; do root="$(dirname "$root")"; done
cd "$root" || exit 1
source scripts/device-lib.sh; jaxmg_device_env
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-560}
R=/tmp/jaxmg-suite/r; rm -rf "$R"; mkdir -p "$R"
pack() {  # r/ into $OUT/r.tar.gz, replaced whole (a file being written may be caught mid-line)
  tar czf "$OUT/r.tmp.tgz" -C "$(dirname "$R")" r 2>/dev/null; mv -f "$OUT/r.tmp.tgz" "$OUT/r.tar.gz"
}
jaxmg_machine_info "$R"
{ jaxmg_build "$R" && jaxmg_carried_wheels "$R"; } > "$R/build.txt" 2>&1 || { pack; tail -n 30 "$R/build.txt"; exit 1; }
python3 -c "import jax, jaxmg; print('jax', jax.__version__, 'cusolvermp', jaxmg.cusolvermp_available()[0])" \
  >> "$R/build.txt" 2>&1
python3 -c "import netket; print('netket', netket.__version__)" >> "$R/build.txt" 2>&1 || echo "no netket" >> "$R/build.txt"
echo "built at ${SECONDS} s" > "$R/summary.txt"
if [ "${JAXMG_SUITE_JAX_CACHE:-1}" = 1 ]; then
  export JAX_COMPILATION_CACHE_DIR=/tmp/jaxmg-suite/jax-cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
  rm -rf "$JAX_COMPILATION_CACHE_DIR"
  echo "JAX compilation cache: $JAX_COMPILATION_CACHE_DIR" >> "$R/summary.txt"
fi
( while sleep 20; do pack; done ) > /dev/null 2>&1 & packer=$!  # no fd held: its sleep may outlive it

suite() {  # suite LABEL GPUS SECONDS [SETS]: the whole of tests/gpu in one pytest run on GPUS;
  # with SETS ("0,1 2,3"): one pytest-xdist worker per set, each seeing its set alone
  # (tests/gpu/conftest.py, JAXMG_GPU_WORKER_SETS), so every test still runs on GPUS' count.
  local label=$1 gpus=$2 bound=$3 sets=${4:-} xd=()
  if [ -n "$sets" ]; then
    unset CUDA_VISIBLE_DEVICES; export JAXMG_GPU_WORKER_SETS="$sets"
    set -- $sets; xd=(-n $# --dist loadgroup)
  else
    unset JAXMG_GPU_WORKER_SETS; export CUDA_VISIBLE_DEVICES=$2
  fi
  echo "$label: GPUs $gpus, sets '${sets}', bound ${bound} s, from ${SECONDS} s" >> "$R/summary.txt"
  # SIGINT at the bound: pytest stops at the test it is in and still prints its summaries
  # (tests/gpu/conftest.py's seconds per file among them); KILL 15 s later.
  JAXMG_TEST_PROGRESS="$R/progress-$label.txt" JAXMG_TEST_SUMMARY="$R/times-$label.txt" \
    timeout -s INT -k 15 "$bound" python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 300 \
    "${xd[@]}" --durations=30 tests/gpu > "$R/pytest-$label.log" 2>&1
  echo "$label: pytest exit $? at ${SECONDS} s: $(tail -n 1 "$R/pytest-$label.log")" >> "$R/summary.txt"
  [ -f "$R/progress-$label.txt" ] && python3 tests/gpu/suite_times.py "$R/progress-$label.txt" \
    --top 40 > "$R/times-from-progress-$label.txt" 2>&1
  pack
}

ngpu=$(nvidia-smi -L | wc -l)
if [ "${SUITE_TWO_GPU:-1}" = 1 ]; then
  if [ "$ngpu" -ge 4 ]; then suite 2gpu 0,1 "$(jaxmg_left 560)" "0,1 2,3"
  else suite 2gpu 0,1 "$(jaxmg_left 560)"; fi
fi
left=$(jaxmg_left 560)
if [ "${SUITE_ONE_GPU:-1}" = 1 ] && [ "$left" -gt 40 ]; then
  if [ "$ngpu" -ge 4 ]; then suite 1gpu 0 "$left" "0 1 2 3"
  else suite 1gpu 0 "$left" "0 1"; fi
else
  echo "1gpu: not run (${left} s left)" >> "$R/summary.txt"
fi
kill "$packer" 2>/dev/null; wait "$packer" 2>/dev/null
pack
cat "$R/summary.txt"
for label in 2gpu 1gpu; do
  [ -f "$R/progress-$label.txt" ] || continue
  echo "== $label"
  grep -E "^(FAILED|ERROR)" "$R/pytest-$label.log" | cut -c1-220 | head -20
  head -n 30 "$R/times-from-progress-$label.txt"
done

#!/usr/bin/env bash
# Session 21: the whole GPU suite (tests/gpu, every file) in ONE pytest run on 1 GPU and in ONE
# on 2 GPUs (issue 36 item 1), where one pytest run of the 2-GPU suite takes longer than one
# device call (600 s; session 20 call 2 was cut at 540 s with about two thirds done).
#
# How: the first call (`start`) copies the tree to /tmp/s21/tree, builds jaxmg there, and starts
# the runner (the two pytest runs, one after the other) in a process session of its own (setsid),
# which the device keeps running after the call returns, until the machine goes back (it stays
# while calls follow within its idle time, as root: device README). The second call (`finish`),
# made at once, only watches: it packs the logs every 20 s and returns when the runner has ended
# or its own bound comes. Neither call's working tree is used by the runner (the copy in /tmp is).
#
#   start:  bash .snap/suite-bg.sh start    (carry [".snap", ".whl"], nvidia-h200-x4)
#   finish: bash docs/gpu-runs/2026-11-28-s21/suite-bg.sh finish   (carry nothing)
#
# The runs: 1 GPU first (four pytest-xdist workers, one GPU each, JAXMG_GPU_WORKER_SETS="0 1 2 3"),
# then 2 GPUs (two workers on GPUs 0,1 and 2,3). Each worker sees its set's GPUs alone
# (tests/gpu/conftest.py), so every test runs on the GPU count of its run. JAX's persistent
# compilation cache is on, as in session 20. Bounds (seconds, environment of the start call):
# SUITE_1GPU_BOUND (900), SUITE_2GPU_BOUND (1500); session 21 ran with 600 and 1100.
#
# What comes back: $OUT/r.tar.gz (rewritten every 20 s) holding r/: id.txt (the user: the
# background run survives only as root), build.txt, nvidia-smi.txt, runner.log, for each run
# (1gpu, 2gpu) pytest-<run>.log, progress-<run>.txt, times-<run>.txt,
# times-from-progress-<run>.txt; summary.txt.
set -u
mode=${1:?usage: suite-bg.sh start|finish}
S=/tmp/s21; R=$S/r
pack() { tar czf "$OUT/r.tmp.tgz" -C "$S" r 2>/dev/null; mv -f "$OUT/r.tmp.tgz" "$OUT/r.tar.gz"; }
watch() {  # pack every 20 s until the runner ends or the call's bound (575 s) nears
  while [ "$SECONDS" -lt 575 ]; do
    pack
    [ -f "$S/runner.done" ] && break
    sleep 20
  done
  pack
  echo "== at ${SECONDS} s of this call"; cat "$R/summary.txt" 2>/dev/null
  for label in 1gpu 2gpu; do
    [ -f "$R/progress-$label.txt" ] || continue
    echo "== $label: $(grep -c '^.* start ' "$R/progress-$label.txt") started"
    grep -E "^(FAILED|ERROR)" "$R/pytest-$label.log" | cut -c1-240 | head -20
    tail -n 2 "$R/pytest-$label.log"
  done
}

if [ "$mode" = finish ]; then
  [ -d "$R" ] || { echo "no run in $S: the machine is a fresh one (the first call's run is lost)"; exit 1; }
  watch
  exit 0
fi

here="$(cd "$(dirname "$0")" && pwd)"
root=$here
while [ ! -f "$root/scripts/device-lib.sh" ] && [ "$root" != / ]; do root="$(dirname "$root")"; done
rm -rf "$S"; mkdir -p "$R"
cp -a "$root" "$S/tree"
[ -d "$root/../.whl" ] && cp -a "$root/../.whl" "$S/.whl"
cd "$S/tree" || exit 1
{ id; date; } > "$R/id.txt"
source scripts/device-lib.sh; jaxmg_device_env
jaxmg_machine_info "$R"
{ jaxmg_build "$R" && jaxmg_carried_wheels "$R"; } > "$R/build.txt" 2>&1 || { pack; tail -n 30 "$R/build.txt"; exit 1; }
python3 -c "import jax, jaxmg; print('jax', jax.__version__, 'cusolvermp', jaxmg.cusolvermp_available()[0])" \
  >> "$R/build.txt" 2>&1
python3 -c "import netket; print('netket', netket.__version__)" >> "$R/build.txt" 2>&1 || echo "no netket" >> "$R/build.txt"
export JAX_COMPILATION_CACHE_DIR=$S/jax-cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
echo "built at ${SECONDS} s of the first call; commit $(cat "$root/.commit" 2>/dev/null || echo '?')" > "$R/summary.txt"

export SUITE_1GPU_BOUND=${SUITE_1GPU_BOUND:-900} SUITE_2GPU_BOUND=${SUITE_2GPU_BOUND:-1500}
export -p > "$S/env.sh"
cat > "$S/runner.sh" <<'EOF'
#!/usr/bin/env bash
# The two pytest runs, one after the other (started by suite-bg.sh start under setsid).
source /tmp/s21/env.sh
S=/tmp/s21; R=$S/r; cd "$S/tree" || exit 1
ngpu=$(nvidia-smi -L | wc -l)
suite() {  # suite LABEL BOUND SETS: the whole of tests/gpu, one worker per GPU set
  local label=$1 bound=$2 sets=$3
  export JAXMG_GPU_WORKER_SETS="$sets"; unset CUDA_VISIBLE_DEVICES
  set -- $sets
  echo "$label: sets '$sets', bound $bound s, from $(date +%T)" >> "$R/summary.txt"
  JAXMG_TEST_PROGRESS="$R/progress-$label.txt" JAXMG_TEST_SUMMARY="$R/times-$label.txt" \
    timeout -s INT -k 15 "$bound" python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 300 \
    -n $# --dist loadgroup --durations=30 tests/gpu > "$R/pytest-$label.log" 2>&1
  echo "$label: pytest exit $? at $(date +%T): $(tail -n 1 "$R/pytest-$label.log")" >> "$R/summary.txt"
  python3 tests/gpu/suite_times.py "$R/progress-$label.txt" --top 40 \
    > "$R/times-from-progress-$label.txt" 2>&1
}
b1=${SUITE_1GPU_BOUND:-900} b2=${SUITE_2GPU_BOUND:-1500}
if [ "$ngpu" -ge 4 ]; then suite 1gpu "$b1" "0 1 2 3"; suite 2gpu "$b2" "0,1 2,3"
else suite 1gpu "$b1" "0 1"; suite 2gpu "$b2" "0,1"; fi
touch "$S/runner.done"
EOF
setsid nohup bash "$S/runner.sh" > "$R/runner.log" 2>&1 < /dev/null &
echo "runner started at ${SECONDS} s" >> "$R/summary.txt"
watch

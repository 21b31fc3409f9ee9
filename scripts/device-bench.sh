#!/usr/bin/env bash
# On a GPU machine: build jaxmg and the engine's ceiling, run the benchmark
# under a timeout, and keep everything under RESULTS_DIR.
#
#   scripts/device-bench.sh RESULTS_DIR [bench/run.py arguments]
#
#   scripts/device-bench.sh OUT/bench                       # --preset h200x4
#   scripts/device-bench.sh OUT/bench --ops potrs --n 65536 --tiles 1024 --gpus 4
#   scripts/device-bench.sh OUT/largest --largest           # the largest float32 potrs
#   scripts/device-bench.sh OUT/engines --engines --budget-s 400   # bench/engines.py
#   scripts/device-bench.sh OUT/scaling --scaling --budget-s 330   # bench/scaling.py
#
# With --scaling first, bench/scaling.py runs (issue 37's scaling sweep:
# every op, N doubling from 8192, on 1, 2 and 4 GPUs, every engine, beside
# one-GPU JAX); its results go to RESULTS_DIR/<date>-<machine>-scaling/,
# the folder to copy to bench/results/. On 2 GPUs, about 8 minutes in all
# (build included), with the cuSOLVERMp wheel carried in .whl/:
#   JAXMG_BENCH_TIMEOUT=380 JAXMG_BENCH_PACK=$OUT/scaling.tar.gz \
#     scripts/device-bench.sh /tmp/scaling --scaling --budget-s 330
# (the device tool returns at most 8 files from $OUT: pack, as here; on
# 2026-11-27 results.csv stayed behind, bench/results/2026-11-27-h200x4-scaling).
# The wheels in .whl/ (cuSOLVERMp's) are installed for every mode
# (jaxmg_carried_wheels in scripts/device-lib.sh).
#
# With --engines first, bench/engines.py runs instead of bench/run.py (every
# engine side by side on all GPUs; the rest of the arguments are its own) and
# the ceiling is not built; it appends its own section to meta.txt.
# RESULTS_DIR gets results.csv, table.txt, the PNG plots (or largest.txt and
# largest.json) and meta.txt (date, machine, GPUs, commit); raw/ the logs
# (the build, the ceiling's output, nvidia-smi). The layout of bench/results/.
#
# Environment: JAXMG_COMMIT (recorded in meta.txt when the tree has no .git),
# JAXMG_BENCH_TIMEOUT (seconds for the benchmark itself, default 450: the
# h200x4 preset stops starting cases at 380 s), JAXMG_SKIP_BUILD=1 (reuse the
# build of a previous call on a machine still warm), JAXMG_BENCH_PACK=FILE
# (at the end, RESULTS_DIR packed into FILE, a .tar.gz, and removed); see
# scripts/device-lib.sh.
set -uo pipefail
results="${1:?usage: scripts/device-bench.sh RESULTS_DIR [run.py args]}"
shift
# shellcheck source=scripts/device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
raw="$results/raw"
mkdir -p "$raw"

# The end of every mode: the status, and RESULTS_DIR packed where asked.
finish() {
  echo "device-bench: exit $1; results in $results"
  if [ -n "${JAXMG_BENCH_PACK:-}" ]; then
    if tar -czf "$JAXMG_BENCH_PACK" -C "$results" . ; then
      rm -rf "$results"
      echo "device-bench: packed into $JAXMG_BENCH_PACK"
    else
      echo "device-bench: packing into $JAXMG_BENCH_PACK failed; $results kept"
    fi
  fi
  exit "$1"
}
jaxmg_device_env
jaxmg_machine_info "$raw"
ceiling="${JAXMG_CEILING_BIN:-/tmp/jaxmg-bench/ceiling}"
[ "$#" -eq 0 ] && set -- --preset h200x4

# JAXMG_COMMIT first: the device machine's copy of .git may be stale.
commit="${JAXMG_COMMIT:-$(git -C "$jaxmg_root" rev-parse HEAD 2>/dev/null || true)}"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "gpu_name: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  echo "gpu_count: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)"
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "cuda: $("${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)"
  echo "commit: ${commit:-unknown}"
  echo "python: $("$jaxmg_python" -c 'import sys, jax; print(sys.version.split()[0], "jax", jax.__version__)' 2>&1 | tail -1)"
  echo "command: scripts/device-bench.sh $results $*"
  echo "env: XLA_FLAGS=${XLA_FLAGS:-} XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-}"
} >"$results/meta.txt"
cat "$results/meta.txt"

engines=0
scaling=0
[ "$1" = --engines ] && { engines=1; shift; }
[ "$1" = --scaling ] && { scaling=1; shift; }
if [ "${JAXMG_SKIP_BUILD:-0}" = 1 ] && [ -d "$jaxmg_site/jaxmg" ] &&
   { [ "$engines" = 1 ] || [ "$scaling" = 1 ] || [ -x "$ceiling" ]; }; then
  echo "== reusing the build in $jaxmg_site"
  jaxmg_use_site
else
  jaxmg_build "$raw" || { echo "device-bench: build failed"; exit 1; }
  [ "$engines" = 1 ] || [ "$scaling" = 1 ] ||
    jaxmg_build_ceiling "$ceiling" "$raw/ceiling-build.log" ||
    echo "device-bench: no ceiling binary; the benchmark runs without its column"
fi
jaxmg_carried_wheels "$raw"

cd "$jaxmg_root" || exit 1
if [ "$engines" = 1 ]; then
  echo "== engines: bench/engines.py $results $*"
  # SIGTERM first: engines.py then writes the table and CSV of what it measured.
  timeout -k 30 "${JAXMG_BENCH_TIMEOUT:-450}" "$jaxmg_python" bench/engines.py "$results" "$@" \
    2>&1 | tee "$raw/engines.log"
  status="${PIPESTATUS[0]}"
  finish "$status"
fi
if [ "$scaling" = 1 ]; then
  echo "== scaling: bench/scaling.py --out-root $results $*"
  # SIGTERM first: scaling.py then writes the table, plots and README of
  # what it measured (results.csv is written row by row).
  JAXMG_SCALING_COMMAND="scripts/device-bench.sh $results --scaling $*" \
    timeout -k 30 "${JAXMG_BENCH_TIMEOUT:-450}" "$jaxmg_python" bench/scaling.py \
    --out-root "$results" "$@" 2>&1 | tee "$raw/scaling.log"
  status="${PIPESTATUS[0]}"
  finish "$status"
fi
echo "== benchmark: bench/run.py $*"
extra=()
[ "$1" = --largest ] || extra=(--ceiling "$ceiling")
# SIGTERM first: run.py then writes the table and CSV of what it measured.
timeout -k 30 "${JAXMG_BENCH_TIMEOUT:-450}" "$jaxmg_python" bench/run.py "$@" \
  --out "$results" "${extra[@]}" 2>&1 | tee "$raw/run.log"
status="${PIPESTATUS[0]}"
finish "$status"

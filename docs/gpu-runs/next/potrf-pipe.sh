#!/usr/bin/env bash
# Next session, one call on 2 GPUs (nvidia-h200-x2, or GPUs 0,1 of a larger machine), branch
# potrf-pipe: the tiled Cholesky's JAXMG_POTRF_PIPELINE (engine/cusolvermg/cuda_potrf.c: panel
# copies on a copy stream of each GPU into two buffers, diagonal tiles by herk) against today's
# path, issue 37's potrs float64 on 2 GPUs (s20: 0.180 s at N = 32768, T_A 2048; JAX's one GPU
# 0.274 s; the target >= 1.85x, about 0.148 s).
#   1. build;
#   2. time.py: N = 16384 and 32768, JAX's cho_factor + cho_solve on GPU 0, then jaxmg.potrs on
#      both GPUs (the cuSOLVERMg engine, T_A left out: the trace says which) with
#      JAXMG_POTRF_PIPELINE=0 and =1 alternately, 5 timed runs each after a warm-up, medians;
#      every timed run's backward error checked; then one traced run per setting
#      (JAXMG_TRACE=1: the per-GPU split idle / wait / factor / copy / update, workspace);
#   3. the tiled potrf's GPU tests: tests/gpu/test_gpu_potrf_pipeline.py (both settings, every
#      dtype), then with JAXMG_POTRF_PIPELINE=1 JAXMG_ENGINE=cusolvermg: test_gpu_potrs.py,
#      test_gpu_shared_gpus.py, and test_gpu_ops.py's every-op/dtype, N=8192 and
#      not-positive-definite cases.
#
#   run: bash docs/gpu-runs/next/potrf-pipe.sh   (carry [".whl"] if the tree has it)
# What comes back: $OUT/r.tar.gz holding r/: build.txt, nvidia-smi.txt, time.txt (the table),
# time.err (the trace lines), pytest-*.log, summary.txt.
set -u
cd "$(dirname "$0")/../../.."
source scripts/device-lib.sh; jaxmg_device_env
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-575}
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/r.tar.gz -C $OUT r; }
jaxmg_machine_info $R
jaxmg_build $R > $R/build.txt 2>&1 || { pack; exit 1; }
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1}

timeout $(jaxmg_left 240) python3 - > $R/time.txt 2> $R/time.err <<'PY'
import os, re, statistics, sys, tempfile, time
import numpy as np, jax, jax.numpy as jnp, jax.scipy.linalg as jsl, jaxmg
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
gpus = jax.devices("gpu")[:2]; d0 = gpus[0]
mesh = Mesh(np.array(gpus), ("x",)); rows = NamedSharding(mesh, P("x", None))
REPEATS = 5

def traced(fn):
    """fn() with fd 2 sent to a file: the C library's JAXMG_TRACE lines."""
    sys.stderr.flush()
    with tempfile.TemporaryFile("w+") as f:
        saved = os.dup(2); os.dup2(f.fileno(), 2)
        try:
            fn()
        finally:
            sys.stderr.flush(); os.dup2(saved, 2); os.close(saved)
        f.seek(0); return [ln for ln in f.read().splitlines() if ln.startswith("jaxmg trace")]

@jax.jit
def backward(a, x, b):
    return jnp.linalg.norm(a @ x - b) / (jnp.linalg.norm(a) * jnp.linalg.norm(x))

print(f"jax {jax.__version__}, {[str(g) for g in gpus]}", flush=True)
for n in (16384, 32768):
    make = jax.jit(lambda k: (lambda r: (r + r.T) / 2 + 3.0 * np.sqrt(n) * jnp.eye(n))(
        jax.random.normal(k, (n, n), jnp.float64)), out_shardings=rows)
    a = make(jax.random.key(n))          # SPD, condition number about 5
    b = jax.random.normal(jax.random.key(1), (n, 1), jnp.float64)
    tol = 30 * n * np.finfo(np.float64).eps
    # JAX on one GPU.
    a1, b1 = jax.device_put(a, d0), jax.device_put(b, d0)
    cho = jax.jit(lambda a, b: jsl.cho_solve(jsl.cho_factor(a, lower=True), b))
    x = cho(a1, b1).block_until_ready(); ts = []
    for _ in range(REPEATS):
        t0 = time.perf_counter(); x = cho(a1, b1).block_until_ready(); ts.append(time.perf_counter() - t0)
    jax_t = statistics.median(ts); res = float(backward(a1, x, b1))
    print(f"N={n} JAX cho_factor+cho_solve 1 GPU: median {jax_t:.4f} s {[round(t, 4) for t in ts]}"
          f" residual {res:.1e} {'ok' if res < tol else 'FAIL'}", flush=True)
    del a1, b1, x
    # jaxmg on 2 GPUs, the two settings alternately.
    solve = jax.jit(lambda a, b: jaxmg.potrs(a, b, mesh=mesh, in_specs=(P("x", None), P(None, None))))
    os.environ["JAXMG_ENGINE"] = "cusolvermg"
    times, worst = {"0": [], "1": []}, {"0": 0.0, "1": 0.0}
    for v in ("0", "1"):
        os.environ["JAXMG_POTRF_PIPELINE"] = v; solve(a, b).block_until_ready()  # warm-up
    for _ in range(REPEATS):
        for v in ("0", "1"):
            os.environ["JAXMG_POTRF_PIPELINE"] = v
            t0 = time.perf_counter(); x = solve(a, b).block_until_ready()
            times[v].append(time.perf_counter() - t0)
            worst[v] = max(worst[v], float(backward(a, x, b)))
    for v in ("0", "1"):
        m = statistics.median(times[v])
        print(f"N={n} jaxmg potrs 2 GPUs JAXMG_POTRF_PIPELINE={v}: median {m:.4f} s "
              f"{[round(t, 4) for t in times[v]]} = {jax_t / m:.2f}x JAX; worst residual "
              f"{worst[v]:.1e} {'ok' if worst[v] < tol else 'FAIL'}", flush=True)
    os.environ["JAXMG_TRACE"] = "1"
    for v in ("0", "1"):
        os.environ["JAXMG_POTRF_PIPELINE"] = v
        for ln in traced(lambda: solve(a, b).block_until_ready()):
            print(f"N={n} pipeline {v} trace: {ln}", flush=True)
            split = re.search(r"tiled potrf \[([^\]]*)\]", ln)
            if split:
                print(f"N={n} pipeline {v} split: {split.group(1)}", flush=True)
    del os.environ["JAXMG_TRACE"], os.environ["JAXMG_ENGINE"], os.environ["JAXMG_POTRF_PIPELINE"]
    del a, b
PY
echo "time: exit $?" >> $R/summary.txt; pack

G=tests/gpu/test_gpu_
PYT="python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 200 --durations=8"
l=$(jaxmg_left 150)
timeout $l $PYT ${G}potrf_pipeline.py > $R/pytest-potrf_pipeline.log 2>&1
echo "potrf_pipeline (both settings): exit $? $(tail -n 1 $R/pytest-potrf_pipeline.log)" >> $R/summary.txt; pack
pipe1() {  # LABEL FILE [pytest args]: a GPU test file with the pipeline on, the tiled engine forced
  local label=$1 file=$2; shift 2
  local l; l=$(jaxmg_left 120)
  [ "$l" -gt 15 ] || { echo "$label: not reached" >> $R/summary.txt; return; }
  JAXMG_POTRF_PIPELINE=1 JAXMG_ENGINE=cusolvermg timeout $l $PYT ${G}$file.py "$@" \
    > $R/pytest-$label.log 2>&1
  echo "$label (pipeline 1, cusolvermg): exit $? $(tail -n 1 $R/pytest-$label.log)" >> $R/summary.txt
  pack
}
pipe1 potrs potrs
pipe1 shared_gpus shared_gpus
pipe1 ops ops -k "every_op or n8192 or not_positive"
cat $R/summary.txt; grep -E "median|split" $R/time.txt

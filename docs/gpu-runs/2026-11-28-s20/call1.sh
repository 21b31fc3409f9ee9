#!/usr/bin/env bash
# Session 20, call 1, on 4 GPUs (nvidia-h200-x4 / h100-x4). One build, then
#  lanes at once: A (GPUs 0,1) = s19's next-call lane A: eig-mgpu GPU tests after b2ccab9,
#    syevd eig-mgpu at N = 16384 and 32768 on 2 GPUs vs JAX's eigh on one;
#  B (GPU 2, then 2,3) = mixed_precision whole on one GPU, then qr, gesvd, potrs, shared_gpus;
#  then all 4 GPUs: the scaling benchmark's 4-GPU rows (potrs, lu_solve, potri at 32768 and
#  65536; syevd/syevd_values at 16384 with default and eig-mgpu).
set -u
cd "$(dirname "$0")"
source scripts/device-lib.sh; jaxmg_device_env
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-575}
R=$OUT/r; mkdir -p $R
jaxmg_machine_info $R
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
jaxmg_carried_wheels $R >> $R/build.txt 2>&1
G=tests/gpu/test_gpu_
PYT="python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 200 --durations=8"
laneA() {
  export CUDA_VISIBLE_DEVICES=0,1
  JAXMG_SYEVD_MGPU=1 JAXMG_TEST_PROGRESS=$R/progressA.txt timeout $(jaxmg_left 110) \
    $PYT ${G}syevd_mgpu.py > $R/pytest-syevd_mgpu.log 2>&1
  echo "syevd_mgpu: exit $? $(tail -n 1 $R/pytest-syevd_mgpu.log)" >> $R/summaryA.txt
  JAXMG_SYEVD_MGPU=1 JAXMG_TRACE=1 timeout $(jaxmg_left 190) python3 - > $R/time-syevd.txt 2> $R/time-syevd.err <<'PY'
import time, numpy as np, jax, jax.numpy as jnp, jaxmg
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
mesh = Mesh(np.array(jax.devices()[:2]), ("x",)); d0 = jax.devices()[0]
for n in (16384, 32768):
    g = jax.random.normal(jax.random.key(n), (n, n), jnp.float64)
    a1 = jax.device_put((g + g.T) / 2, d0); del g
    a2 = jax.device_put(a1, NamedSharding(mesh, P("x", None)))
    for name, f, x in (("jax eigh 1 GPU", jax.jit(jnp.linalg.eigh), a1),
                       ("jaxmg eig-mgpu 2 GPUs", jax.jit(lambda a: jaxmg.syevd(
                           a, T_A=256, mesh=mesh, in_specs=(P("x", None),))), a2),
                       ("jaxmg eig-mgpu values 2 GPUs", jax.jit(lambda a: jaxmg.syevd(
                           a, T_A=256, mesh=mesh, in_specs=(P("x", None),), return_eigenvectors=False)), a2)):
        out = jax.block_until_ready(f(x)); ts = []
        for _ in range(2):
            t0 = time.perf_counter(); out = jax.block_until_ready(f(x)); ts.append(time.perf_counter() - t0)
        if isinstance(out, tuple):
            w, v = (jax.device_put(o, d0) for o in out)
            res = float(jnp.linalg.norm(a1 @ v - v * w) / jnp.linalg.norm(a1))
        else:
            res = float("nan")
        print(f"N={n} {name}: min {min(ts):.3f} s {ts}; residual {res:.2e}", flush=True)
    del a1, a2
PY
  echo "time-syevd: exit $?" >> $R/summaryA.txt
}
laneB() {
  for f in mixed_precision qr gesvd potrs shared_gpus; do
    l=$(jaxmg_left 200); [ "$l" -gt 15 ] || { echo "$f: not reached" >> $R/summaryB.txt; continue; }
    [ $f = mixed_precision ] && export CUDA_VISIBLE_DEVICES=2 || export CUDA_VISIBLE_DEVICES=2,3
    JAXMG_TEST_PROGRESS=$R/progressB.txt timeout $l $PYT ${G}$f.py > $R/pytest-$f.log 2>&1
    echo "$f: exit $? $(tail -n 1 $R/pytest-$f.log)" >> $R/summaryB.txt
  done
}
( export JAXMG_DEADLINE=330; laneA ) & ( export JAXMG_DEADLINE=330; laneB ) & wait
tar czf $OUT/r.tar.gz -C $OUT r
unset CUDA_VISIBLE_DEVICES
if [ "$(nvidia-smi -L | wc -l)" -ge 4 ]; then
  timeout $(jaxmg_left 130) python3 bench/scaling.py --ops potrs,lu_solve,potri --sizes 32768,65536 \
    --gpus 4 --engines default --budget-s 115 --out $R/scaling4 > $R/scaling4.txt 2>&1
  tar czf $OUT/r.tar.gz -C $OUT r
  timeout $(jaxmg_left 130) python3 bench/scaling.py --ops syevd,syevd_values --sizes 16384 \
    --gpus 4 --engines default,eig-mgpu --budget-s 110 --out $R/scaling4e > $R/scaling4e.txt 2>&1
fi
tar czf $OUT/r.tar.gz -C $OUT r
cat $R/summaryA.txt $R/summaryB.txt $R/time-syevd.txt; tail -n 25 $R/scaling4.txt $R/scaling4e.txt

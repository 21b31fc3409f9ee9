#!/usr/bin/env bash
# Not run (session 19 ran out of device time): what session 19's merges still need on 2 GPUs.
# Prepare: .snap = git archive HEAD, this file copied into .snap; .whl holds cuSOLVERMp's wheel
# (NetKet's wheels too if room: see README.md); carry [".snap", ".whl"]; run on 2 GPUs (or 4:
# the two lanes then take disjoint GPUs): bash .snap/next-call.sh (about 420 s).
#  A (GPUs 0,1): the eig-mgpu GPU tests after the Stedc sort and test fixes (not rerun since call 4),
#     then syevd with JAXMG_SYEVD_MGPU=1 at N = 16384 and 32768 against JAX's eigh on one GPU;
#  B (after A): the mixed-precision test file whole on one GPU (call 4 cut it at 120 s after 26
#     passed), then qr, gesvd, potrs and shared_gpus (no session-19 run reached them).
set -u
cd "$(dirname "$0")"
source scripts/device-lib.sh; jaxmg_device_env
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-560}
R=$OUT/r; mkdir -p $R
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
jaxmg_carried_wheels $R >> $R/build.txt 2>&1
G=tests/gpu/test_gpu_
PYT="python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 200 --durations=5"
export CUDA_VISIBLE_DEVICES=0,1
JAXMG_SYEVD_MGPU=1 JAXMG_TEST_PROGRESS=$R/progress.txt timeout $(jaxmg_left 120) \
  $PYT ${G}syevd_mgpu.py > $R/pytest-syevd_mgpu.log 2>&1
JAXMG_SYEVD_MGPU=1 JAXMG_TRACE=1 timeout $(jaxmg_left 150) python3 - > $R/time-syevd.txt 2> $R/time-syevd.err <<'PY'
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
                           a, T_A=256, mesh=mesh, in_specs=(P("x", None),))), a2)):
        out = jax.block_until_ready(f(x)); ts = []
        for _ in range(2):
            t0 = time.perf_counter(); out = jax.block_until_ready(f(x)); ts.append(time.perf_counter() - t0)
        w, v = (jax.device_put(o, d0) for o in out)
        res = float(jnp.linalg.norm(a1 @ v - v * w) / jnp.linalg.norm(a1))
        print(f"N={n} {name}: min {min(ts):.3f} s {ts}; residual {res:.2e}", flush=True)
    del a1, a2
PY
for f in mixed_precision qr gesvd potrs shared_gpus; do
  l=$(jaxmg_left 200); [ "$l" -gt 15 ] || { echo "$f: not reached" >> $R/summary.txt; continue; }
  [ $f = mixed_precision ] && export CUDA_VISIBLE_DEVICES=0 || export CUDA_VISIBLE_DEVICES=0,1
  JAXMG_TEST_PROGRESS=$R/progress.txt timeout $l $PYT ${G}$f.py > $R/pytest-$f.log 2>&1
  echo "$f: exit $? $(tail -n 1 $R/pytest-$f.log)" >> $R/summary.txt
done
tar czf $OUT/r.tar.gz -C $OUT r
tail -n 1 $R/pytest-syevd_mgpu.log; cat $R/time-syevd.txt $R/summary.txt

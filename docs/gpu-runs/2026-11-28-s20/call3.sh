#!/usr/bin/env bash
# Session 20, call 3, on 4 GPUs (2 will do for lanes A and B, one after the other). One build, then
#  A (GPUs 0,1): the tiled potri (e5c7ea8): the two failures of call 2 rerun (errors'
#    short_of_memory retry, cusolvermp's eigensolver bound), potri on 2 GPUs with JAXMG_ENGINE=
#    cusolvermg against NumPy for every dtype, then bench/scaling.py potri at 8192-32768 on 2 GPUs
#    (default = the gathered one GPU, cusolvermg = the tiled inverse) beside JAX's inv;
#  B (GPUs 2,3): docs/gpu-runs/2026-11-28-s20/eig-call.sh (eig-mgpu's replicated column against
#    session 19's owner path and JAX), with its own build;
#  then all 4 GPUs: potri at 16384 and 32768 (scaling.py) and syevd at 32768 (eig-mgpu, the
#  default there; vectors and values alone) beside JAX on one.
set -u
cd "$(dirname "$0")"
source scripts/device-lib.sh; jaxmg_device_env
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-565}
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/r.tmp.tgz -C $OUT r 2>/dev/null; mv -f $OUT/r.tmp.tgz $OUT/r.tar.gz; }
jaxmg_machine_info $R
jaxmg_build $R > $R/build.txt 2>&1 || { pack; tail -n 30 $R/build.txt; exit 1; }
jaxmg_carried_wheels $R >> $R/build.txt 2>&1
ngpu=$(nvidia-smi -L | wc -l)
PYT="python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 200"
laneA() {
  export CUDA_VISIBLE_DEVICES=0,1
  timeout $(jaxmg_left 150) $PYT tests/gpu/test_gpu_errors.py tests/gpu/test_gpu_cusolvermp.py \
    -k "short_of_memory or eigensolver_below or allocator_refusal" > $R/pytest-fixes.log 2>&1
  echo "fixes: exit $? $(tail -n 1 $R/pytest-fixes.log)" >> $R/summaryA.txt
  JAXMG_ENGINE=cusolvermg JAXMG_TRACE=1 timeout $(jaxmg_left 60) python3 - > $R/potri-check.txt 2> $R/potri-check.err <<'PY'
import numpy as np, jax, jax.numpy as jnp, jaxmg
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
mesh = Mesh(np.array(jax.devices()[:2]), ("x",)); rows = NamedSharding(mesh, P("x", None))
rng = np.random.default_rng(7)
for n, t in ((1024, 128), (4096, 256), (2048, 1024)):
    for dt in (np.float32, np.float64, np.complex64, np.complex128):
        g = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if np.iscomplexobj(dt(0)) else 0)
        a = (g @ g.conj().T / n + np.eye(n)).astype(dt)
        inv = np.asarray(jaxmg.potri(jax.device_put(a, rows), t, mesh, (P("x", None),)))
        ref = np.linalg.inv(a.astype(np.complex128 if np.iscomplexobj(a) else np.float64))
        err = np.abs(inv - ref).max() / np.abs(ref).max()
        eye = np.abs(a.astype(ref.dtype) @ inv - np.eye(n)).max()
        print(f"potri N={n} T_A={t} {np.dtype(dt).name}: max rel err {err:.2e}, |A X - I|max {eye:.2e}", flush=True)
PY
  echo "potri-check: exit $?" >> $R/summaryA.txt
  timeout $(jaxmg_left 170) python3 bench/scaling.py --ops potri --sizes 8192,16384,32768 --gpus 2 \
    --engines default,cusolvermg --budget-s 150 --out $R/potri2 > $R/potri2.txt 2>&1
  echo "potri2: exit $?" >> $R/summaryA.txt
}
laneB() {
  export CUDA_VISIBLE_DEVICES=2,3
  local e=docs/gpu-runs/2026-11-28-s20/eig-call.sh
  if [ -f $e ]; then
    # Its own build, in a site of its own (lane A uses /tmp/jaxmg-site meanwhile).
    OUT=$R/eig JAXMG_SITE=/tmp/jaxmg-site-eig JAXMG_DEADLINE=325 \
      timeout $(jaxmg_left 330) bash $e > $R/eig-call.txt 2>&1
    echo "eig-call: exit $?" >> $R/summaryB.txt
  else
    echo "eig-call: no eig-call.sh in this tree" >> $R/summaryB.txt
  fi
}
if [ "$ngpu" -ge 4 ]; then
  ( export JAXMG_DEADLINE=345; laneA ) & ( mkdir -p $R/eig; export JAXMG_DEADLINE=345; laneB ) & wait
else
  ( export JAXMG_DEADLINE=300; laneA ); ( mkdir -p $R/eig; laneB )
fi
pack
unset CUDA_VISIBLE_DEVICES
if [ "$ngpu" -ge 4 ]; then
  timeout $(jaxmg_left 70) python3 bench/scaling.py --ops potri --sizes 16384,32768 --gpus 4 \
    --engines default,cusolvermg --budget-s 60 --out $R/four > $R/four.txt 2>&1
  pack
  JAXMG_TRACE=1 timeout $(jaxmg_left 150) python3 - > $R/syevd4.txt 2> $R/syevd4.err <<'PY'
import time, numpy as np, jax, jax.numpy as jnp, jaxmg
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
mesh = Mesh(np.array(jax.devices()[:4]), ("x",)); d0 = jax.devices()[0]
n = 32768
g = jax.random.normal(jax.random.key(n), (n, n), jnp.float64)
a1 = jax.device_put((g + g.T) / 2, d0); del g
a4 = jax.device_put(a1, NamedSharding(mesh, P("x", None)))
for name, f, x in (("jaxmg default (eig-mgpu) 4 GPUs", jax.jit(lambda a: jaxmg.syevd(
                       a, T_A=256, mesh=mesh, in_specs=(P("x", None),))), a4),
                   ("jaxmg values 4 GPUs", jax.jit(lambda a: jaxmg.syevd(
                       a, T_A=256, mesh=mesh, in_specs=(P("x", None),), return_eigenvectors=False)), a4),
                   ("jax eigh 1 GPU", jax.jit(jnp.linalg.eigh), a1)):
    out = jax.block_until_ready(f(x)); ts = []
    for _ in range(2):
        t0 = time.perf_counter(); out = jax.block_until_ready(f(x)); ts.append(time.perf_counter() - t0)
    print(f"N={n} {name}: min {min(ts):.3f} s {ts}", flush=True)
    if name.startswith("jaxmg default"):
        w, v = (jax.device_put(o, d0) for o in out); del out
        res = float(jnp.linalg.norm(a1 @ v - v * w) / jnp.linalg.norm(a1)); del w, v
        print(f"  residual {res:.2e}", flush=True)
PY
fi
pack
cat $R/summaryA.txt $R/summaryB.txt $R/potri-check.txt; tail -n 22 $R/potri2.txt; tail -n 8 $R/four.txt; cat $R/syevd4.txt; tail -n 30 $R/eig-call.txt

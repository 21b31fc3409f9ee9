#!/usr/bin/env bash
# Issue 37, session 19: jaxmg's multi-GPU eigensolver (csrc/engine/eig_mgpu/), never run on a
# GPU before this call. Prepare: .snap = git archive HEAD of branch eig-mgpu, this file copied into
# .snap, and .whl/ holding nvidia_cusolvermp_cu13-0.8.0.3126-*.whl (from /work/main/.whl: T's
# eigenproblem then runs on the GPU by cusolverMpStedc; without it, on the host: about 9 s at
# N = 16384); carry [".snap", ".whl"]; run on 2 GPUs:
#   bash .snap/eig-call.sh        (about 250 s; every step bounded by jaxmg_left, JAXMG_DEADLINE=290)
# 1. the reduction alone (scripts/probe-eig-mgpu.sh): Q's orthogonality, A = Q T Q^T and Z = Q I
#    against dorgtr at small N on 1 and 2 GPUs; then N = 8192 and 16384 on 1 and 2 GPUs against
#    cusolverDnDsytrd, T's eigenvalues against cusolverDnXsyevd's, the back-transformation's time;
# 2. the library built, syevd with JAXMG_SYEVD_MGPU=1 on 2 GPUs against jnp.linalg.eigh and
#    eigvalsh on one GPU at N = 16384 (JAXMG_TRACE=1: the engine's parts: sytrd, stedc or
#    stemr/sterf, ormtr); N = 32768 too with BIG=1 (the time left permitting);
# 3. tests/gpu/test_gpu_syevd_mgpu.py.
# Logs under $OUT/r (and $OUT/r.tar.gz); the summary at the end of stdout.
set -u
cd "$(dirname "$0")"
source scripts/device-lib.sh; jaxmg_device_env
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-290}
R=$OUT/r; mkdir -p $R
jaxmg_carried_wheels $R > $R/wheels.txt 2>&1
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1}
jaxmg_machine_info $R
# 1. The probe first: it needs no build of the library (gcc against the toolkit).
SIZES=8192,16384 GPUS=1,2 NBS=${NBS:-64} TILE=${TILE:-256} REPS=2 \
  timeout $(jaxmg_left 130) bash scripts/probe-eig-mgpu.sh $R/probe > $R/probe.txt 2>&1
# 2. The library, then syevd against JAX.
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; tail -5 $R/build.txt; exit 1; }
cat > $R/time_syevd.py <<'PY'
import os, sys, time, numpy as np, jax, jax.numpy as jnp, jaxmg
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
sizes = [int(s) for s in sys.argv[1].split(",")]
mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
d0 = jax.devices()[0]
def timed(f, *a, reps=2):
    out = jax.block_until_ready(f(*a)); ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); out = jax.block_until_ready(f(*a)); ts.append(time.perf_counter() - t0)
    return out, min(ts), ts
for n in sizes:
    g = jax.random.normal(jax.random.key(n), (n, n), jnp.float64)
    a1 = jax.device_put((g + g.T) / 2, d0)
    a2 = jax.device_put(a1, NamedSharding(mesh, P("x", None)))
    del g
    for vec in (True, False):
        what = "eigh" if vec else "eigvalsh"
        ref = jax.jit(jnp.linalg.eigh if vec else jnp.linalg.eigvalsh)
        r, tj, tsj = timed(ref, a1)
        wref = r[0] if vec else r
        f = jax.jit(lambda a: jaxmg.syevd(a, T_A=256, mesh=mesh, in_specs=(P("x", None),),
                                          return_eigenvectors=vec))
        o, tm, tsm = timed(f, a2)
        w = o[0] if vec else o
        err_w = float(jnp.max(jnp.abs(jax.device_put(w, d0) - wref)) / jnp.max(jnp.abs(wref)))
        line = (f"N={n} {what}: jax 1 GPU {tj:.3f} s {['%.3f' % t for t in tsj]}; jaxmg eig-mgpu 2 GPUs "
                f"{tm:.3f} s {['%.3f' % t for t in tsm]}; speed {tj / tm:.2f}x; eigenvalues vs JAX {err_w:.2e}")
        if vec:
            v = jax.device_put(o[1], d0); av = jax.device_put(a1, d0)
            res = float(jnp.linalg.norm(av @ v - v * jax.device_put(w, d0)) / jnp.linalg.norm(av))
            orth = float(jnp.linalg.norm(v.T @ v - jnp.eye(n)) / np.sqrt(n))
            line += f"; ||AV-VW||/||A|| {res:.2e}; ||V^TV-I||/sqrt(N) {orth:.2e}"
            del v, av
        print(line, flush=True)
        del o, r
PY
SIZES_T=16384; [ "${BIG:-0}" = 1 ] && SIZES_T=16384,32768
JAXMG_SYEVD_MGPU=1 JAXMG_TRACE=1 timeout $(jaxmg_left 110) python3 $R/time_syevd.py $SIZES_T \
  > $R/time-syevd.txt 2> $R/time-syevd.err
# 3. The GPU tests of the engine.
JAXMG_TEST_PROGRESS=$R/progress-tests.txt timeout $(jaxmg_left 100) python3 -m pytest -q -rfEs \
  -p no:cacheprovider --timeout 100 --durations=10 tests/gpu/test_gpu_syevd_mgpu.py > $R/pytest-mgpu.log 2>&1
tar czf $OUT/r.tar.gz -C $OUT r
echo "== probe"; grep -v "^#" $R/probe/probe-eig-mgpu.csv 2>/dev/null | cut -c1-200; tail -3 $R/probe.txt
echo "== syevd"; cat $R/time-syevd.txt; grep "jaxmg trace syevd" $R/time-syevd.err | cut -c1-400 | tail -4
tail -5 $R/time-syevd.err | cut -c1-300
echo "== tests"; tail -qn 3 $R/pytest-mgpu.log
echo "== ${SECONDS} s"

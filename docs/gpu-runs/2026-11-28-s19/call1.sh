#!/usr/bin/env bash
# Session 19 call 1 (run as written, 2 x H200, main d60fd8a): call4.sh's steps on the helpers of
# scripts/device-lib.sh. Prepare: .snap = git archive HEAD, this file copied into .snap;
# carry [".snap", ".whl"]; run on 2 GPUs: bash .snap/next-call.sh (about 200 s).
# 1. never_arrives[2] with JAXMG_TRACE=1: the NCCL watchdog's lines (4279bf7) say whether
#    process 1's watchdog fires at its timeout and whether ncclCommRevoke ends its wait;
# 2. sygvd and syevd_tridiagonal whole (no run of session 18 reached them);
# 3. potrs at N = 32768 on 2 GPUs with T_A = 1024 beside the default 2048 (halves the panel
#    work on the critical path: issue 37's potrs at 1.55x, target 1.85x).
set -u
cd "$(dirname "$0")"
source scripts/device-lib.sh; jaxmg_device_env; jaxmg_carried_wheels
export JAXMG_DEADLINE=${JAXMG_DEADLINE:-540}
R=$OUT/r; mkdir -p $R
jaxmg_build $R > $R/build.txt 2>&1 || { tar czf $OUT/r.tar.gz -C $OUT r; exit 1; }
G=tests/gpu/test_gpu_
PYT="python3 -m pytest -q -rfEs -p no:cacheprovider --timeout 150 --durations=10"
export CUDA_VISIBLE_DEVICES=0,1
JAXMG_TRACE=1 NCCL_DEBUG=WARN JAXMG_TEST_PROGRESS=$R/progress-faults.txt \
  timeout $(jaxmg_left 60) $PYT ${G}mpmd_faults.py -k never_arrives > $R/pytest-faults.log 2>&1
JAXMG_TEST_PROGRESS=$R/progress-rest.txt timeout $(jaxmg_left 200) $PYT ${G}sygvd.py ${G}syevd_tridiagonal.py > $R/pytest-rest.log 2>&1
timeout $(jaxmg_left 120) python3 - > $R/potrs-ta.txt 2>&1 <<'PY'
import time, numpy as np, jax, jax.numpy as jnp, jaxmg
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
n = 32768; mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
key = jax.random.key(0)
g = jax.random.normal(key, (n, n), jnp.float64)
a = jax.device_put(g @ g.T / n + 2 * jnp.eye(n), NamedSharding(mesh, P("x", None)))
b = jax.device_put(jnp.ones((n, 1)), NamedSharding(mesh, P(None, None)))
for t_a in (2048, 1024, 2048, 1024):
    f = jax.jit(lambda a, b: jaxmg.potrs(a, b, T_A=t_a, mesh=mesh, in_specs=(P("x", None), P(None, None))))
    x = f(a, b).block_until_ready(); times = []
    for _ in range(5):
        t0 = time.perf_counter(); x = f(a, b).block_until_ready(); times.append(time.perf_counter() - t0)
    r = float(jnp.linalg.norm(a @ x - b) / (jnp.linalg.norm(a) * jnp.linalg.norm(x)))
    print(f"T_A={t_a} median {sorted(times)[2]:.4f} s min {min(times):.4f} s backward error {r:.2e}", flush=True)
PY
tar czf $OUT/r.tar.gz -C $OUT r
tail -qn 1 $R/pytest-*.log; cat $R/potrs-ta.txt; grep -h "watchdog\|Timeout\|File \"" $R/progress-faults.txt | cut -c1-250 | head -30

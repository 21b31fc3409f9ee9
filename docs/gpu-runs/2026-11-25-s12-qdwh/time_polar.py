import time, sys, numpy as np, jax, jax.numpy as jnp, jax.scipy.linalg
jax.config.update("jax_enable_x64", True)
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import jaxmg
mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
def t(f, a, k=3):
    jax.block_until_ready(f(a)); ts = []
    for _ in range(k):
        t0 = time.perf_counter(); jax.block_until_ready(f(a)); ts.append(time.perf_counter() - t0)
    return min(ts)
for dtype, n, methods in ((np.float32, 4096, ("qdwh",)), (np.float32, 8192, ("qdwh",)),
                          (np.float64, 4096, ("qdwh", "svd")), (np.float64, 8192, ("qdwh",))):
    a = jax.device_put(np.random.default_rng(0).standard_normal((n, n)).astype(dtype),
                       NamedSharding(mesh, P("x", None)))
    def jx(a):
        with jax.default_matmul_precision("highest"):
            return jax.scipy.linalg.polar(a)
    tj = t(jax.jit(jx), a)
    for m in methods:
        f = jax.jit(lambda a, m=m: jaxmg.polar(a, mesh=mesh, matrix_specs=P("x", None), method=m))
        tm = t(f, a)
        up, h = f(a)
        up64, a64 = np.asarray(up, np.float64), np.asarray(a, np.float64)
        bwd = np.linalg.norm(a64 - up64 @ np.asarray(h, np.float64)) / np.linalg.norm(a64)
        print(f"{np.dtype(dtype).name} N={n} jax {tj:.3f}s jaxmg[{m}] {tm:.3f}s speed {tj/tm:.3f} bwd {bwd:.1e}", flush=True)

import os, sys, time, numpy as np, jax, jax.numpy as jnp, jaxmg
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_enable_x64", True)
end = time.time() + float(sys.argv[1]) - 5          # the seconds this script may take
mesh = Mesh(np.array(jax.devices()[:2]), ("x",)); d0 = jax.devices()[0]
def left(): return end - time.time()
def say(*a): print(*a, flush=True)
def run(f, x, reps):                                 # compiled ahead: runs are all timed
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); out = jax.block_until_ready(f(x)); ts.append(time.perf_counter() - t)
    return out, min(ts), ts
EST = {16384: 4.0, 32768: 26.0}                      # s a run, JAX's eigh (the slowest)
SIZES = [int(s) for s in os.environ.get("EIG_SIZES", "16384,32768").split(",")]  # (dry runs)
for n in SIZES:
    EST.setdefault(n, 1.0)
    # The first size: a warm-up, then 2 runs of jaxmg's (which varied by 5% in session 19),
    # 1 of JAX's (steady); the next: one run each (the first of its size in the process).
    first = n == SIZES[0]
    if left() < 3 * EST[n]:
        say(f"N={n}: skipped, {left():.0f} s left"); continue
    g = jax.random.normal(jax.random.key(n), (n, n), jnp.float64)
    a1 = jax.device_put((g + g.T) / 2, d0); del g
    a2 = jax.device_put(a1, NamedSharding(mesh, P("x", None)))
    for vec in (True, False):
        what = "eigh" if vec else "eigvalsh"
        mg = jax.jit(lambda a: jaxmg.syevd(a, T_A=256, mesh=mesh, in_specs=(P("x", None),),
                                           return_eigenvectors=vec)).lower(a2).compile()
        ref = jax.jit(jnp.linalg.eigh if vec else jnp.linalg.eigvalsh).lower(a1).compile()
        res = {}
        for path in ("replicated", "owner", "jax"):
            if path == "owner" and not first and left() < 4 * EST[n]:
                say(f"N={n} {what} owner: skipped, {left():.0f} s left"); continue
            reps = 2 if first and path != "jax" else 1
            if left() < (1.5 if path == "jax" else 0.8) * EST[n] * (reps + first):
                say(f"N={n} {what} {path}: skipped, {left():.0f} s left"); continue
            os.environ["JAXMG_SYEVD_MGPU_PATH"] = path if path != "jax" else "replicated"
            f, x = (ref, a1) if path == "jax" else (mg, a2)
            if first: run(f, x, 1)
            out, t, ts = run(f, x, reps)
            w = out[0] if vec else out
            res[path] = (t, jax.device_put(w, d0))
            line = f"N={n} {what} {path}: {t:.3f} s {['%.3f' % x for x in ts]}"
            if vec and path == "replicated":
                v = jax.device_put(out[1], d0)
                r = float(jnp.linalg.norm(a1 @ v - v * res[path][1]) / jnp.linalg.norm(a1))
                o = float(jax.jit(lambda v: jnp.linalg.norm(v.T @ v - jnp.eye(n, dtype=v.dtype)))(v)
                          / np.sqrt(n))
                line += f"; ||AV-VW||/||A|| {r:.1e}; ||V^TV-I||/sqrt(N) {o:.1e}"
                del v
            del out
            say(line)
        if "jax" in res:
            wj = res["jax"][1]
            for p in ("replicated", "owner"):
                if p in res:
                    dw = float(jnp.max(jnp.abs(res[p][1] - wj)) / jnp.max(jnp.abs(wj)))
                    say(f"RESULT N={n} {what} {p}: {res[p][0]:.3f} s vs jax {res['jax'][0]:.3f} s: "
                        f"{res['jax'][0] / res[p][0]:.2f}x; eigenvalues vs jax {dw:.1e}")
        del mg, ref, res
    del a1, a2

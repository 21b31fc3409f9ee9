"""SPMD, 4 GPUs: potrs, potri, syevd on fresh float64 inputs; counts wrong calls.
argv: N,T_A cases. Wrong: residual above 1e-12 (eigen: or orthogonality)."""
import os, sys, numpy as np, jax
sys.path.insert(0, "tests/python")
jax.config.update("jax_enable_x64", True)
import jaxmg, jaxmg_testing as jt
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
rng = np.random.default_rng(5)
rows = NamedSharding(mesh, P("x", None))
ops = sys.argv[1].split(",")
dt = np.dtype(os.environ.get("SPMD_DTYPE", "float64"))
for case in sys.argv[2:]:
    n, ta = map(int, case.split(","))
    for op in ops:
        bad, worst = 0, 0.0
        for it in range(10):
            a = jt.make_hpd(rng, n, dt)
            if op == "potrs":
                b = jt.make_rhs(rng, n, 2, dt)
                x = jaxmg.potrs(jax.device_put(a, rows), jax.device_put(b, NamedSharding(mesh, P())),
                                T_A=ta, mesh=mesh, in_specs=(P("x", None), P(None, None)))
                r = jt.solve_backward_error(a, np.asarray(x), b)
            elif op == "potri":
                ai = jaxmg.potri(jax.device_put(a, rows), T_A=ta, mesh=mesh, in_specs=P("x", None))
                r = jt.inverse_residual(a, np.asarray(ai))
            else:
                w, v = jaxmg.syevd(jax.device_put(a, rows), T_A=ta, mesh=mesh, in_specs=P("x", None))
                r = max(jt.eig_residual(a, np.asarray(w), np.asarray(v)), jt.orthogonality(np.asarray(v)) / n)
            worst = max(worst, r)
            bad += not (r < jt.tol(dt, n))
        print(f"SPMD {dt.name} {op} n={n} T_A={ta}: bad {bad} of 10, worst {worst:.2e}", flush=True)

import sys, numpy as np, jax
sys.path.insert(0, "tests/python")
jax.config.update("jax_enable_x64", True)
import jaxmg, jaxmg_testing as jt
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
rng = np.random.default_rng(5)
for n, ta in ((8, 2), (16, 2)):
    bad = 0
    for it in range(60):
        a = jt.make_hpd(rng, n, np.float64); b = jt.make_rhs(rng, n, 2, np.float64)
        x = jaxmg.potrs(jax.device_put(a, NamedSharding(mesh, P("x", None))), jax.device_put(b, NamedSharding(mesh, P())),
                        T_A=ta, mesh=mesh, in_specs=(P("x", None), P(None, None)))
        res = np.linalg.norm(a @ np.asarray(x) - b) / (np.linalg.norm(a) * np.linalg.norm(np.asarray(x)))
        bad += res > 1e-12
    print(f"SPMD 4 GPUs n={n} T_A={ta}: bad {bad} of 60", flush=True)

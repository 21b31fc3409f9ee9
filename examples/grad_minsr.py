"""jax.grad through jaxmg.potrs: the gradient of a minSR-like step with
respect to the Jacobian X, checked against jnp.linalg.solve.

Runs on whatever devices exist (4 CPU devices when there is no GPU)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

import jaxmg

mesh = jax.make_mesh((jax.device_count(),), ("x",))
n_samples, n_params = 64, 256
X = jax.random.normal(jax.random.PRNGKey(0), (n_samples, n_params)) / n_samples**0.5
e_loc = jax.random.normal(jax.random.PRNGKey(1), (n_samples, 1))


def update_norm(X, solve):
    T = X @ X.T + 1e-3 * jnp.eye(n_samples)  # the Gram matrix, built inside jit
    v = solve(T, e_loc)                       # (T + lambda I) v = e_loc
    return jnp.sum((X.T @ v) ** 2)            # |delta theta|^2


def jaxmg_solve(T, b):
    return jaxmg.potrs(T, b, T_A=16, mesh=mesh, in_specs=(P("x", None), P(None, None)))


# jax.make_mesh's axes are Explicit; jaxmg's derivatives need no jax.set_mesh.
g = jax.jit(jax.grad(update_norm), static_argnums=1)(X, jaxmg_solve)
g_ref = jax.grad(update_norm, argnums=0)(X, jnp.linalg.solve)
print("relative difference to jnp.linalg.solve:",
      float(jnp.linalg.norm(g - g_ref) / jnp.linalg.norm(g_ref)))

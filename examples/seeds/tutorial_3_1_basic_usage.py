# The seed tutorial's section 3.1 (Basic Usage), with the imports and the
# x64 setting of its sections 2.3 and 6 that it relies on. Needs 4 devices.
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxmg import potrs

# Problem: Solve Ax = b where A is symmetric positive definite
N = 1000
A = jnp.eye(N, dtype=jnp.float64) * 2 # Diagonal matrix
b = jnp.ones((N, 1), dtype=jnp.float64)

# Setup mesh and sharding
mesh = jax.make_mesh((4,), ("x",))
A = jax.device_put(A, NamedSharding(mesh, P("x", None)))
b = jax.device_put(b, NamedSharding(mesh, P(None, None)))

# Solve!
x = potrs(A, b, T_A=128, mesh=mesh, in_specs=(P("x", None), P(None, None)))
# x ≈ [0.5, 0.5, 0.5, ...]
print(x[:4].ravel(), bool(jnp.allclose(x, 0.5)))

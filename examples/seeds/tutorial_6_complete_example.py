# The seed tutorial's section 6 (Complete Example), unchanged. Needs GPUs.
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jaxmg import potrs

# Setup
jax.config.update("jax_enable_x64", True)
devices = jax.devices("gpu")
ndev = len(devices)
mesh = jax.make_mesh((ndev,), ("x",))

# Create Gram matrix (like in minSR: T = X @ X.T)
N_samples, N_params = 4000, 100000
key = jax.random.PRNGKey(0)
X = jax.random.normal(key, (N_samples, N_params)) / jnp.sqrt(N_samples)
T = X @ X.T # (4000, 4000) — much smaller than (100000, 100000)!

# Add regularization
T_reg = T + 1e-4 * jnp.eye(N_samples)

# RHS (centered local energies)
b = jax.random.normal(key, (N_samples, 1))

# Shard for distributed solve
T_sharded = jax.device_put(T_reg, NamedSharding(mesh, P("x", None)))
b_replicated = jax.device_put(b, NamedSharding(mesh, P(None, None)))

# Distributed Cholesky solve: (T + λI) v = b
v = potrs(T_sharded, b_replicated, T_A=256, mesh=mesh,
          in_specs=(P("x", None), P(None, None)))

# Final minSR update: δθ = X.T @ v
delta_theta = X.T @ v # (100000, 1)
print(f"Update shape: {delta_theta.shape}")

"""minSR with NetKet on jaxmg: NetKet's own driver and distributed Cholesky
solver, unchanged, on an 8-site transverse-field Ising chain.

``nk.driver.VMC_SR(..., use_ntk=True, linear_solver=cholesky_distributed)``
solves the minSR system (the neural tangent kernel, N_samples x N_samples,
rows sharded over NetKet's mesh) with ``jaxmg.potrs_shardmap_ctx`` at the
global level inside NetKet's jit: JAXMg 1.x's call form, which jaxmg serves
beside the seeds'. Runs on whatever devices exist (4 CPU devices when there
is no GPU); needs ``pip install netket``."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax
from jax.sharding import AxisType

jax.config.update("jax_enable_x64", True)
import netket as nk  # noqa: E402

# NetKet's mesh: one axis "S" over every device, set as the context mesh.
mesh = jax.make_mesh((jax.device_count(),), ("S",), axis_types=(AxisType.Auto,))
jax.sharding.set_mesh(mesh)

graph = nk.graph.Chain(8, pbc=True)
hilbert = nk.hilbert.Spin(0.5, N=8)
hamiltonian = nk.operator.IsingJax(hilbert, graph, h=1.0)
exact = float(nk.exact.lanczos_ed(hamiltonian)[0])

vstate = nk.vqs.MCState(nk.sampler.MetropolisLocal(hilbert, n_chains=16),
                        nk.models.RBM(alpha=1, param_dtype=float),
                        n_samples=512, seed=0, sampler_seed=1)
driver = nk.driver.VMC_SR(hamiltonian, nk.optimizer.Sgd(learning_rate=0.05),
                          variational_state=vstate, diag_shift=0.01, use_ntk=True,
                          linear_solver=nk.optimizer.solver.cholesky_distributed)
log = nk.logging.RuntimeLog()
driver.run(30, out=log, show_progress=False)
energy = float(log.data["Energy"]["Mean"].real[-1])
print(f"devices: {jax.device_count()} {jax.devices()[0].platform}")
print(f"energy after 30 minSR steps: {energy:.5f} (exact {exact:.5f}, "
      f"relative error {abs(energy - exact) / abs(exact):.2e})")

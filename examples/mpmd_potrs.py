"""potrs in MPMD mode: one process per device, the same code as SPMD.

Launch one process per GPU of a node (here 4), each told its index:

    for i in 0 1 2 3; do
      python examples/mpmd_potrs.py --process-id $i --num-processes 4 &
    done; wait

Every process sees every GPU (leave CUDA_VISIBLE_DEVICES unset) and drives
its own through ``local_device_ids``; jaxmg's leader (the process holding
shard 0) opens the others' buffers through CUDA IPC. Without GPUs the same
command runs on one CPU device per process (add ``--cpu``), the processes
sharing their buffers through POSIX shared memory.
"""

from __future__ import annotations

import argparse

import jax


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--process-id", type=int, required=True)
    parser.add_argument("--num-processes", type=int, required=True)
    parser.add_argument("--coordinator", default="localhost:12355")
    parser.add_argument("--cpu", action="store_true", help="one CPU device per process")
    args = parser.parse_args()

    if args.cpu:
        jax.config.update("jax_platforms", "cpu")
    jax.distributed.initialize(
        coordinator_address=args.coordinator, num_processes=args.num_processes,
        process_id=args.process_id,
        local_device_ids=None if args.cpu else [args.process_id])
    jax.config.update("jax_enable_x64", True)

    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import jaxmg

    n = 256 * jax.device_count()
    mesh = Mesh(np.array(jax.devices()), ("x",))  # spans every process
    # The same matrix in every process (one seed): symmetric positive definite.
    rng = np.random.default_rng(0)
    m = rng.standard_normal((n, n))
    a_host = m @ m.T / n + np.eye(n)
    b_host = rng.standard_normal((n, 2))
    # Each process provides its own rows; jaxmg sees one global array.
    a = jax.make_array_from_callback((n, n), NamedSharding(mesh, P("x", None)),
                                     lambda idx: a_host[idx])
    b = jax.make_array_from_callback((n, 2), NamedSharding(mesh, P(None, None)),
                                     lambda idx: b_host[idx])
    x = jaxmg.potrs(a, b, T_A=64, mesh=mesh, in_specs=(P("x", None), P(None, None)))
    local = np.asarray(x.addressable_shards[0].data)  # x is replicated
    residual = np.linalg.norm(a_host @ local - b_host) / (
        np.linalg.norm(a_host) * np.linalg.norm(local))
    agrees = np.allclose(local, np.linalg.solve(a_host, b_host), rtol=1e-9, atol=1e-12)
    verdict = "ok" if residual < 1e-13 and agrees else "WRONG"
    print(f"process {jax.process_index()} of {jax.process_count()}: N={n}, relative "
          f"residual {residual:.1e}, agrees with numpy.linalg.solve: {verdict}", flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()

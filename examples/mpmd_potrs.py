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

    n, t_a = 16 * jax.device_count(), 8
    mesh = Mesh(np.array(jax.devices()), ("x",))  # spans every process
    diag = np.arange(1, n + 1, dtype=np.float64)
    a_host, b_host = np.diag(diag), np.ones((n, 1))
    # Each process provides its own rows; jaxmg sees one global array.
    a = jax.make_array_from_callback((n, n), NamedSharding(mesh, P("x", None)),
                                     lambda idx: a_host[idx])
    b = jax.make_array_from_callback((n, 1), NamedSharding(mesh, P(None, None)),
                                     lambda idx: b_host[idx])
    x = jaxmg.potrs(a, b, T_A=t_a, mesh=mesh, in_specs=(P("x", None), P(None, None)))
    local = np.asarray(x.addressable_shards[0].data)  # x is replicated
    ok = np.allclose(local[:, 0], 1 / diag)
    print(f"process {jax.process_index()}: x == 1/diag(A): {ok}", flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()

"""SPMD or MPMD: how the devices of a call are driven, read off the mesh.

A call solves one matrix per group of devices (the devices along the axes
A's rows are sharded over, for each position along the other axes). When
every group lies in one process, its devices are threads of that process and
meet in the in-process rendezvous (SPMD), also inside a multi-process job
(the seed tutorial's mesh ("S", "T") with rows sharded over "T" within each
process). When a group spans processes (one process per GPU, started with
``jax.distributed.initialize``), the call is MPMD: the processes meet through
POSIX shared memory and the leader reaches the others' buffers through CUDA
IPC (GPUs) or shared memory (CPU devices). cuSOLVERMg drives the GPUs of one
node, so a group that spans nodes is refused.

An MPMD call carries the job's identity (``job_id``): the C library keys its
rendezvous on it instead of XLA's run id, which is per process. It is a hash
of the coordinator address and a random nonce that process 0 publishes through
the job's key-value store, so every process of one job run shares it, and no
other job (a second job on the node, or an earlier run on the same port whose
shared-memory segments a crash left behind) has it.

Each process also publishes its pid, so that an MPMD call names the process
of every shard: a process that dies before it reaches a call then fails the
others at once, instead of after the rendezvous timeout.
"""

from __future__ import annotations

import functools
import hashlib
import os
import secrets
import socket
from typing import Sequence

import jax
import numpy as np
from jax.sharding import Mesh

from jaxmg._src import _compat

_NONCE_KEY = "jaxmg/job_nonce"
_HOST_KEY = "jaxmg/node/{}"
_PID_KEY = "jaxmg/pid/{}"


def _kv_timeout_s() -> float:
    """How long to wait for the other processes' entries: the rendezvous
    timeout (they reach the same call)."""
    try:
        value = float(os.environ.get("JAXMG_RENDEZVOUS_TIMEOUT", "300"))
    except ValueError:
        value = 300.0
    return value if value > 0 else 300.0


def node_name() -> str:
    """This machine, as processes that can share memory must agree on: the
    host name and the kernel's boot id (containers with their own host name
    do not share /dev/shm; a reused host name after a reboot is another
    boot)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def pid_entry() -> str:
    """This process as another process can watch it: its pid namespace and
    pid (a pid means the same process only within one namespace)."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = "?"
    return f"{namespace} {os.getpid()}"


def watchable_pids(entries: Sequence[str], nodes: Sequence[str], me: int) -> tuple[int, ...]:
    """The pid of every process (pid_entry's text, by process index) that
    this one can watch: on its node and in its pid namespace; 0 for the
    others."""
    mine = entries[me].split(" ")[0]
    pids = []
    for entry, node in zip(entries, nodes):
        namespace, _, pid = entry.partition(" ")
        ok = namespace == mine and namespace != "?" and node == nodes[me] and pid.isdigit()
        pids.append(int(pid) if ok else 0)
    return tuple(pids)


@functools.lru_cache(maxsize=1)
def _job() -> tuple[int, tuple[str, ...], tuple[int, ...]]:
    if _compat.distributed_client() is None:
        raise RuntimeError(
            "jaxmg: the mesh spans several processes but jax.distributed is not "
            "initialized in this one; call jax.distributed.initialize first"
        )
    me, count = jax.process_index(), jax.process_count()
    timeout = _kv_timeout_s()

    def get(key: str, what: str) -> str:
        try:
            return _compat.kv_get(key, timeout)
        except Exception as e:  # the client raises its own error types
            raise RuntimeError(
                f"jaxmg: {what} did not arrive within {timeout:.3g} s (set "
                f"JAXMG_RENDEZVOUS_TIMEOUT to wait longer); every process must "
                f"make the same jaxmg calls: {e}") from e

    if me == 0:
        nonce = secrets.token_hex(16)
        _compat.kv_set(_NONCE_KEY, nonce)
    else:
        nonce = get(_NONCE_KEY, "the job identity from process 0")
    _compat.kv_set(_HOST_KEY.format(me), node_name())
    _compat.kv_set(_PID_KEY.format(me), pid_entry())
    nodes = tuple(get(_HOST_KEY.format(i), f"the node name of process {i}")
                  for i in range(count))
    entries = tuple(get(_PID_KEY.format(i), f"the pid of process {i}") for i in range(count))
    text = f"{_compat.coordinator_address()}|{nonce}".encode()
    job_id = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little",
                            signed=True)
    # 0 means SPMD to the C library
    return job_id or 1, nodes, watchable_pids(entries, nodes, me)


def job_id() -> int:
    """This job run's identity, the same in all its processes (nonzero)."""
    return _job()[0]


def process_nodes() -> tuple[str, ...]:
    """The node of every process of the job, by process index."""
    return _job()[1]


def process_pids() -> tuple[int, ...]:
    """The pid of every process of the job, by process index, where this
    process can watch it (see watchable_pids), else 0."""
    return _job()[2]


def groups(mesh: Mesh, axes: Sequence[str], others: Sequence[str]) -> np.ndarray:
    """The mesh's devices as (groups, shards): row g holds the devices of
    group g in shard order (the layout _shard.position numbers)."""
    names = list(mesh.axis_names)
    order = [names.index(a) for a in others] + [names.index(a) for a in axes]
    devices = np.transpose(np.asarray(mesh.devices), order)
    nparts = int(np.prod([mesh.shape[a] for a in axes]))
    return devices.reshape(-1, nparts)


def call_job_id(op: str, mesh: Mesh, axes: Sequence[str], others: Sequence[str]) -> int:
    """0 when every group of the call lies in one process (SPMD); else the
    job's identity (MPMD), once the groups are checked to lie on one node."""
    grid = groups(mesh, axes, others)
    spanning = [row for row in grid if len({d.process_index for d in row}) > 1]
    if not spanning:
        return 0
    nodes = process_nodes()
    for row in spanning:
        where = sorted({nodes[d.process_index] for d in row})
        if len(where) > 1:
            raise ValueError(
                f"jaxmg.{op}: the devices that solve one matrix span {len(where)} "
                f"nodes ({', '.join(w.split('/')[0] for w in where)}); cuSOLVERMg "
                "drives the GPUs of one node only. Shard A's rows over an axis "
                "within a node (e.g. P('T', None) on a mesh ('S', 'T') with 'T' "
                "within nodes): each node then solves its own copy"
            )
    return job_id()


def group_pids(mesh: Mesh, axes: Sequence[str], others: Sequence[str]) -> np.ndarray:
    """For an MPMD call: the pid of the process of every shard of every group
    (groups x shards, flattened, as the C library reads attribute pids)."""
    pids = process_pids()
    grid = groups(mesh, axes, others)
    return np.array([[pids[d.process_index] for d in row] for row in grid],
                    dtype=np.int64).reshape(-1)


def ambient_job_id(op: str, nparts: int) -> int:
    """For calls from inside the user's own shard_map, where the mesh is not
    known: the job's identity in a multi-process job (the process rendezvous
    also serves participants of one process), else 0. A call over more
    devices (nparts) than this process's node has must span nodes, which
    cuSOLVERMg cannot: refused here rather than left to time out."""
    if jax.process_count() == 1:
        return 0
    nodes = process_nodes()
    mine = nodes[jax.process_index()]
    on_node = sum(1 for d in jax.devices() if nodes[d.process_index] == mine)
    if nparts > on_node:
        raise ValueError(
            f"jaxmg.{op}: A's rows are sharded over {nparts} devices but this "
            f"node has {on_node} devices of the job; cuSOLVERMg drives the GPUs of "
            "one node only. Shard the rows over an axis within a node (e.g. axis "
            "'T' of a mesh ('S', 'T') with 'T' within nodes)"
        )
    return job_id()

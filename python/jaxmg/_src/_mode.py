"""SPMD or MPMD: how the devices of a call are driven, read off the mesh.

A call solves one matrix per group of devices (the devices along the axes
A's rows are sharded over, for each position along the other axes). When
every group lies in one process, its devices are threads of that process and
meet in the in-process rendezvous (SPMD), also inside a multi-process job
(the seed tutorial's mesh ("S", "T") with rows sharded over "T" within each
process). When a group spans processes (one process per GPU, started with
``jax.distributed.initialize``), the call is MPMD: the processes meet through
POSIX shared memory and the leader reaches the others' buffers through CUDA
IPC (GPUs) or shared memory (CPU devices). Those leader engines drive the
devices of one node: a group that spans nodes (``nodes`` > 1, sent to the C
library's engine check and as the call's attribute ``nodes``) runs on
cuSOLVERMp, which needs no shared memory, or is refused before tracing, in
every process, with the engines' reasons.

An engine of the local model (cuSOLVERMp; lapack-local on CPU devices) wants
one communicator id per group (attribute ``comm_id``, int64[groups * 16]:
group g's 128 bytes at [16 g, 16 g + 16)). The group's first process makes it
(NCCL's unique id, or on CPU devices the id of the communicator between the
processes of the node, through the C library) and hands it to the others
through the job's key-value store, under a key that every process computes
alike (the job and the group's device ids); ids are kept per device set, so
retracing and the other ops reuse the same communicator (the C library keeps
one per id). In one process every id is made here (on CPU devices, the
threads communicator's).

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
import itertools
import os
import secrets
import socket
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.sharding import Mesh

from jaxmg._src import _compat, _native

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
    group g in shard order (the layout _ffi_call.position numbers)."""
    names = list(mesh.axis_names)
    order = [names.index(a) for a in others] + [names.index(a) for a in axes]
    devices = np.transpose(np.asarray(mesh.devices), order)
    nparts = int(np.prod([mesh.shape[a] for a in axes]))
    return devices.reshape(-1, nparts)


def call_job_id(op: str, mesh: Mesh, axes: Sequence[str], others: Sequence[str]) -> int:
    """0 when every group of the call lies in one process (SPMD); else the
    job's identity (MPMD). Whether an engine can drive a group that spans
    nodes is the engine check's to say (call_nodes)."""
    grid = groups(mesh, axes, others)
    if all(len({d.process_index for d in row}) == 1 for row in grid):
        return 0
    return job_id()


def nodes_spanned(processes: np.ndarray, nodes: Sequence[str]) -> int:
    """The most nodes one group spans: ``processes`` holds the process index
    of every device (groups x shards), ``nodes`` every process's node."""
    return max((len({nodes[int(p)] for p in row}) for row in np.atleast_2d(processes)),
               default=1)


def call_nodes(mesh: Mesh, axes: Sequence[str], others: Sequence[str]) -> int:
    """The most nodes one group of the call spans (1 where no group spans
    processes: no key-value store is asked then)."""
    grid = groups(mesh, axes, others)
    processes = np.array([[d.process_index for d in row] for row in grid])
    if all(len(set(row)) == 1 for row in processes):
        return 1
    return nodes_spanned(processes, process_nodes())


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
    also serves participants of one process), else 0."""
    if jax.process_count() == 1:
        return 0
    return job_id()


def ambient_nodes(nparts: int) -> int:
    """For calls from inside the user's own shard_map: the nodes a group of
    ``nparts`` devices spans, as far as it can be told without the mesh: 1
    when this node has that many devices of the job (a group that spans
    nodes all the same cannot be seen here, and times out in the leader
    engines' rendezvous), else every node of the job."""
    if jax.process_count() == 1:
        return 1
    nodes = process_nodes()
    mine = nodes[jax.process_index()]
    on_node = sum(1 for d in jax.devices() if nodes[d.process_index] == mine)
    return 1 if nparts <= on_node else len(set(nodes))


# Communicator ids (see the module's docstring).
_COMM_KEY = "jaxmg/comm/{:x}/{}"
_NO_ID = bytes(_native.COMM_ID_BYTES)
# (job, group tag) -> id: one communicator per device set.
_comm_ids: dict[tuple[int, str], bytes] = {}
# Calls from inside the user's own shard_map, numbered per kind of call (see
# ambient_comm_ids).
_ambient_calls: dict[tuple[Any, ...], Any] = {}


def device_set_tag(device_ids: Sequence[int]) -> str:
    """A group's name, the same in every process: its device ids in rank
    order, hashed (a key-value store key stays short)."""
    text = ",".join(str(int(i)) for i in device_ids).encode()
    return hashlib.blake2b(text, digest_size=12).hexdigest()


def share_comm_ids(tags: Sequence[str | None], makers: Sequence[int], me: int, job: int,
                   make: Callable[[], bytes],
                   cache: dict[tuple[int, str], bytes] | None) -> list[bytes]:
    """One communicator id per group. ``tags[g]``: group g's name, the same
    in every process, or None where this process takes no part in group g
    (its id is then zeros: never read here). ``makers[g]``: the process that
    makes group g's id. ``job``: 0 in one process (every id made here), else
    the job's identity (the maker stores the id in the key-value store, the
    others wait for it). ``cache``: ids already made, by (job, tag), or None
    for ids made afresh. A process first makes and stores every id it makes,
    then waits for the others', so no two processes wait on each other."""
    ids: list[bytes | None] = []
    for tag, maker in zip(tags, makers):
        if tag is None:
            ids.append(_NO_ID)
        elif cache is not None and (job, tag) in cache:
            ids.append(cache[(job, tag)])
        elif job == 0 or maker == me:
            made = make()
            if len(made) != _native.COMM_ID_BYTES:
                raise RuntimeError(f"jaxmg: a communicator id of {len(made)} bytes")
            if job:
                _compat.kv_set(_COMM_KEY.format(job & (2**64 - 1), tag), made.hex())
            ids.append(made)
        else:
            ids.append(None)
    timeout = _kv_timeout_s()
    for g, (tag, maker) in enumerate(zip(tags, makers)):
        if ids[g] is None:
            key = _COMM_KEY.format(job & (2**64 - 1), tag)
            try:
                ids[g] = bytes.fromhex(_compat.kv_get(key, timeout))
            except Exception as e:  # the client raises its own error types
                raise RuntimeError(
                    f"jaxmg: the communicator id of group {g} did not arrive from process "
                    f"{maker} within {timeout:.3g} s (set JAXMG_RENDEZVOUS_TIMEOUT to wait "
                    f"longer); every process must make the same jaxmg calls: {e}") from e
    if cache is not None:
        for tag, made in zip(tags, ids):
            if tag is not None:
                cache[(job, tag)] = made
    return ids  # type: ignore[return-value]


def comm_id_attr(ids: Sequence[bytes]) -> tuple[int, ...]:
    """The attribute ``comm_id``: group g's 128 bytes as int64 [16 g, 16 g + 16),
    in this machine's byte order (the C library copies them back to bytes)."""
    for made in ids:
        if len(made) != _native.COMM_ID_BYTES:
            raise ValueError(f"jaxmg: a communicator id of {len(made)} bytes")
    return tuple(int(v) for v in np.frombuffer(b"".join(ids), dtype=np.int64))


def mesh_comm_ids(mesh: Mesh, axes: Sequence[str], others: Sequence[str],
                  job: int) -> tuple[int, ...]:
    """The attribute ``comm_id`` of a call over a whole mesh: the id of every
    group this process takes part in (made by the group's first process, by
    the communicator of the mesh's platform), zeros for the others; kept per
    device set (CPU and GPU devices of one number are different sets)."""
    grid = groups(mesh, axes, others)
    me = jax.process_index()
    platform = _native.platform_of(np.asarray(mesh.devices).flat[0].platform)
    tags = [f"{platform}-{device_set_tag([d.id for d in row])}"
            if any(d.process_index == me for d in row) else None for row in grid]
    makers = [int(row[0].process_index) for row in grid]
    return comm_id_attr(share_comm_ids(tags, makers, me, job,
                                       lambda: _native.comm_new_id(platform, bool(job)),
                                       _comm_ids))


def ambient_comm_ids(ngroups: int, job: int, kind: tuple[Any, ...], platform: str) -> tuple[int, ...]:
    """The attribute ``comm_id`` of a call from inside the user's own
    shard_map, where the devices of each group are not known: fresh ids for
    every group, made by process 0 (NCCL lets any process make an id) under
    a key numbered by such calls of the same ``kind`` (the op, the rows'
    axes and their sizes: every process makes the same calls of a kind in
    the same order, and a call of another kind that only some processes
    make does not shift the numbering). A process that waits for an id
    nobody makes (a call that process 0 never makes) fails after
    JAXMG_RENDEZVOUS_TIMEOUT with a message saying so. A retrace makes new
    communicators. ``platform``: whose communicator ("CUDA", "cpu")."""
    k = next(_ambient_calls.setdefault(kind, itertools.count()))
    name = hashlib.blake2b(repr(kind).encode(), digest_size=6).hexdigest()
    tags = [f"ambient-{name}-{k}-{g}" for g in range(ngroups)]
    return comm_id_attr(share_comm_ids(tags, [0] * ngroups, jax.process_index(), job,
                                       lambda: _native.comm_new_id(platform, bool(job)),
                                       None))

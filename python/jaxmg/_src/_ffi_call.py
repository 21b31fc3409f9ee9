"""One shard's FFI call: its static description (``Call``: geometry, the
rows' axes, the device set, the job and the local model's communicators),
the shard's position in the call, the types of its results inside a
shard_map, the call ids the C library keys its rendezvous on, the memory
heuristic that lets the leader permute out of place, and ``ffi_call``
itself (target ``jaxmg_<op>`` with its attributes).
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxmg._src import _compat, _mode
from jaxmg._src._geometry import Geometry


@dataclass(frozen=True)
class Call:
    """The static part of one call on one shard: its geometry, the axes A's
    rows are sharded over and the others (one group each), the id of its
    device set, and, when the mesh is known, whether it spans processes
    (``job``: 0 SPMD, else the job's identity; None inside the user's own
    shard_map, where the mesh is not known: see _mode.ambient_job_id) and
    every shard's process (``pids``, MPMD only); the most nodes a group
    spans (``nodes``) and, for an engine of the local model, every group's
    communicator id (``comm_id``, _mode.comm_id_attr) and the rows of the
    process grid it runs on (``grid_rows``, see local_grid_rows). Hashable,
    so that it can be a custom_jvp's non-differentiable argument."""

    g: Geometry
    axes: tuple[str, ...]
    others: tuple[str, ...]
    mesh_id: int
    job: int | None = None
    pids: tuple[int, ...] | None = None
    nodes: int = 1
    comm_id: tuple[int, ...] | None = None
    grid_rows: int = 1

    @property
    def axis(self) -> Any:
        """The rows' axes as collectives take them."""
        return self.axes if len(self.axes) > 1 else self.axes[0]


def mesh_id(device_ids: Sequence[int], axes: Sequence[str]) -> int:
    """A stable id for the device set of a call: calls on disjoint meshes never
    meet in the rendezvous. Stable across processes (no salted hashing)."""
    text = ",".join(map(str, device_ids)) + "|" + ",".join(map(str, axes))
    return zlib.crc32(text.encode())


def position(axes: Sequence[str], others: Sequence[str], nparts: int) -> jax.Array:
    """This device's position as the C library wants it: group * nparts + shard,
    where shard is the index along the sharded axes and group the index along
    the others (each group solves its own copy)."""
    shard = jax.lax.axis_index(tuple(axes) if len(axes) > 1 else axes[0])
    if others:
        group = jax.lax.axis_index(tuple(others) if len(others) > 1 else others[0])
        shard = group * nparts + shard
    return jnp.asarray(shard, dtype=jnp.int32)


def result_types(axes: Sequence[str], *inputs: jax.Array) -> tuple[frozenset[str], frozenset[str]]:
    """The mesh axes an op's results vary over, inside a shard_map that
    checks vma: (its per-shard results, its results that are the same on
    every shard of a group). A result varies over the axes its inputs vary
    over; the per-shard ones over the rows' axes too, the others not (the
    op hands every shard of a group the same value). Both empty elsewhere."""
    data = frozenset().union(*map(_compat.varying_axes, inputs))
    if not _compat.vma_checked():
        return data, data
    return data | frozenset(axes), data - frozenset(axes)


def local_grid_rows(axes: Sequence[str], sizes: Any) -> int:
    """The rows r of the r x c process grid an engine of the local model
    runs on (the attribute ``grid_rows``; exec/local.h): A's rows sharded
    over two mesh axes, as ``P(r, c)`` is read (1.x's 2D process grid,
    NetKet's ``process_grid``), make a grid of the first axis's size by the
    second's (r x 1 included); over one axis (or more than two), the 1 x P
    line. The C library moves A's part onto the grid over NCCL before the
    solver and back after it where the result is in A's place. ``sizes``:
    the mesh's axis sizes by name."""
    if len(axes) != 2:
        return 1
    return int(sizes[axes[0]])


def mesh_call(op: str, mesh: Mesh, rows: Any, g: Geometry) -> Call:
    """The Call of an op over a whole mesh: its device set's id, whether its
    groups span processes (MPMD: the job and every shard's pid), the nodes
    they span, and for an engine of the local model every group's
    communicator id (Geometry.local: the C library's engine table says
    which engines run in that model: on CPU devices lapack-local, whose
    calls carry the threads communicator's id in one process and the
    processes communicator's where a group spans processes, MPMD)."""
    ids = [int(d.id) for d in np.asarray(mesh.devices).flat]
    job = _mode.call_job_id(op, mesh, rows.axes, rows.others)
    pids = tuple(int(p) for p in _mode.group_pids(mesh, rows.axes, rows.others)) if job else None
    nodes = _mode.call_nodes(mesh, rows.axes, rows.others)
    comm = _mode.mesh_comm_ids(mesh, rows.axes, rows.others, job) if g.local else None
    grid_rows = local_grid_rows(rows.axes, mesh.shape) if g.local else 1
    return Call(g, rows.axes, rows.others, mesh_id(ids, mesh.axis_names), job, pids,
                nodes, comm, grid_rows)


# --- call ids -----------------------------------------------------------------------------

# Numbers every traced call: the C library keys its rendezvous on it, so that
# two calls in one program never meet, whatever order the devices run them in.
_call_ids = itertools.count(1)

# MPMD calls are numbered per mesh instead: all processes of a job trace the
# calls over a mesh that spans them in the same order (they are collective),
# but one process may trace calls over its own devices that the others never
# make, which would shift a process-wide count.
_mpmd_call_ids: dict[int, Any] = {}


def _call_id(mesh_id_attr: int, job: int) -> dict[str, int]:
    """The attributes that number one traced call (see _call_ids)."""
    if job:
        ids = _mpmd_call_ids.setdefault(mesh_id_attr, itertools.count(1))
        return {"call_id": next(ids), "job_id": job}
    return {"call_id": next(_call_ids)}


# --- the memory heuristic -----------------------------------------------------------------

# The leader permutes A into cuSOLVERMg's layout fastest out of place, into
# one more shard-sized buffer per device for the length of the call. A
# refused allocation costs seconds (XLA's allocator waits for memory to be
# freed before it fails), so it is tried only where four shards (A, XLA's
# copy of A when the caller keeps it, the scratch, and room for the solver's
# own buffers, potri's second shard among them) fit in the allocator's limit.
_SCRATCH_SHARDS = 4


def scratch_fits(a_shard: Any) -> bool:
    """Whether the out-of-place permutation may be tried for a shard of this
    shape and dtype: by the allocator limit of this process's first device
    (every device of a call is alike); always where no limit is known."""
    stats = None
    try:
        stats = jax.local_devices()[0].memory_stats()
    except Exception:  # backends without memory statistics
        stats = None
    limit = (stats or {}).get("bytes_limit")
    if not limit:
        return True
    shard_bytes = int(np.prod(a_shard.shape[-2:])) * np.dtype(a_shard.dtype).itemsize
    return _SCRATCH_SHARDS * shard_bytes <= int(limit)


# --- the call -----------------------------------------------------------------------------


def ffi_call(
    op: str,
    operands: Sequence[jax.Array],
    results: Sequence[jax.ShapeDtypeStruct],
    *,
    call: Call,
    varying: Sequence[frozenset[str]] | None = None,
    aliases: dict[int, int] | None = None,
    **attrs: int,
) -> Sequence[jax.Array]:
    """Calls target ``jaxmg_<op>`` with A (operand 0) aliased to result 0, so
    that XLA hands A's buffer to the solver when nothing else needs it and
    copies A first when it is still live: the user's array is never modified.
    ``aliases``: operand -> result, for an op that overwrites another operand
    too (sygvd's B: ``{0: 0, 1: 2}``); default ``{0: 0}``.

    ``call`` gives the tile, the device set and the job (see Call).
    ``varying``: inside a shard_map that checks vma, the mesh axes each result
    varies over (see result_types). JAX wants an FFI call's operands typed
    alike, and cannot know its results' types: they are typed here."""
    if varying is not None and _compat.vma_checked():
        union = frozenset().union(*map(_compat.varying_axes, operands), *varying)
        operands = [_compat.pvary(x, union) for x in operands]
        results = [_compat.typed_result(r.shape, r.dtype, v)
                   for r, v in zip(results, varying)]
    target = jax.ffi.ffi_call(
        f"jaxmg_{op}",
        tuple(results),
        input_output_aliases=dict(aliases) if aliases is not None else {0: 0},
        # A batch is solved one matrix after the other.
        vmap_method="sequential",
    )
    return target(*operands, **_attributes(op, operands[0], call, attrs))


def _attributes(op: str, a: Any, call: Call, attrs: dict[str, int]) -> dict[str, Any]:
    """The call's attributes: the op's own (``attrs``), then T_A, the device
    set, the scratch heuristic, the call's number and job, and the nodes,
    pids and communicators where they differ from the C library's defaults."""
    attrs = dict(attrs, T_A=call.g.tile, mesh_id=call.mesh_id, scratch=int(scratch_fits(a)))
    job = call.job
    if job is None:  # A's operand is one shard, r x N: there are N / r shards
        rows, cols = a.shape[-2:]
        job = _mode.ambient_job_id(op, max(cols // max(rows, 1), 1))
    attrs.update(_call_id(int(attrs.get("mesh_id", 0)), job))
    if call.nodes > 1:  # attribute nodes defaults to 1
        attrs["nodes"] = call.nodes
    typed: dict[str, Any] = {k: np.int64(v) for k, v in attrs.items()}
    if job and call.pids is not None:
        typed["pids"] = np.asarray(call.pids, dtype=np.int64)
    if call.comm_id is not None:
        typed["comm_id"] = np.asarray(call.comm_id, dtype=np.int64)
        if call.grid_rows > 1:  # attribute grid_rows defaults to 1
            typed["grid_rows"] = np.int64(call.grid_rows)
    return typed

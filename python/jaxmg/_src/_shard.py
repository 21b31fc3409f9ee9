"""What every op does on one shard around its FFI call: tile and padding
geometry, padding and unpadding, the shard's position, the call itself.

Conventions. A shard of A is ``r`` rows of the N x N matrix, row-major. The C
library reads it column-major: since A is Hermitian, those are the columns of
conj(A). The ops account for the conjugation on the right-hand side and the
outputs.

Padding. cuSOLVERMg's 1D block-cyclic layout needs every shard to be a whole
number of tiles. When ``r`` is not a multiple of T_A, each shard is padded to
``rp`` rows (the next multiple) with rows and columns of the identity (scaled
for syevd), placed at the end of every shard: the padded matrix is a symmetric
permutation of diag(A, c*I), so the answer for A is read off exactly.
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxmg._src import _checks, _compat, _mode, _native
from jaxmg._src._compat import is_tracer as _compat_is_tracer
from jaxmg._src._compat import place, shard_map_unchecked


@dataclass(frozen=True)
class Geometry:
    """Sizes of one call: N over ``nparts`` shards of ``r`` rows, padded to
    ``rp``; and the engine the C library's check chose for them ("" when
    not asked: no library for the platform)."""

    n: int
    nparts: int
    tile: int  # the T_A given to the solver
    r: int
    rp: int
    engine: str = ""

    @property
    def padded(self) -> bool:
        return self.rp != self.r

    @property
    def n_padded(self) -> int:
        return self.nparts * self.rp


def geometry(op: str, n: int, nparts: int, tile: int, pad: bool) -> Geometry:
    """The call's sizes. A T_A larger than the shard is reduced to the shard
    size: both mean one tile per device, and the smaller needs no padding."""
    r = n // nparts
    tile = min(tile, r)
    rp = -(-r // tile) * tile
    if rp != r and not pad:
        raise ValueError(
            f"jaxmg.{op}: the shard size N/devices = {r} is not a multiple of "
            f"T_A={tile}; pass pad=True or choose a T_A that divides {r}"
        )
    return Geometry(n=n, nparts=nparts, tile=tile, r=r, rp=rp)


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


def pad_shard(a: jax.Array, g: Geometry, shard: jax.Array, diag: Any) -> jax.Array:
    """A shard (r x N) -> padded shard (rp x N'), ``diag`` on the new diagonal."""
    if not g.padded:
        return a
    extra = g.rp - g.r
    a = a.reshape(g.r, g.nparts, g.r)
    a = jnp.pad(a, ((0, extra), (0, 0), (0, extra)))
    a = a.reshape(g.rp, g.n_padded)
    rows = jnp.arange(g.r, g.rp)
    return a.at[rows, shard * g.rp + rows].set(jnp.asarray(diag, a.dtype))


def unpad_shard(a: jax.Array, g: Geometry) -> jax.Array:
    """Padded shard (rp x N') -> shard (r x N)."""
    if not g.padded:
        return a
    a = a.reshape(g.rp, g.nparts, g.rp)[: g.r, :, : g.r]
    return a.reshape(g.r, g.n)


def pad_rows(x: jax.Array, g: Geometry) -> jax.Array:
    """A replicated (N x k) array -> (N' x k), zero rows at the end of each shard."""
    if not g.padded:
        return x
    k = x.shape[1]
    x = x.reshape(g.nparts, g.r, k)
    x = jnp.pad(x, ((0, 0), (0, g.rp - g.r), (0, 0)))
    return x.reshape(g.n_padded, k)


def unpad_rows(x: jax.Array, g: Geometry) -> jax.Array:
    """(N' x k) -> (N x k): drops the padding rows."""
    if not g.padded:
        return x
    k = x.shape[1]
    return x.reshape(g.nparts, g.rp, k)[:, : g.r, :].reshape(g.n, k)


def unpad_info(info: jax.Array, g: Geometry) -> jax.Array:
    """Maps a failing leading minor's order from padded to original numbering.
    Padding rows are identity rows and never fail."""
    if not g.padded:
        return info
    p = jnp.maximum(info, 1) - 1
    original = (p // g.rp) * g.r + (p % g.rp) + 1
    return jnp.where(info > 0, original, info).astype(info.dtype)


# The engines of the local model (engine/engine.h, JMG_MODEL_LOCAL): their
# calls carry a communicator id per group (attribute comm_id, _mode.py): on
# CPU devices (lapack-local) the threads communicator's in one process, the
# processes communicator's where a group spans processes (MPMD).
LOCAL_ENGINES = frozenset({"cusolvermp", "lapack-local"})


def local_grid_rows(axes: Sequence[str], sizes: Any) -> int:
    """The rows r of the r x c process grid an engine of the local model
    runs on (the attribute ``grid_rows``; exec/local.h): A's rows sharded
    over two mesh axes, as ``P(r, c)`` is read (1.x's 2D process grid,
    NetKet's ``process_grid``), make a grid of the first axis's size by the
    second's (r x 1 included); over one axis (or more than two), the 1 x P
    line. The C
    library moves A's part onto the grid over NCCL before the solver and
    back after it where the result is in A's place. ``sizes``: the mesh's
    axis sizes by name."""
    if len(axes) != 2:
        return 1
    return int(sizes[axes[0]])


# Public functions named otherwise than the C library's op they run (the
# engine check asks by the op's name).
SOLVER_OF_FORM = {"eigh_generalized": "sygvd"}


# Numbers every traced call: the C library keys its rendezvous on it, so that
# two calls in one program never meet, whatever order the devices run them in.
_call_ids = itertools.count(1)

# MPMD calls are numbered per mesh instead: all processes of a job trace the
# calls over a mesh that spans them in the same order (they are collective),
# but one process may trace calls over its own devices that the others never
# make, which would shift a process-wide count.
_mpmd_call_ids: dict[int, Any] = {}

def onto(x: Any, mesh: Mesh, spec: Any) -> Any:
    """x moved onto mesh as spec says where the op's program cannot do it
    or its cotangent would come back laid out otherwise than x; else x as
    it is (host arrays, arrays on mesh's devices, values traced under
    ``jax.jit``: the program lays them out).

    - A concrete array committed to other devices than mesh's is moved (jit
      refuses arguments on other devices).
    - Under autodiff run eagerly (``jax.grad`` or ``jax.vjp`` outside
      ``jax.jit``), x is a tracer whose value is known: it is put on mesh
      here, naming its value's own placement as the source, so that JAX
      moves its cotangent back there. Left to the program, the cotangent
      would come back as XLA lays it out (A's rows sharded, for A), typed
      so on a mesh of Explicit axes, and the cotangent of an unsharded A's
      other uses (``(A + A^H) / 2``) could not be added to it (issue 29).
      Under ``jax.jit`` the program's own placement (``_compat.place``)
      types the cotangent like x."""
    if _compat_is_tracer(x):
        value = _compat.concrete_value(x)
        if value is None:
            return x
        src = getattr(value, "sharding", None)
        if not isinstance(src, jax.sharding.Sharding):  # a host array: one device
            local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
            src = jax.sharding.SingleDeviceSharding(local[0] if local else jax.devices()[0])
        return jax.device_put(x, jax.sharding.NamedSharding(mesh, spec), src=src)
    sharding = getattr(x, "sharding", None)
    if sharding is None:
        return x
    if set(sharding.device_set) == set(mesh.devices.flat):
        return x
    return jax.device_put(x, jax.sharding.NamedSharding(mesh, spec))


def settle_on_cpu(outputs: Any, mesh: Mesh) -> Any:
    """Waits for an eager call's results on CPU devices.

    XLA:CPU runs each device's part of a multi-device program on a pool thread
    and holds that thread until the part completes. With many programs in
    flight, parts of different programs can fill the pool while each waits for
    its own missing parts (a jaxmg call needs all of them), and nothing moves
    again: seen after about 50 asynchronously dispatched calls on a 2-core
    machine. Waiting here keeps one eager jaxmg call in flight. Under tracing
    there is nothing to wait for."""
    leaves = jax.tree_util.tree_leaves(outputs)
    if any(_compat_is_tracer(x) for x in leaves):
        return outputs
    if next(iter(mesh.devices.flat)).platform == "cpu":
        jax.block_until_ready(outputs)
    return outputs


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
    attrs = dict(attrs, T_A=call.g.tile, mesh_id=call.mesh_id,
                 scratch=int(scratch_fits(operands[0])))
    job, pids = call.job, call.pids
    if job is None:  # A's operand is one shard, r x N: there are N / r shards
        rows, cols = operands[0].shape[-2:]
        job = _mode.ambient_job_id(op, max(cols // max(rows, 1), 1))
    if job:
        ids = _mpmd_call_ids.setdefault(int(attrs.get("mesh_id", 0)), itertools.count(1))
        attrs = dict(attrs, call_id=next(ids), job_id=job)
    else:
        attrs = dict(attrs, call_id=next(_call_ids))
    if call.nodes > 1:  # attribute nodes defaults to 1
        attrs["nodes"] = call.nodes
    attrs = {k: np.int64(v) for k, v in attrs.items()}
    if job and pids is not None:
        attrs["pids"] = np.asarray(pids, dtype=np.int64)
    if call.comm_id is not None:
        attrs["comm_id"] = np.asarray(call.comm_id, dtype=np.int64)
        if call.grid_rows > 1:  # attribute grid_rows defaults to 1
            attrs["grid_rows"] = np.int64(call.grid_rows)
    return target(*operands, **attrs)


def prepare(op: str, a: Any, n: int, T_A: Any, mesh: Any, in_specs: Any,
            n_specs: int, pad: bool) -> tuple[Any, Mesh, Any, Geometry]:
    """The steps every op takes before its program runs, in order: mesh and
    in_specs (inferred when left out), their checks, N against the device
    count, T_A (chosen when left out), A moved onto the mesh, the padding
    geometry, the native library loaded. Returns (a, mesh, rows, geometry)."""
    mesh, in_specs = _checks.resolve_layout(op, a, mesh, in_specs)
    rows = _checks.check_specs(op, mesh, in_specs, n_specs)
    _checks.check_divisible(op, n, rows.nparts)
    platform = _native.platform_of(np.asarray(mesh.devices).flat[0].platform)
    nodes = _mode.call_nodes(mesh, rows.axes, rows.others)
    g = choose_geometry(op, n, rows.nparts, np.dtype(a.dtype), T_A, pad, not pad, platform,
                        nodes)
    a = onto(a, mesh, rows.spec)
    return a, mesh, rows, g


def choose_geometry(op: str, n: int, nparts: int, dtype: np.dtype, T_A: Any,
                    pad: bool, exact: bool, platform: str, nodes: int = 1) -> Geometry:
    """The call's geometry, with T_A checked against the engines before
    anything is traced: the C library says which engine would run the call
    (engine/engine.h, jmg_engine_check: every engine's limits live in its
    ``supports``; ``nodes``: the most nodes a group spans). An explicit T_A
    that none takes is a ValueError naming each engine's reason; left out,
    the default (``default_tile``) with the widest tiles an engine runs
    (``_checks.tile_caps``), padded to a power-of-two tile where the engine
    would lay A out in much narrower blocks than the default's (``wider``;
    the C library says which blocks: engine.h's ``block``). The engine
    chosen is kept in the geometry (an engine of the local model changes
    the call's attributes)."""
    solver = op.removesuffix("_shardmap_ctx")  # the ctx forms run the same ops
    solver = SOLVER_OF_FORM.get(solver, solver)
    where = f"on {nparts} {platform} device(s)" + (f" over {nodes} nodes" if nodes > 1 else "")
    hint = ("" if nodes == 1 else
            ". The devices that solve one matrix span several nodes: only cuSOLVERMp "
            "runs such a group (pip install \"jaxmg[cuda13]\", GPUs); or shard A's rows "
            "over an axis within a node (e.g. P('T', None) on a mesh ('S', 'T') with 'T' "
            "within nodes), so that each node solves its own copy")

    def check(g: Geometry) -> tuple[bool, str, int] | None:
        return _native.engine_choice(platform, solver, nparts, dtype.name, g.rp * nparts,
                                     g.tile, nodes=nodes)

    def chosen(g: Geometry, verdict: tuple[bool, str, int] | None) -> Geometry:
        return dataclasses.replace(g, engine=verdict[1]) if verdict is not None else g

    def wider(g: Geometry, verdict: tuple[bool, str, int] | None) -> Geometry:
        """g, or where the engine would lay A out in blocks much narrower
        than g's tiles (cuSOLVERMp's syevd takes powers of two that divide
        the shard: 4 for a shard of 1500 rows), the geometry padded to a
        power-of-two tile that the engine takes whole, with the fewest
        padding rows (then the widest tile)."""
        if verdict is None or not verdict[0] or pad is False or exact:
            return chosen(g, verdict)
        if verdict[2] >= min(g.tile, _checks.tile_caps()[-1]):
            return chosen(g, verdict)
        best = None
        for cap in _checks.tile_caps():
            g2 = geometry(op, n, nparts, cap, pad)
            v2 = check(g2)
            if v2 is None or not v2[0] or v2[2] < g2.tile:
                continue
            if best is None or g2.rp < best[0].rp:
                best = (g2, v2)
        return chosen(*best) if best is not None else chosen(g, verdict)

    if T_A is not None:
        g = geometry(op, n, nparts, _checks.check_tile(op, T_A), pad)
        verdict = check(g)
        if verdict is not None and not verdict[0]:
            raise ValueError(
                f"jaxmg.{op}: T_A={T_A} cannot run N={n} {dtype.name} {where}: "
                f"{verdict[1]}{hint}"
            )
        return chosen(g, verdict)
    first = None
    for cap in _checks.tile_caps():
        g = geometry(op, n, nparts, _checks.default_tile(n, nparts, exact, cap), pad)
        verdict = check(g)
        if verdict is None or verdict[0]:
            return wider(g, verdict)
        first = first or verdict[1]
    raise ValueError(
        f"jaxmg.{op}: no engine runs N={n} {dtype.name} {where}: {first}{hint}"
    )


def mesh_call(op: str, mesh: Mesh, rows: Any, g: Geometry) -> Call:
    """The Call of an op over a whole mesh: its device set's id, whether its
    groups span processes (MPMD: the job and every shard's pid), the nodes
    they span, and for an engine of the local model every group's
    communicator id."""
    ids = [int(d.id) for d in np.asarray(mesh.devices).flat]
    job = _mode.call_job_id(op, mesh, rows.axes, rows.others)
    pids = tuple(int(p) for p in _mode.group_pids(mesh, rows.axes, rows.others)) if job else None
    nodes = _mode.call_nodes(mesh, rows.axes, rows.others)
    local = g.engine in LOCAL_ENGINES
    comm = _mode.mesh_comm_ids(mesh, rows.axes, rows.others, job) if local else None
    grid_rows = local_grid_rows(rows.axes, mesh.shape) if local else 1
    return Call(g, rows.axes, rows.others, mesh_id(ids, mesh.axis_names), job, pids,
                nodes, comm, grid_rows)


def mapped(
    local_fn: Callable[..., Any],
    mesh: Mesh,
    in_specs: tuple[Any, ...],
    out_specs: Any,
) -> Callable[..., Any]:
    """``local_fn`` (an op's local core: this device's rows in, this
    device's part of the results out, derivative rules included) mapped
    over ``mesh``, its inputs laid out as ``in_specs`` say first.

    Why the derivatives live inside the shard_map. Differentiated there,
    every value is one device's part and JAX's own rules for shard_map
    type the cotangents at its boundary from in_specs and out_specs, for
    Auto and Explicit axes alike. Derivative arithmetic on the whole
    arrays outside it would be typed by the mesh's axis types instead:
    under Explicit axes every intermediate carries a sharding that each
    cotangent must match, which products of row- and column-sharded
    matrices do not (issue 15)."""
    mapped_fn = shard_map_unchecked(local_fn, mesh=mesh, in_specs=in_specs,
                                    out_specs=out_specs)

    def run(*args: jax.Array) -> Any:
        return mapped_fn(*(place(x, mesh, spec) for x, spec in zip(args, in_specs)))

    return run

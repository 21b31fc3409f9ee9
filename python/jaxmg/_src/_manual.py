"""What the ``*_shardmap_ctx`` forms' derivative rules compute with, inside
the user's own ``jax.shard_map``: one device's part of each matrix, and
collectives over the axes A's rows are sharded over.

Conventions. Along those axes, device d (its index, 0 ... nparts-1) holds rows
R_d = d*r ... (d+1)*r - 1 of A (r = N / nparts). "A" is the Hermitian matrix
of a's upper triangle, the one the ops solve with; its derivatives are taken
with respect to a, as in the plain forms.

Why the rules are right under both settings of shard_map's ``check_vma``.
JAX differentiates a shard_map body as a function of every device's values
(transposing psum into psum, ppermute into the inverse permutation, and so
on); what differs is how it reads a value that is the same on every device:

- ``check_vma=True`` (shard_map's default) types every value by the mesh axes
  it may vary over. A value typed invariant is one value, and its cotangent
  is the whole cotangent on every device. The ops type their results (an
  FFI call cannot say): x, w and status invariant over the rows' axes,
  A^-1's rows and V's columns varying.
- ``check_vma=False`` types nothing: every device's copy is its own variable,
  and the cotangent of a value that is the same everywhere arrives split
  over the devices (shard_map divides the cotangent of an output that
  out_specs leave unmapped by the number of devices, and sums the cotangents
  of an unmapped input): only the sum of the parts is the cotangent.

The rules use only collectives JAX knows how to transpose, plus one linear
map of their own, the solve with A, whose transpose they give explicitly:
the FFI solve takes the right-hand side of the group's first device (its
leader) and hands every device the same x, so its transpose sums the
cotangent's parts over the axes they may differ over (all of the rows' axes
without vma typing, none for an invariant cotangent) and hands A^-H of the
sum to the leader alone. Neither reading needs to know the caller's
out_specs.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxmg._src import _checks, _compat, _ffi_call, _geometry, _mode, _native


# The static part of one call: shared with the plain forms, which run the
# same local cores inside their own shard_map.
Call = _ffi_call.Call


def make_call(op: str, rows: _checks.RowSharding, n: int, a: Any, T_A: Any,
              pad: bool, geometry: _geometry.Geometry | None = None,
              precision: str = "exact") -> Call:
    """The checks every ctx form makes before tracing anything, then its Call:
    T_A (chosen when left out; one that divides the shard where not
    ``pad``) and the engine (for a solve's ``precision``), the padding
    geometry (``geometry``'s when given: an op that chooses its own,
    gesvd), and, under
    ``check_vma=True``, that ``a`` is typed as varying over the rows' axes
    (it holds this device's rows; a value typed the same on every device
    cannot be, and its derivative would be read as one shared value)."""
    platform = _native.platform_of(jax.default_backend())
    nodes = _mode.ambient_nodes(rows.nparts)
    g = geometry or _geometry.choose_geometry(op, n, rows.nparts, np.dtype(a.dtype), T_A,
                                              pad, platform, nodes, precision)
    if _compat.vma_checked():
        missing = [name for name in rows.axes if name not in _compat.varying_axes(a)]
        if missing:
            raise ValueError(
                f"jaxmg.{op}: a is typed as the same on every device along "
                f"{tuple(missing)}, but it must be this device's rows of A: pass A "
                f"into the shard_map with in_specs P({rows.spec[0]!r}, None), or "
                f"mark it with jax.lax.pcast(a, {tuple(missing)!r}, to='varying')"
            )
    comm, grid_rows = None, 1
    if g.local:  # an engine of the local model: a communicator per group
        sizes = _compat.current_manual_axes()
        ngroups = int(np.prod([sizes[name] for name in rows.others], dtype=np.int64))
        kind = (op, rows.axes, tuple(int(sizes[a]) for a in rows.axes + rows.others))
        job = _mode.ambient_job_id(op, rows.nparts)
        comm = _mode.ambient_comm_ids(ngroups, job, kind, platform)
        grid_rows = _ffi_call.local_grid_rows(rows.axes, sizes)
    return Call(g, rows.axes, rows.others, _ffi_call.mesh_id([], rows.axes + rows.others),
                nodes=nodes, comm_id=comm, grid_rows=grid_rows)


def shard_index(call: Call) -> jax.Array:
    """This device's index d along the rows' axes."""
    return jax.lax.axis_index(call.axis)


def summed_axes(call: Call, x: jax.Array) -> tuple[str, ...]:
    """The rows' axes over which x's per-device values may differ, and so
    must be summed to give the value they stand for when x is a cotangent:
    all of them without vma typing, else those x is typed varying over."""
    if not _compat.vma_checked():
        return call.axes
    vary = _compat.varying_axes(x)
    return tuple(name for name in call.axes if name in vary)


def _named(axes: tuple[str, ...]) -> Any:
    return axes if len(axes) > 1 else axes[0]


def psum(x: jax.Array, axes: tuple[str, ...]) -> jax.Array:
    return jax.lax.psum(x, _named(axes)) if axes else x


def rows_everywhere(call: Call, x: jax.Array) -> jax.Array:
    """The matrix whose rows are spread over the devices (each device's x,
    of the same shape, in its place along axis 0), whole on every device: a
    psum of each device's rows in their place of a zero matrix rather than
    an all_gather, so that under vma typing the result, and what is
    computed from it alone, is typed the same on every device."""
    nparts = call.g.nparts
    if nparts == 1:
        return x
    rows = x.shape[0]
    whole = jnp.zeros((rows * nparts,) + x.shape[1:], x.dtype)
    whole = jax.lax.dynamic_update_slice_in_dim(whole, x, shard_index(call) * rows, axis=0)
    return psum(whole, call.axes)


def leader_only(x: jax.Array, axes: tuple[str, ...]) -> jax.Array:
    """x on the device of index 0 along ``axes``, zero on the others."""
    if not axes:
        return x
    first = jax.lax.axis_index(_named(axes)) == 0
    return jnp.where(first, x, jnp.zeros_like(x))


def ring_sum(call: Call, x: jax.Array, term: Callable[[jax.Array, jax.Array], jax.Array]) -> jax.Array:
    """sum over j of term(j, x_j), x_j being device j's x: x goes round the
    ring of devices (nparts - 1 steps of ppermute), so no device ever holds
    more than one other device's part. term's j is a traced index."""
    n = call.g.nparts
    d = shard_index(call)
    to_previous = [(k, (k - 1) % n) for k in range(n)]
    total = None
    for step in range(n):
        # After `step` moves, this device holds the x of device d + step.
        part = term((d + step) % n, x)
        total = part if total is None else total + part
        if step + 1 < n:
            x = jax.lax.ppermute(x, call.axis, to_previous)
    assert total is not None
    return total


def rows_times(call: Call, x: jax.Array, y: jax.Array) -> jax.Array:
    """Rows R_d of X Y, from this device's rows of X (r x N) and of Y (r x M):
    the sum over j of X[R_d, R_j] Y[R_j, :]."""
    r = call.g.r

    def term(j: jax.Array, y_j: jax.Array) -> jax.Array:
        return jax.lax.dynamic_slice_in_dim(x, j * r, r, axis=1) @ y_j

    return ring_sum(call, y, term)


def _global_rows(call: Call, a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The global row and column indices of this device's (r x N) rows."""
    r, n = a.shape
    rows = shard_index(call) * r + jnp.arange(r)[:, None]
    return rows, jnp.arange(n)[None, :]


def hermitian_rows(call: Call, a: jax.Array) -> jax.Array:
    """Rows R_d of the Hermitian matrix of a's upper triangle. Left of the
    diagonal they are the conjugates of columns R_d above it, which other
    devices hold: one all_to_all of r x r blocks brings them."""
    r, n = a.shape
    nparts = call.g.nparts
    blocks = a.reshape(r, nparts, r).transpose(1, 0, 2)  # block j: a[R_d, R_j]
    # Device d receives every device j's block a[R_j, R_d]: A's columns R_d.
    columns = jax.lax.all_to_all(blocks, call.axis, 0, 0, tiled=False).reshape(n, r)
    rows, cols = _global_rows(call, a)
    diagonal = jnp.real(a).astype(a.dtype)
    return jnp.where(cols > rows, a,
                     jnp.where(cols == rows, diagonal, jnp.conj(columns).T))


def hermitian_matvec(call: Call, a: jax.Array, v: jax.Array) -> jax.Array:
    """A v (N x k), the same on every device, for the full v (N x k): with U
    a's upper triangle (real diagonal) and S its strict part, A = U + S^H;
    rows R_d of U v are this device's, and S^H v sums every device's
    S[R_d, :]^H v[R_d]: one psum of N x k."""
    r, n = a.shape
    d = shard_index(call)
    rows, cols = _global_rows(call, a)
    strict = jnp.where(cols > rows, a, jnp.zeros_like(a))
    upper = strict + jnp.where(cols == rows, jnp.real(a).astype(a.dtype), jnp.zeros_like(a))
    own = jax.lax.dynamic_slice_in_dim(v, d * r, r, axis=0)
    placed = jax.lax.dynamic_update_slice_in_dim(jnp.zeros_like(v), upper @ v, d * r, axis=0)
    return psum(placed + jnp.conj(strict).T @ own, call.axes)


def hermitian_times_columns(call: Call, a: jax.Array, v: jax.Array) -> jax.Array:
    """A V_d for this device's columns V_d of some N x (nparts * c) matrix V
    (V_d is N x c): the sum over j of A[:, R_j] V_d[R_j, :], where
    A[:, R_j] = A[R_j, :]^H is device j's Hermitian rows, which go round the
    ring."""
    r = call.g.r

    def term(j: jax.Array, rows_j: jax.Array) -> jax.Array:
        return jnp.conj(rows_j).T @ jax.lax.dynamic_slice_in_dim(v, j * r, r, axis=0)

    return ring_sum(call, hermitian_rows(call, a), term)


def linear_solve(call: Call, a: jax.Array, r: jax.Array,
                 matvec: Callable[[jax.Array], jax.Array],
                 solve: Callable[[jax.Array], jax.Array],
                 solve_transposed: Callable[[jax.Array], jax.Array]) -> jax.Array:
    """A^-1 r (r: the leader's) as a linear map JAX can differentiate and
    transpose: jax.lax.custom_linear_solve, with ``matvec`` (A v, the same
    on every device), ``solve`` (the FFI solve: A^-1 of the leader's r, on
    every device) and ``solve_transposed`` (A^-T of the leader's c, on every
    device). Its transpose hands the cotangent's parts, summed over the axes
    they may differ over, to ``solve_transposed``, and its result to the
    leader alone (see this module's docstring).

    Under vma typing, custom_linear_solve types its result as varying over
    every axis its operands vary over, a's rows' axes included, although
    every device holds the same x; r is typed so from the start, and the
    result is retyped as the same on every device by one psum of x on the
    leader and zeros elsewhere (exact)."""
    checked = _compat.vma_checked()
    if checked:
        r = _compat.pvary(r, _compat.varying_axes(a) | set(call.axes))
    like = _compat.varying_axes(r)

    def typed_matvec(v: jax.Array) -> jax.Array:
        return _compat.pvary(matvec(v), like)

    def typed_solve(_: Any, r: jax.Array) -> jax.Array:
        return _compat.pvary(solve(r), like)

    def transpose_solve(_: Any, c: jax.Array) -> jax.Array:
        summed = summed_axes(call, c)
        return _compat.pvary(leader_only(solve_transposed(psum(c, summed)), summed), like)

    x = jax.lax.custom_linear_solve(typed_matvec, r, typed_solve, transpose_solve)
    if checked:
        x = psum(leader_only(x, call.axes), call.axes)
    return x

"""potrs: solve A x = b for Hermitian positive definite A across devices."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _manual, _native, _shard
from jaxmg._src._compat import current_manual_axes


def _potrs_shard(call: _shard.Call, a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One shard's part: a is r x N, b is N x k (replicated). Returns x (N x k)
    and the status (int32 scalar), the same on every shard."""
    g = call.g
    per_shard, same = _shard.result_types(call.axes, a, b)
    pos = _shard.position(call.axes, call.others, g.nparts)
    shard = pos % g.nparts
    a_p = _shard.pad_shard(a, g, shard, 1)
    # The solver sees conj(A) (see _shard): solve conj(A) y = conj(b), x = conj(y).
    # It wants B column-major, which is B^T row-major.
    b_cm = jnp.conj(_shard.pad_rows(b, g)).T
    dtype = a.dtype
    _, y_cm, info = _shard.ffi_call(
        "potrs",
        (a_p, b_cm, pos),
        (
            jax.ShapeDtypeStruct(a_p.shape, dtype),
            jax.ShapeDtypeStruct(b_cm.shape, dtype),
            jax.ShapeDtypeStruct((), jnp.int32),
        ),
        call=call,
        varying=(per_shard, same, same),
    )
    x = _shard.unpad_rows(jnp.conj(y_cm).T, g)
    return x, _shard.unpad_info(info, g)


@functools.lru_cache(maxsize=256)
def _program(mesh: Mesh, rows: _checks.RowSharding, g: _shard.Geometry) -> Any:
    """The local core (_ctx_solve, derivative rules included) over the mesh."""
    call = _shard.mesh_call("potrs", mesh, rows, g)
    return jax.jit(_shard.mapped(functools.partial(_ctx_solve, call), mesh,
                                 in_specs=(rows.spec, P(None, None)), out_specs=(P(None, None), P())))


def potrs(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Solves ``a @ x = b`` for Hermitian positive definite ``a`` on all devices.

    Args:
      a: the N x N matrix, rows sharded over the mesh axis named in
        ``in_specs[0]`` (e.g. ``P("x", None)``). Only its upper triangle is read
        (the lower triangle of its transpose). It is not modified.
      b: right-hand sides, (N, NRHS) or (N,), replicated (``P(None, None)``).
      T_A: tile size (columns per block of the 1D block-cyclic layout). A T_A
        above the shard size N/devices is reduced to it. Omitted: the whole
        shard up to 2048 rows, else its largest divisor in 1024..2048, else
        even tiles of at most 2048 (padding fewer rows than tiles), as
        measured on 4 H200s (see ``jaxmg._src._checks.default_tile``).
      mesh: the device mesh; may be omitted with in_specs when ``a`` carries a
        NamedSharding (they are read from it), or when ``a`` is a host or
        single-device array (it is then placed on a 1-D mesh "x" over all
        devices).
      in_specs: ``(P(axis, None), P(None, None))``, or just ``(P(axis, None),)``.
      return_status: also return the solver's status.
      pad: pad each shard to a multiple of T_A when needed (else raise).

    Returns:
      x with b's shape, replicated on every device; with ``return_status``,
      ``(x, status)`` where status is an int32 scalar: 0 on success, k > 0 when
      the leading minor of order k is not positive definite (x is then NaN).
    """
    n, dtype = _checks.check_matrix("potrs", a)
    _checks.check_rhs("potrs", b, n, dtype)
    a, mesh, rows, g = _shard.prepare("potrs", a, n, T_A, mesh, in_specs, 2, pad)
    b = _shard.onto(b, mesh, P())
    b2 = b if b.ndim == 2 else b[:, None]
    x, status = _program(mesh, rows, g)(a, b2)
    x = x if b.ndim == 2 else x[:, 0]
    _shard.settle_on_cpu((x, status), mesh)
    return (x, status) if return_status else x


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _ctx_solve(call: _manual.Call, a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """x = A^-1 b and the status inside the user's shard_map (b: the
    leader's), differentiable in this device's rows a and in b (see
    _ctx_solve_jvp)."""
    return _potrs_shard(call, a, b)


@_ctx_solve.defjvp
def _ctx_solve_jvp(call: _manual.Call, primals: tuple[jax.Array, jax.Array],
                   tangents: tuple[jax.Array, jax.Array]):
    """dx = A^-1 (db - dA x), dA the Hermitian matrix of da's upper triangle:
    dA x through one psum, A^-1 by one more jaxmg solve (_ctx_linear_solve),
    whose transpose JAX takes for reverse mode."""
    (a, b), (da, db) = primals, tangents
    x, status = _ctx_solve(call, a, b)
    dx = _ctx_linear_solve(call, a, db - _manual.hermitian_matvec(call, da, x))
    return (x, status), (dx, _compat.zero_tangent(status))


def _ctx_linear_solve(call: _manual.Call, a: jax.Array, r: jax.Array) -> jax.Array:
    """A^-1 r (r: the leader's) as a linear map JAX can differentiate and
    transpose: jax.lax.custom_linear_solve, with matvec A v (one psum), solve
    the FFI solve and transpose_solve its transpose (see _manual): the
    cotangent's parts summed, A^-H of the sum to the leader.

    Under vma typing, custom_linear_solve types its result as varying over
    every axis its operands vary over, a's rows' axes included, although
    every device holds the same x; r is typed so from the start, and the
    result is retyped as the same on every device by one psum of x on the
    leader and zeros elsewhere (exact)."""
    checked = _compat.vma_checked()
    if checked:
        r = _compat.pvary(r, _compat.varying_axes(a) | set(call.axes))
    like = _compat.varying_axes(r)

    def matvec(v: jax.Array) -> jax.Array:
        return _compat.pvary(_manual.hermitian_matvec(call, a, v), like)

    def solve(_: Any, r: jax.Array) -> jax.Array:
        return _compat.pvary(_potrs_shard(call, a, r)[0], like)

    def transpose_solve(_: Any, c: jax.Array) -> jax.Array:
        # A^-T = conj(A^-1 conj(.)) for Hermitian A.
        summed = _manual.summed_axes(call, c)
        x, _ = _potrs_shard(call, a, jnp.conj(_manual.psum(c, summed)))
        return _compat.pvary(_manual.leader_only(jnp.conj(x), summed), like)

    x = jax.lax.custom_linear_solve(matvec, r, solve, transpose_solve)
    if checked:
        x = _manual.psum(_manual.leader_only(x, call.axes), call.axes)
    return x


def potrs_shardmap_ctx(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    pad: bool = True,
    axis_name: str | tuple[str, ...] | None = None,
) -> tuple[jax.Array, jax.Array]:
    """``potrs`` on the local shard, from inside your own ``jax.shard_map``.

    Args:
      a: this device's rows of A, (N / devices, N).
      b: the right-hand sides, (N, NRHS) or (N,), the same on every device
        (the first device's b is used).
      T_A: tile size, as in ``potrs``.
      pad: as in ``potrs``.
      axis_name: the mesh axis (or axes) A's rows are sharded over; may be
        omitted when the shard_map has one axis.

    Returns:
      ``(x, status)``: x with b's shape (the same on every device) and the
      status as an int32 array of shape (1,). Declare ``out_specs`` like
      ``(P(None, None), P(None))``. Works with either ``check_vma`` setting
      of shard_map; with ``check_vma=True`` (its default) x and status are
      typed as the same along the rows' axes. Differentiable in a and b
      (``jax.grad``, ``jax.jvp``, ``jax.vjp``, to any order), whatever the
      out_specs.
    """
    rows, n, dtype = _checks.check_local_shard(
        "potrs_shardmap_ctx", a, current_manual_axes(), axis_name
    )
    _checks.check_rhs("potrs_shardmap_ctx", b, n, dtype)
    call = _manual.make_call("potrs_shardmap_ctx", rows, n, a, T_A, pad)
    _native.load()
    b2 = b if b.ndim == 2 else b[:, None]
    x, status = _ctx_solve(call, a, b2)
    x = x if b.ndim == 2 else x[:, 0]
    return x, status.reshape(1)

"""potri: the inverse of a Hermitian positive definite A across devices."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _manual, _native, _shard
from jaxmg._src._compat import current_manual_axes


def _potri_shard(call: _shard.Call, a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One shard's part: a is r x N. Returns this shard's rows of A^-1 and the
    status (int32 scalar, the same on every shard)."""
    g = call.g
    per_shard, same = _shard.result_types(call.axes, a)
    pos = _shard.position(call.axes, call.others, g.nparts)
    a_p = _shard.pad_shard(a, g, pos % g.nparts, 1)
    # The solver inverts conj(A) column-major; read row-major, its full
    # (both triangles) inverse conj(A^-1)^T is A^-1 itself.
    inv, info = _shard.ffi_call(
        "potri",
        (a_p, pos),
        (jax.ShapeDtypeStruct(a_p.shape, a.dtype), jax.ShapeDtypeStruct((), jnp.int32)),
        call=call,
        varying=(per_shard, same),
    )
    return _shard.unpad_shard(inv, g), _shard.unpad_info(info, g)


@functools.lru_cache(maxsize=256)
def _program(mesh: Mesh, rows: _checks.RowSharding, g: _shard.Geometry) -> Any:
    """The local core (_ctx_invert, derivative rules included) over the mesh."""
    call = _shard.mesh_call("potri", mesh, rows, g)
    return jax.jit(_shard.mapped(functools.partial(_ctx_invert, call), mesh,
                                 in_specs=(rows.spec,), out_specs=(rows.spec, P())))


def potri(
    a: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """The inverse of a Hermitian positive definite ``a``, computed on all devices.

    Args:
      a: the N x N matrix, rows sharded as ``in_specs[0]`` says (e.g.
        ``P("x", None)``). Only its upper triangle is read. It is not modified.
      T_A: tile size of the 1D block-cyclic layout (see ``potrs``).
      mesh: the device mesh; may be omitted with in_specs when ``a`` carries a
        NamedSharding (they are read from it), or when ``a`` is a host or
        single-device array (it is then placed on a 1-D mesh "x" over all
        devices).
      in_specs: ``(P(axis, None),)``.
      return_status: also return the solver's status.
      pad: pad each shard to a multiple of T_A when needed (else raise).

    Returns:
      A^-1, both triangles, sharded like ``a``; with ``return_status``,
      ``(inverse, status)``: status 0 on success, k > 0 when the leading minor
      of order k is not positive definite (the inverse is then NaN).
    """
    n, _ = _checks.check_matrix("potri", a)
    a, mesh, rows, g = _shard.prepare("potri", a, n, T_A, mesh, in_specs, 1, pad)
    inv, status = _program(mesh, rows, g)(a)
    _shard.settle_on_cpu((inv, status), mesh)
    return (inv, status) if return_status else inv


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _ctx_invert(call: _manual.Call, a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """This device's rows of A^-1 and the status inside the user's
    shard_map, differentiable in this device's rows a (see _ctx_invert_jvp)."""
    return _potri_shard(call, a)


@_ctx_invert.defjvp
def _ctx_invert_jvp(call: _manual.Call, primals: tuple[jax.Array],
                    tangents: tuple[jax.Array]):
    """d(A^-1) = -A^-1 dA A^-1, rows R_d: -A^-1[R_d, :] (dA A^-1), with dA
    the Hermitian matrix of da's upper triangle. Two products of
    row-sharded matrices, each a ring of ppermutes (no device holds more than
    two shards at a time), linear in da: JAX transposes them for reverse mode."""
    (a,), (da,) = primals, tangents
    inv, status = _ctx_invert(call, a)
    da_inv = _manual.rows_times(call, _manual.hermitian_rows(call, da), inv)
    dinv = -_manual.rows_times(call, inv, da_inv)
    return (inv, status), (dinv, _compat.zero_tangent(status))


def potri_shardmap_ctx(
    a: jax.Array,
    T_A: int | None = None,
    pad: bool = True,
    axis_name: str | tuple[str, ...] | None = None,
) -> tuple[jax.Array, jax.Array]:
    """``potri`` on the local shard, from inside your own ``jax.shard_map``.

    Args:
      a: this device's rows of A, (N / devices, N).
      T_A, pad: as in ``potri``.
      axis_name: the mesh axis (or axes) A's rows are sharded over; may be
        omitted when the shard_map has one axis.

    Returns:
      ``(inverse_rows, status)``: this device's rows of A^-1 and the status as
      an int32 array of shape (1,). Declare ``out_specs`` like
      ``(P("x", None), P(None))``. Works with either ``check_vma`` setting of
      shard_map; with ``check_vma=True`` (its default) the status is typed as
      the same along the rows' axes. Differentiable in a (``jax.grad``,
      ``jax.jvp``, ``jax.vjp``, to any order).
    """
    rows, n, _ = _checks.check_local_shard("potri_shardmap_ctx", a,
                                           current_manual_axes(), axis_name)
    call = _manual.make_call("potri_shardmap_ctx", rows, n, a, T_A, pad)
    _native.load()
    inv, status = _ctx_invert(call, a)
    return inv, status.reshape(1)

"""JAXMg 1.x's ``qr`` and ``qr_shardmap_ctx`` (the seeds have no QR). See
jaxmg._src.api.v1 for how a ctx call is read."""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import Mesh

from jaxmg._src import _checks, _mode, _native, _placement
from jaxmg._src.api import _donate
from jaxmg._src.api.v1._calls import (
    _UNSET,
    _at_global_level,
    _check_tall,
    _check_flag,
    _global_layout,
    _local_call,
    _local_shard,
    _resolved,
    _specs,
)
from jaxmg._src._compat import current_manual_axes
from jaxmg._src.core import qr as qr_core


def check_rows(op: str, m: int, n: int, nparts: int, r_sharded: bool = True) -> None:
    """A tall or square A whose M rows (Q's too) divide into the devices its
    rows are sharded over, and, where R is returned row-sharded, R's N rows
    too."""
    _check_tall(op, m, n)
    if m % nparts != 0:
        raise ValueError(
            f"jaxmg.{op}: a has M={m} rows, not divisible by the {nparts} devices its rows "
            "are sharded over (A and Q are row-sharded)")
    if r_sharded and n % nparts != 0:
        raise ValueError(
            f"jaxmg.{op}: R has N={n} rows, not divisible by the {nparts} devices: R is "
            "row-sharded like a (its rows over the same mesh axes). Shard a's rows over "
            "fewer devices (or, for a solve, use jaxmg.least_squares, which takes any N)")


def prepare(op: str, a: Any, T_A: Any, mesh: Any, specs: Any,
            layout: Callable[[str, Any, Any, Any], tuple[Any, Any]], n_specs: int = 1,
            r_sharded: bool = True) -> tuple[Any, ...]:
    """qr's steps before its program runs: a checked, the mesh and specs
    (``layout``'s), the rows' sharding, M and N against the group, the
    geometry (the engine asked), a onto the mesh. Returns (a, mesh, rows,
    g). Shared with least_squares (``n_specs`` 2: b's spec may follow A's;
    ``r_sharded`` False: its R stays inside the program, any N)."""
    m, dtype = _checks.check_matrix(op, a, square=False)
    n = int(a.shape[1])
    _check_tall(op, m, n)
    mesh, specs = layout(op, a, mesh, specs)
    rows = _checks.check_specs(op, mesh, specs, n_specs)
    check_rows(op, m, n, rows.nparts, r_sharded)
    platform = _native.platform_of(np.asarray(mesh.devices).flat[0].platform)
    nodes = _mode.call_nodes(mesh, rows.axes, rows.others)
    g = qr_core.geometry(op, m, n, rows.nparts, dtype, T_A, platform, nodes)
    return _placement.onto(a, mesh, rows.spec), mesh, rows, g


def _qr_global(a: jax.Array, *, op: str, T_A: Any, mesh: Any, specs: Any,
               layout: Callable[[str, Any, Any, Any], tuple[Any, Any]]) -> tuple[Any, ...]:
    """qr over a whole mesh: (Q, R, status), Q and R sharded like A."""
    a, mesh, rows, g = prepare(op, a, T_A, mesh, specs, layout)
    out = qr_core.over_mesh(mesh, rows, g)(a)
    return tuple(_placement.hand_back(tuple(out), mesh))


def _qr_plain(a: jax.Array, *, T_A: Any, mesh: Any, specs: Any, want_status: bool) -> Any:
    q, r, status = _qr_global(a, op="qr", T_A=T_A, mesh=mesh, specs=specs,
                              layout=_checks.resolve_layout)
    return (q, r, status) if want_status else (q, r)


def qr(
    a: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    *,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    """The reduced QR decomposition ``a = Q @ R`` on all devices (JAXMg 1.x's
    form; the seeds have no QR), as ``jnp.linalg.qr(a)`` (mode "reduced").

    Args:
      a: the M x N matrix, M >= N (tall or square; a wide one is a
        ValueError), rows sharded (``P(axis, None)``), or sharded over two
        mesh axes ``P(r, c)`` (then resharded to rows over both). M and N
        must both be divisible by the number of devices the rows are
        sharded over (A and Q, and R, are row-sharded).
      T_A: tile size, a positive int; accepted for 1.x's signature. The
        engines that run qr take no tiles (LAPACK on CPU devices,
        cuSOLVERDn on one GPU or on a copy gathered onto one; cuSOLVERMp,
        across nodes, lays each GPU's rows out in blocks of its own choice).
      mesh: the device mesh; inferred from ``a``'s sharding when left out.
      matrix_specs: A's spec (``P(axis, None)``; 1.x's name of ``in_specs``).
      in_specs: the same, by its seeds' name (give one of them).
      return_status: also return the status.
      pad: accepted for 1.x's signature; qr never pads (no engine of it
        takes tiles).
      donate: donate ``a`` when called eagerly (it is then deleted, and Q
        takes its buffer); by default it is kept (1.x's default was True).
        Under ``jax.jit``, donate through the jit's ``donate_argnums``.

    Returns:
      ``(Q, R)``, or ``(Q, R, status)`` with ``return_status``. Q: M x N,
      orthonormal columns, row-sharded like ``a``. R: N x N, upper
      triangular (its strict lower part zero), row-sharded like ``a``: its
      rows divide over the devices as A's do, so no device holds more than
      N² / devices of it (R replicated would hold N² on each, as much as
      all of A's shards together for a square A). R's diagonal may be
      negative (complex: any phase), as LAPACK's and ``jnp.linalg.qr``'s.
      status: an int32 scalar, 0, or -1 when ``a`` has a NaN or an Inf
      entry (Q and R are then NaN). Differentiable (jit, grad, vmap) where
      R is invertible (A of full column rank), with jnp.linalg.qr's rule.
    """
    op = "qr"
    specs = _specs(op, in_specs, matrix_specs)
    want_status = _check_flag(op, "return_status", return_status)
    _check_flag(op, "pad", pad)
    donate = _check_flag(op, "donate", donate)
    m, _ = _checks.check_matrix(op, a, square=False)
    _check_tall(op, m, int(a.shape[1]))
    mesh, specs = _resolved(op, a, mesh, specs)
    # Q is the output aliased to A: a donating jit of this very program
    # hands A's buffer to it (_donate.run without a work buffer).
    fn = _donate.Hashable(functools.partial(_qr_plain, T_A=T_A, mesh=mesh, specs=specs,
                                            want_status=want_status))
    return _donate.run(fn, (a,), donate)


def qr_shardmap_ctx(
    a: jax.Array,
    T_A: int | None = None,
    *positional: Any,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    in_specs: Any = None,
    pad: bool = _UNSET,
    axis_name: str | tuple[str, ...] | None = _UNSET,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``qr`` for a caller's own program (see jaxmg._src.api.v1 for the
    rule that tells its two forms apart).

    At the global level, eagerly or under jax.jit (JAXMg 1.x's form),
    ``qr_shardmap_ctx(a, T_A=None, mesh=None, matrix_specs=None, *,
    in_specs=None, pad=True)``: ``a`` the whole M x N matrix (M >= N), its
    mesh and sharding read as in ``potrs_shardmap_ctx``.

    Inside a ``jax.shard_map`` body, ``qr_shardmap_ctx(a, T_A=None,
    pad=True, axis_name=None)``: ``a`` this device's (M/devices, N) rows of
    A; Q and R come back as this device's rows (N/devices of R's).

    Returns:
      ``(Q, R, status)``: Q (in A's buffer when A is donated, else in a
      copy: ``a`` itself is never modified) and R as in ``qr``, status an
      int32 scalar (of shape (1,) inside a shard_map body, as the seeds'
      ctx forms return it), 0 on success, -1 for an ``a`` with a NaN or an
      Inf entry (Q and R NaN).
    """
    op = "qr_shardmap_ctx"
    if current_manual_axes():
        rows, m, n, dtype, pad, platform, nodes = _local_shard(
            op, a, positional, pad=pad, axis_name=axis_name, mesh=mesh,
            matrix_specs=matrix_specs, in_specs=in_specs,
            check_rows=lambda m, n, nparts: check_rows(op, m, n, nparts))
        g = qr_core.geometry(op, m, n, rows.nparts, dtype, T_A, platform, nodes)
        q, r, status = qr_core.local(_local_call(op, rows, a, T_A, pad, g), a)
        return q, r, status.reshape(1)
    pad, mesh, specs = _at_global_level(op, positional, pad=pad, axis_name=axis_name,
                                        mesh=mesh, matrix_specs=matrix_specs,
                                        in_specs=in_specs)
    return _qr_global(a, op=op, T_A=T_A, mesh=mesh, specs=specs, layout=_global_layout)

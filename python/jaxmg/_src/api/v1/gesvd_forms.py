"""JAXMg 1.x's ``gesvd`` and ``gesvd_shardmap_ctx`` (the seeds have no
SVD). See jaxmg._src.api.v1 for how a ctx call is read."""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import Mesh

from jaxmg._src import _checks, _manual, _mode, _native, _placement
from jaxmg._src.api import _donate
from jaxmg._src.api.v1._calls import (
    _UNSET,
    _at_global_level,
    _check_flag,
    _global_layout,
    _local_call,
    _local_shard,
    _resolved,
    _specs,
)
from jaxmg._src._compat import current_manual_axes
from jaxmg._src.core import gesvd as gesvd_core


def _gesvd_flags(op: str, compute_u: Any, compute_vh: Any,
                 full_matrices: Any) -> tuple[bool, bool, bool]:
    return (_check_flag(op, "compute_u", compute_u), _check_flag(op, "compute_vh", compute_vh),
            _check_flag(op, "full_matrices", full_matrices))


def _gesvd_rows(op: str, m: int, n: int, nparts: int, full: bool, want_u: bool,
                want_vh: bool) -> None:
    """Every matrix gesvd takes or returns is row-sharded like A: A's (and
    U's) M rows, and Vh's (min(M, N), or N with full_matrices), must divide
    into the devices A's rows are sharded over."""
    if m % nparts != 0:
        raise ValueError(
            f"jaxmg.{op}: a has M={m} rows, not divisible by the {nparts} devices its rows "
            f"are sharded over (A{' and U' if want_u else ''} are row-sharded)")
    vh_rows = n if full else min(m, n)
    if want_vh and vh_rows % nparts != 0:
        which = "N" if full else "min(M, N)"
        raise ValueError(
            f"jaxmg.{op}: Vh has {which}={vh_rows} rows for a {m} x {n} a"
            f"{' with full_matrices=True' if full else ''}, not divisible by the {nparts} "
            "devices: Vh is row-sharded like a (its rows over the same mesh axes). Shard "
            "over fewer devices, or pass compute_vh=False")


def _prepare_gesvd(op: str, a: Any, T_A: Any, mesh: Any, specs: Any, full: bool,
                   want_u: bool, want_vh: bool,
                   layout: Callable[[str, Any, Any, Any], tuple[Any, Any]]) -> tuple[Any, ...]:
    """gesvd's steps before its program runs (_prepare_svd's). Returns
    (a, mesh, rows, g)."""
    return _prepare_svd(op, a, T_A, mesh, specs, layout,
                        lambda m, n, nparts: _gesvd_rows(op, m, n, nparts, full, want_u,
                                                         want_vh))


def _prepare_svd(op: str, a: Any, T_A: Any, mesh: Any, specs: Any,
                 layout: Callable[[str, Any, Any, Any], tuple[Any, Any]],
                 check_rows: Callable[[int, int, int], None],
                 geometry: Callable[..., Any] = gesvd_core.geometry) -> tuple[Any, ...]:
    """The steps before a program on an M x N A runs (gesvd's, polar's):
    a checked, the mesh and specs (``layout``'s), the rows' sharding, every
    output's rows against the group (``check_rows(M, N, nparts)``), the
    geometry (``geometry``'s, gesvd's by default: the engine asked), a onto
    the mesh. Returns (a, mesh, rows, g)."""
    m, dtype = _checks.check_matrix(op, a, square=False)
    n = int(a.shape[1])
    mesh, specs = layout(op, a, mesh, specs)
    rows = _checks.check_specs(op, mesh, specs, 1)
    check_rows(m, n, rows.nparts)
    platform = _native.platform_of(np.asarray(mesh.devices).flat[0].platform)
    nodes = _mode.call_nodes(mesh, rows.axes, rows.others)
    g = geometry(op, m, n, rows.nparts, dtype, T_A, platform, nodes)
    return _placement.onto(a, mesh, rows.spec), mesh, rows, g


def _numpy_order(out: tuple[jax.Array, ...], want_u: bool, want_vh: bool) -> tuple[Any, ...]:
    """The core's (s, [U,] [Vh,] status) as (U, s, Vh, status), without
    what was not asked for."""
    s, rest = out[0], list(out[1:-1])
    u = rest.pop(0) if want_u else None
    vh = rest.pop(0) if want_vh else None
    return tuple(x for x in (u, s, vh) if x is not None) + (out[-1],)


def _gesvd_global(a: jax.Array, *, op: str, T_A: Any, mesh: Any, specs: Any, full: bool,
                  want_u: bool, want_vh: bool,
                  layout: Callable[[str, Any, Any, Any], tuple[Any, Any]]) -> tuple[Any, ...]:
    """gesvd over a whole mesh: (work, U, s, Vh, status), without what was
    not asked for; work the solver's work buffer, sharded like A."""
    a, mesh, rows, g = _prepare_gesvd(op, a, T_A, mesh, specs, full, want_u, want_vh, layout)
    work, *out = gesvd_core.over_mesh(mesh, rows, g, full, want_u, want_vh, work=True)(a)
    work, *out = _placement.hand_back((work, *out), mesh)
    return (work,) + _numpy_order(tuple(out), want_u, want_vh)


def _gesvd_plain(a: jax.Array, *, T_A: Any, mesh: Any, specs: Any, full: bool,
                 want_u: bool, want_vh: bool, want_status: bool, work: bool = False) -> Any:
    """gesvd's plain form on a: NumPy's order, status last when asked;
    with ``work``, (work buffer, that) (_donate.run)."""
    work_buf, *out = _gesvd_global(a, op="gesvd", T_A=T_A, mesh=mesh, specs=specs,
                                   full=full, want_u=want_u, want_vh=want_vh,
                                   layout=_checks.resolve_layout)
    out = out if want_status else out[:-1]
    result = out[0] if len(out) == 1 else tuple(out)
    return (work_buf, result) if work else result


def gesvd(
    a: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    *,
    in_specs: Any = None,
    compute_u: bool = True,
    compute_vh: bool = True,
    full_matrices: bool = False,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    """The singular value decomposition ``a = U @ diag(s) @ Vh`` on all
    devices (JAXMg 1.x's form; the seeds have no SVD).

    Args:
      a: the M x N matrix (any M and N, "rectangular or square"), rows
        sharded (``P(axis, None)``), or sharded over two mesh axes ``P(r, c)``
        (then resharded to rows over both). M must be divisible by the
        number of devices the rows are sharded over.
      T_A: tile size, a positive int; accepted for 1.x's signature. The
        engines that run gesvd (LAPACK, cuSOLVERDn on one GPU or on a copy
        gathered onto one) take no tiles.
      mesh: the device mesh; inferred from ``a``'s sharding when left out.
      matrix_specs: A's spec (``P(axis, None)``; 1.x's name of ``in_specs``).
      in_specs: the same, by its seeds' name (give one of them).
      compute_u, compute_vh: return U, Vh.
      full_matrices: U M x M and Vh N x N, instead of M x K and K x N
        (K = min(M, N)).
      return_status: also return the solver's status.
      pad: accepted for 1.x's signature; gesvd never pads (zero rows or
        columns would change the singular vectors of a rank-deficient A).
      donate: donate ``a`` when called eagerly (it is then deleted); by
        default it is kept (1.x's default was True). Under ``jax.jit``,
        donate through the jit's ``donate_argnums``.

    Returns:
      NumPy's order: ``(U, s, Vh)``, ``(U, s)`` (compute_vh=False), ``(s, Vh)``
      (compute_u=False) or ``s``; with ``return_status`` the status last,
      an int32 scalar: 0, or > 0 when the solver did not converge (every
      output is then NaN). s: the K singular values, descending, real,
      replicated. U and Vh: row-sharded like ``a`` (so Vh's K, or N, rows
      must be divisible by the devices too: a ValueError says so).
      Differentiable (jit, grad, vmap) for distinct nonzero singular values;
      the singular vectors of full matrices of a non-square A have no
      derivative (NotImplementedError), as in JAX.
    """
    op = "gesvd"
    specs = _specs(op, in_specs, matrix_specs)
    want_u, want_vh, full = _gesvd_flags(op, compute_u, compute_vh, full_matrices)
    want_status = _check_flag(op, "return_status", return_status)
    _check_flag(op, "pad", pad)
    donate = _check_flag(op, "donate", donate)
    _checks.check_matrix(op, a, square=False)
    mesh, specs = _resolved(op, a, mesh, specs)
    def bound(work: bool) -> Any:
        return _donate.Hashable(functools.partial(
            _gesvd_plain, T_A=T_A, mesh=mesh, specs=specs, full=full, want_u=want_u,
            want_vh=want_vh, want_status=want_status, work=work))

    return _donate.run(bound(False), (a,), donate, bound(True))


def gesvd_shardmap_ctx(
    a: jax.Array,
    T_A: int | None = None,
    *positional: Any,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    in_specs: Any = None,
    compute_u: bool = True,
    compute_vh: bool = True,
    full_matrices: bool = False,
    pad: bool = _UNSET,
    axis_name: str | tuple[str, ...] | None = _UNSET,
) -> tuple[jax.Array, ...]:
    """``gesvd`` for a caller's own program (see jaxmg._src.api.v1's docstring
    for the rule that tells its two forms apart).

    At the global level, eagerly or under jax.jit (JAXMg 1.x's form),
    ``gesvd_shardmap_ctx(a, T_A=None, mesh=None, matrix_specs=None, *,
    in_specs=None, compute_u=True, compute_vh=True, full_matrices=False,
    pad=True)``: ``a`` the whole M x N matrix, its mesh and sharding read as
    in ``potrs_shardmap_ctx``.

    Inside a ``jax.shard_map`` body, ``gesvd_shardmap_ctx(a, T_A=None,
    pad=True, axis_name=None, *, compute_u=..., compute_vh=...,
    full_matrices=...)``: ``a`` this device's (M/devices, N) rows of A, and
    U and Vh come back as this device's rows.

    Returns:
      ``(a_work, U, s, Vh, status)``, ``(a_work, U, s, status)``
      (compute_vh=False), ``(a_work, s, Vh, status)`` (compute_u=False) or
      ``(a_work, s, status)``: a_work the solver's work buffer in A's shape
      and sharding (its contents are unspecified; in A's own buffer when A
      is donated, else in a copy: ``a`` itself is never modified), U, s and Vh as in ``gesvd`` (NaN when the solver did not
      converge), status an int32 scalar (of shape (1,) inside a shard_map
      body, as the seeds' ctx forms return it), 0 on success.
    """
    op = "gesvd_shardmap_ctx"
    want_u, want_vh, full = _gesvd_flags(op, compute_u, compute_vh, full_matrices)
    if current_manual_axes():
        call = _local_svd_call(
            op, a, T_A, positional, pad=pad, axis_name=axis_name, mesh=mesh,
            matrix_specs=matrix_specs, in_specs=in_specs,
            check_rows=lambda m, n, nparts: _gesvd_rows(op, m, n, nparts, full, want_u,
                                                        want_vh))
        out = gesvd_core.local(call, full, want_u, want_vh, a)
        out = _numpy_order(tuple(out), want_u, want_vh)
        return (a,) + out[:-1] + (out[-1].reshape(1),)
    pad, mesh, specs = _at_global_level(op, positional, pad=pad, axis_name=axis_name,
                                        mesh=mesh, matrix_specs=matrix_specs,
                                        in_specs=in_specs)
    return _gesvd_global(a, op=op, T_A=T_A, mesh=mesh, specs=specs, full=full,
                         want_u=want_u, want_vh=want_vh, layout=_global_layout)



def _local_svd_call(op: str, a: Any, T_A: Any, positional: tuple[Any, ...], *, pad: Any,
                    axis_name: Any, mesh: Any, matrix_specs: Any, in_specs: Any,
                    check_rows: Callable[[int, int, int], None]) -> _manual.Call:
    """gesvd_shardmap_ctx inside a shard_map body: _local_shard's checks,
    the geometry (the engine asked) and the call. Everything refused here
    is refused before tracing."""
    rows, m, n, dtype, pad, platform, nodes = _local_shard(
        op, a, positional, pad=pad, axis_name=axis_name, mesh=mesh,
        matrix_specs=matrix_specs, in_specs=in_specs, check_rows=check_rows)
    g = gesvd_core.geometry(op, m, n, rows.nparts, dtype, T_A, platform, nodes)
    return _local_call(op, rows, a, T_A, pad, g)

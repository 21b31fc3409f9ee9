"""JAXMg 1.x's ``polar`` and ``polar_shardmap_ctx`` (JAXMg's main line; the
seeds have no polar decomposition). See jaxmg._src.api.v1 for how a ctx
call is read, and jaxmg._src.core.polar for how it is computed (QDWH over
jaxmg's QR by default, or gesvd's SVD)."""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
from jax.sharding import Mesh

from jaxmg._src import _checks, _placement
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
from jaxmg._src.api.v1.gesvd_forms import _prepare_svd
from jaxmg._src._compat import current_manual_axes
from jaxmg._src.core import polar as polar_core


# What a wide A's refusal tells (_calls._check_tall).
_WIDE = (" (Up M x N with orthonormal columns, H N x N). For a wide A, decompose its "
         "conjugate transpose: Aᴴ = Up H gives A = Hᴴ Upᴴ")


def _tall(op: str, m: int, n: int) -> None:
    _check_tall(op, m, n, _WIDE)


def _polar_rows(op: str, m: int, n: int, nparts: int) -> None:
    """A's and Up's M rows, and H's N rows, must divide into the devices A's
    rows are sharded over (Up and H are row-sharded like A; QDWH's QRs
    stack each device's N / devices rows of I under its rows of A, and the
    SVD shards its Vh, N x N, as H)."""
    if m % nparts != 0:
        raise ValueError(
            f"jaxmg.{op}: a has M={m} rows, not divisible by the {nparts} devices its rows "
            "are sharded over (A and Up are row-sharded)")
    if n % nparts != 0:
        raise ValueError(
            f"jaxmg.{op}: H has N={n} rows for a {m} x {n} a, not "
            f"divisible by the {nparts} devices: H is row-sharded like a (its rows over the "
            "same mesh axes). Shard over fewer devices")


def _polar_checks(op: str) -> Callable[[int, int, int], None]:
    """polar's check of A's shape against the group, before tracing: tall,
    then every output's rows."""
    def check(m: int, n: int, nparts: int) -> None:
        _tall(op, m, n)
        _polar_rows(op, m, n, nparts)
    return check


def _check_method(op: str, method: Any) -> str:
    """``method``: "qdwh" or "svd", refused before tracing otherwise."""
    if not isinstance(method, str) or method not in polar_core.METHODS:
        raise ValueError(f"jaxmg.{op}: method must be one of "
                         f"{', '.join(map(repr, polar_core.METHODS))}, got {method!r}")
    return method


def _polar_global(a: jax.Array, *, op: str, T_A: Any, mesh: Any, specs: Any, want_h: bool,
                  layout: Callable[[str, Any, Any, Any], tuple[Any, Any]],
                  method: str = "qdwh") -> tuple[Any, ...]:
    """polar over a whole mesh: (Up, [H,] status)."""
    a, mesh, rows, g = _prepare_svd(op, a, T_A, mesh, specs, layout, _polar_checks(op),
                                    functools.partial(polar_core.geometry, method=method))
    out = polar_core.over_mesh(mesh, rows, g, want_h)(a)
    return tuple(_placement.hand_back(tuple(out), mesh))


def _polar_plain(a: jax.Array, *, T_A: Any, mesh: Any, specs: Any, want_h: bool,
                 want_status: bool, method: str = "qdwh") -> Any:
    """polar's plain form on a: Up, (Up, H), status last when asked."""
    out = _polar_global(a, op="polar", T_A=T_A, mesh=mesh, specs=specs, want_h=want_h,
                        layout=_checks.resolve_layout, method=method)
    out = out if want_status else out[:-1]
    return out[0] if len(out) == 1 else tuple(out)


def polar(
    a: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    *,
    in_specs: Any = None,
    compute_h: bool = True,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
    method: str = "qdwh",
) -> Any:
    """The polar decomposition ``a = Up @ H`` on all devices (JAXMg 1.x's
    form, from JAXMg's main line; the seeds have none).

    ``method="qdwh"`` (the default): the QR-based dynamically weighted
    Halley iteration (QDWH, as ``jax.scipy.linalg.polar``) over jaxmg's own
    distributed QR (qr's engines: LAPACK on CPU devices, cuSOLVERDn on one
    GPU, the gather engine on several, cuSOLVERMp and ``lapack-local`` in
    the local model) and Cholesky solves of an N x N matrix on every
    device: 2 QR-based and 4 Cholesky-based steps in float64 and
    complex128, 2 and 2 in float32 and complex64, for every A whose
    ‖A‖_F / σ_min(A) is at most 10/eps (more steps, up to 8, where it is
    larger). An A QDWH cannot orthonormalize (numerically rank deficient,
    σ_min(A) below about eps ‖A‖, exactly singular included; detected
    inside the program from ‖UpᴴUp - I‖) is decomposed by the SVD method
    instead where an engine has an SVD (then Up has orthonormal columns,
    one of A's polar factors, and status 0); where none has (the local
    model), the status is 1 and Up and H are NaN.
    ``method="svd"``: through jaxmg's distributed SVD (gesvd's engines:
    not in the local model, where the call is refused before tracing):
    A = U Σ Vᴴ, Up = U Vᴴ, H = V Σ Vᴴ. Both are backward stable for every
    condition number.

    Args:
      a: the M x N matrix, M >= N (a wide ``a`` is a ValueError), rows
        sharded (``P(axis, None)``), or sharded over two mesh axes ``P(r, c)``
        (then resharded to rows over both). M and N must be divisible by
        the number of devices the rows are sharded over (Up and H are
        row-sharded like ``a``).
      T_A: tile size, a positive int; accepted for 1.x's signature (the
        QR's and the SVD's engines take no tiles).
      mesh: the device mesh; inferred from ``a``'s sharding when left out.
      matrix_specs: A's spec (``P(axis, None)``; 1.x's name of ``in_specs``).
      in_specs: the same, by its seeds' name (give one of them).
      compute_h: also return H.
      return_status: also return the status.
      pad: accepted for 1.x's signature; polar never pads (as gesvd and qr).
      donate: donate ``a`` when called eagerly (it is then deleted, and Up
        takes its buffer); by default it is kept (1.x's default was True).
        Under ``jax.jit``, donate through the jit's ``donate_argnums``.
      method: ``"qdwh"`` or ``"svd"`` (keyword only; anything else is a
        ValueError before tracing).

    Returns:
      ``(Up, H)``, ``Up`` (compute_h=False), with ``return_status`` the
      status last: an int32 scalar, 0, or nonzero with every output NaN:
      -1 when A has a NaN or an Inf entry, > 0 when the SVD (the SVD
      method's, or QDWH's fallback's) did not converge, or (QDWH without
      an engine that has an SVD) 1 when A is
      numerically rank deficient. Up: M x N with orthonormal columns, A's
      dtype, sharded like ``a``. H: N x N Hermitian positive semidefinite
      (exactly Hermitian), A's dtype, row-sharded like ``a``.
      Differentiable (jit, grad, jvp; polar's own rule, defined wherever A
      has full column rank, repeated singular values included) and batched
      under vmap (where QDWH may fall back on the SVD, a batch runs both).
    """
    op = "polar"
    method = _check_method(op, method)
    specs = _specs(op, in_specs, matrix_specs)
    want_h = _check_flag(op, "compute_h", compute_h)
    want_status = _check_flag(op, "return_status", return_status)
    _check_flag(op, "pad", pad)
    donate = _check_flag(op, "donate", donate)
    _checks.check_matrix(op, a, square=False)
    _tall(op, *(int(x) for x in a.shape))
    mesh, specs = _resolved(op, a, mesh, specs)
    # Up has A's shape: a donating jit hands it A's buffer, no work buffer
    # needs returning (_donate.run without ``worked``).
    fn = _donate.Hashable(functools.partial(_polar_plain, T_A=T_A, mesh=mesh, specs=specs,
                                            want_h=want_h, want_status=want_status,
                                            method=method))
    return _donate.run(fn, (a,), donate)


def polar_shardmap_ctx(
    a: jax.Array,
    T_A: int | None = None,
    *positional: Any,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    in_specs: Any = None,
    compute_h: bool = True,
    pad: bool = _UNSET,
    axis_name: str | tuple[str, ...] | None = _UNSET,
    method: str = "qdwh",
) -> tuple[jax.Array, ...]:
    """``polar`` for a caller's own program (see jaxmg._src.api.v1 for the
    rule that tells its two forms apart).

    At the global level, eagerly or under jax.jit (JAXMg 1.x's form),
    ``polar_shardmap_ctx(a, T_A=None, mesh=None, matrix_specs=None, *,
    in_specs=None, compute_h=True, pad=True)``: ``a`` the whole M x N
    matrix (M >= N), its mesh and sharding read as in
    ``potrs_shardmap_ctx``. Up has A's shape and sharding: under the
    caller's ``jax.jit(..., donate_argnums=0)`` it takes A's buffer.

    Inside a ``jax.shard_map`` body, ``polar_shardmap_ctx(a, T_A=None,
    pad=True, axis_name=None, *, compute_h=..., method=...)``: ``a`` this
    device's (M/devices, N) rows of A, and Up and H come back as this
    device's rows.

    ``method``: ``"qdwh"`` (the default) or ``"svd"``, as in ``polar``.

    Returns:
      ``(Up, H, status)`` or ``(Up, status)`` (compute_h=False): Up and H as
      in ``polar`` (NaN where the status is nonzero), status an int32 scalar (of
      shape (1,) inside a shard_map body, as the seeds' ctx forms return
      it), 0 on success.
    """
    op = "polar_shardmap_ctx"
    method = _check_method(op, method)
    want_h = _check_flag(op, "compute_h", compute_h)
    if current_manual_axes():
        rows, m, n, dtype, pad, platform, nodes = _local_shard(
            op, a, positional, pad=pad, axis_name=axis_name, mesh=mesh,
            matrix_specs=matrix_specs, in_specs=in_specs, check_rows=_polar_checks(op))
        g = polar_core.geometry(op, m, n, rows.nparts, dtype, T_A, platform, nodes, method)
        calls = polar_core.Calls(*(None if gi is None else _local_call(op, rows, a, T_A, pad, gi)
                                   for gi in (g.qr, g.svd)))
        out = polar_core.local(calls, want_h, a)
        return tuple(out[:-1]) + (out[-1].reshape(1),)
    pad, mesh, specs = _at_global_level(op, positional, pad=pad, axis_name=axis_name,
                                        mesh=mesh, matrix_specs=matrix_specs,
                                        in_specs=in_specs)
    return _polar_global(a, op=op, T_A=T_A, mesh=mesh, specs=specs, want_h=want_h,
                         layout=_global_layout, method=method)

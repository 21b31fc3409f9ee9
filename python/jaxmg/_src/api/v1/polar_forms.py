"""JAXMg 1.x's ``polar`` and ``polar_shardmap_ctx`` (JAXMg's main line; the
seeds have no polar decomposition). See jaxmg._src.api.v1 for how a ctx
call is read, and jaxmg._src.core.polar for how it is computed (through
gesvd's SVD)."""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
from jax.sharding import Mesh

from jaxmg._src import _checks, _shard
from jaxmg._src.api import _donate
from jaxmg._src.api.v1._calls import (
    _UNSET,
    _at_global_level,
    _check_tall,
    _check_flag,
    _global_layout,
    _resolved,
    _specs,
)
from jaxmg._src.api.v1.gesvd_forms import _local_svd_call, _prepare_svd
from jaxmg._src._compat import current_manual_axes
from jaxmg._src.core import polar as polar_core


# What a wide A's refusal tells (_calls._check_tall).
_WIDE = (" (Up M x N with orthonormal columns, H N x N). For a wide A, decompose its "
         "conjugate transpose: Aᴴ = Up H gives A = Hᴴ Upᴴ")


def _tall(op: str, m: int, n: int) -> None:
    _check_tall(op, m, n, _WIDE)


def _polar_rows(op: str, m: int, n: int, nparts: int) -> None:
    """A's and Up's M rows, and H's N rows, must divide into the devices A's
    rows are sharded over (Up and H are row-sharded like A; the SVD under
    them shards its Vh, N x N, the same way)."""
    if m % nparts != 0:
        raise ValueError(
            f"jaxmg.{op}: a has M={m} rows, not divisible by the {nparts} devices its rows "
            "are sharded over (A and Up are row-sharded)")
    if n % nparts != 0:
        raise ValueError(
            f"jaxmg.{op}: H (and the SVD's Vh) has N={n} rows for a {m} x {n} a, not "
            f"divisible by the {nparts} devices: H is row-sharded like a (its rows over the "
            "same mesh axes). Shard over fewer devices")


def _polar_checks(op: str) -> Callable[[int, int, int], None]:
    """polar's check of A's shape against the group, before tracing: tall,
    then every output's rows."""
    def check(m: int, n: int, nparts: int) -> None:
        _tall(op, m, n)
        _polar_rows(op, m, n, nparts)
    return check


def _polar_global(a: jax.Array, *, op: str, T_A: Any, mesh: Any, specs: Any, want_h: bool,
                  layout: Callable[[str, Any, Any, Any], tuple[Any, Any]]) -> tuple[Any, ...]:
    """polar over a whole mesh: (Up, [H,] status)."""
    a, mesh, rows, g = _prepare_svd(op, a, T_A, mesh, specs, layout, _polar_checks(op))
    out = polar_core.over_mesh(mesh, rows, g, want_h)(a)
    _shard.settle_on_cpu(out, mesh)
    return tuple(out)


def _polar_plain(a: jax.Array, *, T_A: Any, mesh: Any, specs: Any, want_h: bool,
                 want_status: bool) -> Any:
    """polar's plain form on a: Up, (Up, H), status last when asked."""
    out = _polar_global(a, op="polar", T_A=T_A, mesh=mesh, specs=specs, want_h=want_h,
                        layout=_checks.resolve_layout)
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
) -> Any:
    """The polar decomposition ``a = Up @ H`` on all devices (JAXMg 1.x's
    form, from JAXMg's main line; the seeds have none).

    Computed through jaxmg's distributed SVD (``gesvd``'s engines: LAPACK on
    CPU devices, cuSOLVERDn on one GPU, the gather engine on several):
    A = U Σ Vᴴ, Up = U Vᴴ, H = V Σ Vᴴ. Backward stable for every condition
    number, a singular A included (Up then has orthonormal columns and is
    one of A's polar factors; H is unique for every A). Where no engine has
    an SVD (cuSOLVERMp and ``lapack-local``, the local model, chosen with
    ``JAXMG_ENGINE``) the call is refused with a ValueError before anything
    is traced, naming each engine's reason.

    Args:
      a: the M x N matrix, M >= N (a wide ``a`` is a ValueError), rows
        sharded (``P(axis, None)``), or sharded over two mesh axes ``P(r, c)``
        (then resharded to rows over both). M and N must be divisible by
        the number of devices the rows are sharded over (Up and H are
        row-sharded like ``a``).
      T_A: tile size, a positive int; accepted for 1.x's signature (the
        SVD's engines take no tiles).
      mesh: the device mesh; inferred from ``a``'s sharding when left out.
      matrix_specs: A's spec (``P(axis, None)``; 1.x's name of ``in_specs``).
      in_specs: the same, by its seeds' name (give one of them).
      compute_h: also return H.
      return_status: also return the SVD's status.
      pad: accepted for 1.x's signature; polar never pads (as gesvd).
      donate: donate ``a`` when called eagerly (it is then deleted, and Up
        takes its buffer); by default it is kept (1.x's default was True).
        Under ``jax.jit``, donate through the jit's ``donate_argnums``.

    Returns:
      ``(Up, H)``, ``Up`` (compute_h=False), with ``return_status`` the
      status last: an int32 scalar, 0, or nonzero when the SVD did not
      converge (> 0) or A has a NaN or an Inf entry (-1); every output is
      then NaN. Up: M x N with orthonormal columns, A's dtype, sharded like
      ``a``. H: N x N Hermitian positive semidefinite (exactly Hermitian),
      A's dtype, row-sharded like ``a``. Differentiable (jit, grad, jvp;
      polar's own rule, defined wherever A has full column rank, repeated
      singular values included) and batched under vmap.
    """
    op = "polar"
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
                                            want_h=want_h, want_status=want_status))
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
    pad=True, axis_name=None, *, compute_h=...)``: ``a`` this device's
    (M/devices, N) rows of A, and Up and H come back as this device's rows.

    Returns:
      ``(Up, H, status)`` or ``(Up, status)`` (compute_h=False): Up and H as
      in ``polar`` (NaN when the SVD failed), status an int32 scalar (of
      shape (1,) inside a shard_map body, as the seeds' ctx forms return
      it), 0 on success.
    """
    op = "polar_shardmap_ctx"
    want_h = _check_flag(op, "compute_h", compute_h)
    if current_manual_axes():
        call = _local_svd_call(op, a, T_A, positional, pad=pad, axis_name=axis_name,
                               mesh=mesh, matrix_specs=matrix_specs, in_specs=in_specs,
                               check_rows=_polar_checks(op))
        out = polar_core.local(call, want_h, a)
        return tuple(out[:-1]) + (out[-1].reshape(1),)
    pad, mesh, specs = _at_global_level(op, positional, pad=pad, axis_name=axis_name,
                                        mesh=mesh, matrix_specs=matrix_specs,
                                        in_specs=in_specs)
    return _polar_global(a, op=op, T_A=T_A, mesh=mesh, specs=specs, want_h=want_h,
                         layout=_global_layout)

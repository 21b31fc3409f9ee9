"""JAXMg 1.x's forms of the solves, beside the seeds': ``potrs`` (with its
log-determinant), ``lu_solve``, their ``*_shardmap_ctx`` forms, and
``potri`` (the seeds' form only; 1.x has no potri). See
jaxmg._src.api.v1 for how a call is read."""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _ffi_call, _geometry, _placement
from jaxmg._src.api import seeds
from jaxmg._src.api.v1._calls import (
    _UNSET,
    _at_global_level,
    _check_flag,
    _global_layout,
    _inside_shard_map,
    _plain,
    _specs,
)
from jaxmg._src._compat import current_manual_axes
from jaxmg._src.core import lu_solve as lu_solve_core
from jaxmg._src.core import potrs as potrs_core


def potrs(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
    *,
    matrix_specs: Any = None,
    return_logdet: bool = False,
    donate: bool = False,
    precision: str = "exact",
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Solves ``a @ x = b`` for Hermitian positive definite ``a`` on all devices.

    The seeds' form (``potrs(a, b, T_A, mesh, in_specs, return_status, pad)``)
    and JAXMg 1.x's (``potrs(a, b, T_A, mesh=None, matrix_specs=None, *,
    in_specs=None, return_status=False, pad=True, donate=True)``) in one.

    Args:
      a: the N x N matrix, rows sharded (``P(axis, None)``), or sharded over
        two mesh axes ``P(r, c)`` (then resharded to rows over both). Only
        its upper triangle is read.
      b: right-hand sides, (N, NRHS) or (N,), replicated.
      T_A: tile size; chosen when left out (see ``jaxmg._src._checks.default_tile``).
      mesh: the device mesh; inferred from ``a``'s sharding when left out.
      in_specs: ``(P(axis, None), P(None, None))`` or A's spec alone.
      return_status: also return the solver's status.
      pad: pad each shard to a multiple of T_A when needed (else raise).
      matrix_specs: JAXMg 1.x's name of ``in_specs`` (give one of them).
      return_logdet: also return log det ``a`` (from its Cholesky factor), a
        replicated real scalar of ``a``'s real dtype, NaN when ``a`` is not
        positive definite; differentiable (d logdet = tr(A^-1 dA), with
        jaxmg's distributed inverse).
      donate: donate ``a`` and ``b`` to the solve when called eagerly (they
        are then deleted); by default they are kept (1.x's default was True).
        Under ``jax.jit``, donate through the jit's ``donate_argnums``.
      precision: "exact" (the default) or "mixed": a factorization in the
        next lower precision refined to the exact path's backward error,
        with the exact factorization as its automatic fallback (see
        ``jaxmg._src.api.seeds.potrs``; docs/guides/mixed-precision.md). Not
        with ``return_logdet``.

    Returns:
      x with b's shape, replicated; with ``return_status``, ``(x, status)``,
      status an int32 scalar: 0 on success, k > 0 when the leading minor of
      order k is not positive definite, -1: A not finite (x NaN). With
      ``return_logdet``, ``(x, logdet)`` or ``(x, logdet, status)``.
    """
    specs = _specs("potrs", in_specs, matrix_specs)
    want_logdet = _check_flag("potrs", "return_logdet", return_logdet)
    precision = _check_precision("potrs", precision, want_logdet)
    solve = _potrs_with_logdet if want_logdet else seeds.potrs
    return _plain("potrs", solve, (a, b), T_A, mesh, specs, donate,
                  functools.partial(_solve_worked, "potrs", want_logdet),
                  return_status=return_status, pad=pad, precision=precision)


def lu_solve(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
    *,
    matrix_specs: Any = None,
    donate: bool = False,
    precision: str = "exact",
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Solves ``a @ x = b`` for a general nonsingular ``a`` on all devices
    (LU with partial pivoting).

    The seeds' form (``lu_solve(a, b, T_A, mesh, in_specs, return_status,
    pad)``) and JAXMg 1.x's (``lu_solve(a, b, T_A, mesh=None,
    matrix_specs=None, *, in_specs=None, return_status=False, pad=True,
    donate=True)``) in one. ``matrix_specs``, ``donate`` and ``precision``
    ("exact" or "mixed": an LU in the next lower precision, refined, with
    the exact LU as its fallback) as in ``potrs``; ``a`` may be sharded over
    two mesh axes ``P(r, c)``. See ``jaxmg._src.api.seeds.lu_solve`` for the
    rest.

    Returns:
      x with b's shape, replicated; with ``return_status``, ``(x, status)``,
      status an int32 scalar: 0 on success, k > 0 when U(k, k) is exactly
      zero (A singular), -1 when A has a NaN or an Inf (x is then NaN).
    """
    specs = _specs("lu_solve", in_specs, matrix_specs)
    precision = _check_precision("lu_solve", precision, False)
    return _plain("lu_solve", seeds.lu_solve, (a, b), T_A, mesh, specs, donate,
                  functools.partial(_solve_worked, "lu_solve", False),
                  return_status=return_status, pad=pad, precision=precision)


def _check_precision(op: str, precision: Any, want_logdet: bool) -> str:
    """precision= checked (_checks.check_precision), and refused with the
    log-determinant, which would come from the lower-precision factor."""
    precision = _checks.check_precision(op, precision)
    if want_logdet and precision != "exact":
        raise ValueError(
            f"jaxmg.{op}: return_logdet=True needs precision=\"exact\": with "
            f"precision=\"{precision}\" the factor is in a lower precision, and so would "
            "the log-determinant be")
    return precision


def _potrs_with_logdet(a: jax.Array, b: jax.Array, T_A: int | None = None,
                       mesh: Mesh | None = None, in_specs: Any = None,
                       return_status: bool = False,
                       pad: bool = True, precision: str = "exact") -> tuple[jax.Array, ...]:
    """``seeds.potrs`` with log det A: (x, logdet) or (x, logdet, status);
    precision is exact (``_check_precision`` refuses the others)."""
    x, logdet, status = seeds.run_solve("potrs", a, b, T_A, mesh, in_specs, pad,
                                        _without_work)
    return (x, logdet, status) if return_status else (x, logdet)


def _solve_worked(op: str, want_logdet: bool, a: jax.Array, b: jax.Array,
                  T_A: int | None = None, mesh: Mesh | None = None, in_specs: Any = None,
                  return_status: bool = False, pad: bool = True,
                  precision: str = "exact") -> tuple[Any, Any]:
    """A solve's plain form with A's work buffer: (work, what the plain form
    returns), for a donating jit (_donate.run)."""
    work, *out = seeds.run_solve(op, a, b, T_A, mesh, in_specs, pad,
                                 functools.partial(_solve_program, op,
                                                   want_logdet=want_logdet), x_at=1,
                                 precision=precision)
    out = out if return_status else out[:-1]
    return work, (out[0] if len(out) == 1 else tuple(out))


def _without_work(mesh: Mesh, rows: _checks.RowSharding,
                  g: _geometry.Geometry) -> Callable[[jax.Array, jax.Array], tuple[jax.Array, ...]]:
    """potrs's program with log det A, A's work buffer dropped: (x, logdet,
    status)."""
    program = _solve_program("potrs", mesh, rows, g, True)
    return lambda a, b: program(a, b)[1:]


def potri(
    a: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
    *,
    matrix_specs: Any = None,
    donate: bool = False,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """The inverse of a Hermitian positive definite ``a`` (the seeds' form;
    JAXMg 1.x has no potri). ``matrix_specs`` and ``donate`` as in ``potrs``;
    ``a`` may be sharded over two mesh axes ``P(r, c)``. See
    ``jaxmg._src.api.seeds.potri`` for the rest."""
    specs = _specs("potri", in_specs, matrix_specs)
    return _plain("potri", seeds.potri, (a,), T_A, mesh, specs, donate,
                  return_status=return_status, pad=pad)


_SOLVES = {"potrs": potrs_core, "lu_solve": lu_solve_core}


@functools.lru_cache(maxsize=256)
def _solve_program(op: str, mesh: Mesh, rows: _checks.RowSharding,
                   g: _geometry.Geometry, want_logdet: bool = False) -> Any:
    """(a_work, x, status), or (a_work, x, logdet, status) with want_logdet
    (potrs only)."""
    if not want_logdet:
        return _SOLVES[op].over_mesh(mesh, rows, g, work=True)
    call = _ffi_call.mesh_call(op, mesh, rows, g)
    return jax.jit(_placement.mapped(functools.partial(potrs_core.local_logdet, call), mesh,
                                     in_specs=(rows.spec, P(None, None)),
                                     out_specs=(rows.spec, P(None, None), P(), P())))


def _solve_ctx(op: str, a: Any, b: Any, T_A: Any, positional: tuple[Any, ...], *,
               mesh: Any, matrix_specs: Any, in_specs: Any, pad: Any, axis_name: Any,
               extra: dict[str, Any], precision: Any = "exact") -> tuple[jax.Array, ...]:
    """A solve's ctx form (op: ``potrs_shardmap_ctx``, ...): the seeds'
    inside a shard_map body, else 1.x's, ``(a_work, x, status)``, x in b's
    shape, replicated. extra: 1.x's options this version does not implement
    (return_logdet), refused inside a shard_map and when true. precision:
    both forms take it ("exact" or "mixed")."""
    if current_manual_axes():
        precision = _check_precision(op, precision, False)
        pad, axis_name, _ = _inside_shard_map(
            op, positional, pad=pad, axis_name=axis_name, mesh=mesh,
            matrix_specs=matrix_specs, in_specs=in_specs,
            extra={k: bool(v) for k, v in extra.items()})
        return getattr(seeds, op)(a, b, T_A, pad, axis_name, precision=precision)
    pad, mesh, specs = _at_global_level(op, positional, pad=pad, axis_name=axis_name,
                                        mesh=mesh, matrix_specs=matrix_specs,
                                        in_specs=in_specs)
    want_logdet = "return_logdet" in extra and _check_flag(
        op, "return_logdet", extra["return_logdet"])
    precision = _check_precision(op, precision, want_logdet)
    base = op.removesuffix("_shardmap_ctx")

    def solve(mesh: Mesh, rows: _checks.RowSharding, g: _geometry.Geometry) -> Any:
        return _solve_program(base, mesh, rows, g, want_logdet)

    return seeds.run_solve(op, a, b, T_A, mesh, specs, pad, solve, layout=_global_layout,
                           x_at=1, precision=precision)


# --- the ctx forms ------------------------------------------------------------------------


def potrs_shardmap_ctx(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    *positional: Any,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    in_specs: Any = None,
    return_logdet: bool = False,
    pad: bool = _UNSET,
    axis_name: str | tuple[str, ...] | None = _UNSET,
    precision: str = "exact",
) -> tuple[jax.Array, ...]:
    """``potrs`` for a caller's own program: the seeds' form inside a
    ``jax.shard_map`` body, JAXMg 1.x's at the global level (see
    jaxmg._src.api.v1's docstring for the rule).

    Inside a shard_map body, ``potrs_shardmap_ctx(a, b, T_A=None, pad=True,
    axis_name=None)``: ``a`` this device's rows, returns ``(x, status)``,
    status of shape (1,) (see ``jaxmg._src.api.seeds.potrs_shardmap_ctx``).

    At the global level, ``potrs_shardmap_ctx(a, b, T_A=None, mesh=None,
    matrix_specs=None, *, in_specs=None, pad=True)``:

    Args:
      a: the whole N x N matrix, rows sharded (or over two mesh axes). Its
        mesh and sharding are read from it, or inside jax.jit from its type
        (Explicit axes) and the context mesh (``jax.sharding.set_mesh``);
        left unsaid, the rows are sharded over all the mesh's axes.
      b: (N,) or (N, NRHS), replicated.
      T_A, pad: as in ``potrs``.
      mesh, matrix_specs (or in_specs): as in ``potrs``.
      return_logdet: also return log det ``a``, as in ``potrs``.
      precision: "exact" or "mixed", as in ``potrs`` (both forms).

    Returns:
      ``(a_work, x, status)``, or ``(a_work, x, logdet, status)`` with
      ``return_logdet`` (logdet as in ``potrs``): a_work the solver's work buffer in A's shape
      and sharding (its contents are unspecified; ``a`` itself is never
      modified), x with b's shape, replicated (NaN when A is not positive
      definite), status an int32 scalar (0, or the order of the failing
      leading minor). Differentiable in a and b through x (a_work is held
      constant).
    """
    return _solve_ctx("potrs_shardmap_ctx", a, b, T_A, positional, mesh=mesh,
                      matrix_specs=matrix_specs, in_specs=in_specs, pad=pad,
                      axis_name=axis_name, extra={"return_logdet": return_logdet},
                      precision=precision)


def lu_solve_shardmap_ctx(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    *positional: Any,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    in_specs: Any = None,
    pad: bool = _UNSET,
    axis_name: str | tuple[str, ...] | None = _UNSET,
    precision: str = "exact",
) -> tuple[jax.Array, ...]:
    """``lu_solve`` for a caller's own program: the seeds' form inside a
    ``jax.shard_map`` body, JAXMg 1.x's at the global level (see
    jaxmg._src.api.v1's docstring for the rule).

    Inside a shard_map body, ``lu_solve_shardmap_ctx(a, b, T_A=None,
    pad=True, axis_name=None)``: ``a`` this device's rows, returns ``(x,
    status)``, status of shape (1,) (see
    ``jaxmg._src.api.seeds.lu_solve_shardmap_ctx``).

    At the global level, ``lu_solve_shardmap_ctx(a, b, T_A=None, mesh=None,
    matrix_specs=None, *, in_specs=None, pad=True)``: ``a`` the whole
    matrix, read as in ``potrs_shardmap_ctx``. Both forms take
    ``precision`` ("exact" or "mixed", as in ``lu_solve``).

    Returns (global level):
      ``(a_work, x, status)``: a_work the solver's work buffer in A's shape
      and sharding (its contents are unspecified; ``a`` itself is never
      modified), x with b's shape, replicated (NaN when A is singular),
      status an int32 scalar (0; k > 0: U(k, k) exactly zero; -1: A not finite).
      Differentiable in a and b through x (a_work is held constant).
    """
    return _solve_ctx("lu_solve_shardmap_ctx", a, b, T_A, positional, mesh=mesh,
                      matrix_specs=matrix_specs, in_specs=in_specs, pad=pad,
                      axis_name=axis_name, extra={}, precision=precision)



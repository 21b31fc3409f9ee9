"""JAXMg 1.x's call forms beside the seeds' (0.x), under the same names.

The plain forms (``potrs``, ``lu_solve``, ``syevd``, ``potri``) take a
superset of both generations' arguments (``gesvd``, which the seeds lack,
takes 1.x's alone): the seeds' positional order ``(a,
[b,] T_A, mesh, in_specs, ...)`` is also 1.x's up to its fifth argument,
whose 1.x name ``matrix_specs`` means the seeds' ``in_specs``; 1.x's
keyword-only ``donate=`` and ``return_logdet=`` (potrs) are accepted too.
Every seeds' call means what it meant.

The ``*_shardmap_ctx`` forms mean two things, and which one a call means is
read off a fact JAX knows, never off the arguments' values:

- Inside a ``jax.shard_map`` body (the context mesh has manual axes): the
  seeds' form. ``a`` is this device's rows of A; it returns
  ``(x, status)`` (potrs, lu_solve) / ``(w, [V_local,] status)``; positional arguments after
  ``T_A`` are ``pad, axis_name``.
- At the global level, eagerly or inside ``jax.jit`` (no manual axes):
  1.x's form. ``a`` is the whole matrix, its sharding read from ``a``
  (a concrete array, or a traced one on an Explicit mesh) or from the
  context mesh (``jax.sharding.set_mesh``, ``use_abstract_mesh``); it returns
  ``(a_work, x, status)`` (potrs, lu_solve) / ``(a_work, w, [V,] status)``; positional
  arguments after ``T_A`` are ``mesh, matrix_specs``.

A call that fits neither (1.x's ``mesh``, ``matrix_specs`` or ``in_specs``
inside a shard_map, the seeds' ``axis_name`` outside one, a bool where 1.x
has its mesh) is refused before anything is traced.

The work is the ops' cores' (jaxmg._src.core); this module is conventions
only, like jaxmg._src.api.seeds, whose functions it calls for the seeds'
meanings.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _manual, _mode, _native, _shard
from jaxmg._src._compat import current_manual_axes
from jaxmg._src.api import _donate, seeds
from jaxmg._src.core import gesvd as gesvd_core
from jaxmg._src.core import lu_solve as lu_solve_core
from jaxmg._src.core import potrs as potrs_core
from jaxmg._src.core import syevd as syevd_core

# "Not given": tells a keyword left out from one given its default value.
_UNSET: Any = object()


# --- arguments ----------------------------------------------------------------------------


def _specs(op: str, in_specs: Any, matrix_specs: Any) -> Any:
    """in_specs and its 1.x name matrix_specs (one of them), A's spec
    normalized: ``P(r, c)`` over two different mesh axes (a 2D process grid,
    as NetKet's ``process_grid`` makes) is read as A's rows over both axes,
    ``P((r, c), None)``, the layout the engines take: the op's program
    reshards A to it."""
    if in_specs is not None and matrix_specs is not None:
        raise TypeError(f"jaxmg.{op}: pass in_specs or matrix_specs (its JAXMg 1.x name), "
                        "not both")
    specs = matrix_specs if matrix_specs is not None else in_specs
    if specs is None:
        return None
    single = isinstance(specs, P)
    seq = (specs,) if single else specs
    if isinstance(seq, (tuple, list)) and seq and isinstance(seq[0], P):
        first = _two_axes_as_rows(seq[0])
        if first is not seq[0]:
            seq = (first,) + tuple(seq[1:])
            return first if single else seq
    return specs


def _two_axes_as_rows(spec: P) -> P:
    """``P(r, c)`` with both entries naming different mesh axes -> ``P((r, c), None)``;
    any other spec as it is (the checks judge it)."""
    entries = tuple(spec)
    if len(entries) != 2 or entries[0] is None or entries[1] is None:
        return spec

    def names(e: Any) -> tuple[Any, ...]:
        return tuple(e) if isinstance(e, (tuple, list)) else (e,)

    rows, cols = names(entries[0]), names(entries[1])
    if set(rows) & set(cols) or len(set(rows)) != len(rows) or len(set(cols)) != len(cols):
        return spec
    return P(rows + cols, None)


def _check_flag(op: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"jaxmg.{op}: {name} must be a bool, got {value!r}")
    return bool(value)




def _resolved(op: str, a: Any, mesh: Any, specs: Any) -> tuple[Mesh, Any]:
    """mesh and specs, inferred where left out, so that a donating jit can
    take them as constants (a traced A names no mesh)."""
    if _compat.is_tracer(a):
        return mesh, specs
    return _checks.resolve_layout(op, a, mesh, specs)


def _plain(op: str, seeds_fn: Any, arrays: tuple[Any, ...], T_A: Any, mesh: Any,
           specs: Any, donate: Any, worked: Any = None, **options: Any) -> Any:
    """A plain form: the seeds' function on ``arrays`` (A first), or, with
    ``donate``, ``worked`` (the same, with the solver's work buffer in
    front) in a jit that donates them (_donate.run)."""
    donate = _check_flag(op, "donate", donate)
    if not donate:
        return seeds_fn(*arrays, T_A=T_A, mesh=mesh, in_specs=specs, **options)
    _checks.check_matrix(op, arrays[0])
    mesh, specs = _resolved(op, arrays[0], mesh, specs)

    def bound(fn: Any) -> Any:
        return fn and _donate.Hashable(
            functools.partial(fn, T_A=T_A, mesh=mesh, in_specs=specs, **options))

    return _donate.run(bound(seeds_fn), arrays, True, bound(worked))


# --- plain forms --------------------------------------------------------------------------


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

    Returns:
      x with b's shape, replicated; with ``return_status``, ``(x, status)``,
      status an int32 scalar: 0 on success, k > 0 when the leading minor of
      order k is not positive definite, -1: A not finite (x NaN). With
      ``return_logdet``, ``(x, logdet)`` or ``(x, logdet, status)``.
    """
    specs = _specs("potrs", in_specs, matrix_specs)
    want_logdet = _check_flag("potrs", "return_logdet", return_logdet)
    solve = _potrs_with_logdet if want_logdet else seeds.potrs
    return _plain("potrs", solve, (a, b), T_A, mesh, specs, donate,
                  functools.partial(_solve_worked, "potrs", want_logdet),
                  return_status=return_status, pad=pad)


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
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Solves ``a @ x = b`` for a general nonsingular ``a`` on all devices
    (LU with partial pivoting).

    The seeds' form (``lu_solve(a, b, T_A, mesh, in_specs, return_status,
    pad)``) and JAXMg 1.x's (``lu_solve(a, b, T_A, mesh=None,
    matrix_specs=None, *, in_specs=None, return_status=False, pad=True,
    donate=True)``) in one. ``matrix_specs`` and ``donate`` as in ``potrs``;
    ``a`` may be sharded over two mesh axes ``P(r, c)``. See
    ``jaxmg._src.api.seeds.lu_solve`` for the rest.

    Returns:
      x with b's shape, replicated; with ``return_status``, ``(x, status)``,
      status an int32 scalar: 0 on success, k > 0 when U(k, k) is exactly
      zero (A singular), -1 when A has a NaN or an Inf (x is then NaN).
    """
    specs = _specs("lu_solve", in_specs, matrix_specs)
    return _plain("lu_solve", seeds.lu_solve, (a, b), T_A, mesh, specs, donate,
                  functools.partial(_solve_worked, "lu_solve", False),
                  return_status=return_status, pad=pad)


def _potrs_with_logdet(a: jax.Array, b: jax.Array, T_A: int | None = None,
                       mesh: Mesh | None = None, in_specs: Any = None,
                       return_status: bool = False,
                       pad: bool = True) -> tuple[jax.Array, ...]:
    """``seeds.potrs`` with log det A: (x, logdet) or (x, logdet, status)."""
    x, logdet, status = seeds.run_solve("potrs", a, b, T_A, mesh, in_specs, pad,
                                        _without_work)
    return (x, logdet, status) if return_status else (x, logdet)


def _solve_worked(op: str, want_logdet: bool, a: jax.Array, b: jax.Array,
                  T_A: int | None = None, mesh: Mesh | None = None, in_specs: Any = None,
                  return_status: bool = False, pad: bool = True) -> tuple[Any, Any]:
    """A solve's plain form with A's work buffer: (work, what the plain form
    returns), for a donating jit (_donate.run)."""
    work, *out = seeds.run_solve(op, a, b, T_A, mesh, in_specs, pad,
                                 functools.partial(_solve_program, op,
                                                   want_logdet=want_logdet), x_at=1)
    out = out if return_status else out[:-1]
    return work, (out[0] if len(out) == 1 else tuple(out))


def _syevd_worked(a: jax.Array, T_A: int | None = None, mesh: Mesh | None = None,
                  in_specs: Any = None, return_eigenvectors: bool = True,
                  return_status: bool = False, pad: bool = True) -> tuple[Any, Any]:
    """``seeds.syevd`` with A's work buffer: (work, what it returns), work
    None for a padded call (whose work buffer is not A's shape), for a
    donating jit (_donate.run)."""
    n, _ = _checks.check_matrix("syevd", a)
    a, mesh, rows, g = _shard.prepare("syevd", a, n, T_A, mesh, in_specs, 1, pad)
    program = syevd_core.over_mesh(mesh, rows, g, return_eigenvectors, work=not g.padded)
    out = tuple(program(a))
    work, out = (None, out) if g.padded else (out[0], out[1:])
    out = out if return_status else out[:-1]
    return work, (out[0] if len(out) == 1 else out)


def _without_work(mesh: Mesh, rows: _checks.RowSharding,
                  g: _shard.Geometry) -> Callable[[jax.Array, jax.Array], tuple[jax.Array, ...]]:
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


def syevd(
    a: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    return_eigenvectors: bool = True,
    return_status: bool = False,
    pad: bool = True,
    *,
    matrix_specs: Any = None,
    donate: bool = False,
) -> Any:
    """Eigenvalues and eigenvectors of a Hermitian ``a`` on all devices.

    The seeds' form (``syevd(a, T_A, mesh, in_specs, return_eigenvectors,
    return_status, pad)``) and JAXMg 1.x's (``syevd(a, T_A, mesh=None,
    matrix_specs=None, *, in_specs=None, return_eigenvectors=True,
    return_status=False, pad=True, donate=True)``) in one. ``matrix_specs``
    and ``donate`` as in ``potrs``; ``a`` may be sharded over two mesh axes.

    Returns:
      ``w``, ``(w, V)``, ``(w, status)`` or ``(w, V, status)``: w ascending,
      real, replicated; V's columns the eigenvectors, sharded by columns;
      status 0 on success, > 0: no convergence, -1: A not finite (outputs NaN).
    """
    specs = _specs("syevd", in_specs, matrix_specs)
    return _plain("syevd", seeds.syevd, (a,), T_A, mesh, specs, donate, _syevd_worked,
                  return_eigenvectors=return_eigenvectors,
                  return_status=return_status, pad=pad)


# --- the ctx forms: which generation ------------------------------------------------------


def _inside_shard_map(op: str, positional: tuple[Any, ...], *, pad: Any, axis_name: Any,
                      mesh: Any, matrix_specs: Any, in_specs: Any,
                      extra: dict[str, Any]) -> tuple[bool, Any, Any]:
    """The seeds' reading of a ctx call inside a shard_map body: (pad,
    axis_name), refusing what only 1.x's global form takes."""
    given = [k for k, v in (("mesh", mesh), ("matrix_specs", matrix_specs),
                            ("in_specs", in_specs)) if v is not None]
    given += [k for k, v in extra.items() if v]
    if given:
        raise ValueError(
            f"jaxmg.{op} is called inside a shard_map body, where it takes this device's "
            f"rows of A (the seeds' form: {op}(a, ..., T_A, pad, axis_name)); "
            f"{', '.join(given)} belong to JAXMg 1.x's form, which takes the whole "
            "matrix and is called at the global level (eagerly or under jax.jit, outside "
            "shard_map)")

    def a_bool(pad: Any) -> None:
        if not isinstance(pad, (bool, np.bool_)):
            raise TypeError(
                f"jaxmg.{op}: inside a shard_map body the argument after T_A is pad (a "
                f"bool; the seeds' form), got {pad!r}; JAXMg 1.x's form, whose "
                "argument there is the mesh, is called at the global level")

    pad, axis_name = _after_T_A(op, positional, "pad", pad, _UNSET, a_bool,
                                "axis_name", axis_name, _UNSET)
    pad = True if pad is _UNSET else _check_flag(op, "pad", pad)
    return pad, (None if axis_name is _UNSET else axis_name), None


def _at_global_level(op: str, positional: tuple[Any, ...], *, pad: Any, axis_name: Any,
                     mesh: Any, matrix_specs: Any, in_specs: Any) -> tuple[bool, Any, Any]:
    """1.x's reading of a ctx call at the global level: (pad, mesh, specs),
    refusing the seeds' shard_map-only arguments."""
    if axis_name is not _UNSET:
        raise ValueError(
            f"jaxmg.{op}: axis_name is the seeds' form's, for calls inside a shard_map "
            "body; this call is at the global level (no shard_map), where jaxmg takes the "
            "whole matrix and reads its sharding from it or from the context mesh "
            "(JAXMg 1.x's form)")

    def not_a_bool(mesh: Any) -> None:
        if isinstance(mesh, (bool, np.bool_)):
            raise TypeError(
                f"jaxmg.{op}: at the global level (outside shard_map) the argument after "
                f"T_A is the mesh (JAXMg 1.x's form), got {mesh!r}; pad= is a keyword "
                "there. The seeds' form, whose argument there is pad, is called inside "
                "a shard_map body on this device's rows")

    mesh, matrix_specs = _after_T_A(op, positional, "mesh", mesh, None, not_a_bool,
                                    "matrix_specs", matrix_specs, None)
    if mesh is not None:
        _checks.check_mesh(op, mesh)
    specs = _specs(op, in_specs, matrix_specs)
    pad = True if pad is _UNSET else _check_flag(op, "pad", pad)
    return pad, mesh, specs


def _after_T_A(op: str, positional: tuple[Any, ...], first: str, first_value: Any,
               first_unset: Any, check_first: Callable[[Any], None], second: str,
               second_value: Any, second_unset: Any) -> tuple[Any, Any]:
    """The two arguments a ctx form may take positionally after T_A (its
    ``*positional``), ``first`` and ``second`` by name: each taken from
    ``positional`` where it is there (``check_first`` judging the first),
    else its keyword's value; refusing more than two, and one given both
    ways (its keyword's value not its ``*_unset``)."""
    if len(positional) > 2:
        raise TypeError(f"jaxmg.{op}: too many positional arguments")
    if positional:
        if first_value is not first_unset:
            raise TypeError(f"jaxmg.{op}: {first} given twice")
        first_value = positional[0]
        check_first(first_value)
    if len(positional) > 1:
        if second_value is not second_unset:
            raise TypeError(f"jaxmg.{op}: {second} given twice")
        second_value = positional[1]
    return first_value, second_value


# --- the ctx forms at the global level: the mesh and A's layout ---------------------------


def _context_mesh(op: str) -> Mesh:
    """The concrete mesh of the context (jax.sharding.set_mesh, or
    use_abstract_mesh over a mesh of the process's devices): the
    abstract mesh's names, sizes and axis types over concrete devices.

    Devices: the concrete context mesh's (set_mesh sets one) when it has the
    abstract mesh's shape; else, with as many devices, its devices in order
    laid out in the abstract mesh's shape (a mesh that jax.make_mesh built
    on the same devices, as NetKet does for its process grids); else all
    devices, in order, when the abstract mesh has as many."""
    abstract = jax.sharding.get_abstract_mesh()
    if abstract is None or abstract.empty:
        raise ValueError(
            f"jaxmg.{op}: a traced A names no mesh: pass mesh= and matrix_specs=, or set "
            "a context mesh (jax.sharding.set_mesh)")
    names = tuple(abstract.axis_names)
    sizes = tuple(int(abstract.shape[n]) for n in names)
    types = tuple(abstract.axis_types)
    concrete = _compat.concrete_context_mesh()
    if concrete is not None:
        if tuple(concrete.axis_names) == names and tuple(
                int(concrete.shape[n]) for n in names) == sizes:
            return concrete
        devices = np.asarray(concrete.devices).reshape(-1)
    else:
        devices = np.asarray(jax.devices())
    if devices.size != int(np.prod(sizes)):
        raise ValueError(
            f"jaxmg.{op}: the context mesh {dict(zip(names, sizes))} has "
            f"{int(np.prod(sizes))} devices, but no concrete mesh of as many devices is "
            "known; pass mesh=")
    return Mesh(devices.reshape(sizes), names, axis_types=types)


def _global_layout(op: str, a: Any, mesh: Any, specs: Any) -> tuple[Mesh, Any]:
    """The mesh and specs of a global-level ctx call: given, else read from a
    concrete ``a``'s sharding, else from a traced ``a``'s type (Explicit
    axes) over the context mesh, else A's rows over all the mesh's axes."""
    if not _compat.is_tracer(a):
        return _checks.resolve_layout(op, a, mesh, specs)
    if mesh is None:
        mesh = _context_mesh(op)
    if specs is None:
        sharding = getattr(jax.typeof(a), "sharding", None)
        spec = getattr(sharding, "spec", None)
        entries = tuple(spec) if spec is not None else ()
        if entries and entries[0] is not None:
            first = _two_axes_as_rows(P(*entries))
            specs = (P(entries[0], None) if len(entries) < 2 or entries[1] is None
                     else first,)
        else:
            axes = tuple(mesh.axis_names)
            specs = (P(axes[0] if len(axes) == 1 else axes, None),)
    return mesh, specs


def _prepare_global(op: str, a: Any, T_A: Any, mesh: Any, specs: Any, n_specs: int,
                    pad: bool) -> tuple[Any, Mesh, Any, Any]:
    n, _ = _checks.check_matrix(op, a)
    mesh, specs = _global_layout(op, a, mesh, specs)
    return _shard.prepare(op, a, n, T_A, mesh, specs, n_specs, pad)


# The solves' cores by op: each has local_work, (work rows, x, status).
_SOLVES = {"potrs": potrs_core, "lu_solve": lu_solve_core}


@functools.lru_cache(maxsize=256)
def _solve_program(op: str, mesh: Mesh, rows: _checks.RowSharding,
                   g: _shard.Geometry, want_logdet: bool = False) -> Any:
    """(a_work, x, status), or (a_work, x, logdet, status) with want_logdet
    (potrs only)."""
    if not want_logdet:
        return _SOLVES[op].over_mesh(mesh, rows, g, work=True)
    call = _shard.mesh_call(op, mesh, rows, g)
    return jax.jit(_shard.mapped(functools.partial(potrs_core.local_logdet, call), mesh,
                                 in_specs=(rows.spec, P(None, None)),
                                 out_specs=(rows.spec, P(None, None), P(), P())))


def _solve_ctx(op: str, a: Any, b: Any, T_A: Any, positional: tuple[Any, ...], *,
               mesh: Any, matrix_specs: Any, in_specs: Any, pad: Any, axis_name: Any,
               extra: dict[str, Any]) -> tuple[jax.Array, ...]:
    """A solve's ctx form (op: ``potrs_shardmap_ctx``, ...): the seeds'
    inside a shard_map body, else 1.x's, ``(a_work, x, status)``, x in b's
    shape, replicated. extra: 1.x's options this version does not implement
    (return_logdet), refused inside a shard_map and when true."""
    if current_manual_axes():
        pad, axis_name, _ = _inside_shard_map(
            op, positional, pad=pad, axis_name=axis_name, mesh=mesh,
            matrix_specs=matrix_specs, in_specs=in_specs,
            extra={k: bool(v) for k, v in extra.items()})
        return getattr(seeds, op)(a, b, T_A, pad, axis_name)
    pad, mesh, specs = _at_global_level(op, positional, pad=pad, axis_name=axis_name,
                                        mesh=mesh, matrix_specs=matrix_specs,
                                        in_specs=in_specs)
    want_logdet = "return_logdet" in extra and _check_flag(
        op, "return_logdet", extra["return_logdet"])
    base = op.removesuffix("_shardmap_ctx")

    def solve(mesh: Mesh, rows: _checks.RowSharding, g: _shard.Geometry) -> Any:
        return _solve_program(base, mesh, rows, g, want_logdet)

    return seeds.run_solve(op, a, b, T_A, mesh, specs, pad, solve, layout=_global_layout,
                           x_at=1)


@functools.lru_cache(maxsize=256)
def _syevd_program(mesh: Mesh, rows: _checks.RowSharding, g: _shard.Geometry,
                   want_vectors: bool) -> Any:
    """(a_work, w, V, status), or (a_work, w, status) for an unpadded call:
    a_work the solver's work buffer (V^H with eigenvectors), so that a
    donated A is worked on in place; V sharded like A, as 1.x hands it back.
    A padded call's work buffer is not A's shape: there a_work is V^H
    computed, and without eigenvectors the program returns (w, status)
    (the caller puts A itself in front)."""
    if not g.padded:
        program = syevd_core.over_mesh(mesh, rows, g, want_vectors, work=True)
        if not want_vectors:
            return program

        def run(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
            u, w, v, status = program(a)
            return u, w, _compat.place(v, mesh, rows.spec), status

        return jax.jit(run)
    values = syevd_core.over_mesh(mesh, rows, g, want_vectors)
    if not want_vectors:
        return values

    def run_padded(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        w, v, status = values(a)
        v = _compat.place(v, mesh, rows.spec)
        return _compat.place(jnp.conj(v).T, mesh, rows.spec), w, v, status

    return jax.jit(run_padded)


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
) -> tuple[jax.Array, ...]:
    """``potrs`` for a caller's own program: the seeds' form inside a
    ``jax.shard_map`` body, JAXMg 1.x's at the global level (see this
    module's docstring for the rule).

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
                      axis_name=axis_name, extra={"return_logdet": return_logdet})


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
) -> tuple[jax.Array, ...]:
    """``lu_solve`` for a caller's own program: the seeds' form inside a
    ``jax.shard_map`` body, JAXMg 1.x's at the global level (see this
    module's docstring for the rule).

    Inside a shard_map body, ``lu_solve_shardmap_ctx(a, b, T_A=None,
    pad=True, axis_name=None)``: ``a`` this device's rows, returns ``(x,
    status)``, status of shape (1,) (see
    ``jaxmg._src.api.seeds.lu_solve_shardmap_ctx``).

    At the global level, ``lu_solve_shardmap_ctx(a, b, T_A=None, mesh=None,
    matrix_specs=None, *, in_specs=None, pad=True)``: ``a`` the whole
    matrix, read as in ``potrs_shardmap_ctx``.

    Returns (global level):
      ``(a_work, x, status)``: a_work the solver's work buffer in A's shape
      and sharding (its contents are unspecified; ``a`` itself is never
      modified), x with b's shape, replicated (NaN when A is singular),
      status an int32 scalar (0; k > 0: U(k, k) exactly zero; -1: A not finite).
      Differentiable in a and b through x (a_work is held constant).
    """
    return _solve_ctx("lu_solve_shardmap_ctx", a, b, T_A, positional, mesh=mesh,
                      matrix_specs=matrix_specs, in_specs=in_specs, pad=pad,
                      axis_name=axis_name, extra={})


def syevd_shardmap_ctx(
    a: jax.Array,
    T_A: int | None = None,
    *positional: Any,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    in_specs: Any = None,
    return_eigenvectors: bool = True,
    pad: bool = _UNSET,
    axis_name: str | tuple[str, ...] | None = _UNSET,
) -> tuple[jax.Array, ...]:
    """``syevd`` for a caller's own program: the seeds' form inside a
    ``jax.shard_map`` body, JAXMg 1.x's at the global level (see this
    module's docstring for the rule).

    Inside a shard_map body, ``syevd_shardmap_ctx(a, T_A=None,
    return_eigenvectors=True, pad=True, axis_name=None)`` (``a`` this
    device's rows; see ``jaxmg._src.api.seeds.syevd_shardmap_ctx``).
    There the argument after T_A is ``return_eigenvectors``, then ``pad``,
    then ``axis_name``, as in the seeds.

    At the global level, ``syevd_shardmap_ctx(a, T_A=None, mesh=None,
    matrix_specs=None, *, in_specs=None, return_eigenvectors=True,
    pad=True)``: ``a`` the whole matrix, read as in ``potrs_shardmap_ctx``.

    Returns (global level):
      ``(a_work, w, V, status)`` or ``(a_work, w, status)``: w the N
      eigenvalues ascending, real, replicated; V the eigenvectors as
      columns, sharded like A (rows); a_work what the solver leaves in A's
      place (V^H with eigenvectors; else unspecified contents), in A's
      buffer when A is donated (``jax.jit(..., donate_argnums=0)`` around a
      program that returns it), else in a copy (``a`` itself is never
      modified); status an int32 scalar, 0 on success (outputs NaN else).
    """
    op = "syevd_shardmap_ctx"
    if current_manual_axes():
        seeds_pos = positional
        if positional:
            # The seeds' order: return_eigenvectors, pad, axis_name.
            if not isinstance(positional[0], (bool, np.bool_)):
                raise TypeError(
                    f"jaxmg.{op}: inside a shard_map body the argument after T_A is "
                    f"return_eigenvectors (a bool; the seeds' form), got {positional[0]!r}; "
                    "JAXMg 1.x's form, whose argument there is the mesh, is called at the "
                    "global level")
            return_eigenvectors = positional[0]
            seeds_pos = positional[1:]
        pad, axis_name, _ = _inside_shard_map(
            op, seeds_pos, pad=pad, axis_name=axis_name, mesh=mesh,
            matrix_specs=matrix_specs, in_specs=in_specs, extra={})
        want = _check_flag(op, "return_eigenvectors", return_eigenvectors)
        return seeds.syevd_shardmap_ctx(a, T_A, want, pad, axis_name)
    pad, mesh, specs = _at_global_level(op, positional, pad=pad, axis_name=axis_name,
                                        mesh=mesh, matrix_specs=matrix_specs,
                                        in_specs=in_specs)
    want = _check_flag(op, "return_eigenvectors", return_eigenvectors)
    a_in = a
    a, mesh, rows, g = _prepare_global(op, a, T_A, mesh, specs, 1, pad)
    out = _syevd_program(mesh, rows, g, want)(a)
    out = (a_in,) + tuple(out) if g.padded and not want else out
    _shard.settle_on_cpu(out, mesh)
    return tuple(out)


# --- gesvd (JAXMg 1.x only: the seeds have no SVD) -------------------------------------------


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
    """gesvd's steps before its program runs: a checked, the mesh and
    specs (``layout``'s), the rows' sharding, every output's rows against
    the group, the geometry (the engine asked), a onto the mesh. Returns
    (a, mesh, rows, g)."""
    m, dtype = _checks.check_matrix(op, a, square=False)
    n = int(a.shape[1])
    mesh, specs = layout(op, a, mesh, specs)
    rows = _checks.check_specs(op, mesh, specs, 1)
    _gesvd_rows(op, m, n, rows.nparts, full, want_u, want_vh)
    platform = _native.platform_of(np.asarray(mesh.devices).flat[0].platform)
    nodes = _mode.call_nodes(mesh, rows.axes, rows.others)
    g = gesvd_core.geometry(op, m, n, rows.nparts, dtype, T_A, platform, nodes)
    return _shard.onto(a, mesh, rows.spec), mesh, rows, g


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
    _shard.settle_on_cpu(out, mesh)
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
    """``gesvd`` for a caller's own program (see this module's docstring for
    the rule that tells its two forms apart).

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
        pad, axis_name, _ = _inside_shard_map(
            op, positional, pad=pad, axis_name=axis_name, mesh=mesh,
            matrix_specs=matrix_specs, in_specs=in_specs, extra={})
        rows, n, dtype = _checks.check_local_shard(op, a, current_manual_axes(), axis_name,
                                                   square=False)
        m = int(a.shape[0]) * rows.nparts
        _gesvd_rows(op, m, n, rows.nparts, full, want_u, want_vh)
        platform = _native.platform_of(jax.default_backend())
        g = gesvd_core.geometry(op, m, n, rows.nparts, dtype, T_A, platform,
                                _mode.ambient_nodes(rows.nparts))
        call = _manual.make_call(op, rows, m, a, T_A, pad, geometry=g)
        # A rectangular shard does not tell the group's size (_shard.ffi_call).
        call = dataclasses.replace(call, job=_mode.ambient_job_id(op, rows.nparts))
        _native.load()
        out = gesvd_core.local(call, full, want_u, want_vh, a)
        out = _numpy_order(tuple(out), want_u, want_vh)
        return (a,) + out[:-1] + (out[-1].reshape(1),)
    pad, mesh, specs = _at_global_level(op, positional, pad=pad, axis_name=axis_name,
                                        mesh=mesh, matrix_specs=matrix_specs,
                                        in_specs=in_specs)
    return _gesvd_global(a, op=op, T_A=T_A, mesh=mesh, specs=specs, full=full,
                         want_u=want_u, want_vh=want_vh, layout=_global_layout)

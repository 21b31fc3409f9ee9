"""JAXMg 1.x's forms of ``syevd`` and ``syevd_shardmap_ctx``, beside the
seeds'. See jaxmg._src.api.v1 for how a call is read."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxmg._src import _checks, _compat, _geometry, _placement
from jaxmg._src.api import seeds
from jaxmg._src.api.v1._calls import (
    _UNSET,
    _at_global_level,
    _check_flag,
    _inside_shard_map,
    _plain,
    _prepare_global,
    _specs,
)
from jaxmg._src._compat import current_manual_axes
from jaxmg._src.core import syevd as syevd_core


def _syevd_worked(a: jax.Array, T_A: int | None = None, mesh: Mesh | None = None,
                  in_specs: Any = None, return_eigenvectors: bool = True,
                  return_status: bool = False, pad: bool = True) -> tuple[Any, Any]:
    """``seeds.syevd`` with A's work buffer: (work, what it returns), work
    None for a padded call (whose work buffer is not A's shape) and where
    V is the work buffer itself (``syevd_core.vectors_in_a``: one device;
    V takes a donated A's buffer, as potri's inverse does, and returning
    the buffer twice would make XLA copy it), for a donating jit
    (_donate.run)."""
    n, _ = _checks.check_matrix("syevd", a)
    a, mesh, rows, g = _placement.prepare("syevd", a, n, T_A, mesh, in_specs, 1, pad)
    worked = not g.padded and not syevd_core.vectors_in_a(g, return_eigenvectors)
    program = syevd_core.over_mesh(mesh, rows, g, return_eigenvectors, work=worked)
    out = tuple(program(a))
    work, out = (out[0], out[1:]) if worked else (None, out)
    out = out if return_status else out[:-1]
    return work, (out[0] if len(out) == 1 else out)


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


@functools.lru_cache(maxsize=256)
def _syevd_program(mesh: Mesh, rows: _checks.RowSharding, g: _geometry.Geometry,
                   want_vectors: bool) -> Any:
    """(a_work, w, V, status), or (a_work, w, status) for an unpadded call:
    a_work the solver's work buffer (V^H with eigenvectors; V itself on one
    device, ``syevd_core.vectors_in_a``), so that a donated A is worked on
    in place; V sharded like A, as 1.x hands it back.
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
    ``jax.shard_map`` body, JAXMg 1.x's at the global level (see
    jaxmg._src.api.v1's docstring for the rule).

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
      place (with eigenvectors V^H, or V itself on one device, where V is
      A's buffer: a program returning both a_work and V then holds a copy;
      else unspecified contents), in A's
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
    return tuple(_placement.hand_back(tuple(out), mesh))



"""The seeds' API (JAXMg 0.x): potrs, potri, syevd and lu_solve with
``(a, [b,] T_A, mesh, in_specs, ..., return_status, pad)``, and the
``*_shardmap_ctx`` forms called on the local shard from inside the caller's
own ``jax.shard_map``, returning ``(outputs..., status)`` with the status of
shape (1,).

This module is only conventions: argument names and order, in_specs and
their inference, the checks that refuse misuse before anything is traced
(_checks), 1-D right-hand sides, which outputs are returned and in what
order. The work, derivative rules included, is the ops' cores'
(jaxmg._src.core), which know nothing of any API's conventions; JAXMg 1.x's
forms (matrix_specs, donate=, return_logdet, a_work first, ...) are meant to
be a second adapter like this one over the same cores.

One adapter module for the whole family rather than one per op: the ops
share every convention (argument order, in_specs, return_status, pad,
the ctx forms' status of shape (1,)), and one module shows them side by side.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _geometry, _manual, _native, _placement
from jaxmg._src._compat import current_manual_axes
from jaxmg._src.core import lu_solve as lu_solve_core
from jaxmg._src.core import potri as potri_core
from jaxmg._src.core import potrs as potrs_core
from jaxmg._src.core import syevd as syevd_core


def potrs(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
    *,
    precision: str = "exact",
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
        measured on 4 H200s (see ``jaxmg._src._checks.default_tile``),
        narrower where the engine that runs the call needs it. A T_A that no
        engine can take raises ValueError, naming the limit
        (docs/guides/engines.md). On one GPU the default engine (cuSOLVERDn) holds the whole
        matrix and uses T_A only for padding.
      mesh: the device mesh; may be omitted with in_specs when ``a`` carries a
        NamedSharding (they are read from it), or when ``a`` is a host or
        single-device array (it is then placed on a 1-D mesh "x" over all
        devices).
      in_specs: ``(P(axis, None), P(None, None))``, or just ``(P(axis, None),)``.
      return_status: also return the solver's status.
      pad: pad each shard to a multiple of T_A when needed (else raise).
      precision: "exact" (the default): factor and solve in ``a``'s dtype.
        "mixed": factor in the next lower precision (float32 for float64,
        complex64 for complex128), refine x in ``a``'s dtype until its
        backward error is the exact path's, and fall back to the exact
        factorization by itself where refinement does not converge (an
        ill-conditioned ``a``): the same answer and status either way
        (docs/guides/mixed-precision.md). float32 and complex64 inputs run
        the exact path on CPU devices. Runs on one GPU (cuSOLVERDn), on
        several GPUs of one node (A gathered onto the first, cuSOLVERDn
        there; where the copy does not fit, cuSOLVERMg's exact solve) and
        on CPU devices; cuSOLVERMg and cuSOLVERMp, named by JAXMG_ENGINE,
        refuse it with a ValueError.

    Returns:
      x with b's shape, replicated on every device; with ``return_status``,
      ``(x, status)`` where status is an int32 scalar: 0 on success, k > 0 when
      the leading minor of order k is not positive definite, -1 when A has a
      NaN or an Inf entry (x is then NaN).
    """
    x, status = run_solve("potrs", a, b, T_A, mesh, in_specs, pad, potrs_core.over_mesh,
                          precision=precision)
    return (x, status) if return_status else x


def potrs_shardmap_ctx(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    pad: bool = True,
    axis_name: str | tuple[str, ...] | None = None,
    *,
    precision: str = "exact",
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
      precision: "exact" or "mixed", as in ``potrs``.

    Returns:
      ``(x, status)``: x with b's shape (the same on every device) and the
      status as an int32 array of shape (1,). Declare ``out_specs`` like
      ``(P(None, None), P(None))``. Works with either ``check_vma`` setting
      of shard_map; with ``check_vma=True`` (its default) x and status are
      typed as the same along the rows' axes. Differentiable in a and b
      (``jax.grad``, ``jax.jvp``, ``jax.vjp``, to any order), whatever the
      out_specs.
    """
    return _solve_in_shard_map("potrs_shardmap_ctx", potrs_core.local, a, b, T_A, pad,
                               axis_name, precision)


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
      of order k is not positive definite, -1 when A has a NaN or an Inf
      entry (the inverse is then NaN).
    """
    n, _ = _checks.check_matrix("potri", a)
    a, mesh, rows, g = _placement.prepare("potri", a, n, T_A, mesh, in_specs, 1, pad)
    inv, status = potri_core.over_mesh(mesh, rows, g)(a)
    inv, status = _placement.hand_back((inv, status), mesh)
    return (inv, status) if return_status else inv


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
    inv, status = potri_core.local(call, a)
    return inv, status.reshape(1)


def syevd(
    a: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    return_eigenvectors: bool = True,
    return_status: bool = False,
    pad: bool = True,
) -> Any:
    """Eigenvalues and eigenvectors of a Hermitian ``a``, computed on all devices.

    Args:
      a: the N x N matrix, rows sharded as ``in_specs[0]`` says (e.g.
        ``P("x", None)``). Only its upper triangle is read. It is not modified.
      T_A: tile size of the 1D block-cyclic layout (see ``potrs``).
      mesh: the device mesh; may be omitted with in_specs when ``a`` carries a
        NamedSharding (they are read from it), or when ``a`` is a host or
        single-device array (it is then placed on a 1-D mesh "x" over all
        devices).
      in_specs: ``(P(axis, None),)``.
      return_eigenvectors: also return the eigenvectors.
      return_status: also return the solver's status.
      pad: pad each shard to a multiple of T_A when needed (else raise).

    Returns:
      ``w``, ``(w, V)``, ``(w, status)`` or ``(w, V, status)``. ``w``: the N
      eigenvalues in ascending order, real, replicated. ``V``: the eigenvectors
      as columns (``a @ V = V * w``, as in ``jnp.linalg.eigh``; JAXMg returns
      them as rows), sharded by columns (``P(None, axis)``), the layout the
      solver leaves them in. ``status``: 0 on success, > 0 if the solver did not
      converge, -1 when A has a NaN or an Inf entry (outputs are then NaN).
    """
    n, _ = _checks.check_matrix("syevd", a)
    a, mesh, rows, g = _placement.prepare("syevd", a, n, T_A, mesh, in_specs, 1, pad)
    if return_eigenvectors:
        w, v, status = syevd_core.over_mesh(mesh, rows, g, True)(a)
    else:
        w, status = syevd_core.over_mesh(mesh, rows, g, False)(a)
    out: tuple[jax.Array, ...] = (w, v) if return_eigenvectors else (w,)
    if return_status:
        out = out + (status,)
    out = _placement.hand_back(out, mesh)
    return out[0] if len(out) == 1 else out


def syevd_shardmap_ctx(
    a: jax.Array,
    T_A: int | None = None,
    return_eigenvectors: bool = True,
    pad: bool = True,
    axis_name: str | tuple[str, ...] | None = None,
) -> Any:
    """``syevd`` on the local shard, from inside your own ``jax.shard_map``.

    Args:
      a: this device's rows of A, (N / devices, N).
      T_A, return_eigenvectors: as in ``syevd``.
      pad: as in ``syevd``; padding is not possible here when eigenvectors are
        wanted (they would not be evenly split), so the shard size must then be
        a multiple of T_A.
      axis_name: the mesh axis (or axes) A's rows are sharded over; may be
        omitted when the shard_map has one axis.

    Returns:
      ``(w, status)`` or ``(w, V_local, status)``: all N eigenvalues (the same
      on every device), this device's N/devices columns of V (eigenvectors
      ``d*N/devices ...``; out_specs ``P(None, "x")``), and the status as an
      int32 array of shape (1,). Works with either ``check_vma`` setting of
      shard_map; with ``check_vma=True`` (its default) w and status are typed
      as the same along the rows' axes. Differentiable in a (``jax.grad``,
      ``jax.jvp``, ``jax.vjp``, to any order; eigenvectors through functions
      that do not depend on their phases, as for ``jnp.linalg.eigh``).
    """
    rows, n, _ = _checks.check_local_shard("syevd_shardmap_ctx", a,
                                           current_manual_axes(), axis_name)
    # Eigenvectors cannot be padded here: a T_A left out then divides the
    # shard, and one given must (with pad=False, make_call says so).
    r = n // rows.nparts
    tile = None if T_A is None else min(_checks.check_tile("syevd_shardmap_ctx", T_A), r)
    if return_eigenvectors and pad and tile is not None and r % tile:
        raise ValueError(
            f"jaxmg.syevd_shardmap_ctx: the shard size {r} is not a multiple of "
            f"T_A={tile}, and padded eigenvectors cannot be split evenly inside "
            "shard_map; choose a T_A that divides the shard size, or use jaxmg.syevd"
        )
    call = _manual.make_call("syevd_shardmap_ctx", rows, n, a, T_A,
                             pad and not return_eigenvectors)
    _native.load()
    if return_eigenvectors:
        w, v, status = syevd_core.local(call, a)
        return w, v, status.reshape(1)
    w, status = syevd_core.local_values(call, a)
    return w, status.reshape(1)


def lu_solve(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
    *,
    precision: str = "exact",
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Solves ``a @ x = b`` for a general nonsingular ``a`` on all devices, by
    LU with partial pivoting.

    Args:
      a: the N x N matrix, rows sharded over the mesh axis named in
        ``in_specs[0]`` (e.g. ``P("x", None)``). It is not modified.
      b: right-hand sides, (N, NRHS) or (N,), replicated (``P(None, None)``).
      T_A: tile size, as in ``potrs``.
      mesh: the device mesh, as in ``potrs``.
      in_specs: ``(P(axis, None), P(None, None))``, or just ``(P(axis, None),)``.
      return_status: also return the solver's status.
      pad: pad each shard to a multiple of T_A when needed (else raise).
      precision: "exact" (the default) or "mixed": an LU in the next lower
        precision refined in ``a``'s dtype, with the exact LU as its
        fallback, as in ``potrs``.

    Returns:
      x with b's shape, replicated on every device; with ``return_status``,
      ``(x, status)`` where status is an int32 scalar: 0 on success, k > 0
      when U(k, k) of the LU factorization is exactly zero (A is singular),
      -1 when A has a NaN or an Inf entry (x is then NaN). A nearly singular A gives status 0 and an x as accurate
      as its condition number allows, as LAPACK's getrf/getrs. Differentiable
      in a and b, and batched by ``jax.vmap`` (one matrix after the other).
    """
    x, status = run_solve("lu_solve", a, b, T_A, mesh, in_specs, pad, lu_solve_core.over_mesh,
                          precision=precision)
    return (x, status) if return_status else x


def lu_solve_shardmap_ctx(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    pad: bool = True,
    axis_name: str | tuple[str, ...] | None = None,
    *,
    precision: str = "exact",
) -> tuple[jax.Array, jax.Array]:
    """``lu_solve`` on the local shard, from inside your own ``jax.shard_map``.

    Args:
      a: this device's rows of A, (N / devices, N).
      b: the right-hand sides, (N, NRHS) or (N,), the same on every device
        (the first device's b is used).
      T_A: tile size, as in ``lu_solve``.
      pad: as in ``lu_solve``.
      axis_name: the mesh axis (or axes) A's rows are sharded over; may be
        omitted when the shard_map has one axis.
      precision: "exact" or "mixed", as in ``lu_solve``.

    Returns:
      ``(x, status)`` as ``potrs_shardmap_ctx``: x with b's shape (the same
      on every device), the status of shape (1,). Differentiable in a and b.
    """
    return _solve_in_shard_map("lu_solve_shardmap_ctx", lu_solve_core.local, a, b, T_A, pad,
                               axis_name, precision)


# --- what the solves (potrs, lu_solve) share -----------------------------------------------


def run_solve(
    op: str,
    a: Any,
    b: Any,
    T_A: Any,
    mesh: Any,
    in_specs: Any,
    pad: bool,
    program: Callable[[Mesh, _checks.RowSharding, _geometry.Geometry], Callable[..., Any]],
    layout: Callable[[str, Any, Any, Any], tuple[Any, Any]] | None = None,
    x_at: int = 0,
    precision: str = "exact",
) -> tuple[jax.Array, ...]:
    """A solve over a whole mesh, as the plain forms (and JAXMg 1.x's ctx
    forms at the global level, jaxmg._src.api.v1) make it: a and b checked,
    the mesh and specs (``layout``'s, when given, else inferred where left
    out), A onto the mesh (_placement.prepare), b replicated on it, a 1-D b as
    one column; then ``program(mesh, rows, g)(a, b)``, whose outputs are
    returned, x (at ``x_at``) in b's shape. ``precision`` (checked here) is
    the geometry's: the engine is chosen for it and the program's solves
    run in it."""
    precision = _checks.check_precision(op, precision)
    n, dtype = _checks.check_matrix(op, a)
    _checks.check_rhs(op, b, n, dtype)
    if layout is not None:
        mesh, in_specs = layout(op, a, mesh, in_specs)
    a, mesh, rows, g = _placement.prepare(op, a, n, T_A, mesh, in_specs, 2, pad, precision)
    b = _placement.onto(b, mesh, P())
    out = list(program(mesh, rows, g)(a, _columns(b)))
    out[x_at] = _shaped_like(out[x_at], b)
    return _placement.hand_back(tuple(out), mesh)


def _solve_in_shard_map(op: str, local: Callable[..., tuple[jax.Array, jax.Array]],
                        a: jax.Array, b: jax.Array, T_A: int | None, pad: bool,
                        axis_name: str | tuple[str, ...] | None,
                        precision: str = "exact") -> tuple[jax.Array, jax.Array]:
    """A solve's ctx form (op: ``potrs_shardmap_ctx``, ...) on this device's
    rows a: the checks, then the op's core ``local``; ``(x, status)``, x in
    b's shape, the status of shape (1,)."""
    precision = _checks.check_precision(op, precision)
    rows, n, dtype = _checks.check_local_shard(op, a, current_manual_axes(), axis_name)
    _checks.check_rhs(op, b, n, dtype)
    call = _manual.make_call(op, rows, n, a, T_A, pad, precision=precision)
    _native.load()
    x, status = local(call, a, _columns(b))
    return _shaped_like(x, b), status.reshape(1)


def _columns(b: jax.Array) -> jax.Array:
    """b as N x k: a 1-D b as one column (the cores take N x k)."""
    return b if b.ndim == 2 else b[:, None]


def _shaped_like(x: jax.Array, b: jax.Array) -> jax.Array:
    """x (N x k) in b's shape."""
    return x if b.ndim == 2 else x[:, 0]

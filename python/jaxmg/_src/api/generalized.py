"""The generalized Hermitian-definite eigenproblem A v = λ B v (type 1,
B Hermitian positive definite): ``eigh_generalized`` and
``eigh_generalized_shardmap_ctx``, with the seeds' conventions (T_A, mesh,
in_specs, return_status, pad; the ctx form called on the local shards
inside the caller's shard_map, its status of shape (1,)) and 1.x's
``matrix_specs`` alias and ``donate``. The work is sygvd's core
(jaxmg._src.core.sygvd), which runs the C library's op ``sygvd`` on every
engine that has it (docs/guides/engines.md).

``jax.scipy.linalg.eigh(a, b)`` is JAX's name for this problem (which it
refuses: "Only the b=None case of eigh is implemented"); SciPy's
``scipy.linalg.eigh(a, b)`` is the reference the tests compare with.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxmg._src import _checks, _compat, _manual, _native, _placement
from jaxmg._src._compat import current_manual_axes
from jaxmg._src.api import _donate
from jaxmg._src.api.v1._calls import _check_flag as _flag, _two_axes_as_rows
from jaxmg._src.core import sygvd as sygvd_core

_OP = "eigh_generalized"
_CTX = "eigh_generalized_shardmap_ctx"


def eigh_generalized(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    *,
    return_eigenvectors: bool = True,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
    matrix_specs: Any = None,
) -> Any:
    """Eigenvalues and B-orthonormal eigenvectors of the pencil (A, B):
    ``a @ v = w * (b @ v)``, A Hermitian, B Hermitian positive definite
    (LAPACK's ``?sygvd``/``?hegvd`` with itype 1; ``scipy.linalg.eigh(a, b)``).

    Args:
      a: the N x N Hermitian matrix, rows sharded as ``in_specs[0]`` says
        (e.g. ``P("x", None)``). Only its upper triangle is read. Not
        modified unless ``donate``.
      b: the N x N Hermitian positive definite matrix, of a's dtype, sharded
        as a is (a b on another mesh or with another spec is a ValueError; a
        host or single-device b is placed like a). Only its upper triangle is
        read. Not modified unless ``donate``.
      T_A: tile size of the 1D block-cyclic layout (see ``jaxmg.potrs``).
        This op never pads (``jaxmg._src.core.sygvd`` says why): a T_A that
        does not divide the shard N/devices is narrowed to the largest
        divisor of the shard below it (with ``pad=True``) or refused (with
        ``pad=False``).
      mesh: the device mesh; may be omitted with in_specs when ``a`` carries
        a NamedSharding (they are read from it), or when ``a`` is a host or
        single-device array (it is then placed on a 1-D mesh "x" over all
        devices).
      in_specs: ``(P(axis, None),)`` (A's spec, which B shares), or
        ``(P(axis, None), P(axis, None))`` (the same spec twice).
      return_eigenvectors: also return the eigenvectors.
      return_status: also return the solver's status.
      pad: as above (T_A).
      donate: called eagerly, hand a's and b's buffers to the solver (both
        are deleted after the call; the eigenvectors are computed in a's
        buffer, b's serves as the solver's workspace). Under ``jax.jit``
        donation is the outer jit's (``donate_argnums``).
      matrix_specs: JAXMg 1.x's name for in_specs (give one of them).

    Returns:
      ``w``, ``(w, V)``, ``(w, status)`` or ``(w, V, status)``. ``w``: the N
      eigenvalues in ascending order, real, replicated. ``V``: the
      eigenvectors as columns, ``a @ V = (b @ V) * w`` and ``V^H b V = I``,
      sharded by columns (``P(None, axis)``). ``status``: an int32 scalar, 0
      on success, k in 1..N when the eigensolver did not converge, N + k
      when B's leading minor of order k is not positive definite, -1 when A
      or B has a NaN or an Inf entry; every output is NaN for a nonzero
      status. Differentiable in a and b (``jax.jvp``, ``jax.vjp``,
      ``jax.grad``; eigenvectors through functions that do not depend on
      their phases, with distinct eigenvalues, as for ``jnp.linalg.eigh``),
      and batched by ``jax.vmap`` (one pencil after the other).
    """
    options = dict(return_eigenvectors=_flag(_OP, "return_eigenvectors", return_eigenvectors),
                   return_status=_flag(_OP, "return_status", return_status),
                   pad=_flag(_OP, "pad", pad))
    donate = _flag(_OP, "donate", donate)
    specs = _specs(in_specs, matrix_specs)
    _check_pair(a, b)
    mesh, specs = _checks.resolve_layout(_OP, a, mesh, specs)
    if not donate:
        return _run(a, b, T_A=T_A, mesh=mesh, in_specs=specs, **options)

    def bound(fn: Any) -> Any:
        return _donate.Hashable(functools.partial(fn, T_A=T_A, mesh=mesh, in_specs=specs,
                                                  **options))

    if _b_first(mesh, specs, options["return_eigenvectors"]):
        return _donate.run(bound(_run_b_first), (b, a), True, bound(_run_worked_b_first))
    return _donate.run(bound(_run), (a, b), True, bound(_run_worked))


def eigh_generalized_shardmap_ctx(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    return_eigenvectors: bool = True,
    pad: bool = True,
    axis_name: str | tuple[str, ...] | None = None,
) -> Any:
    """``eigh_generalized`` on the local shards, from inside your own
    ``jax.shard_map``.

    Args:
      a: this device's rows of A, (N / devices, N).
      b: this device's rows of B, (N / devices, N), of a's dtype.
      T_A, return_eigenvectors, pad: as in ``eigh_generalized`` (a T_A
        that does not divide the shard is narrowed with ``pad=True``).
      axis_name: the mesh axis (or axes) A's and B's rows are sharded over;
        may be omitted when the shard_map has one axis.

    Returns:
      ``(w, status)`` or ``(w, V_local, status)``: all N eigenvalues (the
      same on every device), this device's N/devices columns of V
      (eigenvectors ``d*N/devices ...``; out_specs ``P(None, "x")``), and
      the status as an int32 array of shape (1,). Works with either
      ``check_vma`` setting of shard_map. Differentiable in a and b.
    """
    return_eigenvectors = _flag(_CTX, "return_eigenvectors", return_eigenvectors)
    pad = _flag(_CTX, "pad", pad)
    manual = current_manual_axes()
    rows, n, dtype = _checks.check_local_shard(_CTX, a, manual, axis_name)
    shape_b, dtype_b = getattr(b, "shape", None), getattr(b, "dtype", None)
    if shape_b is None or dtype_b is None:
        raise TypeError(f"jaxmg.{_CTX}: b must be an array, got {type(b).__name__}")
    if tuple(shape_b) != tuple(a.shape):
        raise ValueError(f"jaxmg.{_CTX}: b's shard has shape {tuple(shape_b)}; it must be "
                         f"a's, {tuple(a.shape)} (B sharded as A is)")
    if np.dtype(dtype_b) != dtype:
        raise TypeError(f"jaxmg.{_CTX}: b has dtype {np.dtype(dtype_b)}, a has {dtype}; "
                        "they must be the same")
    if _compat.vma_checked():
        missing = [name for name in rows.axes if name not in _compat.varying_axes(b)]
        if missing:
            raise ValueError(
                f"jaxmg.{_CTX}: b is typed as the same on every device along "
                f"{tuple(missing)}, but it must be this device's rows of B: pass B into "
                f"the shard_map with in_specs P({rows.spec[0]!r}, None)")
    tile = sygvd_core.tile_for(n, rows.nparts, T_A) if pad else T_A
    call = _manual.make_call(_CTX, rows, n, a, tile, False)
    _native.load()
    if return_eigenvectors:
        w, v, status = sygvd_core.local(call, a, b)
        return w, v, status.reshape(1)
    w, status = sygvd_core.local_values(call, a, b)
    return w, status.reshape(1)


# --- the plain form's parts ---------------------------------------------------------------


def _run(a: Any, b: Any, T_A: int | None, mesh: Mesh, in_specs: Any,
         return_eigenvectors: bool, return_status: bool, pad: bool) -> Any:
    """The plain form on a resolved mesh and specs: its outputs."""
    return _program(a, b, T_A, mesh, in_specs, return_eigenvectors, return_status, pad,
                    False)[1]


def _run_worked(a: Any, b: Any, T_A: int | None, mesh: Mesh, in_specs: Any,
                return_eigenvectors: bool, return_status: bool, pad: bool) -> tuple[Any, Any]:
    """``_run`` with the solver's work buffers (A's and B's places):
    ``((a_work, b_work), outputs)``, for a donating jit (_donate.run); on
    one device with eigenvectors ``((b_work,), outputs)``: V is A's work
    buffer there and takes a donated A's (see ``_b_first``)."""
    return _program(a, b, T_A, mesh, in_specs, return_eigenvectors, return_status, pad, True)


def _b_first(mesh: Mesh, in_specs: Any, return_eigenvectors: bool) -> bool:
    """Whether a donating call hands its arrays over as (B, A): on one
    device with eigenvectors V is A's work buffer (``sygvd_core.vectors_in_a``)
    and the donating program returns (b_work, w, V): JAX pairs donated
    arguments with the program's outputs of their shape in order, so B
    must come first for its buffer to go to b_work and A's to V."""
    spec_a = in_specs[0] if isinstance(in_specs, (tuple, list)) else in_specs
    return bool(return_eigenvectors) and _checks.check_specs(_OP, mesh, (spec_a,), 1).nparts == 1


def _run_b_first(b: Any, a: Any, **kw: Any) -> Any:
    """``_run`` with B handed first (``_b_first``)."""
    return _run(a, b, **kw)


def _run_worked_b_first(b: Any, a: Any, **kw: Any) -> tuple[Any, Any]:
    """``_run_worked`` with B handed first (``_b_first``)."""
    return _run_worked(a, b, **kw)


def _program(a: Any, b: Any, T_A: int | None, mesh: Mesh, in_specs: Any,
             return_eigenvectors: bool, return_status: bool, pad: bool,
             work: bool) -> tuple[Any, Any]:
    n, _ = _check_pair(a, b)
    spec_a = in_specs[0] if isinstance(in_specs, (tuple, list)) else in_specs
    rows = _checks.check_specs(_OP, mesh, (spec_a,), 1)
    _check_b_layout(b, mesh, rows)
    _checks.check_divisible(_OP, n, rows.nparts)
    tile = sygvd_core.tile_for(n, rows.nparts, T_A) if pad else T_A
    a, mesh, rows, g = _placement.prepare(_OP, a, n, tile, mesh, (spec_a,), 1, False)
    b = _placement.onto(b, mesh, rows.spec)
    out = tuple(sygvd_core.over_mesh(mesh, rows, g, return_eigenvectors, work)(a, b))
    front = 1 if sygvd_core.vectors_in_a(g, return_eigenvectors) else 2
    buffers, out = (out[:front], out[front:]) if work else (None, out)
    if not return_status:
        out = out[:-1]
    buffers, out = _placement.hand_back((buffers, out), mesh)
    return buffers, (out[0] if len(out) == 1 else out)


def _specs(in_specs: Any, matrix_specs: Any) -> Any:
    """in_specs (or its 1.x name matrix_specs) as A's spec alone: one spec,
    or two equal ones (A's and B's)."""
    if in_specs is not None and matrix_specs is not None:
        raise TypeError(f"jaxmg.{_OP}: pass in_specs or matrix_specs (its JAXMg 1.x name), "
                        "not both")
    specs = matrix_specs if matrix_specs is not None else in_specs
    if specs is None:
        return None
    if isinstance(specs, P):
        return (_two_axes_as_rows(specs),)
    if isinstance(specs, (tuple, list)) and len(specs) == 2:
        if specs[0] != specs[1]:
            raise ValueError(
                f"jaxmg.{_OP}: A and B must be sharded the same way; in_specs gives "
                f"{specs[0]} for A and {specs[1]} for B")
        specs = specs[:1]
    if isinstance(specs, (tuple, list)) and len(specs) == 1 and isinstance(specs[0], P):
        return (_two_axes_as_rows(specs[0]),)
    return specs


def _check_pair(a: Any, b: Any) -> tuple[int, np.dtype]:
    """a square of a supported dtype; b an array of a's shape and dtype."""
    n, dtype = _checks.check_matrix(_OP, a)
    shape_b, dtype_b = getattr(b, "shape", None), getattr(b, "dtype", None)
    if shape_b is None or dtype_b is None:
        raise TypeError(f"jaxmg.{_OP}: b must be an array, got {type(b).__name__}")
    if tuple(shape_b) != (n, n):
        raise ValueError(f"jaxmg.{_OP}: b has shape {tuple(shape_b)}; it must be a's, "
                         f"({n}, {n})")
    if np.dtype(dtype_b) != dtype:
        raise TypeError(f"jaxmg.{_OP}: b has dtype {np.dtype(dtype_b)}, a has {dtype}; "
                        "they must be the same")
    return n, dtype


def _check_b_layout(b: Any, mesh: Mesh, rows: _checks.RowSharding) -> None:
    """A b placed on a mesh must be sharded as A is: its rows over the same
    axes of the same mesh (its columns replicated)."""
    sharding = _compat.sharding_of(b)
    if not isinstance(sharding, NamedSharding):
        return
    spec = tuple(sharding.spec) + (None,) * (2 - len(tuple(sharding.spec)))
    same = sharding.mesh == mesh and _two_axes_as_rows(P(*spec[:2])) == rows.spec
    if not same:
        raise ValueError(
            f"jaxmg.{_OP}: A and B must be sharded the same way: A's rows are sharded as "
            f"{rows.spec} on the mesh {dict(mesh.shape)}, b is laid out as {sharding.spec} on "
            f"{dict(sharding.mesh.shape)}")

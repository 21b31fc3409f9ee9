"""``jaxmg.memory_estimate``: what a call would take on each device, asked
before running it.

Two parts, each asked of whoever decides it, nothing guessed:

- XLA's buffers: the program the call would run (the same function,
  donating where the call would donate), lowered and compiled for abstract
  arrays of the call's shapes and shardings, and XLA's buffer assignment of
  it (``compiled.memory_analysis()``, per device): arguments, outputs, the
  part of them aliased (a donated A handed to the solver), temporaries.
- The engine's workspace: what the engine that would run the call takes
  from XLA's allocator during it, asked of its library now (cuSOLVERDn's
  ``*_bufferSize`` on this process's first GPU; engine/engine.h's
  ``workspace``), for the call's M x N A where the op's is rectangular
  (qr, and least_squares, whose engine work is its QR). Engines that
  cannot tell ahead of a call say so (``workspace`` None, gesvd's and
  polar's on every engine; ``JAXMG_TRACE=1`` prints what a call took).

The peak is their sum, arguments included: what the device holds while
the solver runs, A and b among it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxmg._src import _checks, _geometry, _mode, _native
from jaxmg._src.api import generalized, seeds
from jaxmg._src.api.v1 import _calls as v1_calls, gesvd_forms as v1_gesvd
from jaxmg._src.api.v1 import least_squares_forms as v1_ls, qr_forms as v1_qr
from jaxmg._src.api.v1 import polar_forms as v1_polar
from jaxmg._src.api.v1 import solve_forms as v1_solve
from jaxmg._src.api.v1 import syevd_forms as v1_syevd
from jaxmg._src.core import gesvd as gesvd_core
from jaxmg._src.core import polar as polar_core
from jaxmg._src.core import qr as qr_core
from jaxmg._src.core import sygvd as sygvd_core

OPS = ("potrs", "lu_solve", "potri", "syevd", "gesvd", "sygvd", "qr", "least_squares",
       "polar")
# The ops of an M x N A (the others' is square).
RECTANGULAR = ("gesvd", "qr", "least_squares", "polar")


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device of one call (see ``memory_estimate``)."""

    op: str
    engine: str  # the engine that would run the call ("" where no library says)
    T_A: int
    padded: bool  # the matrix padded to whole tiles (a padded A is a copy)
    donated: bool
    arguments: int  # XLA's buffers: A and b as passed
    outputs: int
    aliased: int  # outputs in an argument's buffer (a donated A's)
    temporaries: int
    workspace: int | None  # the engine's, asked of its library; None: unknown
    workspace_note: str  # the engine's name (and its path), or why the workspace is unknown

    @property
    def xla_bytes(self) -> int:
        """XLA's part: arguments + outputs - aliased + temporaries."""
        return self.arguments + self.outputs - self.aliased + self.temporaries

    @property
    def peak(self) -> int | None:
        """XLA's part plus the engine's workspace; None where that is unknown."""
        return None if self.workspace is None else self.xla_bytes + self.workspace


def memory_estimate(op: str, shape: tuple[int, ...], dtype: Any, mesh: Mesh | None = None,
                    in_specs: Any = None, *, T_A: int | None = None, nrhs: int = 1,
                    donate: bool = True, pad: bool = True, return_eigenvectors: bool = True,
                    compute_u: bool = True, compute_vh: bool = True,
                    full_matrices: bool = False, compute_h: bool = True,
                    precision: str = "exact") -> MemoryEstimate:
    """The memory one call of ``op`` would take on each device, asked before
    running it: XLA's buffers for the program the call runs, and the
    workspace of the engine that would run it.

    Args:
      op: "potrs", "lu_solve", "potri", "syevd", "gesvd", "sygvd"
        (``eigh_generalized``: B of A's shape and sharding), "qr",
        "least_squares" or "polar".
      shape: A's shape, (N, N) (gesvd: (M, N); qr, least_squares, polar:
        (M, N), M >= N).
      dtype: A's dtype (float32, float64, complex64, complex128).
      mesh: the mesh A is on; left out, a 1-D mesh "x" over all devices.
      in_specs: A's spec as the op takes it (``(P("x", None),)``); left out,
        A's rows over the mesh's axes.
      T_A: as the op takes it (left out: the op's choice).
      nrhs: b's columns (potrs, lu_solve, least_squares; b replicated).
      donate: estimate the call with A (and b) donated (``donate=True``),
        worked on in place, else the call that keeps A.
      pad, return_eigenvectors, compute_u, compute_vh, full_matrices,
        compute_h: as the op takes them.
      precision: potrs's and lu_solve's ("exact" or "mixed"): with "mixed"
        the workspace counts the lower-precision copy of A and the
        refinement's vectors beside the engine's exact-path buffers.

    Returns:
      A ``MemoryEstimate``: the engine, T_A, whether A is padded, XLA's
      per-device ``arguments``, ``outputs``, ``aliased`` and
      ``temporaries``, the engine's ``workspace`` (None where the engine
      cannot tell ahead of a call), and ``peak``, their sum. syevd on one
      GPU: cusolverDnXsyevd's workspace where it fits beside XLA's buffers
      within the device's ``bytes_limit``, else that of jaxmg's tridiagonal
      path, which the engine then runs (``workspace_note`` says so; with
      ``JAXMG_SYEVD`` set, the one it names).
    """
    if op not in OPS:
        raise ValueError(f"jaxmg.memory_estimate: op must be one of {', '.join(OPS)}, "
                         f"got {op!r}")
    dtype = np.dtype(dtype)
    if dtype.name not in ("float32", "float64", "complex64", "complex128"):
        raise TypeError(f"jaxmg.memory_estimate: dtype must be float32, float64, complex64 "
                        f"or complex128, got {dtype.name}")
    if len(tuple(shape)) != 2 or any(int(s) < 1 for s in shape):
        raise ValueError(f"jaxmg.memory_estimate: shape must be (N, N) (gesvd, qr, "
                         f"least_squares, polar: (M, N)), got {shape!r}")
    m, n = (int(s) for s in shape)
    precision = _checks.check_precision(f"memory_estimate({op!r})", precision)
    if precision != "exact" and op not in ("potrs", "lu_solve"):
        raise ValueError(f"jaxmg.memory_estimate: precision={precision!r} is potrs's and "
                         f"lu_solve's, not {op}'s")
    if op not in RECTANGULAR and m != n:
        raise ValueError(f"jaxmg.memory_estimate: {op} takes a square A, got {shape!r}")
    if mesh is None:
        mesh = jax.make_mesh((jax.device_count(),), ("x",))
    mesh = _checks.check_mesh(op, mesh)
    if in_specs is None:
        axes = tuple(mesh.axis_names)
        in_specs = (P(axes[0] if len(axes) == 1 else axes, None),)
    specs = v1_calls._specs(op, in_specs, None)
    specs = (specs,) if isinstance(specs, P) else tuple(specs)
    rows = _checks.check_specs(op, mesh, specs[:1], 1)
    platform = _native.platform_of(np.asarray(mesh.devices).flat[0].platform)
    nodes = _mode.call_nodes(mesh, rows.axes, rows.others)
    if op == "gesvd":
        g = gesvd_core.geometry(op, m, n, rows.nparts, dtype, T_A, platform, nodes)
    elif op in ("qr", "least_squares"):
        v1_qr.check_rows(op, m, n, rows.nparts, r_sharded=op == "qr")
        g = qr_core.geometry(op, m, n, rows.nparts, dtype, T_A, platform, nodes)
    elif op == "sygvd":  # never padded: a T_A narrowed as eigh_generalized does
        _checks.check_divisible(op, n, rows.nparts)
        tile = sygvd_core.tile_for(n, rows.nparts, T_A) if pad else T_A
        g = _geometry.choose_geometry(op, n, rows.nparts, dtype, tile, False, platform,
                                      nodes)
    elif op == "polar":
        v1_polar._tall(op, m, n)
        v1_polar._polar_rows(op, m, n, rows.nparts)
        g = polar_core.geometry(op, m, n, rows.nparts, dtype, T_A, platform, nodes)
    else:
        _checks.check_divisible(op, n, rows.nparts)
        g = _geometry.choose_geometry(op, n, rows.nparts, dtype, T_A, pad, platform,
                                      nodes, precision)

    a = jax.ShapeDtypeStruct((m, n), dtype, sharding=NamedSharding(mesh, rows.spec))
    b = jax.ShapeDtypeStruct((m, nrhs), dtype, sharding=NamedSharding(mesh, P()))
    if op == "sygvd":  # B: A's shape and sharding
        b = jax.ShapeDtypeStruct((n, n), dtype, sharding=NamedSharding(mesh, rows.spec))
    fn, args = _program(op, a, b, mesh, specs[:1], T_A, pad, donate, return_eigenvectors,
                        compute_u, compute_vh, full_matrices, compute_h, precision)
    donated = tuple(range(len(args))) if donate else ()
    compiled = jax.jit(fn, donate_argnums=donated).lower(*args).compile()
    mem = compiled.memory_analysis()

    if op in ("qr", "least_squares"):  # least_squares's engine work is its QR's
        work, note = _native.workspace(platform, "qr", rows.nparts, dtype.name, n, g.tile,
                                       nodes=nodes, m=m)
    elif op in RECTANGULAR:
        work, note = None, (f"{op}'s workspace is not asked ahead of a call" if op != "polar"
                            else "polar's workspace (its QRs' and Cholesky solves', or its "
                            "SVD's) is not asked ahead of a call")
    else:
        work, note = _native.workspace(platform, op, rows.nparts, dtype.name,
                                       g.rp * rows.nparts, g.tile, nrhs,
                                       return_eigenvectors, nodes, precision=precision)
    xla = (int(mem.argument_size_in_bytes) + int(mem.output_size_in_bytes)
           - int(mem.alias_size_in_bytes) + int(mem.temp_size_in_bytes))
    if op == "syevd" and work is not None and rows.nparts == 1:
        work, note = _syevd_fallback(mesh, platform, dtype, g, return_eigenvectors, nodes,
                                     xla, work, note)
    return MemoryEstimate(
        op=op, engine=g.engine, T_A=g.tile, padded=g.padded, donated=bool(donate),
        arguments=int(mem.argument_size_in_bytes), outputs=int(mem.output_size_in_bytes),
        aliased=int(mem.alias_size_in_bytes), temporaries=int(mem.temp_size_in_bytes),
        workspace=work, workspace_note=note)


def _syevd_fallback(mesh: Mesh, platform: str, dtype: np.dtype, g: Any, vectors: bool,
                    nodes: int, xla: int, work: int, note: str) -> tuple[int, str]:
    """syevd on one GPU where JAXMG_SYEVD leaves the choice to the engine:
    cusolverDnXsyevd where its workspace fits beside XLA's buffers in the
    device's limit, else jaxmg's tridiagonal path (engine/cusolverdn/syevd.c),
    whose workspace is then the estimate's."""
    if platform != "CUDA" or note not in ("cusolverdn", "cusolvermp"):
        return work, note
    if os.environ.get("JAXMG_SYEVD", "") not in ("", "auto"):
        return work, note  # the C library's query followed the setting
    stats = np.asarray(mesh.devices).flat[0].memory_stats() or {}
    limit = stats.get("bytes_limit")
    if limit is None or xla + work <= int(limit):
        return work, note
    tri, _ = _native.workspace(platform, "syevd", 1, dtype.name, g.rp, g.tile, 1, vectors,
                               nodes, syevd_solver="tridiagonal")
    if tri is None:
        return work, note
    return tri, (f"{note}: jaxmg's tridiagonal path (cusolverDnXsyevd's workspace, {work} "
                 f"bytes, does not fit beside XLA's {xla} in the device's {int(limit)})")


def _program(op: str, a: Any, b: Any, mesh: Mesh, specs: Any, T_A: Any, pad: bool,
             donate: bool, vectors: bool, want_u: bool, want_vh: bool,
             full: bool, want_h: bool = True,
             precision: str = "exact") -> tuple[Any, tuple[Any, ...]]:
    """The function a call runs and its abstract arguments: with ``donate``,
    the one a donating eager call jits (its work buffer returned, v1.solve_forms'
    ``*_worked``), else the plain form's."""
    kw = dict(T_A=T_A, mesh=mesh, in_specs=specs, pad=pad)
    if op in ("potrs", "lu_solve"):
        plain = seeds.potrs if op == "potrs" else seeds.lu_solve
        fn = functools.partial(v1_solve._solve_worked, op, False) if donate else plain
        return functools.partial(fn, precision=precision, **kw), (a, b)
    if op == "potri":
        return functools.partial(seeds.potri, **kw), (a,)
    if op == "syevd":
        fn = v1_syevd._syevd_worked if donate else seeds.syevd
        return functools.partial(fn, return_eigenvectors=vectors, **kw), (a,)
    if op == "qr":  # Q is the output aliased to A: the plain program donates A to it
        return functools.partial(v1_qr._qr_plain, T_A=T_A, mesh=mesh, specs=specs,
                                 want_status=False), (a,)
    if op == "least_squares":
        return functools.partial(v1_ls._ls_plain, T_A=T_A, mesh=mesh, specs=specs,
                                 want_status=False, work=donate), (a, b)
    if op == "sygvd":  # the order a donating call hands A and B over in
        b_first = donate and generalized._b_first(mesh, specs, vectors)
        fn = (generalized._run_worked_b_first if b_first else
              generalized._run_worked if donate else generalized._run)
        return (functools.partial(fn, return_eigenvectors=vectors, return_status=False, **kw),
                (b, a) if b_first else (a, b))
    if op == "polar":  # Up takes a donated A's buffer: no work buffer returned
        return functools.partial(v1_polar._polar_plain, T_A=T_A, mesh=mesh, specs=specs,
                                 want_h=want_h, want_status=False), (a,)
    return functools.partial(v1_gesvd._gesvd_plain, T_A=T_A, mesh=mesh, specs=specs, full=full,
                             want_u=want_u, want_vh=want_vh, want_status=False,
                             work=donate), (a,)

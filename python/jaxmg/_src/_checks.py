"""Argument checks shared by the ops, run before anything is traced.

Each check raises ``TypeError`` or ``ValueError`` naming the argument and what
was expected, so that misuse never reaches XLA or the C library.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from jaxmg._src import _compat

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64),
                    np.dtype(np.complex64), np.dtype(np.complex128))


def check_matrix(op: str, a: Any, square: bool = True) -> tuple[int, np.dtype]:
    """``a`` must be a square 2-D array of a supported dtype (any 2-D shape
    when not ``square``: gesvd's); returns (N, its rows, and dtype)."""
    shape = getattr(a, "shape", None)
    dtype = getattr(a, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"jaxmg.{op}: a must be an array, got {type(a).__name__}")
    if len(shape) != 2:
        raise ValueError(f"jaxmg.{op}: a must be 2-D ({'N x N' if square else 'M x N'}), "
                         f"got shape {tuple(shape)}")
    if square and shape[0] != shape[1]:
        raise ValueError(f"jaxmg.{op}: a must be square, got shape {tuple(shape)}")
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"jaxmg.{op}: a has dtype {dtype}; supported are float32, float64, "
            "complex64 and complex128"
        )
    if shape[0] < 1 or shape[1] < 1:
        raise ValueError(f"jaxmg.{op}: a must not be empty, got shape {tuple(shape)}")
    return int(shape[0]), dtype


def check_rhs(op: str, b: Any, n: int, dtype: np.dtype) -> int:
    """``b`` must be (N,) or (N, NRHS) of a's dtype; returns NRHS (1 for 1-D)."""
    shape = getattr(b, "shape", None)
    if shape is None or getattr(b, "dtype", None) is None:
        raise TypeError(f"jaxmg.{op}: b must be an array, got {type(b).__name__}")
    if len(shape) not in (1, 2):
        raise ValueError(f"jaxmg.{op}: b must be (N,) or (N, NRHS), got shape {tuple(shape)}")
    if shape[0] != n:
        raise ValueError(
            f"jaxmg.{op}: b has {shape[0]} rows but a is {n} x {n}; b must have N={n} rows"
        )
    if np.dtype(b.dtype) != dtype:
        raise TypeError(
            f"jaxmg.{op}: b has dtype {np.dtype(b.dtype)} but a has dtype {dtype}; "
            "they must match"
        )
    return int(shape[1]) if len(shape) == 2 else 1


# precision= of the solves (potrs, lu_solve): the exact path, or a
# lower-precision factorization refined to the exact path's accuracy
# (docs/guides/mixed-precision.md).
PRECISIONS = ("exact", "mixed")


def check_precision(op: str, precision: Any) -> str:
    """``precision`` must be "exact" (the default) or "mixed"; returned as
    given."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(
            f"jaxmg.{op}: precision must be \"exact\" (the default) or \"mixed\" (a "
            f"lower-precision factorization refined to the exact path's accuracy), got "
            f"{precision!r}")
    return precision


def check_tile(op: str, T_A: Any) -> int:
    """``T_A`` must be an integer >= 1."""
    if isinstance(T_A, bool) or not isinstance(T_A, (int, np.integer)):
        raise TypeError(f"jaxmg.{op}: T_A must be an int, got {T_A!r}")
    if T_A < 1:
        raise ValueError(f"jaxmg.{op}: T_A must be >= 1, got {T_A}")
    return int(T_A)


def check_mesh(op: str, mesh: Any) -> Mesh:
    if mesh is None:
        raise ValueError(f"jaxmg.{op}: mesh is required (a jax.sharding.Mesh)")
    if not isinstance(mesh, Mesh):
        raise TypeError(f"jaxmg.{op}: mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    return mesh


@functools.lru_cache(maxsize=8)
def _all_devices_mesh(backend: str) -> Mesh:
    return Mesh(np.array(jax.devices(backend)), ("x",))


def resolve_layout(op: str, a: Any, mesh: Any, in_specs: Any) -> tuple[Mesh, Any]:
    """The mesh and in_specs to use when the caller left them out.

    - Both given: as given.
    - A carries a NamedSharding (a jax.Array placed on a mesh): its mesh, and
      its spec if that shards the rows; else A's rows over all the mesh's axes.
    - A is on the host or on one device: a 1-D mesh "x" over all devices of the
      default backend, rows sharded.
    - mesh given alone: a 1-D mesh's axis shards the rows.
    """
    if mesh is not None and in_specs is not None:
        return check_mesh(op, mesh), in_specs
    sharding = _compat.sharding_of(a)
    if mesh is None:
        if sharding is not None:
            mesh = sharding.mesh
        elif _compat.is_tracer(a):
            raise ValueError(
                f"jaxmg.{op}: mesh is required under jax.jit (a traced array does not say "
                "which mesh it lives on); pass mesh= and in_specs="
            )
        else:
            mesh = _all_devices_mesh(jax.default_backend())
    mesh = check_mesh(op, mesh)
    if in_specs is None:
        spec = sharding.spec if sharding is not None and sharding.mesh == mesh else None
        if spec is not None and len(spec) >= 1 and spec[0] is not None and (
                len(spec) < 2 or spec[1] is None):
            in_specs = (PartitionSpec(spec[0], None),)
        else:
            axes = tuple(mesh.axis_names)
            in_specs = (PartitionSpec(axes[0] if len(axes) == 1 else axes, None),)
    return mesh, in_specs


# Tile widths (columns) for default_tile: 1024 to 2048 measured best; no
# default below 128.
_TILE_MAX = 2048
_TILE_GOOD = 1024
_TILE_MIN = 128


def tile_caps() -> tuple[int, ...]:
    """The widest tiles default_tile tries, in turn, until the C library says
    an engine runs the call (_geometry.choose_geometry): 2048 first (measured
    best), then halved down to 128, where an engine's limit says so
    (cusolverMgSyevd: T_A <= 1024)."""
    caps, cap = [], _TILE_MAX
    while cap >= _TILE_MIN:
        caps.append(cap)
        cap //= 2
    return tuple(caps) or (_TILE_MAX,)


def default_tile(n: int, nparts: int, exact: bool = False,
                 tile_max: int | None = None) -> int:
    """T_A when the caller leaves it out, for shards of r = n / nparts rows,
    with tiles of at most ``tile_max`` columns (2048 below; an engine's limit
    may ask for fewer, and the same rules then hold with 1024 for 2048 and
    512 for 1024, and so on).

    - r <= 2048: r, the whole shard (one tile per device).
    - Else the largest divisor of r between 1024 and 2048 (no padding).
    - Else, when padding is allowed (``exact`` false): the fewest tiles of at
      most 2048 columns, as even as possible: k = ceil(r / 2048) tiles of
      ceil(r / k) columns, between 1025 and 2048, padding each shard by
      fewer than k rows (under 0.1% of them).
    - Else (``exact``: pad=False, or syevd_shardmap_ctx's eigenvectors, which
      cannot be padded) the largest divisor of r between 128 and 1024, else
      the smallest divisor above 2048 (r itself when r is prime): never a
      tile below 128 columns, whose many small operations cost more than the
      block-cyclic layout's balance gains.

    Measured (bench/results/2026-11-21-h200x4/table.txt, potrs float64 on 4
    H200s, seconds for T_A = 256 / 1024 / 2048): N=8192: 0.0347 / 0.0163 /
    0.0137; N=16384: 0.1139 / 0.0493 / 0.0458; N=32768: 0.4330 / 0.1853 /
    0.1855; N=65536: 1.9462 / 0.8925 / 0.9024. T_A = 256 is about twice as
    slow as 1024 at every N; 2048 is as fast as 1024 or faster up to
    N=32768 (at N=8192 it is the whole shard, one tile per device, and the
    fastest), and 1% slower at N=65536, where the ceiling of the same
    solver, data already cyclic, is 1% slower too. Tile widths need not be
    multiples of 128: cuSOLVERMg takes any width (not measured: whether
    widths off multiples of 64 cost anything)."""
    top = _TILE_MAX if tile_max is None else tile_max
    good = _TILE_GOOD if top == _TILE_MAX else max(top // 2, 1)
    r = n // nparts
    if r <= top:
        return max(r, 1)
    small = [t for t in range(1, math.isqrt(r) + 1) if r % t == 0]
    divisors = sorted(set(small) | {r // t for t in small})
    largest = max(t for t in divisors if t <= top)
    if largest >= good:
        return largest
    if not exact:
        k = -(-r // top)
        return -(-r // k)
    if largest >= min(_TILE_MIN, top):
        return largest
    return min(t for t in divisors if t > top)


def _spec_entries(op: str, what: str, spec: Any) -> tuple[Any, ...]:
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"jaxmg.{op}: {what} must be a PartitionSpec, got {spec!r}")
    entries = tuple(spec)
    if len(entries) > 2:
        raise ValueError(f"jaxmg.{op}: {what} has {len(entries)} entries for a 2-D array: {spec}")
    return entries + (None,) * (2 - len(entries))


def _axes_of(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    if isinstance(entry, (tuple, list)):
        return tuple(entry)
    return (entry,)


@dataclass(frozen=True)
class RowSharding:
    """How A is split: its rows over ``axes`` (in order), everything else replicated."""

    axes: tuple[str, ...]    # mesh axes the rows are sharded over
    nparts: int              # product of their sizes: the number of shards
    others: tuple[str, ...]  # the remaining mesh axes (independent copies)
    spec: PartitionSpec      # A's spec, normalized to two entries


def check_specs(op: str, mesh: Mesh, in_specs: Any, n_specs: int) -> RowSharding:
    """``in_specs``: A's spec ``P(axis, None)``, then (for potrs) b's, replicated.

    A single spec (or a one-element tuple) is accepted; b's spec then defaults
    to fully replicated, as in the seed README's example.
    """
    if isinstance(in_specs, PartitionSpec):
        in_specs = (in_specs,)
    if not isinstance(in_specs, (tuple, list)) or not 1 <= len(in_specs) <= n_specs:
        want = "(P(axis, None),)" if n_specs == 1 else "(P(axis, None), P(None, None))"
        raise ValueError(f"jaxmg.{op}: in_specs must be {want}, got {in_specs!r}")
    row, col = _spec_entries(op, "in_specs[0] (the spec of a)", in_specs[0])
    axes = _axes_of(row)
    if not axes or col is not None:
        raise ValueError(
            f"jaxmg.{op}: in_specs[0] must shard a's rows and replicate its columns, "
            f"like P('x', None); got {in_specs[0]}"
        )
    for name in axes:
        if name not in mesh.axis_names:
            raise ValueError(
                f"jaxmg.{op}: in_specs[0] names axis {name!r}, which is not an axis of "
                f"the mesh {tuple(mesh.axis_names)}"
            )
    if len(set(axes)) != len(axes):
        raise ValueError(f"jaxmg.{op}: in_specs[0] names an axis twice: {in_specs[0]}")
    if len(in_specs) > 1:
        entries = _spec_entries(op, "in_specs[1] (the spec of b)", in_specs[1])
        if any(e is not None for e in entries):
            raise ValueError(
                f"jaxmg.{op}: in_specs[1] must replicate b on every device, "
                f"P(None, None); got {in_specs[1]}"
            )
    nparts = math.prod(int(mesh.shape[name]) for name in axes)
    others = tuple(name for name in mesh.axis_names if name not in axes)
    return RowSharding(axes, nparts, others, PartitionSpec(row, None))


def check_divisible(op: str, n: int, nparts: int) -> None:
    if n % nparts != 0:
        raise ValueError(
            f"jaxmg.{op}: N={n} is not divisible by the {nparts} devices a's rows "
            "are sharded over"
        )


def check_local_shard(
    op: str, a: Any, manual_axes: dict[str, int], axis_name: Any, square: bool = True
) -> tuple[RowSharding, int, np.dtype]:
    """For the ``*_shardmap_ctx`` forms: ``a`` is this device's (N/devices, N)
    rows of A (any (M/devices, N) when not ``square``: gesvd's), inside a
    shard_map over ``manual_axes``; ``axis_name`` names the axes A's rows are
    sharded over (may be omitted with a single axis). Returns the rows'
    sharding, A's columns N and its dtype."""
    if not manual_axes:
        raise ValueError(f"jaxmg.{op} must be called inside jax.shard_map")
    if axis_name is None:
        if len(manual_axes) != 1:
            raise ValueError(
                f"jaxmg.{op}: the shard_map has axes {tuple(manual_axes)}; pass "
                "axis_name= to say which one a's rows are sharded over"
            )
        axes = tuple(manual_axes)
    else:
        axes = _axes_of(axis_name)
        for name in axes:
            if name not in manual_axes:
                raise ValueError(
                    f"jaxmg.{op}: axis_name {name!r} is not an axis of the "
                    f"shard_map {tuple(manual_axes)}"
                )
    nparts = math.prod(manual_axes[name] for name in axes)
    others = tuple(name for name in manual_axes if name not in axes)
    shape = getattr(a, "shape", None)
    if shape is None or getattr(a, "dtype", None) is None:
        raise TypeError(f"jaxmg.{op}: a must be an array, got {type(a).__name__}")
    if len(shape) != 2 or shape[0] < 1 or shape[1] < 1 or (
            square and shape[1] != shape[0] * nparts):
        want = f"(N/{nparts}, N)" if square else f"(M/{nparts}, N)"
        raise ValueError(
            f"jaxmg.{op}: a must be this device's {want} rows of A, got "
            f"shape {tuple(shape)}"
        )
    dtype = np.dtype(a.dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"jaxmg.{op}: a has dtype {dtype}; supported are float32, float64, "
            "complex64 and complex128"
        )
    spec = PartitionSpec(axes if len(axes) > 1 else axes[0], None)
    return RowSharding(axes, nparts, others, spec), int(shape[1]), dtype

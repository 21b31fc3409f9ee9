"""JAXMg 1.x's call forms beside the seeds' (0.x), under the same names.

The plain forms (``potrs``, ``lu_solve``, ``syevd``, ``potri``) take a
superset of both generations' arguments (``gesvd``, ``polar``, ``qr`` and
``least_squares``, which the seeds lack, take 1.x's alone): the seeds'
positional order ``(a, [b,] T_A, mesh, in_specs, ...)`` is also 1.x's up
to its fifth argument, whose 1.x name ``matrix_specs`` means the seeds'
``in_specs``; 1.x's keyword-only ``donate=`` and ``return_logdet=``
(potrs) are accepted too.
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

The work is the ops' cores' (jaxmg._src.core); this package is conventions
only, like jaxmg._src.api.seeds, whose functions it calls for the seeds'
meanings. Its modules: ``_calls`` (the machinery every op's forms share:
reading arguments, telling the two ctx generations apart, the mesh and
layout at the global level, donation of the plain forms), then one module
per group of ops: ``solve_forms`` (potrs, lu_solve, potri), ``syevd_forms``,
``gesvd_forms``, ``polar_forms`` (QDWH over qr's program, or gesvd's), ``qr_forms``,
``least_squares_forms`` (over qr's program).
"""

from jaxmg._src.api.v1.gesvd_forms import gesvd, gesvd_shardmap_ctx
from jaxmg._src.api.v1.polar_forms import polar, polar_shardmap_ctx
from jaxmg._src.api.v1.solve_forms import (
    lu_solve,
    lu_solve_shardmap_ctx,
    potri,
    potrs,
    potrs_shardmap_ctx,
)
from jaxmg._src.api.v1.least_squares_forms import least_squares, least_squares_shardmap_ctx
from jaxmg._src.api.v1.qr_forms import qr, qr_shardmap_ctx
from jaxmg._src.api.v1.syevd_forms import syevd, syevd_shardmap_ctx

__all__ = [
    "gesvd",
    "gesvd_shardmap_ctx",
    "least_squares",
    "least_squares_shardmap_ctx",
    "lu_solve",
    "lu_solve_shardmap_ctx",
    "polar",
    "polar_shardmap_ctx",
    "potri",
    "potrs",
    "potrs_shardmap_ctx",
    "qr",
    "qr_shardmap_ctx",
    "syevd",
    "syevd_shardmap_ctx",
]

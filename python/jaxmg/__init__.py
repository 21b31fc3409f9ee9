"""jaxmg: multi-GPU dense linear algebra for JAX.

Cholesky solves (``potrs``), SPD inverses (``potri``), symmetric
eigendecompositions (``syevd``), general solves by LU (``lu_solve``),
singular value decompositions (``gesvd``, of a rectangular or square matrix),
the generalized Hermitian-definite eigenproblem A v = λ B v
(``eigh_generalized`` and ``eigh_generalized_shardmap_ctx``, B positive
definite, SciPy's ``eigh(a, b)``), QR decompositions (``qr``), least-squares
solves (``least_squares``) and polar decompositions (``polar``, A = Up H,
by QDWH over qr's QRs, or gesvd's SVD) of a tall or square matrix, of
row-sharded matrices,
computed across the devices of a node (cuSOLVERDn on one GPU, cuSOLVERMg and
jaxmg's tiled factorizations on several, LAPACK on CPU
devices), from inside jitted JAX programs.

One package serves two API generations: the seeds' (JAXMg 0.x) and JAXMg
1.x's call forms (``matrix_specs``, ``donate=``, the ``*_shardmap_ctx`` forms
called at the global level on the whole matrix, as NetKet does); see
``jaxmg._src.api.v1`` for how a call is read, for every op but ``potri``
(whose ``potri_shardmap_ctx`` has the seeds' form only: 1.x has no potri)
and ``gesvd``, ``qr``, ``least_squares`` and ``polar`` (1.x's forms only:
the seeds have none of them).
"""

from jaxmg._src._native import cusolvermp_available
from jaxmg._src.api.generalized import eigh_generalized, eigh_generalized_shardmap_ctx
from jaxmg._src.api.memory import MemoryEstimate, memory_estimate
from jaxmg._src.api.seeds import potri_shardmap_ctx

# The seeds' forms (0.x) and JAXMg 1.x's under the same names: jaxmg._src.api.v1
# says which a call means.
from jaxmg._src.api.v1 import (
    gesvd,
    gesvd_shardmap_ctx,
    least_squares,
    least_squares_shardmap_ctx,
    lu_solve,
    lu_solve_shardmap_ctx,
    polar,
    polar_shardmap_ctx,
    potri,
    potrs,
    potrs_shardmap_ctx,
    qr,
    qr_shardmap_ctx,
    syevd,
    syevd_shardmap_ctx,
)

__version__ = "2.0.0"

__all__ = [
    "potrs",
    "potrs_shardmap_ctx",
    "potri",
    "potri_shardmap_ctx",
    "syevd",
    "syevd_shardmap_ctx",
    "lu_solve",
    "lu_solve_shardmap_ctx",
    "gesvd",
    "gesvd_shardmap_ctx",
    "qr",
    "qr_shardmap_ctx",
    "least_squares",
    "least_squares_shardmap_ctx",
    "eigh_generalized",
    "eigh_generalized_shardmap_ctx",
    "polar",
    "polar_shardmap_ctx",
    "cusolvermp_available",
    "memory_estimate",
    "MemoryEstimate",
]

"""jaxmg: multi-GPU dense linear algebra for JAX.

Cholesky solves (``potrs``), SPD inverses (``potri``) and symmetric
eigendecompositions (``syevd``) of a row-sharded matrix, computed across all
devices of a node by cuSOLVERMg on GPUs (LAPACK on CPU devices), from inside
jitted JAX programs.
"""

from jaxmg._src.api.seeds import (
    potri,
    potri_shardmap_ctx,
    potrs,
    potrs_shardmap_ctx,
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
]

"""jaxmg: multi-GPU dense linear algebra for JAX.

Cholesky solves (``potrs``), SPD inverses (``potri``) and symmetric
eigendecompositions (``syevd``) of a row-sharded matrix, computed across all
devices of a node by cuSOLVERMg on GPUs (LAPACK on CPU devices), from inside
jitted JAX programs.
"""

from jaxmg._src.potri import potri, potri_shardmap_ctx
from jaxmg._src.potrs import potrs, potrs_shardmap_ctx
from jaxmg._src.syevd import syevd, syevd_shardmap_ctx

__version__ = "0.1.0"

__all__ = [
    "potrs",
    "potrs_shardmap_ctx",
    "potri",
    "potri_shardmap_ctx",
    "syevd",
    "syevd_shardmap_ctx",
]

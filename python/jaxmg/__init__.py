"""jaxmg: multi-GPU dense linear algebra for JAX.

Cholesky solves (``potrs``), SPD inverses (``potri``) and symmetric
eigendecompositions (``syevd``) of a row-sharded matrix, computed across all
devices of a node by cuSOLVERMg on GPUs (LAPACK on CPU devices), from inside
jitted JAX programs.

One package serves two API generations: the seeds' (JAXMg 0.x) and JAXMg
1.x's call forms (``matrix_specs``, ``donate=``, the ``*_shardmap_ctx`` forms
called at the global level on the whole matrix, as NetKet does); see
``jaxmg._src.api.v1`` for how a call is read.
"""

from jaxmg._src.api.seeds import potri_shardmap_ctx

# The seeds' forms (0.x) and JAXMg 1.x's under the same names: jaxmg._src.api.v1
# says which a call means.
from jaxmg._src.api.v1 import (
    potri,
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

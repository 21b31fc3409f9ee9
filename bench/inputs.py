"""Random Hermitian positive definite matrices, generated on the devices where
they are used, without a second copy.

Entry (i, j) is a pure function of (seed, min(i, j), max(i, j)): an integer
hash (Wellons' lowbias32, two rounds) mapped to a uniform value in [-1, 1)
(real and imaginary parts from two hashes; the imaginary part changes sign
across the diagonal), and the diagonal is a constant shift. So:

* the matrix is Hermitian by construction, dense and random, not diagonal;
* every device computes its own rows from iotas in one fused elementwise
  kernel: memory is the matrix itself, never a transpose or a temporary
  (this is what lets bench/largest.py fill the GPUs);
* any block can be computed again later (bench/largest.py checks a solve by
  regenerating A blockwise instead of keeping a copy).

Spectrum: the off-diagonal part is a Wigner matrix with E|a_ij|^2 = v (1/3
real, 2/3 complex), whose eigenvalues lie in about [-2 sqrt(v N), 2 sqrt(v N)]
(semicircle law); the diagonal shift 3 sqrt(v N) puts A's eigenvalues in
about [sqrt(v N), 5 sqrt(v N)]: condition number about 5, like the GPU tests'
matrices and the ceiling's.

``general`` makes a non-symmetric matrix for lu_solve the same way, entry
(i, j) a hash of (seed, i, j) mapped to [-1, 1) (both parts, complex), with
no diagonal shift: no entry dominates its column, so partial pivoting swaps
rows as it would on a user's matrix (an HPD matrix, or one with a large
diagonal, would need no swap). Such a matrix is nonsingular with probability
one, with a condition number of order N; LU with partial pivoting is
backward stable on it, which is what the check measures.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

AXIS = "x"

try:  # jax >= 0.6
    _shard_map = jax.shard_map
except AttributeError:  # pragma: no cover - older jax
    from jax.experimental.shard_map import shard_map as _shard_map


def _mix(x: jax.Array) -> jax.Array:
    """lowbias32: a uint32 bijection with good avalanche."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def _uniform(h: jax.Array, real: Any) -> jax.Array:
    """The top 24 bits of h as a uniform value in [-1, 1) (exact in float32)."""
    return (h >> 8).astype(real) * real(2.0 ** -23) - real(1.0)


def shift(n: int, dtype: Any) -> float:
    """The diagonal: 3 sqrt(v N), v = E|a_ij|^2 of the off-diagonal entries."""
    v = 2.0 / 3.0 if jnp.issubdtype(dtype, jnp.complexfloating) else 1.0 / 3.0
    return 3.0 * float(np.sqrt(v * n))


def entries(rows: jax.Array, cols: jax.Array, n: int, dtype: Any,
            seed: jax.Array) -> jax.Array:
    """A[rows, cols] (uint32 index arrays of one shape) for seed (uint32)."""
    dtype = jnp.dtype(dtype)
    real = jnp.finfo(dtype).dtype.type
    lo, hi = jnp.minimum(rows, cols), jnp.maximum(rows, cols)
    h = _mix(_mix(hi ^ _mix(seed)) + lo * jnp.uint32(0x9E3779B9))
    diag = rows == cols
    a = jnp.where(diag, real(shift(n, dtype)), _uniform(h, real))
    if jnp.issubdtype(dtype, jnp.complexfloating):
        im = _uniform(_mix(h ^ jnp.uint32(0x68E31DA4)), real)
        sign = jnp.where(rows < cols, real(1), jnp.where(diag, real(0), real(-1)))
        a = jax.lax.complex(a, sign * im)
    return a.astype(dtype)


def hpd_shard(n: int, dtype: Any, nparts: int, seed: jax.Array) -> jax.Array:
    """This device's rows of A, inside a shard_map over axis AXIS."""
    r = n // nparts
    first = (jax.lax.axis_index(AXIS) * r).astype(jnp.uint32)
    rows = jax.lax.broadcasted_iota(jnp.uint32, (r, n), 0) + first
    cols = jax.lax.broadcasted_iota(jnp.uint32, (r, n), 1)
    return entries(rows, cols, n, dtype, seed)


def general_shard(n: int, dtype: Any, nparts: int, seed: jax.Array,
                  rows: int | None = None) -> jax.Array:
    """This device's rows of the general matrix (module docstring), inside a
    shard_map over axis AXIS: ``rows`` x n (default n x n), for qr's tall A
    too."""
    r = (rows or n) // nparts
    first = (jax.lax.axis_index(AXIS) * r).astype(jnp.uint32)
    rows = jax.lax.broadcasted_iota(jnp.uint32, (r, n), 0) + first
    cols = jax.lax.broadcasted_iota(jnp.uint32, (r, n), 1)
    return general_entries(rows, cols, n, dtype, seed)


def general_entries(rows: jax.Array, cols: jax.Array, n: int, dtype: Any,
                    seed: jax.Array) -> jax.Array:
    """The general matrix's [rows, cols] (uint32 index arrays of one shape)
    for seed (uint32); ``n`` unused (the entries do not depend on it), taken
    for the same signature as ``entries``."""
    del n
    dtype = jnp.dtype(dtype)
    real = jnp.finfo(dtype).dtype.type
    h = _mix(_mix(rows ^ _mix(seed ^ jnp.uint32(0x2545F491))) + cols * jnp.uint32(0x9E3779B9))
    a = _uniform(h, real)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        a = jax.lax.complex(a, _uniform(_mix(h ^ jnp.uint32(0x68E31DA4)), real))
    return a.astype(dtype)


def general(n: int, dtype: Any, mesh: Mesh, seed: int, rows: int | None = None) -> jax.Array:
    """A concrete non-symmetric matrix for lu_solve (module docstring), rows
    sharded over mesh (1-D, axis AXIS); ``rows`` x n where given (qr's M x
    N), else n x n."""
    f = _shard_map(lambda s: general_shard(n, dtype, mesh.size, s, rows), mesh=mesh,
                   in_specs=P(), out_specs=P(AXIS, None))
    return jax.jit(f, out_shardings=NamedSharding(mesh, P(AXIS, None)))(
        jnp.uint32(seed % 2 ** 32))


def hpd_traced(n: int, dtype: Any, mesh: Mesh, seed: jax.Array) -> jax.Array:
    """A, rows sharded over mesh, as a traceable expression: call it inside the
    jitted function that consumes A so that XLA can hand its buffer over."""
    f = _shard_map(lambda s: hpd_shard(n, dtype, mesh.size, s), mesh=mesh,
                   in_specs=P(), out_specs=P(AXIS, None))
    return f(seed)


def hpd(n: int, dtype: Any, mesh: Mesh, seed: int) -> jax.Array:
    """A concrete A, rows sharded over mesh (1-D, axis AXIS)."""
    f = jax.jit(lambda s: hpd_traced(n, dtype, mesh, s),
                out_shardings=NamedSharding(mesh, P(AXIS, None)))
    return f(jnp.uint32(seed % 2 ** 32))


def replicated_normal(key: jax.Array, shape: tuple[int, ...], dtype: Any,
                      mesh: Mesh) -> jax.Array:
    """Standard normal entries (complex: both parts), replicated over mesh."""
    dtype = jnp.dtype(dtype)
    real = jnp.finfo(dtype).dtype

    def make(key: jax.Array) -> jax.Array:
        k1, k2 = jax.random.split(key)
        x = jax.random.normal(k1, shape, real)
        if jnp.issubdtype(dtype, jnp.complexfloating):
            x = jax.lax.complex(x, jax.random.normal(k2, shape, real))
        return x.astype(dtype)

    return jax.jit(make, out_shardings=NamedSharding(mesh, P()))(key)

"""least_squares's core: x = argmin ||A x - b|| for a full-rank m x n A
with m >= n, A's rows sharded over devices, b (m x k) and x (n x k) the
same on every device. Built over qr's FFI program (core/qr.py): Q and R
from the same engines, Qᴴ b as one psum of Q_dᴴ b_d (each device's rows),
then the n x n triangular solve R x = Qᴴ b on every device.

Rank deficiency is a status, never a silent answer: with d_j = |R_jj|,
status is the first k (1-based) with d_k <= max(m, n) * eps * max_j d_j
(eps the dtype's machine epsilon: numpy.linalg.lstsq's default rcond,
read on R's diagonal instead of the singular values), and x is then NaN.
A column in the span of the ones before it gives such a d_k; a matrix
nearly singular without any small d_k (Kahan's) passes, as it would any
test on an unpivoted QR. An A with a NaN or an Inf entry gives status -1
(qr's) and NaN.

``shard``: the primal values (and the work buffer Q); ``local``,
``local_work``: the differentiable cores (x's rule through the normal
equations with R: with r = b - A x, dx = R⁻¹ R⁻ᴴ (dAᴴ r + Aᴴ (db - dA x)));
``over_mesh``: ``local`` over a mesh. No API conventions here."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _ffi_call, _geometry, _manual, _placement
from jaxmg._src.core import qr as qr_core
from jaxmg._src.core._precision import full_precision


def _my_rows(call: _ffi_call.Call, x: jax.Array, rows: int) -> jax.Array:
    """This device's ``rows`` rows of x (m x k, the same on every device)."""
    if call.g.nparts == 1:
        return x
    d = _manual.shard_index(call)
    return jax.lax.dynamic_slice_in_dim(x, d * rows, rows, axis=0)


def rank_status(r: jax.Array, m: int, n: int) -> jax.Array:
    """The first k (1-based) with |R_kk| <= max(m, n) eps max_j |R_jj|, or 0."""
    d = jnp.abs(jnp.diagonal(r))
    eps = jnp.finfo(r.dtype).eps
    small = d <= max(m, n) * eps * jnp.max(d)
    return jnp.where(jnp.any(small), jnp.argmax(small) + 1, 0).astype(jnp.int32)


@full_precision
def shard(call: _ffi_call.Call, a: jax.Array, b: jax.Array) -> tuple[jax.Array, ...]:
    """One shard's part: a its r x n rows of A, b (m x k) the same on
    every device. Returns (q, r, x, status): q this shard's rows of Q (the
    work buffer, in A's), r R whole (n x n), x (n x k, NaN unless status
    is 0), status an int32 scalar the same on every device."""
    rows, n = a.shape
    m = rows * call.g.nparts
    q, r_part, qr_status = qr_core.shard(call, a)
    r = qr_core.full_r(call, r_part)
    y = _manual.psum(jnp.conj(q).T @ _my_rows(call, b, rows), call.axes)
    status = jnp.where(qr_status != 0, qr_status, rank_status(r, m, n))
    x = jax.lax.linalg.triangular_solve(r, y, left_side=True, lower=False)
    x = jnp.where(status != 0, jnp.full_like(x, jnp.nan), x)
    return q, r, x, status


@full_precision
def _tangent(call: _ffi_call.Call, a: jax.Array, b: jax.Array, r: jax.Array, x: jax.Array,
             status: jax.Array, da: jax.Array, db: jax.Array) -> jax.Array:
    """dx = R⁻¹ R⁻ᴴ (dAᴴ res + Aᴴ (db - dA x)), res = b - A x, from this
    device's rows (one psum): the derivative of x = (AᴴA)⁻¹ Aᴴ b, with
    AᴴA = RᴴR. Linear in (da, db): JAX transposes it for reverse mode."""
    rows = a.shape[0]
    b_d, db_d = _my_rows(call, b, rows), _my_rows(call, db, rows)
    res = b_d - a @ x
    z = _manual.psum(jnp.conj(da).T @ res + jnp.conj(a).T @ (db_d - da @ x), call.axes)
    w = jax.lax.linalg.triangular_solve(r, z, left_side=True, lower=False,
                                        transpose_a=True, conjugate_a=True)
    dx = jax.lax.linalg.triangular_solve(r, w, left_side=True, lower=False)
    return jnp.where(status != 0, jnp.full_like(dx, jnp.nan), dx)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local(call: _ffi_call.Call, a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Inside any shard_map: (x, status) for this device's rows a of A and
    b (m x k, the same on every device); differentiable in a and b."""
    return shard(call, a, b)[2:]


@local.defjvp
def _local_jvp(call: _ffi_call.Call, primals: tuple[jax.Array, jax.Array],
               tangents: tuple[jax.Array, jax.Array]):
    (a, b), (da, db) = primals, tangents
    _, r, x, status = shard(call, a, b)
    dx = _tangent(call, a, b, r, x, status, da, db)
    return (x, status), (dx, _compat.zero_tangent(status))


def _b_work(x: jax.Array, m: int) -> jax.Array:
    """b's shape (m x k), x in its first n rows, zeros past them."""
    return jnp.pad(x, ((0, m - x.shape[0]), (0, 0)))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local_work(call: _ffi_call.Call, a: jax.Array,
               b: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``local`` with the work buffers in front: (q, b_work, x, status), q
    this device's rows of Q, in A's buffer (JAXMg 1.x's ctx form hands it
    back as a_work; a donated A's buffer), held constant (zero tangent);
    b_work b's shape, x in its first n rows (zeros past them)."""
    q, _, x, status = shard(call, a, b)
    return q, _b_work(x, b.shape[0]), x, status


@local_work.defjvp
def _local_work_jvp(call: _ffi_call.Call, primals: tuple[jax.Array, jax.Array],
                    tangents: tuple[jax.Array, jax.Array]):
    (a, b), (da, db) = primals, tangents
    q, r, x, status = shard(call, a, b)
    dx = _tangent(call, a, b, r, x, status, da, db)
    m = b.shape[0]
    return ((q, _b_work(x, m), x, status),
            (jnp.zeros_like(q), _b_work(dx, m), dx, _compat.zero_tangent(status)))


@functools.lru_cache(maxsize=256)
def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: _geometry.Geometry,
              work: bool = False) -> Any:
    """``local`` over the whole mesh, jitted: A row-sharded as ``rows``
    says and b (m x k) replicated in, (x, status) out, replicated; with
    ``work``, ``local_work``'s (q, b_work, x, status), q sharded like A (a
    program that returns it lets XLA hand a donated A to the solver),
    b_work replicated (a donated b's buffer)."""
    call = _ffi_call.mesh_call("qr", mesh, rows, g)
    fn = local_work if work else local
    front = (rows.spec, P(None, None)) if work else ()
    return jax.jit(_placement.mapped(functools.partial(fn, call), mesh,
                                     in_specs=(rows.spec, P(None, None)),
                                     out_specs=front + (P(None, None), P())))

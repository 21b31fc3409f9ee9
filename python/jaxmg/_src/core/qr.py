"""qr's core: the reduced QR decomposition A = Q R of an m x n A with
m >= n, A's rows sharded over devices; Q (m x n, orthonormal columns)
row-sharded like A (in A's buffer: the FFI call's output aliased to A), R
(n x n, upper triangular) row-sharded too, ``rr = ceil(n / devices)`` rows
a device (the rows past n, where the devices do not divide n, are zero).

``geometry`` is the call's sizes (qr never pads: see below), ``shard`` one
shard's FFI program, ``local`` the differentiable local core, ``full_r``
R whole on every device from its shards, ``over_mesh`` ``local`` over a
mesh. No API conventions here (see jaxmg._src.core).

The C library reads a shard column-major, which is Aᵀ; csrc/ops/qr.c and
the engines account for that transpose, so that what comes back is A's own
Q (this shard's rows) and R (this shard's rows), with no conjugation here.

Padding. None, as gesvd: the engines that run qr (LAPACK, cuSOLVERDn on
one GPU or on a copy gathered onto one; in the local model cuSOLVERMp,
which chooses its own blocks among the divisors of a shard's rows, and
lapack-local) take any m >= n and no tiles, so that A's rows must divide
into the group (the API says so before tracing) and T_A only has to be a
positive integer.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _ffi_call, _geometry, _manual, _placement


def r_rows(n: int, nparts: int) -> int:
    """R's rows on each device: ceil(n / nparts)."""
    return -(-n // nparts)


def geometry(op: str, m: int, n: int, nparts: int, dtype: np.dtype, T_A: Any,
             platform: str, nodes: int = 1) -> _geometry.Geometry:
    """The call's sizes (_geometry.unpadded_geometry): ``nparts`` shards of
    m / nparts rows, never padded, and the engine the C library's check
    chooses for the M x N A, asked before anything is traced: none is a
    ValueError naming each engine's reason."""
    return _geometry.unpadded_geometry(op, "qr", f"the QR of a {m} x {n} {dtype.name} matrix",
                                       m, n, nparts, dtype, T_A, platform, nodes)


def shard(call: _ffi_call.Call, a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One shard's part: a is this shard's r x n rows of the m x n A.
    Returns (q, r_part, status): q this shard's r rows of Q (in A's buffer
    when XLA can give it), r_part this shard's ceil(n / devices) rows of R
    (zero past R's n rows), status an int32 scalar, the same on every
    shard (0, or -1 for an A with a NaN or an Inf entry: Q and R NaN)."""
    g = call.g
    rows, n = a.shape
    m = rows * g.nparts
    per_shard, same = _ffi_call.result_types(call.axes, a)
    pos = _ffi_call.position(call.axes, call.others, g.nparts)
    results = (jax.ShapeDtypeStruct(a.shape, a.dtype),
               jax.ShapeDtypeStruct((r_rows(n, g.nparts), n), a.dtype),
               jax.ShapeDtypeStruct((), jnp.int32))
    q, r_part, status = _ffi_call.ffi_call("qr", (a, pos), results, call=call,
                                           varying=(per_shard, per_shard, same), m=m)
    return q, _upper(call, r_part, status), status


def _upper(call: _ffi_call.Call, r_part: jax.Array, status: jax.Array) -> jax.Array:
    """This device's rows of R with R's strict lower part zeroed: an engine
    may leave anything there (cuSOLVERDn leaves its reflectors: engine.h,
    the qr routine), an elementwise mask XLA fuses in place. A nonzero
    status keeps R as the ops layer filled it (NaN)."""
    rr, n = r_part.shape
    first = _manual.shard_index(call) * rr if call.g.nparts > 1 else 0
    row = first + jax.lax.broadcasted_iota(jnp.int32, (rr, n), 0)
    col = jax.lax.broadcasted_iota(jnp.int32, (rr, n), 1)
    keep = (row <= col) | (status != 0)
    return jnp.where(keep, r_part, jnp.zeros((), r_part.dtype))


def full_r(call: _ffi_call.Call, r_part: jax.Array) -> jax.Array:
    """R (n x n) whole on every device, from this device's rows of it
    (_manual.rows_everywhere: typed the same on every device under vma
    typing, and so is what is computed from R alone)."""
    return _manual.rows_everywhere(call, r_part)[:r_part.shape[1]]


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local(call: _ffi_call.Call, a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Inside any shard_map: ``(q, r_part, status)`` for this device's rows a
    of A (``shard``'s), differentiable in a (see _local_jvp)."""
    return shard(call, a)


@local.defjvp
def _local_jvp(call: _ffi_call.Call, primals: tuple[jax.Array], tangents: tuple[jax.Array]):
    """QR's rule (as jnp.linalg.qr's, m >= n, R invertible), on this
    device's rows. With R whole on every device and dA R⁻¹ on this device's
    rows (R⁻¹ from the right, a triangular solve):
      C  = Qᴴ dA R⁻¹              (n x n: one psum of Q_dᴴ (dA_d R⁻¹))
      Ω  = L - Lᴴ + i Im(diag C)  (L = tril(C, -1): Ω skew-Hermitian)
      dQ = Q (Ω - C) + dA R⁻¹
      dR = (C - Ω) R              (upper triangular, real diagonal)
    From A = Q R: Qᴴ dA R⁻¹ = Qᴴ dQ + dR R⁻¹, the first skew-Hermitian
    (QᴴQ = I) and the second upper triangular with a real diagonal (R's
    diagonal stays real, as LAPACK's complex Householder QR makes it: JAX's
    choice too), which fixes Ω = Qᴴ dQ.
    The rule is linear in dA: JAX transposes it for reverse mode."""
    (a,), (da,) = primals, tangents
    q, r_part, status = shard(call, a)
    n = a.shape[1]
    r = full_r(call, r_part)
    da_rinv = jax.lax.linalg.triangular_solve(r, da, left_side=False, lower=False)
    c = _manual.psum(jnp.conj(q).T @ da_rinv, call.axes)
    low = jnp.tril(c, -1)
    omega = low - jnp.conj(low).T
    if jnp.iscomplexobj(c):
        omega = omega + jnp.diag(1j * jnp.imag(jnp.diagonal(c))).astype(c.dtype)
    dq = q @ (omega - c) + da_rinv
    dr = (c - omega) @ r
    rr = r_part.shape[0]
    dr = jnp.pad(dr, ((0, rr * call.g.nparts - n), (0, 0)))
    d = _manual.shard_index(call) if call.g.nparts > 1 else 0
    dr_part = jax.lax.dynamic_slice_in_dim(dr, d * rr, rr, axis=0)
    return (q, r_part, status), (dq, dr_part, _compat.zero_tangent(status))


@functools.lru_cache(maxsize=256)
def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: _geometry.Geometry) -> Any:
    """``local`` over the whole mesh, jitted: A row-sharded as ``rows`` says
    in, ``(Q, R, status)`` out, Q and R row-sharded like A (R's rows padded
    with zero rows to ceil(n / devices) a device), status replicated. Q is
    the FFI call's output aliased to A: a program that donates A gives its
    buffer to Q."""
    call = _ffi_call.mesh_call("qr", mesh, rows, g)
    return jax.jit(_placement.mapped(functools.partial(local, call), mesh,
                                     in_specs=(rows.spec,),
                                     out_specs=(rows.spec, rows.spec, P())))

"""polar's core: the polar decomposition A = Up H of an m x n A with
m >= n, A's rows sharded over devices; Up (m x n, orthonormal columns)
row-sharded like A, H (n x n, Hermitian positive semidefinite) row-sharded
like A too (its n rows over the same devices, as gesvd's Vh).

How. Through gesvd's distributed SVD (the same FFI program, so the same
engines: LAPACK on CPU devices, cuSOLVERDn on one GPU, the gather engine on
several): A = U Σ Vᴴ (reduced), Up = U Vᴴ, H = V Σ Vᴴ. Each device forms
its own rows of Up and H while Vh's rows go round the ring of devices
(_factors): no device holds Vh or H whole. This is backward stable whatever
A's condition number: A - Up H and UpᴴUp - I are of the order of the
working precision also for a singular A (then Up, which has orthonormal
columns, is one of the polar factors and H, unique for every A, is still
(AᴴA)^½). H is made exactly Hermitian: (X + Xᴴ) / 2, Xᴴ's rows brought by
one all_to_all. The derivative rule gathers Vh whole on every device.

Where the SVD fails (did not converge, or A has a NaN or an Inf entry: the
status is then nonzero) its outputs are NaN, and so are Up and H.

``geometry`` is gesvd's (the engine check asked for gesvd: where no engine
has an SVD, polar is refused before tracing with that check's reasons),
``local`` the differentiable local core (its own derivative rule, not
gesvd's: see _rule), ``over_mesh`` it over a mesh. No API conventions here.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _manual, _shard
from jaxmg._src.core import gesvd as gesvd_core


def geometry(op: str, m: int, n: int, nparts: int, dtype: np.dtype, T_A: Any,
             platform: str, nodes: int = 1) -> _shard.Geometry:
    """gesvd's geometry of an m x n A (see jaxmg._src.core.gesvd.geometry):
    polar runs where gesvd runs, and only there."""
    return gesvd_core.geometry(op, m, n, nparts, dtype, T_A, platform, nodes)


def _svd(call: _shard.Call, a: jax.Array) -> tuple[jax.Array, ...]:
    """(u, s, vh, status) of this shard's rows a: u this shard's rows of U
    (reduced, r x n), s the n singular values, vh this shard's rows of Vh
    (n / nparts x n)."""
    _, s, u, vh, status = gesvd_core.shard(call, a, False, True, True)
    return u, s, vh, status


def _gathered(call: _shard.Call, vh: jax.Array) -> jax.Array:
    """The whole n x n Vh on every device (the derivative rule's)."""
    return jax.lax.all_gather(vh, call.axis, tiled=True) if call.g.nparts > 1 else vh


def _hermitian_average(call: _shard.Call, x: jax.Array) -> jax.Array:
    """This device's rows of (X + Xᴴ) / 2, from its rows x (q x n) of an
    n x n X: exactly Hermitian. Xᴴ's rows are the conjugates of X's
    columns, which every device holds a block of: one all_to_all of q x q
    blocks brings them (as _manual.hermitian_rows)."""
    nparts = call.g.nparts
    if nparts == 1:
        return (x + jnp.conj(x).T) / 2
    q, n = x.shape
    blocks = x.reshape(q, nparts, q).transpose(1, 0, 2)  # block j: X[R_d, R_j]
    columns = jax.lax.all_to_all(blocks, call.axis, 0, 0, tiled=False).reshape(n, q)
    return (x + jnp.conj(columns).T) / 2


def _hermitian_rows(call: _shard.Call, vh_all: jax.Array, x_vh: jax.Array) -> jax.Array:
    """This device's rows of V X Vᴴ (X n x n, Hermitian up to rounding;
    ``x_vh`` = X Vh; ``vh_all`` the whole Vh), made exactly Hermitian."""
    q = vh_all.shape[0] // call.g.nparts
    columns = vh_all
    if call.g.nparts > 1:
        columns = jax.lax.dynamic_slice_in_dim(vh_all, _manual.shard_index(call) * q, q, axis=1)
    v_rows = jnp.conj(columns).T  # V's rows B_d
    return _hermitian_average(call, v_rows @ x_vh)


def _factors(call: _shard.Call, u: jax.Array, s: jax.Array, vh: jax.Array,
             want_h: bool) -> tuple[jax.Array, Any]:
    """(this device's rows of Up = U Vh, of H = V Σ Vᴴ, or None without
    ``want_h``) from its rows of U and Vh. Vh's rows go round the ring of devices, as in _manual.ring_sum,
    but in a fori_loop, so that XLA keeps one block in flight and one pair
    of sums (measured with XLA:CPU's buffer assignment, square A on 4
    devices: 5.5 shards of temporaries, against 7.8 unrolled and 12 with
    Vh gathered whole): no device holds Vh or H whole. With q = n / nparts
    and B_j = j q ... (j + 1) q - 1 (device j's rows of Vh, and the
    singular values they belong to):
      Up[R_d, :] = sum over j of U[R_d, B_j] Vh[B_j, :]
      H[B_d, :]  = sum over j of Vh[B_j, B_d]ᴴ Σ[B_j] Vh[B_j, :]
    then H made exactly Hermitian (_hermitian_average)."""
    s_c = s.astype(vh.dtype)
    nparts = call.g.nparts
    if nparts == 1:
        h = _hermitian_average(call, (jnp.conj(vh).T * s_c) @ vh) if want_h else None
        return u @ vh, h
    q = vh.shape[0]
    d = _manual.shard_index(call)
    to_previous = [(k, (k - 1) % nparts) for k in range(nparts)]

    def term(j: jax.Array, vh_j: jax.Array) -> tuple[jax.Array, ...]:
        up_part = jax.lax.dynamic_slice_in_dim(u, j * q, q, axis=1) @ vh_j
        if not want_h:
            return (up_part,)
        s_j = jax.lax.dynamic_slice_in_dim(s_c, j * q, q)
        v_j = jnp.conj(jax.lax.dynamic_slice_in_dim(vh_j, d * q, q, axis=1)).T
        return up_part, v_j @ (s_j[:, None] * vh_j)

    def step(i: jax.Array, carry: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        # After i moves, this device holds the rows of Vh of device d + i.
        vh_i, sums = carry[0], carry[1:]
        vh_i = jax.lax.ppermute(vh_i, call.axis, to_previous)
        parts = term((d + i) % nparts, vh_i)
        return (vh_i,) + tuple(x + y for x, y in zip(sums, parts))

    sums = jax.lax.fori_loop(1, nparts, step, (vh,) + term(d, vh))[1:]
    return sums[0], (_hermitian_average(call, sums[1]) if want_h else None)


def _picked(up: jax.Array, h: Any, status: jax.Array,
            want_h: bool) -> tuple[jax.Array, ...]:
    return (up,) + ((h,) if want_h else ()) + (status,)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def local(call: _shard.Call, want_h: bool, a: jax.Array) -> tuple[jax.Array, ...]:
    """Inside any shard_map: ``(up, [h,] status)`` for this device's rows a
    of A: up and h this device's rows of Up and H, status an int32 scalar
    (0, or the SVD's nonzero status, every output then NaN), the same on
    every device. Differentiable in a where A has full column rank (_rule)."""
    u, s, vh, status = _svd(call, a)
    up, h = _factors(call, u, s, vh, want_h)
    return _picked(up, h, status, want_h)


@local.defjvp
def _local_jvp(call: _shard.Call, want_h: bool, primals: tuple[jax.Array],
               tangents: tuple[jax.Array]):
    return _rule(call, want_h, primals[0], tangents[0])


def _rule(call: _shard.Call, want_h: bool, a: jax.Array,
          da: jax.Array) -> tuple[tuple[jax.Array, ...], tuple[Any, ...]]:
    """(primal, tangent) of ``local``. The polar decomposition's own rule,
    smooth wherever A has full column rank (repeated singular values
    included, unlike the SVD's).

    From A = Up H, UpᴴUp = I and H = Hᴴ: with M = Upᴴ dA and Ω = Upᴴ dUp
    (skew-Hermitian), M = Ω H + dH, so H Ω + Ω H = M - Mᴴ and dH = M - Ω H;
    the part of dUp outside Up's span is (I - Up Upᴴ) dA H⁻¹. In V's basis
    (H = V Σ Vᴴ, Up V = U), with P = Vᴴ M V = Uᴴ dA V (one psum of
    U_dᴴ dA_d V, n x n, the same on every device):
      Ω̃ = Vᴴ Ω V,  Ω̃_ij = (P - Pᴴ)_ij / (σ_i + σ_j)
      dUp = U Ω̃ Vᴴ + (dA V - U P) Σ⁻¹ Vᴴ     (the second term for m > n)
      dH  = V (P - Ω̃ Σ) Vᴴ                   (Hermitian: (σ_i P_ij + σ_j conj(P_ji)) / (σ_i + σ_j))
    A zero σ_i + σ_j or σ_i (A without full column rank, where the polar
    factor is not differentiable) contributes zero instead of a division
    by zero. Returns this device's rows of Up, H and their tangents."""
    r, n = a.shape
    m = r * call.g.nparts
    u, s, vh, status = _svd(call, a)
    up, h = _factors(call, u, s, vh, want_h)
    vh_all = _gathered(call, vh)
    dtype = a.dtype
    v = jnp.conj(vh_all).T  # n x n
    dp = _manual.psum((jnp.conj(u).T @ da) @ v, call.axes)  # Uᴴ dA V
    s_c = s.astype(dtype)
    den = s[:, None] + s[None, :]
    inv_den = jnp.where(den == 0, 0, 1 / jnp.where(den == 0, 1, den)).astype(dtype)
    omega = (dp - jnp.conj(dp).T) * inv_den
    dup = u @ (omega @ vh_all)
    if m > n:
        s_inv = jnp.where(s == 0, 0, 1 / jnp.where(s == 0, 1, s)).astype(dtype)
        dup = dup + ((da @ v - u @ dp) * s_inv[None, :]) @ vh_all
    dh = (_hermitian_rows(call, vh_all, (dp - omega * s_c[None, :]) @ vh_all)
          if want_h else None)
    return (_picked(up, h, status, want_h),
            _picked(dup, dh, _compat.zero_tangent(status), want_h))


@functools.lru_cache(maxsize=256)
def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: _shard.Geometry,
              want_h: bool) -> Any:
    """``local`` over the whole mesh, jitted: A row-sharded as ``rows`` says
    in, ``(Up, [H,] status)`` out, Up and H sharded like A, status
    replicated. Up has A's shape, dtype and sharding: a program that
    returns it (this one) lets XLA hand a donated A's buffer to it."""
    call = _shard.mesh_call("gesvd", mesh, rows, g)
    out_specs = _picked(rows.spec, rows.spec, P(), want_h)
    return jax.jit(_shard.mapped(functools.partial(local, call, want_h),
                                 mesh, in_specs=(rows.spec,), out_specs=out_specs))

"""polar's core: the polar decomposition A = Up H of an m x n A with
m >= n, A's rows sharded over devices; Up (m x n, orthonormal columns)
row-sharded like A, H (n x n, Hermitian positive semidefinite) row-sharded
like A too (its n rows over the same devices, as gesvd's Vh).

How. Through gesvd's distributed SVD (the same FFI program, so the same
engines: LAPACK on CPU devices, cuSOLVERDn on one GPU, the gather engine on
several): A = U Σ Vᴴ (reduced), Up = U Vᴴ, H = V Σ Vᴴ. Every device gathers
Vh whole (n x n) once and forms its own rows of Up (its rows of U times
Vh) and of H. This is backward stable whatever A's condition number: A -
Up H and UpᴴUp - I are of the order of the working precision also for
a singular A (then Up, which has orthonormal columns, is one of the polar
factors and H, unique for every A, is still (AᴴA)^½). H is made exactly
Hermitian: (X + Xᴴ) / 2 of the n x n product, then this device's rows.

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
    """(u, s, vh_all, status) of this shard's rows a: u this shard's rows of
    U (reduced), s the n singular values, vh_all the whole n x n Vh
    (gathered on every device)."""
    _, s, u, vh, status = gesvd_core.shard(call, a, False, True, True)
    vh_all = jax.lax.all_gather(vh, call.axis, tiled=True) if call.g.nparts > 1 else vh
    return u, s, vh_all, status


def _hermitian_rows(call: _shard.Call, vh_all: jax.Array, x_vh: jax.Array) -> jax.Array:
    """This device's rows of V X Vᴴ (X n x n, Hermitian up to rounding;
    ``x_vh`` = X Vh), made exactly Hermitian: (Y + Yᴴ) / 2 of Y = Vhᴴ (X Vh),
    then the rows of this device's shard."""
    y = jnp.conj(vh_all).T @ x_vh
    y = (y + jnp.conj(y).T) / 2
    rows = y.shape[0] // call.g.nparts
    if call.g.nparts == 1:
        return y
    return jax.lax.dynamic_slice_in_dim(y, _manual.shard_index(call) * rows, rows, axis=0)


def _factors(call: _shard.Call, u: jax.Array, s: jax.Array,
             vh_all: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(this device's rows of Up = U Vh, of H = V Σ Vᴴ)."""
    up = u @ vh_all
    h = _hermitian_rows(call, vh_all, s.astype(vh_all.dtype)[:, None] * vh_all)
    return up, h


def _picked(up: jax.Array, h: jax.Array, status: jax.Array,
            want_h: bool) -> tuple[jax.Array, ...]:
    return (up,) + ((h,) if want_h else ()) + (status,)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def local(call: _shard.Call, want_h: bool, a: jax.Array) -> tuple[jax.Array, ...]:
    """Inside any shard_map: ``(up, [h,] status)`` for this device's rows a
    of A: up and h this device's rows of Up and H, status an int32 scalar
    (0, or the SVD's nonzero status, every output then NaN), the same on
    every device. Differentiable in a where A has full column rank (_rule)."""
    u, s, vh_all, status = _svd(call, a)
    up, h = _factors(call, u, s, vh_all)
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
    u, s, vh_all, status = _svd(call, a)
    up, h = _factors(call, u, s, vh_all)
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
    dh = _hermitian_rows(call, vh_all, (dp - omega * s_c[None, :]) @ vh_all)
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

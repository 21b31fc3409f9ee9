"""polar's core: the polar decomposition A = Up H of an m x n A with
m >= n, A's rows sharded over devices; Up (m x n, orthonormal columns)
row-sharded like A, H (n x n, Hermitian positive semidefinite) row-sharded
like A too (its n rows over the same devices).

Two methods, one program each (``local``):

- ``"qdwh"`` (the default): the QR-based dynamically weighted Halley
  iteration (Nakatsukasa, Bai and Gygi, SIAM J. Matrix Anal. Appl. 31,
  2010) over jaxmg's own distributed QR (qr's FFI program, on the stacked
  (m + n) x n matrix [√c X; I], each device stacking its rows of √c X on its
  n / devices rows of I) and a Cholesky solve, with JAX's products at full
  precision (_precision.py). See core/_qdwh.py for the iteration and its
  stopping rule. An A that QDWH cannot orthonormalize (numerically rank deficient:
  σ_min(A) below about eps ‖A‖) is detected inside the program: where an
  engine has an SVD the program takes the SVD method instead (lax.cond),
  elsewhere the status is RANK_DEFICIENT and the outputs are NaN.
- ``"svd"``: through gesvd's distributed SVD (the same FFI program, so the
  same engines: LAPACK on CPU devices, cuSOLVERDn on one GPU, the gather
  engine on several; none in the local model): A = U Σ Vᴴ (reduced),
  Up = U Vᴴ, H = V Σ Vᴴ, each device forming its own rows of Up and H while
  Vh's rows go round the ring of devices (_factors).

Both are backward stable: A - Up H and UpᴴUp - I are of the order of the
working precision. H is made exactly Hermitian ((X + Xᴴ) / 2). Where the
status is nonzero (A has a NaN or an Inf entry: -1; the SVD did not
converge, or QDWH met a rank-deficient A with no SVD to fall back on: > 0)
Up and H are NaN.

``geometry`` is the call's sizes and engines (the stacked QR's and, where
an engine has one, the SVD's), ``local`` the differentiable local core (its
own derivative rule, the same for both methods: see _rule), ``over_mesh``
it over a mesh. No API conventions here.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _ffi_call, _geometry, _manual, _native, _placement
from jaxmg._src.core import _qdwh
from jaxmg._src.core import gesvd as gesvd_core
from jaxmg._src.core import qr as qr_core
from jaxmg._src.core._precision import full_precision

METHODS = ("qdwh", "svd")

# The status of a numerically rank-deficient A where no engine has an SVD
# to fall back on (the local model): Up and H are then NaN.
RANK_DEFICIENT = 1



@dataclasses.dataclass(frozen=True)
class Geometry:
    """polar's sizes and engines: ``qr`` the geometry of QDWH's QRs of the
    stacked (m + n) x n matrix (None for the SVD method), ``svd`` gesvd's of
    A (None where the method is QDWH and no engine has an SVD)."""

    method: str
    qr: _geometry.Geometry | None
    svd: _geometry.Geometry | None

    @property
    def main(self) -> _geometry.Geometry:
        """The geometry of the op that does the work (the QR's for QDWH)."""
        g = self.qr if self.method == "qdwh" else self.svd
        assert g is not None
        return g

    @property
    def engine(self) -> str:
        return self.main.engine

    @property
    def tile(self) -> int:
        return self.main.tile

    @property
    def padded(self) -> bool:
        return False


def geometry(op: str, m: int, n: int, nparts: int, dtype: np.dtype, T_A: Any,
             platform: str, nodes: int = 1, method: str = "qdwh") -> Geometry:
    """polar's geometry of an m x n A, the engines asked before anything is
    traced. ``"svd"``: gesvd's (no engine with an SVD is gesvd's
    ValueError). ``"qdwh"``: qr's for the stacked (m + n) x n matrix (no
    engine with a QR is a ValueError naming each engine's reason), and
    gesvd's where an engine has an SVD (the rank-deficient fallback)."""
    if method == "svd":
        return Geometry(method, None, gesvd_core.geometry(op, m, n, nparts, dtype, T_A,
                                                           platform, nodes))
    try:
        g_qr = qr_core.geometry(op, m + n, n, nparts, dtype, T_A, platform, nodes)
    except ValueError as e:
        raise ValueError(f"{e} (polar's QDWH iteration runs QRs of the (M+N) x N matrix "
                         f"[√c X; I] of a {m} x {n} A)") from None
    tile = m // nparts if T_A is None else min(_checks.check_tile(op, T_A), m // nparts)
    choice = _native.engine_choice(platform, "gesvd", nparts, dtype.name, n, tile,
                                   nodes=nodes)
    g_svd = None
    if choice is None or choice.ok:
        g_svd = gesvd_core.geometry(op, m, n, nparts, dtype, T_A, platform, nodes)
    return Geometry(method, g_qr, g_svd)


@dataclasses.dataclass(frozen=True)
class Calls:
    """The Calls of one polar program: ``qr`` QDWH's stacked QR's (None for
    the SVD method), ``svd`` gesvd's (None where no engine has an SVD).
    Hashable (a custom_jvp's non-differentiable argument)."""

    qr: _ffi_call.Call | None
    svd: _ffi_call.Call | None

    @property
    def main(self) -> _ffi_call.Call:
        """Either Call: both have the same axes and devices."""
        call = self.qr or self.svd
        assert call is not None
        return call


# --- the SVD method -------------------------------------------------------------------------


def _svd(call: _ffi_call.Call, a: jax.Array) -> tuple[jax.Array, ...]:
    """(u, s, vh, status) of this shard's rows a: u this shard's rows of U
    (reduced, r x n), s the n singular values, vh this shard's rows of Vh
    (n / nparts x n)."""
    _, s, u, vh, status = gesvd_core.shard(call, a, False, True, True)
    return u, s, vh, status


def _hermitian_average(call: _ffi_call.Call, x: jax.Array) -> jax.Array:
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


def _hermitian_rows(call: _ffi_call.Call, vh_all: jax.Array, x_vh: jax.Array) -> jax.Array:
    """This device's rows of V X Vᴴ (X n x n, Hermitian up to rounding;
    ``x_vh`` = X Vh; ``vh_all`` the whole Vh), made exactly Hermitian."""
    q = vh_all.shape[0] // call.g.nparts
    columns = vh_all
    if call.g.nparts > 1:
        columns = jax.lax.dynamic_slice_in_dim(vh_all, _manual.shard_index(call) * q, q, axis=1)
    v_rows = jnp.conj(columns).T  # V's rows B_d
    return _hermitian_average(call, v_rows @ x_vh)


@full_precision
def _factors(call: _ffi_call.Call, u: jax.Array, s: jax.Array, vh: jax.Array,
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


def _by_svd(call: _ffi_call.Call, a: jax.Array, want_h: bool) -> tuple[jax.Array, Any, jax.Array]:
    """(up, h or None, status) by the SVD method."""
    u, s, vh, status = _svd(call, a)
    up, h = _factors(call, u, s, vh, want_h)
    return up, h, status


def _nan_where_failed(out: tuple[Any, ...], status: jax.Array) -> tuple[Any, ...]:
    return tuple(None if x is None else jnp.where(status == 0, x, jnp.nan).astype(x.dtype)
                 for x in out)


def _primal(calls: Calls, want_h: bool, a: jax.Array) -> tuple[jax.Array, Any, jax.Array]:
    """(up, h or None, status) by the calls' method: QDWH where ``calls.qr``
    is given, falling back on the SVD (``calls.svd``, where an engine has
    one) for a rank-deficient A; else the SVD."""
    if calls.qr is None:
        return _by_svd(calls.svd, a, want_h)
    up, h, status, deficient = _qdwh.qdwh(calls.qr, a, want_h)
    if calls.svd is None:
        status = jnp.where(deficient, RANK_DEFICIENT, status).astype(jnp.int32)
        up, h = _nan_where_failed((up, h), status)
        return up, h, status
    up, h = _nan_where_failed((up, h), status)
    return jax.lax.cond(deficient, lambda: _by_svd(calls.svd, a, want_h),
                        lambda: (up, h, status))


def _picked(up: jax.Array, h: Any, status: jax.Array,
            want_h: bool) -> tuple[jax.Array, ...]:
    return (up,) + ((h,) if want_h else ()) + (status,)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def local(calls: Calls, want_h: bool, a: jax.Array) -> tuple[jax.Array, ...]:
    """Inside any shard_map: ``(up, [h,] status)`` for this device's rows a
    of A: up and h this device's rows of Up and H, status an int32 scalar
    (0, or nonzero with every output NaN), the same on every device.
    Differentiable in a where A has full column rank (_rule)."""
    up, h, status = _primal(calls, want_h, a)
    return _picked(up, h, status, want_h)


@local.defjvp
def _local_jvp(calls: Calls, want_h: bool, primals: tuple[jax.Array],
               tangents: tuple[jax.Array]):
    return _rule(calls, want_h, primals[0], tangents[0])


@full_precision
def _rule(calls: Calls, want_h: bool, a: jax.Array,
          da: jax.Array) -> tuple[tuple[jax.Array, ...], tuple[Any, ...]]:
    """(primal, tangent) of ``local``. The polar decomposition's own rule,
    smooth wherever A has full column rank (repeated singular values
    included, unlike the SVD's), from Up and H whatever the method.

    From A = Up H, UpᴴUp = I and H = Hᴴ: with M = Upᴴ dA and Ω = Upᴴ dUp
    (skew-Hermitian), M = Ω H + dH, so H Ω + Ω H = M - Mᴴ and dH = M - Ω H;
    the part of dUp outside Up's span is (I - Up Upᴴ) dA H⁻¹. In H's
    eigenbasis (H = V Σ Vᴴ, from H gathered whole on every device; U = Up V
    this device's rows), with P = Vᴴ M V = Uᴴ dA V (one psum of
    U_dᴴ dA_d V, n x n, the same on every device):
      Ω̃ = Vᴴ Ω V,  Ω̃_ij = (P - Pᴴ)_ij / (σ_i + σ_j)
      dUp = U Ω̃ Vᴴ + (dA V - U P) Σ⁻¹ Vᴴ     (the second term for m > n)
      dH  = V (P - Ω̃ Σ) Vᴴ                   (Hermitian: (σ_i P_ij + σ_j conj(P_ji)) / (σ_i + σ_j))
    A zero σ_i + σ_j or σ_i (A without full column rank, where the polar
    factor is not differentiable) contributes zero instead of a division
    by zero. Returns this device's rows of Up, H and their tangents."""
    call = calls.main
    r, n = a.shape
    m = r * call.g.nparts
    up, h, status = _primal(calls, True, a)
    h_all = _manual.rows_everywhere(call, h)
    w, v = jnp.linalg.eigh(h_all)
    s = jnp.maximum(w, 0)
    u = up @ v
    vh_all = jnp.conj(v).T
    dtype = a.dtype
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
    return (_picked(up, h if want_h else None, status, want_h),
            _picked(dup, dh, _compat.zero_tangent(status), want_h))


def mesh_calls(mesh: Mesh, rows: _checks.RowSharding, g: Geometry) -> Calls:
    """The Calls of a program over the whole mesh."""
    return Calls(None if g.qr is None else _ffi_call.mesh_call("qr", mesh, rows, g.qr),
                 None if g.svd is None else _ffi_call.mesh_call("gesvd", mesh, rows, g.svd))


@functools.lru_cache(maxsize=256)
def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: Geometry, want_h: bool) -> Any:
    """``local`` over the whole mesh, jitted: A row-sharded as ``rows`` says
    in, ``(Up, [H,] status)`` out, Up and H sharded like A, status
    replicated. Up has A's shape, dtype and sharding: a program that
    returns it (this one) lets XLA hand a donated A's buffer to it."""
    calls = mesh_calls(mesh, rows, g)
    out_specs = _picked(rows.spec, rows.spec, P(), want_h)
    return jax.jit(_placement.mapped(functools.partial(local, calls, want_h),
                                     mesh, in_specs=(rows.spec,), out_specs=out_specs))

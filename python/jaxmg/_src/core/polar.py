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
  precision (_precision.py). See _qdwh for the iteration and its stopping
  rule. An A that QDWH cannot orthonormalize (numerically rank deficient:
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
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _manual, _native, _shard
from jaxmg._src.core import gesvd as gesvd_core
from jaxmg._src.core import qr as qr_core
from jaxmg._src.core._precision import full_precision

METHODS = ("qdwh", "svd")

# The status of a numerically rank-deficient A where no engine has an SVD
# to fall back on (the local model): Up and H are then NaN.
RANK_DEFICIENT = 1

# QDWH's QR-based step while c_k exceeds this, its Cholesky-based one after
# (Nakatsukasa and Higham 2012: the Cholesky-based step is then stable, Z's
# condition number being at most 1 + c_k).
CHOLESKY_CUTOFF = 100.0

# Halley steps (a, b, c) = (3, 1, 3) after the schedule, at most, for an A
# whose smallest singular values lie below the schedule's lower bound.
MAX_EXTRA_STEPS = 8


@dataclasses.dataclass(frozen=True)
class Geometry:
    """polar's sizes and engines: ``qr`` the geometry of QDWH's QRs of the
    stacked (m + n) x n matrix (None for the SVD method), ``svd`` gesvd's of
    A (None where the method is QDWH and no engine has an SVD)."""

    method: str
    qr: _shard.Geometry | None
    svd: _shard.Geometry | None

    @property
    def main(self) -> _shard.Geometry:
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
    verdict = _native.engine_check(platform, "gesvd", nparts, dtype.name, n, tile,
                                   nodes=nodes)
    g_svd = None
    if verdict is None or verdict[0]:
        g_svd = gesvd_core.geometry(op, m, n, nparts, dtype, T_A, platform, nodes)
    return Geometry(method, g_qr, g_svd)


@dataclasses.dataclass(frozen=True)
class Calls:
    """The Calls of one polar program: ``qr`` QDWH's stacked QR's (None for
    the SVD method), ``svd`` gesvd's (None where no engine has an SVD).
    Hashable (a custom_jvp's non-differentiable argument)."""

    qr: _shard.Call | None
    svd: _shard.Call | None

    @property
    def main(self) -> _shard.Call:
        """Either Call: both have the same axes and devices."""
        call = self.qr or self.svd
        assert call is not None
        return call


# --- the SVD method -------------------------------------------------------------------------


def _svd(call: _shard.Call, a: jax.Array) -> tuple[jax.Array, ...]:
    """(u, s, vh, status) of this shard's rows a: u this shard's rows of U
    (reduced, r x n), s the n singular values, vh this shard's rows of Vh
    (n / nparts x n)."""
    _, s, u, vh, status = gesvd_core.shard(call, a, False, True, True)
    return u, s, vh, status


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


@full_precision
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


def _by_svd(call: _shard.Call, a: jax.Array, want_h: bool) -> tuple[jax.Array, Any, jax.Array]:
    """(up, h or None, status) by the SVD method."""
    u, s, vh, status = _svd(call, a)
    up, h = _factors(call, u, s, vh, want_h)
    return up, h, status


# --- the QDWH method ------------------------------------------------------------------------


def schedule(eps: float, l0: float) -> list[tuple[float, float, float]]:
    """QDWH's weights (a_k, b_k, c_k), k = 0, 1, ..., for X_0's singular
    values in [l0, 1] (NBG 2010, eq. 3.3 to 3.5): with
    d = (4 (1 - l²) / l⁴)^⅓,
      a = √(1 + d) + ½ √(8 - 4 d + 8 (2 - l²) / (l² √(1 + d))),
      b = (a - 1)² / 4,  c = a + b - 1,
    and the lower bound's next value l ← l (a + b l²) / (1 + c l²), until
    1 - l <= 10 eps (every singular value of X_k is then within 10 eps of
    1, in exact arithmetic)."""
    out = []
    lo = l0
    while 1 - lo > 10 * eps:
        l2 = lo * lo
        d = (4 * (1 - l2) / (l2 * l2)) ** (1 / 3)
        sd = math.sqrt(1 + d)
        a = sd + 0.5 * math.sqrt(8 - 4 * d + 8 * (2 - l2) / (l2 * sd))
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        out.append((a, b, c))
        lo = min(lo * (a + b * l2) / (1 + c * l2), 1.0)
    return out


def _norm(call: _shard.Call, x: jax.Array) -> jax.Array:
    """‖X‖_F from this device's rows x of X: the same on every device."""
    return jnp.sqrt(_manual.psum(jnp.sum(jnp.real(x * jnp.conj(x))), call.axes))


def _gram(call: _shard.Call, x: jax.Array) -> jax.Array:
    """XᴴX (n x n) on every device, from this device's rows x of X."""
    return _manual.psum(jnp.conj(x).T @ x, call.axes)


def _qr_step(call: _shard.Call, x: jax.Array, abc: jax.Array) -> jax.Array:
    """X ← (b/c) X + (a - b/c)/√c Q1 Q2ᴴ, Q = [Q1; Q2] the QR's Q of
    [√c X; I] (NBG 2010, eq. 4.8), by jaxmg's QR (qr's FFI program).

    The rows' order. The stacked matrix is graded (‖√c X‖ up to 1e10 times
    ‖I‖'s rows in float64), and Householder QR is accurate row by row only
    where its first n rows, those its reflections pivot on, are large
    ones (Cox and Higham 1998: rows sorted by decreasing norm; measured
    here: with a row of I among the first n, ‖A - Up H‖ grew to 1e-10 of
    ‖A‖ for κ = 1e8). Where each device holds at least n rows of A, each
    stacks its rows of √c X on its n / devices rows of I (a row
    permutation of [√c X; I] whose first n rows are X's: its Q is Q's rows
    permuted alike, each device getting its rows of Q1 and of Q2). Else the
    stacked matrix is handed to the QR in its own order, each device
    taking its (m + n) / devices rows of it from X gathered whole, and Q
    is gathered whole to read its rows of Q1. Q2 (n x n) is brought whole
    to every device."""
    a, b, c = (abc[i] for i in range(3))
    sqrt_c = jnp.sqrt(c)
    e = b / c
    r, n = x.shape
    nparts = call.g.nparts
    q_rows = n // nparts
    d = _manual.shard_index(call) if nparts > 1 else 0
    scaled = sqrt_c.astype(x.dtype) * x
    if r >= n or nparts == 1:
        eye_rows = (jnp.arange(n)[None, :] == d * q_rows + jnp.arange(q_rows)[:, None])
        q, _, _ = qr_core.shard(call, jnp.concatenate([scaled, eye_rows.astype(x.dtype)]))
        q1, q2 = q[:r], _manual.rows_everywhere(call, q[r:])
    else:
        stacked = jnp.concatenate([_manual.rows_everywhere(call, scaled),
                                   jnp.eye(n, dtype=x.dtype)])
        mine = _compat.pvary(jax.lax.dynamic_slice_in_dim(stacked, d * (r + q_rows),
                                                          r + q_rows),
                             call.axes)
        q, _, _ = qr_core.shard(call, mine)
        q_all = _manual.rows_everywhere(call, q)
        q1, q2 = jax.lax.dynamic_slice_in_dim(q_all, d * r, r), q_all[r * nparts:]
    return e.astype(x.dtype) * x + ((a - e) / sqrt_c).astype(x.dtype) * (q1 @ jnp.conj(q2).T)


def _cholesky_step(call: _shard.Call, x: jax.Array, abc: jax.Array) -> jax.Array:
    """X ← (b/c) X + (a - b/c) X Z⁻¹, Z = I + c XᴴX (NBG 2010, eq. 4.9 in
    Nakatsukasa and Higham's Cholesky form): Z = W Wᴴ (Cholesky, n x n, on
    every device), then this device's rows of X W⁻ᴴ W⁻¹ by two triangular
    solves."""
    a, b, c = (abc[i] for i in range(3))
    e = b / c
    n = x.shape[1]
    z = jnp.eye(n, dtype=x.dtype) + c.astype(x.dtype) * _gram(call, x)
    w = jax.lax.linalg.cholesky(z, symmetrize_input=False)
    t = jax.lax.linalg.triangular_solve(w, x, left_side=False, lower=True,
                                        transpose_a=True, conjugate_a=True)
    t = jax.lax.linalg.triangular_solve(w, t, left_side=False, lower=True)
    return e.astype(x.dtype) * x + (a - e).astype(x.dtype) * t


@full_precision
def _qdwh(call: _shard.Call, a: jax.Array,
          want_h: bool) -> tuple[jax.Array, Any, jax.Array, jax.Array]:
    """(up, h or None, status, deficient) by QDWH on this device's rows a.

    The iteration (NBG 2010): X_0 = A / ‖A‖_F (‖A‖_F >= ‖A‖_2, so X_0's
    singular values are at most 1), then the static schedule of weights
    for the lower bound l_0 = eps / 10 of X_0's smallest singular value
    (``schedule``: it covers ‖A‖_F / σ_min(A) up to 10 / eps, a condition
    number of 1/eps with a margin; float64: 2 QR-based and 4
    Cholesky-based steps, float32: 2 and 2), the QR-based step while
    c_k > 100, the Cholesky-based one after. Stopping rule: after the
    schedule, Halley's steps ((a, b, c) = (3, 1, 3), Cholesky-based) while
    ‖X_k - X_{k-1}‖_F > (5 eps)^⅓ (NBG's test: the iteration converges
    cubically, so X_k is then accurate to about 5 eps), at most
    MAX_EXTRA_STEPS of them: singular values below the schedule's bound
    are brought to 1 there. Then one Newton-Schulz step, Up = X (3 I - XᴴX)
    / 2, and H = Upᴴ A made exactly Hermitian.

    ``deficient``: ‖XᴴX - I‖_F > 4 √eps before that Newton-Schulz step
    (which takes a deviation e of a singular value from 1 to about 1.5 e²,
    below working precision only from e of order √eps): QDWH left a
    singular value away from 1, as it does for a singular A (it maps a zero
    singular value to zero, and ones far below eps ‖A‖ move too little to
    reach 1). The same on every device. status: 0, or -1 for an A with a
    NaN or an Inf entry."""
    dtype = a.dtype
    n = a.shape[1]
    nparts = call.g.nparts
    eps = float(jnp.finfo(dtype).eps)
    finite = _manual.psum(jnp.all(jnp.isfinite(a)).astype(jnp.int32), call.axes) == nparts
    fro = _norm(call, a)
    scale = jnp.where(finite & (fro > 0), fro, 1)
    x = jnp.where(finite, a / scale.astype(dtype), 0)
    steps = schedule(eps, eps / 10)
    real = jnp.finfo(dtype).dtype
    qr_steps = np.asarray([s for s in steps if s[2] > CHOLESKY_CUTOFF], np.float64)
    chol_steps = np.asarray([s for s in steps if s[2] <= CHOLESKY_CUTOFF], np.float64)
    if len(qr_steps):
        coefs = jnp.asarray(qr_steps, real)
        x = jax.lax.fori_loop(0, len(qr_steps), lambda k, x: _qr_step(call, x, coefs[k]), x)

    def chol(x: jax.Array, abc: jax.Array) -> tuple[jax.Array, jax.Array]:
        new = _cholesky_step(call, x, abc)
        return new, _norm(call, new - x)

    coefs = jnp.asarray(chol_steps, real)
    x, change = jax.lax.fori_loop(0, len(chol_steps), lambda k, s: chol(s[0], coefs[k]),
                                  (x, jnp.asarray(np.inf, real)))
    tol = (5 * eps) ** (1 / 3)
    halley = jnp.asarray((3.0, 1.0, 3.0), real)

    def more(state: tuple[jax.Array, ...]) -> jax.Array:
        k, _, change = state
        return (change > tol) & (k < MAX_EXTRA_STEPS)

    def halley_step(state: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        k, x, _ = state
        return (k + 1,) + chol(x, halley)

    _, x, _ = jax.lax.while_loop(more, halley_step, (jnp.asarray(0), x, change))
    eye = jnp.eye(n, dtype=dtype)
    gram = _gram(call, x)
    deficient = finite & (jnp.linalg.norm(gram - eye) > 4 * math.sqrt(eps))
    up = x @ (1.5 * eye - 0.5 * gram)
    h = None
    if want_h:
        whole = _manual.psum(jnp.conj(up).T @ a, call.axes)
        whole = (whole + jnp.conj(whole).T) / 2
        q = n // nparts
        h = whole if nparts == 1 else jax.lax.dynamic_slice_in_dim(
            whole, _manual.shard_index(call) * q, q, axis=0)
    status = jnp.where(finite, 0, -1).astype(jnp.int32)
    return up, h, status, deficient


def _nan_where_failed(out: tuple[Any, ...], status: jax.Array) -> tuple[Any, ...]:
    return tuple(None if x is None else jnp.where(status == 0, x, jnp.nan).astype(x.dtype)
                 for x in out)


def _primal(calls: Calls, want_h: bool, a: jax.Array) -> tuple[jax.Array, Any, jax.Array]:
    """(up, h or None, status) by the calls' method: QDWH where ``calls.qr``
    is given, falling back on the SVD (``calls.svd``, where an engine has
    one) for a rank-deficient A; else the SVD."""
    if calls.qr is None:
        return _by_svd(calls.svd, a, want_h)
    up, h, status, deficient = _qdwh(calls.qr, a, want_h)
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
    return Calls(None if g.qr is None else _shard.mesh_call("qr", mesh, rows, g.qr),
                 None if g.svd is None else _shard.mesh_call("gesvd", mesh, rows, g.svd))


@functools.lru_cache(maxsize=256)
def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: Geometry, want_h: bool) -> Any:
    """``local`` over the whole mesh, jitted: A row-sharded as ``rows`` says
    in, ``(Up, [H,] status)`` out, Up and H sharded like A, status
    replicated. Up has A's shape, dtype and sharding: a program that
    returns it (this one) lets XLA hand a donated A's buffer to it."""
    calls = mesh_calls(mesh, rows, g)
    out_specs = _picked(rows.spec, rows.spec, P(), want_h)
    return jax.jit(_shard.mapped(functools.partial(local, calls, want_h),
                                 mesh, in_specs=(rows.spec,), out_specs=out_specs))

"""polar's QDWH iteration on this device's rows of A (``qdwh``): the
QR-based dynamically weighted Halley iteration (Nakatsukasa, Bai and
Gygi, SIAM J. Matrix Anal. Appl. 31, 2010) over jaxmg's own distributed QR
(qr's FFI program) and a Cholesky solve, in its named steps: finiteness,
scaling, the schedule's QR-based then Cholesky-based steps, Halley's steps
until converged, the rank test, one Newton-Schulz step, and H. The
program around it, the SVD method and the derivative rule are polar.py's.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxmg._src import _compat, _ffi_call, _manual
from jaxmg._src.core import qr as qr_core
from jaxmg._src.core._precision import full_precision

# QDWH's QR-based step while c_k exceeds this, its Cholesky-based one after
# (Nakatsukasa and Higham 2012: the Cholesky-based step is then stable, Z's
# condition number being at most 1 + c_k).
CHOLESKY_CUTOFF = 100.0

# Halley steps (a, b, c) = (3, 1, 3) after the schedule, at most, for an A
# whose smallest singular values lie below the schedule's lower bound.
MAX_EXTRA_STEPS = 8


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


def _norm(call: _ffi_call.Call, x: jax.Array) -> jax.Array:
    """‖X‖_F from this device's rows x of X: the same on every device."""
    return jnp.sqrt(_manual.psum(jnp.sum(jnp.real(x * jnp.conj(x))), call.axes))


def _gram(call: _ffi_call.Call, x: jax.Array) -> jax.Array:
    """XᴴX (n x n) on every device, from this device's rows x of X."""
    return _manual.psum(jnp.conj(x).T @ x, call.axes)


def _qr_step(call: _ffi_call.Call, x: jax.Array, abc: jax.Array) -> jax.Array:
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


def _cholesky_step(call: _ffi_call.Call, x: jax.Array, abc: jax.Array) -> jax.Array:
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
def qdwh(call: _ffi_call.Call, a: jax.Array,
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
    eps = float(jnp.finfo(a.dtype).eps)
    finite = _all_finite(call, a)
    x = _scaled(call, a, finite)
    steps = schedule(eps, eps / 10)
    x = _qr_phase(call, x, [s for s in steps if s[2] > CHOLESKY_CUTOFF])
    x, change = _cholesky_phase(call, x, [s for s in steps if s[2] <= CHOLESKY_CUTOFF])
    x = _halley_until_converged(call, x, change, eps)
    gram = _gram(call, x)
    deficient = finite & _far_from_orthonormal(gram, eps)
    up = _newton_schulz(x, gram)
    h = _hermitian_factor(call, up, a) if want_h else None
    status = jnp.where(finite, 0, -1).astype(jnp.int32)
    return up, h, status, deficient


def _all_finite(call: _ffi_call.Call, a: jax.Array) -> jax.Array:
    """Whether every entry of A is finite, the same on every device."""
    count = _manual.psum(jnp.all(jnp.isfinite(a)).astype(jnp.int32), call.axes)
    return count == call.g.nparts


def _scaled(call: _ffi_call.Call, a: jax.Array, finite: jax.Array) -> jax.Array:
    """X_0 = A / ‖A‖_F (singular values at most 1); zero for an A that is not
    finite, A itself for a zero A."""
    fro = _norm(call, a)
    scale = jnp.where(finite & (fro > 0), fro, 1)
    return jnp.where(finite, a / scale.astype(a.dtype), 0)


def _qr_phase(call: _ffi_call.Call, x: jax.Array,
              steps: list[tuple[float, float, float]]) -> jax.Array:
    """The schedule's QR-based steps (those with c_k > CHOLESKY_CUTOFF)."""
    if not steps:
        return x
    coefs = jnp.asarray(np.asarray(steps, np.float64), jnp.finfo(x.dtype).dtype)
    return jax.lax.fori_loop(0, len(steps), lambda k, x: _qr_step(call, x, coefs[k]), x)


def _cholesky_and_change(call: _ffi_call.Call, x: jax.Array,
                         abc: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One Cholesky-based step and ‖X_k - X_{k-1}‖_F."""
    new = _cholesky_step(call, x, abc)
    return new, _norm(call, new - x)


def _cholesky_phase(call: _ffi_call.Call, x: jax.Array,
                    steps: list[tuple[float, float, float]]) -> tuple[jax.Array, jax.Array]:
    """The schedule's Cholesky-based steps: X and the last step's change
    (infinite where there were none)."""
    real = jnp.finfo(x.dtype).dtype
    coefs = jnp.asarray(np.asarray(steps, np.float64), real)
    return jax.lax.fori_loop(0, len(steps),
                             lambda k, s: _cholesky_and_change(call, s[0], coefs[k]),
                             (x, jnp.asarray(np.inf, real)))


def _halley_until_converged(call: _ffi_call.Call, x: jax.Array, change: jax.Array,
                            eps: float) -> jax.Array:
    """Halley's steps ((a, b, c) = (3, 1, 3), Cholesky-based) while
    ‖X_k - X_{k-1}‖_F > (5 eps)^⅓, at most MAX_EXTRA_STEPS of them."""
    real = jnp.finfo(x.dtype).dtype
    tol = (5 * eps) ** (1 / 3)
    halley = jnp.asarray((3.0, 1.0, 3.0), real)

    def more(state: tuple[jax.Array, ...]) -> jax.Array:
        k, _, change = state
        return (change > tol) & (k < MAX_EXTRA_STEPS)

    def step(state: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        k, x, _ = state
        return (k + 1,) + _cholesky_and_change(call, x, halley)

    _, x, _ = jax.lax.while_loop(more, step, (jnp.asarray(0), x, change))
    return x


def _far_from_orthonormal(gram: jax.Array, eps: float) -> jax.Array:
    """The rank test: ‖XᴴX - I‖_F > 4 √eps (see _qdwh)."""
    eye = jnp.eye(gram.shape[0], dtype=gram.dtype)
    return jnp.linalg.norm(gram - eye) > 4 * math.sqrt(eps)


def _newton_schulz(x: jax.Array, gram: jax.Array) -> jax.Array:
    """One Newton-Schulz step, Up = X (3 I - XᴴX) / 2 (``gram``: XᴴX)."""
    eye = jnp.eye(gram.shape[0], dtype=x.dtype)
    return x @ (1.5 * eye - 0.5 * gram)


def _hermitian_factor(call: _ffi_call.Call, up: jax.Array, a: jax.Array) -> jax.Array:
    """This device's rows of H = Upᴴ A, made exactly Hermitian."""
    whole = _manual.psum(jnp.conj(up).T @ a, call.axes)
    whole = (whole + jnp.conj(whole).T) / 2
    nparts = call.g.nparts
    q = a.shape[1] // nparts
    return whole if nparts == 1 else jax.lax.dynamic_slice_in_dim(
        whole, _manual.shard_index(call) * q, q, axis=0)

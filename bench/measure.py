"""Timing and checking one JAX-side case: jaxmg on a mesh of k devices, or the
single-device JAX routine on the first device.

Timing: the function is compiled ahead of time (its compile time reported
apart), run once as a warm-up (cuSOLVERMg handles, workspaces, autotuning),
then timed R times, each run on the host clock from the call to
``jax.block_until_ready`` of every output (all devices synchronized). R is
``repeats``, or fewer (at least 2) when R runs of the warm-up's length would
exceed ``max_case_s``; the median is reported with min, max and R.

Checking: every timed run's result is checked (not timed) against the input,
with random probe vectors, in the working precision at
``Precision.HIGHEST`` (no TF32 products):

* potrs and lu_solve: ||A x - b|| / (||A|| ||x||), the normwise backward
  error (lu_solve's A is a general random matrix, inputs.general: partial
  pivoting swaps rows, as it would on a user's matrix);
* potri: with Y = X V for a random N x 4 V, ||A Y - V|| / (||A|| ||Y||): the
  backward error of X as a solver, every entry of X taking part;
* syevd: the larger of ||A V c - V (w c)|| / (max|w| ||c||) and
  ||V^H V c - c|| / ||c|| for a random N x 4 c (all eigenpairs at once, and
  orthonormality); infinite when w is not ascending;
* eigvals (eigenvalues only): the larger of |sum w - tr A| / (N max|w|) and
  |sum w^2 - ||A||^2| / ||A||^2 (the first two moments of the spectrum, which
  no eigenvector is needed to check); infinite when w is not ascending;
* gesvd: the larger of ||A c - U diag(s) Vh c|| / (max s ||c||) and U's
  and Vh's orthonormality on c; infinite when s is not descending;
* polar (A general, as gesvd's): the larger of ||A c - Up H c|| / (||A||
  ||c||), ||Upᴴ Up c - c|| / ||c|| and ||H c - Hᴴ c|| / (||A|| ||c||);
* eigh_gen (A and B Hermitian positive definite, B from another seed): the
  larger of ||A V c - B V (w c)|| / (max|w| ||B|| ||c||) and
  ||Vᴴ B V c - c|| / ||c|| (the pencil's eigenpairs and B-orthonormality);
  infinite when w is not ascending.

||A|| is the Frobenius norm. A run whose residual is not below
cases.tolerance, is not finite, or whose jaxmg status is not 0 makes the
case FAIL: its time is kept in the CSV but never shown or plotted as valid.

Which engine ran: with ``trace=True`` the warm-up call runs with
JAXMG_TRACE=1 and its trace line (the C library's, on stderr) is kept in
Measured.trace; Measured.engine and Measured.tile read the engine that ran
and the T_A from it. ``environ`` sets JAXMG_* variables (read per call by the
C library) for the duration of a measurement.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

import cases
import inputs

HI = jax.lax.Precision.HIGHEST
PROBES = 4
# The ops measured on a general matrix (inputs.general); the others on a
# Hermitian positive definite one (inputs.hpd).
GENERAL = ("lu_solve", "gesvd", "polar", "qr", "lstsq")


@dataclass
class Measured:
    """The outcome of one measurement (times in seconds)."""

    status: str  # ok | FAIL | error: ... | skipped ... | n/a ...
    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    runs: int = 0
    residual: float | None = None
    compile_s: float | None = None
    trace: list[str] = field(default_factory=list)  # the warm-up's JAXMG_TRACE lines

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def engine(self) -> str | None:
        """The engine that ran the warm-up call, from its trace line (e.g.
        ``cusolverdn-gather>cusolvermg`` when the gather engine fell back), or
        None without a trace."""
        for line in reversed(self.trace):
            m = re.search(r", engine ([^,\s]+)(?:, workspace |$)", line)
            if m:
                return m.group(1)
        return None

    @property
    def tile(self) -> int | None:
        """The T_A the warm-up call ran with, from its trace line."""
        for line in reversed(self.trace):
            m = re.search(r" T_A=(\d+) ", line)
            if m:
                return int(m.group(1))
        return None

    def set_times(self, times: list[float]) -> None:
        self.median_s = statistics.median(times)
        self.min_s, self.max_s, self.runs = min(times), max(times), len(times)


def _mm(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.matmul(a, b, precision=HI)


@jax.jit
def frobenius(a: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.sum(jnp.abs(a) ** 2))


@jax.jit
def _potrs_residual(a, b, x, anorm):
    return jnp.linalg.norm(_mm(a, x) - b) / (anorm * jnp.linalg.norm(x))


@contextlib.contextmanager
def environ(settings: dict[str, str | None]) -> Iterator[None]:
    """Sets (value) or unsets (None) environment variables, and restores
    them on exit. The C library reads JAXMG_ENGINE, JAXMG_POTRF and
    JAXMG_TRACE at every call."""
    saved = {k: os.environ.get(k) for k in settings}
    try:
        for k, v in settings.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def captured_trace(lines: list[str]) -> Iterator[None]:
    """Runs the block with JAXMG_TRACE=1 and file descriptor 2 sent to a
    temporary file; on exit appends the ``jaxmg trace`` lines written there to
    ``lines`` and writes everything back to stderr."""
    sys.stderr.flush()
    saved_fd = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as f:
        os.dup2(f.fileno(), 2)
        try:
            with environ({"JAXMG_TRACE": "1"}):
                yield
        finally:
            sys.stderr.flush()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            f.seek(0)
            text = f.read().decode(errors="replace")
            lines.extend(ln for ln in text.splitlines() if ln.startswith("jaxmg trace "))
            sys.stderr.write(text)
            sys.stderr.flush()


@jax.jit
def _potri_residual(a, inv, v, anorm):
    y = _mm(inv, v)
    return jnp.linalg.norm(_mm(a, y) - v) / (anorm * jnp.linalg.norm(y))


@jax.jit
def _syevd_residual(a, w, vecs, c):
    y = _mm(vecs, c)
    wc = w.astype(c.dtype)[:, None] * c
    wmax = jnp.max(jnp.abs(w))
    cn = jnp.linalg.norm(c)
    r1 = jnp.linalg.norm(_mm(a, y) - _mm(vecs, wc)) / (wmax * cn)
    r2 = jnp.linalg.norm(_mm(jnp.conj(vecs).T, y) - c) / cn
    ascending = jnp.all(jnp.diff(w) >= 0)
    return jnp.where(ascending, jnp.maximum(r1, r2), jnp.inf)


@jax.jit
def _eigvals_residual(a, w, anorm):
    wmax = jnp.max(jnp.abs(w))
    tr = jnp.real(jnp.trace(a))
    r1 = jnp.abs(jnp.sum(w) - tr) / (a.shape[0] * wmax)
    r2 = jnp.abs(jnp.sum(w.astype(anorm.dtype) ** 2) - anorm ** 2) / anorm ** 2
    ascending = jnp.all(jnp.diff(w) >= 0)
    return jnp.where(ascending, jnp.maximum(r1, r2), jnp.inf)


@jax.jit
def _gesvd_residual(a, u, s, vh, c):
    """max(||A c - U diag(s) Vh c|| / (s_max ||c||), ||Uᴴ U c - c|| / ||c||,
    ||Vh Vhᴴ c - c|| / ||c||), inf unless s descends."""
    sc = s.astype(c.dtype)[:, None]
    cn = jnp.linalg.norm(c)
    r1 = jnp.linalg.norm(_mm(a, c) - _mm(u, sc * _mm(vh, c))) / (jnp.max(s) * cn)
    r2 = jnp.linalg.norm(_mm(jnp.conj(u).T, _mm(u, c)) - c) / cn
    r3 = jnp.linalg.norm(_mm(vh, _mm(jnp.conj(vh).T, c)) - c) / cn
    descending = jnp.all(jnp.diff(s) <= 0)
    return jnp.where(descending, jnp.maximum(r1, jnp.maximum(r2, r3)), jnp.inf)


@jax.jit
def _polar_residual(a, up, h, c, anorm):
    """max(||A c - Up H c|| / (||A|| ||c||), ||Upᴴ Up c - c|| / ||c||,
    ||H c - Hᴴ c|| / (||A|| ||c||))."""
    cn = jnp.linalg.norm(c)
    r1 = jnp.linalg.norm(_mm(a, c) - _mm(up, _mm(h, c))) / (anorm * cn)
    r2 = jnp.linalg.norm(_mm(jnp.conj(up).T, _mm(up, c)) - c) / cn
    r3 = jnp.linalg.norm(_mm(h, c) - _mm(jnp.conj(h).T, c)) / (anorm * cn)
    return jnp.maximum(r1, jnp.maximum(r2, r3))


@jax.jit
def _eigh_gen_residual(a, b, w, vecs, c):
    """max(||A V c - B V (w c)|| / (max|w| ||B|| ||c||), ||Vᴴ B V c - c|| /
    ||c||), inf unless w ascends."""
    wc = w.astype(c.dtype)[:, None] * c
    cn = jnp.linalg.norm(c)
    r1 = (jnp.linalg.norm(_mm(a, _mm(vecs, c)) - _mm(b, _mm(vecs, wc)))
          / (jnp.max(jnp.abs(w)) * frobenius(b) * cn))
    r2 = jnp.linalg.norm(_mm(jnp.conj(vecs).T, _mm(b, _mm(vecs, c))) - c) / cn
    ascending = jnp.all(jnp.diff(w) >= 0)
    return jnp.where(ascending, jnp.maximum(r1, r2), jnp.inf)


def _qr_residual(a, q, r, c, anorm):
    """max(||A c - Q R c|| / (||A|| ||c||), ||Qᴴ Q c - c|| / ||c||), inf
    unless R is upper triangular."""
    cn = jnp.linalg.norm(c)
    r1 = jnp.linalg.norm(_mm(a, c) - _mm(q, _mm(r, c))) / (anorm * cn)
    r2 = jnp.linalg.norm(_mm(jnp.conj(q).T, _mm(q, c)) - c) / cn
    upper = jnp.all(jnp.tril(r, -1) == 0)
    return jnp.where(upper, jnp.maximum(r1, r2), jnp.inf)


def _host(x: jax.Array) -> np.ndarray:
    """x on the host: the whole array, or, where it spans other processes'
    devices (one process per GPU), this process's first shard (a replicated
    scalar or status is whole there)."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    return np.asarray(x.addressable_shards[0].data)


def _scalar(x: jax.Array) -> float:
    return float(_host(x))


def _residual(op: str, a: jax.Array, b: jax.Array | None, out: Any, anorm: jax.Array,
              key: jax.Array, mesh: Mesh) -> float:
    """The relative residual of one result (module docstring)."""
    if op in ("potrs", "lu_solve", "lstsq"):  # lstsq: a square, nonsingular A
        return _scalar(_potrs_residual(a, b, out, anorm))
    if op == "eigvals":
        return _scalar(_eigvals_residual(a, out, anorm))
    probe = inputs.replicated_normal(key, (a.shape[0], PROBES), a.dtype, mesh)
    if op == "potri":
        return _scalar(_potri_residual(a, out, probe, anorm))
    if op == "gesvd":
        return _scalar(_gesvd_residual(a, *out, probe))
    if op == "polar":
        return _scalar(_polar_residual(a, *out, probe, anorm))
    if op == "qr":
        return _scalar(_qr_residual(a, *out, probe, anorm))
    if op == "eigh_gen":
        return _scalar(_eigh_gen_residual(a, b, *out, probe))
    w, vecs = out
    return _scalar(_syevd_residual(a, w, vecs, probe))


def jaxmg_fn(op: str, tile: int, mesh: Mesh) -> Callable[..., Any]:
    """The jitted jaxmg call: returns (result, status)."""
    import jaxmg

    specs = (P(inputs.AXIS, None), P(None, None))
    if op == "potrs":
        def f(a, b):
            return jaxmg.potrs(a, b, tile, mesh, specs, return_status=True)
    elif op == "lu_solve":
        def f(a, b):
            return jaxmg.lu_solve(a, b, tile, mesh, specs, return_status=True)
    elif op == "potri":
        def f(a, b):
            return jaxmg.potri(a, tile, mesh, specs[:1], return_status=True)
    elif op == "eigvals":
        def f(a, b):
            return jaxmg.syevd(a, tile, mesh, specs[:1], return_eigenvectors=False,
                               return_status=True)
    elif op == "gesvd":
        def f(a, b):
            u, s, vh, status = jaxmg.gesvd(a, tile, mesh, specs[0], return_status=True)
            return (u, s, vh), status
    elif op == "polar":
        def f(a, b):
            up, h, status = jaxmg.polar(a, tile, mesh, specs[0], return_status=True)
            return (up, h), status
    elif op == "qr":
        def f(a, b):
            q, r, status = jaxmg.qr(a, tile, mesh, specs[0], return_status=True)
            return (q, r), status
    elif op == "lstsq":
        def f(a, b):
            return jaxmg.least_squares(a, b, tile, mesh, specs, return_status=True)
    elif op == "eigh_gen":
        def f(a, b):
            w, v, s = jaxmg.eigh_generalized(a, b, tile, mesh, specs[:1],
                                             return_status=True)
            return (w, v), s
    else:
        def f(a, b):
            w, v, s = jaxmg.syevd(a, tile, mesh, specs[:1], return_status=True)
            return (w, v), s
    return jax.jit(f)


def jax_fn(op: str) -> Callable[..., Any]:
    """The jitted single-device JAX routine: returns (result, None)."""
    if op == "potrs":
        def f(a, b):
            return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a, lower=True), b), None
    elif op == "lu_solve":
        def f(a, b):
            return jnp.linalg.solve(a, b), None
    elif op == "potri":
        def f(a, b):
            return jnp.linalg.inv(a), None
    elif op == "eigvals":
        def f(a, b):
            return jnp.linalg.eigvalsh(a), None
    elif op == "gesvd":
        def f(a, b):
            return jnp.linalg.svd(a, full_matrices=False), None
    elif op == "polar":
        def f(a, b):
            return jax.scipy.linalg.polar(a), None
    elif op == "qr":
        def f(a, b):
            return jnp.linalg.qr(a), None
    elif op == "lstsq":
        def f(a, b):
            return jnp.linalg.lstsq(a, b)[0], None
    elif op == "eigh_gen":
        # JAX has no generalized eigh (jax.scipy.linalg.eigh(a, b) raises):
        # B = L Lᴴ, C = L⁻¹ A L⁻ᴴ, C = Y diag(w) Yᴴ, V = L⁻ᴴ Y, composed by hand.
        def f(a, b):
            tri = jax.scipy.linalg.solve_triangular
            lo = jnp.linalg.cholesky(b)
            c = tri(lo, jnp.conj(tri(lo, a, lower=True)).T, lower=True)
            w, y = jnp.linalg.eigh(c)
            return (w, tri(lo, y, lower=True, trans="C")), None
    else:
        def f(a, b):
            return jnp.linalg.eigh(a), None
    return jax.jit(f)


def runs_for(repeats: int, max_case_s: float, warm_s: float) -> int:
    """Timed runs: repeats, or fewer (at least 2) to stay near max_case_s.
    The same rule as the ceiling's (bench/ceiling/main.c)."""
    if max_case_s <= 0 or warm_s * repeats <= max_case_s:
        return repeats
    return max(2, min(repeats, int(max_case_s / warm_s)))


def measure(op: str, dtype: str, n: int, mesh: Mesh, fn: Callable[..., Any], seed: int,
            repeats: int, max_case_s: float, log: Callable[[str], None],
            trace: bool = False, nrhs: int = 1) -> Measured:
    """Generates A (and b, n x nrhs) on mesh, then times and checks fn(A, b);
    with ``trace``, the warm-up call's JAXMG_TRACE lines go to
    Measured.trace."""
    tol = cases.tolerance(dtype, n)
    key = jax.random.PRNGKey(seed)
    a = (inputs.general if op in GENERAL else inputs.hpd)(n, dtype, mesh, seed)
    if op in ("potrs", "lu_solve", "lstsq"):
        b = inputs.replicated_normal(jax.random.fold_in(key, 1), (n, nrhs), dtype, mesh)
    elif op == "eigh_gen":  # B: another Hermitian positive definite matrix
        b = inputs.hpd(n, dtype, mesh, seed + 7919)
    else:
        b = jnp.zeros((), dtype)
    anorm = frobenius(a)
    t0 = time.perf_counter()
    compiled = fn.lower(a, b).compile()
    compile_s = time.perf_counter() - t0
    lines: list[str] = []
    with captured_trace(lines) if trace else contextlib.nullcontext():
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(a, b))
        warm_s = time.perf_counter() - t0
    del out
    m = Measured(status="ok", compile_s=compile_s, trace=lines)
    worst, times = 0.0, []
    for i in range(runs_for(repeats, max_case_s, warm_s)):
        t0 = time.perf_counter()
        out, status = jax.block_until_ready(compiled(a, b))
        times.append(time.perf_counter() - t0)
        res = _residual(op, a, b, out, anorm, jax.random.fold_in(key, 100 + i), mesh)
        bad_status = status is not None and int(np.max(_host(status))) != 0
        del out, status
        if bad_status:
            m.status = "FAIL"
            log(f"    run {i}: solver status not 0")
        if not res < tol:  # NaN too
            m.status = "FAIL"
            log(f"    run {i}: residual {res:.3e} above tolerance {tol:.1e}")
        if np.isfinite(worst):  # a non-finite residual stays the worst
            worst = res if not np.isfinite(res) else max(worst, res)
    m.residual = worst
    m.set_times(times)
    del a, b
    return m

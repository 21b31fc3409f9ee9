"""precision="mixed" (issue 39): potrs and lu_solve factored in float32
(complex64 for complex128) and refined in float64 against the kept A, on 4
CPU devices (the LAPACK engine): every dtype and both API forms, matrices of
condition number 1e2, 1e6 and 1e13 (the last one past float32's reach:
the exact factorization takes over by itself, or GMRES-IR reaches it),
1e9 (past classical refinement's reach: GMRES-IR), the answer and status of the
exact path either way, the normwise backward error against NumPy's float64
(complex128) arithmetic, JAXMG_TRACE's account of the refinement,
derivatives, vmap and jit, memory_estimate, and misuse refused before
anything is traced; the local model's lapack-local (JAXMG_ENGINE), whose
rank 0 refines on its gathered A."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
import jaxmg_testing as jt

N = 32
T_A = 4
SPECS = (P("x", None), P(None, None))
KAPPAS = (1e2, 1e6, 1e13)
OPS = ("potrs", "lu_solve")
# GMRES-IR's basis and a zero vector (JMG_GMRES_RESTART + 2 vectors of N in
# float64) and its coefficients (engine/lapack/mixed.c's workspace).
GMRES = (30 + 2) * N * 8 + 2 * (30 + 2) * 8


def conditioned(rng: np.random.Generator, n: int, kappa: float, hermitian: bool,
                dtype) -> np.ndarray:
    """A matrix of singular values from 1 to 1/kappa (geometric): Q D Qᴴ,
    Hermitian positive definite, or Q D Wᴴ, Q and W random unitary."""
    ref = jt.ref_dtype(dtype)

    def unitary() -> np.ndarray:
        q, _ = np.linalg.qr(jt.random_matrix(rng, (n, n), ref))
        return q

    s = np.logspace(0, -np.log10(kappa), n)
    q = unitary()
    a = (q * s) @ (q.conj().T if hermitian else unitary().conj().T)
    if hermitian:
        a = (a + a.conj().T) / 2
    return a.astype(dtype)


def backward_error(a, x, b) -> float:
    """max over columns of ||b - A x|| / (||A||_F ||x|| + ||b||), in float64
    (complex128) NumPy: the measure the refinement stops on."""
    a, x, b = jt.to_ref(a), jt.to_ref(x), jt.to_ref(b)
    x, b = x.reshape(len(b), -1), b.reshape(len(b), -1)
    r = np.linalg.norm(b - a @ x, axis=0)
    return float(np.max(r / (np.linalg.norm(a) * np.linalg.norm(x, axis=0)
                             + np.linalg.norm(b, axis=0))))


def solve(op: str, mesh, a, b, precision: str):
    """The seeds' form, (x, status) as NumPy arrays."""
    x, status = getattr(jaxmg, op)(jt.shard_rows(a, mesh), b, T_A, mesh, SPECS,
                                   return_status=True, precision=precision)
    return np.asarray(x), int(status)


def matrix(rng, op: str, kappa: float, dtype) -> np.ndarray:
    return conditioned(rng, N, kappa, op == "potrs", dtype)


@pytest.mark.parametrize("kappa", KAPPAS, ids=("1e2", "1e6", "1e13"))
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
@pytest.mark.parametrize("op", OPS)
def test_mixed_gives_the_exact_path_s_accuracy(mesh, rng, op, dtype, kappa):
    a = matrix(rng, op, kappa, dtype)
    b = jt.make_rhs(rng, N, 3, dtype)
    x, status = solve(op, mesh, a, b, "mixed")
    xe, status_e = solve(op, mesh, a, b, "exact")
    assert status == status_e
    assert x.dtype == np.dtype(dtype) and x.shape == b.shape
    if np.dtype(dtype) in (np.float32, np.complex64):
        # No lower precision on CPU devices: the exact path itself.
        np.testing.assert_array_equal(x, xe)
        return
    assert status == 0
    be, be_exact = backward_error(a, x, b), backward_error(a, xe, b)
    u = np.finfo(np.float64).eps / 2
    assert be <= 10 * max(be_exact, u), (be, be_exact)
    assert be <= np.sqrt(N) * u
    x_np = np.linalg.solve(jt.to_ref(a), jt.to_ref(b))
    forward = np.linalg.norm(x - x_np) / np.linalg.norm(x_np)
    assert forward <= 100 * kappa * u * N, forward


def _trace(capfd, op: str) -> str:
    lines = [line for line in capfd.readouterr().err.splitlines()
             if line.startswith(f"jaxmg trace {op} ")]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("dtype", (np.float64, np.complex128), ids=("f64", "c128"))
@pytest.mark.parametrize("op", OPS)
def test_a_hopeless_matrix_falls_back_to_the_exact_answer(mesh, rng, capfd, monkeypatch,
                                                          op, dtype):
    """Condition number 1e14: float32 cannot factor it usefully; the call
    falls back to the exact factorization, status 0, and returns exactly
    the exact path's x (the same LAPACK routine on the same A and b)."""
    a = matrix(rng, op, 1e14, dtype)
    b = jt.make_rhs(rng, N, 2, dtype)
    xe, _ = solve(op, mesh, a, b, "exact")
    capfd.readouterr()
    monkeypatch.setenv("JAXMG_TRACE", "1")
    x, status = solve(op, mesh, a, b, "mixed")
    line = _trace(capfd, op)
    assert status == 0
    np.testing.assert_array_equal(x, xe)
    kind = "potrf+potrs" if op == "potrs" else "getrf+getrs"
    assert f"fallback {np.dtype(dtype).name} {kind}" in line, line
    assert " precision=1 " in line


@pytest.mark.parametrize("op", OPS)
def test_the_trace_names_precision_iterations_and_backward_error(mesh, rng, capfd,
                                                                 monkeypatch, op):
    a = matrix(rng, op, 1e6, np.float64)
    b = jt.make_rhs(rng, N, 1, np.float64)
    monkeypatch.setenv("JAXMG_TRACE", "1")
    x, _ = solve(op, mesh, a, b, "mixed")
    line = _trace(capfd, op)
    factor = "potrf" if op == "potrs" else "getrf"
    assert re.search(rf" {factor} float32 \d+\.\d\d ms,", line), line
    m = re.search(r"refine float64 (\d+) iterations? backward error ([0-9.e+-]+) ", line)
    assert m, line
    assert 1 <= int(m.group(1)) <= 30
    assert float(m.group(2)) <= np.sqrt(N) * np.finfo(np.float64).eps / 2
    assert abs(float(m.group(2)) - backward_error(a, x, b)) <= 0.5 * float(m.group(2)) + 1e-18
    assert "fallback" not in line
    # float32 input: the exact path, said so.
    solve(op, mesh, a.astype(np.float32), b.astype(np.float32), "mixed")
    assert "no lower precision on CPU devices: exact path" in _trace(capfd, op)


@pytest.mark.parametrize("dtype", (np.float64, np.complex128), ids=("f64", "c128"))
@pytest.mark.parametrize("op", OPS)
def test_gmres_ir_carries_refinement_past_classical_refinement(mesh, rng, capfd,
                                                               monkeypatch, op, dtype):
    """Condition number 1e9: float32 (u kappa ~ 60) is past classical
    refinement's reach on these matrices (and float32's Cholesky fails:
    potrs factors A + 8 u diag(A)); GMRES-IR preconditioned by the float32
    factor (engine/refine.h) reaches the exact path's backward error without
    falling back, and the trace says how many outer and inner iterations."""
    a = matrix(rng, op, 1e9, dtype)
    b = jt.make_rhs(rng, N, 2, dtype)
    xe, _ = solve(op, mesh, a, b, "exact")
    capfd.readouterr()
    monkeypatch.setenv("JAXMG_TRACE", "1")
    x, status = solve(op, mesh, a, b, "mixed")
    line = _trace(capfd, op)
    assert status == 0
    assert re.search(r"refine \w+ \d+ iterations backward error \S+ gmres-ir \d+ outer "
                     r"\d+ inner", line), line
    assert "fallback" not in line
    u = np.finfo(np.float64).eps / 2
    be, be_exact = backward_error(a, x, b), backward_error(a, xe, b)
    assert be <= np.sqrt(N) * u and be <= 10 * max(be_exact, u), (be, be_exact)


def test_status_of_a_matrix_that_is_not_positive_definite_or_singular(mesh, rng):
    """The exact path's status (the fallback's info) and NaN in x."""
    a = jt.make_hpd(rng, N, np.float64)
    a[5, 5] = -50.0
    b = jt.make_rhs(rng, N, 1, np.float64)
    (x, status), (_, status_e) = (solve("potrs", mesh, a, b, p) for p in ("mixed", "exact"))
    assert status == status_e > 0 and np.isnan(x).all()
    g = jt.make_general(rng, N, np.float64)
    g[:, 7] = 0.0
    (x, status), (_, status_e) = (solve("lu_solve", mesh, g, b, p) for p in ("mixed", "exact"))
    assert status == status_e > 0 and np.isnan(x).all()


@pytest.mark.parametrize("op", OPS)
def test_the_1x_forms_take_precision(mesh, rng, op):
    a = matrix(rng, op, 1e6, np.complex128)
    b = jt.make_rhs(rng, N, None, np.complex128)
    A = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    f = getattr(jaxmg, op)
    x = f(A, b, T_A, mesh, matrix_specs=P("x", None), precision="mixed")
    assert backward_error(a, x, b) <= np.sqrt(N) * 1.2e-16
    x_donated = f(jnp.array(A), b, T_A, precision="mixed", donate=True)
    np.testing.assert_allclose(np.asarray(x_donated), np.asarray(x), rtol=0, atol=1e-12)
    ctx = getattr(jaxmg, f"{op}_shardmap_ctx")
    work, x_ctx, status = ctx(A, b, T_A, precision="mixed")  # 1.x's, global level
    assert int(status) == 0 and work.shape == (N, N)
    assert backward_error(a, x_ctx, b) <= np.sqrt(N) * 1.2e-16
    # The seeds' ctx form inside the caller's shard_map.
    inner = jax.shard_map(lambda a, b: ctx(a, b, T_A, True, precision="mixed"), mesh=mesh,
                          in_specs=(P("x", None), P()), out_specs=(P(), P()))
    x_in, status_in = inner(A, b)
    assert int(status_in[0]) == 0
    assert backward_error(a, x_in, b) <= np.sqrt(N) * 1.2e-16


@pytest.mark.parametrize("op", OPS)
def test_derivatives_jit_and_vmap_use_the_refined_solve(mesh, rng, op):
    # Well conditioned, so that check_grads's finite differences are exact
    # enough to judge (the refinement does not depend on it).
    well = jt.make_hpd if op == "potrs" else jt.make_general
    a = well(rng, N, np.float64)
    b = jt.make_rhs(rng, N, 2, np.float64)
    A = jt.shard_rows(a, mesh)

    def f(a, b):
        return getattr(jaxmg, op)(a, b, T_A, mesh, SPECS, precision="mixed")

    check_grads(f, (A, b), order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
    # The gradient agrees with JAX's own float64 solve.
    ref = jnp.linalg.solve
    loss = lambda s: lambda a, b: jnp.sum(jnp.sin(s(a, b)))  # noqa: E731
    g = jax.grad(loss(f), argnums=(0, 1))(A, b)
    g_ref = jax.grad(loss(ref), argnums=(0, 1))(jnp.asarray(a), jnp.asarray(b))
    if op == "potrs":  # jaxmg reads A's upper triangle: dA is Hermitian's
        g_ref = (jnp.triu(g_ref[0]) + jnp.tril(g_ref[0], -1).T, g_ref[1])
    for got, want in zip(g, g_ref):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-8, atol=1e-10)
    # jit and vmap: the same x as unbatched eager calls.
    x = np.asarray(jax.jit(f)(A, b))
    np.testing.assert_allclose(x, np.asarray(f(A, b)), rtol=0, atol=0)
    batch = np.stack([well(rng, N, np.float64) for _ in range(2)])
    bb = np.stack([b, 2 * b])
    xs = jax.vmap(lambda a, b: getattr(jaxmg, op)(a, b, T_A, mesh, SPECS,
                                                  precision="mixed"))(batch, bb)
    for i in range(2):
        np.testing.assert_allclose(np.asarray(xs[i]), np.asarray(f(batch[i], bb[i])),
                                   rtol=1e-13, atol=1e-13)


def test_memory_estimate_counts_the_float32_copy(mesh):
    for op, pivots in (("potrs", 0), ("lu_solve", 2 * N * 4)):
        exact = jaxmg.memory_estimate(op, (N, N), np.float64, mesh, nrhs=3)
        mixed = jaxmg.memory_estimate(op, (N, N), np.float64, mesh, nrhs=3,
                                      precision="mixed")
        # A's float32 copy; b kept and the residual (float64), a float32
        # right-hand side; the float32 LU's own pivots; GMRES-IR's basis.
        extra = N * N * 4 + N * 3 * (2 * 8 + 4) + pivots - pivots // 2 + GMRES
        assert mixed.workspace - exact.workspace == extra
        assert exact.workspace == N * N * 8 + pivots // 2
        # float32 input: no lower copy.
        f32 = jaxmg.memory_estimate(op, (N, N), np.float32, mesh, nrhs=3, precision="mixed")
        assert f32.workspace == N * N * 4 + pivots // 2


@pytest.mark.parametrize("precision", ["half", "Mixed", 1, None])
def test_an_unknown_precision_is_refused(mesh, rng, precision):
    a = jt.make_hpd(rng, N, np.float64)
    b = jt.make_rhs(rng, N, 1, np.float64)
    for f in (jaxmg.potrs, jaxmg.lu_solve):
        with pytest.raises(ValueError, match="precision must be \"exact\".*or \"mixed\""):
            f(jt.shard_rows(a, mesh), b, T_A, mesh, SPECS, precision=precision)
    with pytest.raises(ValueError, match="precision must be"):
        jaxmg.potrs_shardmap_ctx(jt.shard_rows(a, mesh), b, T_A, precision=precision)


def test_what_mixed_precision_cannot_do_is_refused_before_tracing(mesh, rng, monkeypatch):
    a = jt.make_hpd(rng, N, np.float64)
    b = jt.make_rhs(rng, N, 1, np.float64)
    A = jt.shard_rows(a, mesh)
    with pytest.raises(ValueError, match="return_logdet=True needs precision=\"exact\""):
        jaxmg.potrs(A, b, T_A, mesh, SPECS, return_logdet=True, precision="mixed")
    with pytest.raises(ValueError, match="return_logdet=True needs precision=\"exact\""):
        jaxmg.potrs_shardmap_ctx(A, b, T_A, return_logdet=True, precision="mixed")
    with pytest.raises(ValueError, match="precision='mixed' is potrs's and lu_solve's"):
        jaxmg.memory_estimate("syevd", (N, N), np.float64, mesh, precision="mixed")


@pytest.mark.parametrize("kappa", (1e2, 1e14), ids=("1e2", "1e14"))
@pytest.mark.parametrize("dtype", (np.float64, np.complex128), ids=("f64", "c128"))
@pytest.mark.parametrize("op", OPS)
def test_lapack_local_refines_on_rank_0_s_gathered_matrix(mesh, rng, capfd, monkeypatch,
                                                         op, dtype, kappa):
    """The local model on CPU devices (JAXMG_ENGINE=lapack-local): every rank
    gets X; refinement on rank 0's gathered A (or, at 1e14, the fallback),
    the exact path's accuracy and status, rank 0's trace saying which."""
    monkeypatch.setenv("JAXMG_ENGINE", "lapack-local")
    a = matrix(rng, op, kappa, dtype)
    b = jt.make_rhs(rng, N, 2, dtype)
    xe, status_e = solve(op, mesh, a, b, "exact")
    capfd.readouterr()
    monkeypatch.setenv("JAXMG_TRACE", "1")
    x, status = solve(op, mesh, a, b, "mixed")
    lines = [line for line in capfd.readouterr().err.splitlines()
             if line.startswith(f"jaxmg trace {op} ") and ", rank 0:" in line]
    assert len(lines) == 1, lines
    assert status == status_e == 0
    assert "engine lapack-local" in lines[0], lines[0]
    u = np.finfo(np.float64).eps / 2
    assert backward_error(a, x, b) <= 10 * max(backward_error(a, xe, b), u)
    if kappa < 1e10:
        assert re.search(r"refine \w+ \d+ iterations? backward error", lines[0]), lines[0]
        assert "fallback" not in lines[0]
    else:
        assert "fallback" in lines[0], lines[0]
        np.testing.assert_array_equal(x, xe)


def test_lapack_local_status_and_memory_estimate(mesh, rng, monkeypatch):
    """A matrix that is not positive definite: the exact path's status and
    NaN on lapack-local too; memory_estimate there counts rank 0's gathered
    and packed copies and, with "mixed", the LAPACK engine's extra."""
    monkeypatch.setenv("JAXMG_ENGINE", "lapack-local")
    a = jt.make_hpd(rng, N, np.float64)
    a[5, 5] = -1.0
    b = jt.make_rhs(rng, N, 1, np.float64)
    x, status = solve("potrs", mesh, a, b, "mixed")
    assert status == solve("potrs", mesh, a, b, "exact")[1] > 0 and np.isnan(x).all()
    exact = jaxmg.memory_estimate("potrs", (N, N), np.float64, mesh, nrhs=3)
    mixed = jaxmg.memory_estimate("potrs", (N, N), np.float64, mesh, nrhs=3,
                                  precision="mixed")
    assert exact.engine == mixed.engine == "lapack-local"
    assert exact.workspace == 2 * N * N * 8
    assert mixed.workspace - exact.workspace == N * N * 4 + N * 3 * (2 * 8 + 4) + GMRES

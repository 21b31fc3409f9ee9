"""precision="mixed" on one GPU (cuSOLVERDn, issue 39): float64 and
complex128 potrs and lu_solve factored on TF32 tensor cores (N = 2048, one
right-hand side: jaxmg's blocked TF32 Cholesky with GMRES-IR, cuSOLVER's
cusolverDnIRSXgesv; condition numbers 1e2, 1e4, 1e6 and 1e12: refinement or
a fallback the trace names, the fast fallback of a TF32 Cholesky that
fails, convergence at 1e4 and 1e5 without a step budget), and in float32 / complex64 by cuSOLVER (N = 512, 3 right-hand
sides; JAXMG_MIXED_LOW=float32),
refined in float64 by cuBLAS against the kept A (the conversion kernels
loaded from PTX), against NumPy's float64 answer: condition numbers 1e2,
1e6 (refinement converges: JAXMG_TRACE names the iterations) and 1e13 (the
fallback, the exact path's answer), both transposes of lu_solve, statuses,
derivatives against jnp, memory_estimate's workspace. On 2 GPUs the gather
engine (A gathered onto GPU 0, cuSOLVERDn's mixed routine on the copy):
the same accuracy and trace marks, memory_estimate's gathered copy, a
gathered copy that does not fit running cuSOLVERMg's exact routine, and
the distributed engines, forced, refusing it with a clear error. Skipped
without GPUs (the 2-GPU cases below 2)."""

from __future__ import annotations

import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

import jaxmg  # noqa: E402

N = 512
SPECS = (P("x", None), P(None, None))
U = np.finfo(np.float64).eps / 2


def _one_gpu() -> Mesh:
    return Mesh(np.array(GPUS[:1]), ("x",))


def _matrix(rng, n: int, kappa: float, hermitian: bool, dtype) -> np.ndarray:
    """Q diag(s) Q^H (hermitian) or Q diag(s) W^H, s from 1 down to 1/kappa,
    Q and W the Q factors of standard normal matrices drawn from rng (in
    float64 / complex128). The factors and the product are computed on the
    first GPU (the same matrix as on the host, to rounding): on the host,
    at N = 2048, they were O(N^3) work a matrix beside the solves' on the
    GPU, complex128's four times float64's."""
    def unitary() -> jax.Array:
        m = rng.standard_normal((n, n))
        if np.issubdtype(dtype, np.complexfloating):
            m = m + 1j * rng.standard_normal((n, n))
        return jnp.linalg.qr(jnp.asarray(m))[0]

    q = unitary()
    s = np.logspace(0, -np.log10(kappa), n)
    w = q if hermitian else unitary()
    a = np.asarray(jnp.matmul(q * s, jnp.conj(w).T, precision=jax.lax.Precision.HIGHEST))
    return ((a + a.conj().T) / 2 if hermitian else a).astype(dtype)


def _berr(a, x, b) -> float:
    x, b = np.asarray(x).reshape(len(b), -1), np.asarray(b).reshape(len(b), -1)
    r = np.linalg.norm(b - a @ x, axis=0)
    return float(np.max(r / (np.linalg.norm(a) * np.linalg.norm(x, axis=0)
                             + np.linalg.norm(b, axis=0))))


def _solve(op, a, b, precision):
    mesh = _one_gpu()
    x, status = getattr(jaxmg, op)(jnp.asarray(a), jnp.asarray(b), 128, mesh, SPECS,
                                   return_status=True, precision=precision)
    return np.asarray(x), int(status)


@pytest.mark.parametrize("kappa", [1e2, 1e6, 1e13], ids=["1e2", "1e6", "1e13"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
@pytest.mark.parametrize("op", ["potrs", "lu_solve"])
def test_mixed_on_one_gpu_has_the_exact_path_s_accuracy(capfd, monkeypatch, op, dtype,
                                                        kappa):
    # N = 512 is one block of the TF32 Cholesky (cuSOLVER's float32 potrf)
    # and 3 right-hand sides take float32 getrf: float32's accuracy, the
    # step budget off (its rules are tested at N = 2048 below).
    monkeypatch.setenv("JAXMG_REFINE_MAX_STEPS", "0")
    rng = np.random.default_rng(39)
    a = _matrix(rng, N, kappa, op == "potrs", dtype)
    b = rng.standard_normal((N, 3)).astype(dtype)
    xe, se = _solve(op, a, b, "exact")
    monkeypatch.setenv("JAXMG_TRACE", "1")
    capfd.readouterr()
    x, s = _solve(op, a, b, "mixed")
    line = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("jaxmg trace")]
    assert s == se == 0
    assert _berr(a, x, b) <= 10 * max(_berr(a, xe, b), U)
    assert "engine cusolverdn" in line[-1]
    if kappa < 1e10:
        assert re.search(r"refine \w+ \d+ iterations? backward error", line[-1]), line
        assert "fallback" not in line[-1]
    else:
        assert "fallback" in line[-1], line
        np.testing.assert_array_equal(x, xe)


TF32_N = 2048  # 4 blocks of the TF32 Cholesky (512 columns each)


def _traced(capfd, monkeypatch, op, a, b, precision):
    monkeypatch.setenv("JAXMG_TRACE", "1")
    capfd.readouterr()
    x, s = _solve(op, a, b, precision)
    monkeypatch.delenv("JAXMG_TRACE")
    lines = [ln for ln in capfd.readouterr().err.splitlines()
             if ln.startswith("jaxmg trace")]
    return x, s, lines[-1]


# Why a mixed call fell back, as JAXMG_TRACE names it: jaxmg's TF32 Cholesky
# failing (no shifted factor under the step budget), refinement not
# converging (classical's contraction, GMRES-IR's budget or estimate), or
# cusolverDnIRSXgesv's own fallback with its reason.
FALLBACK_REASON = (r"failed at column \d+ \(not positive definite in tf32; no diagonal shift"
                   r"|did not converge after"
                   r"|cusolverDnIRSXgesv's own: ")


@pytest.mark.parametrize("kappa", [1e2, 1e4, 1e6, 1e12], ids=["1e2", "1e4", "1e6", "1e12"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
@pytest.mark.parametrize("op", ["potrs", "lu_solve"])
def test_tf32_factorization_refined_to_the_exact_path_s_accuracy(capfd, monkeypatch, op,
                                                                 dtype, kappa):
    """One right-hand side, N = 2048: potrs factors on TF32 tensor cores
    (jaxmg's blocked Cholesky) and refines; lu_solve runs cuSOLVER's
    cusolverDnIRSXgesv (TF32, GMRES). Under the default step budget (one GPU:
    max(1, N / 4096) steps past classical refinement's 10) whatever the
    condition number: status 0 and a backward error within 10x the exact
    path's. At 1e2 refinement converges (no fallback); at 1e4 and 1e6
    either refinement converged or the trace names the fallback and why
    (TF32's unit roundoff 2^-11 times 1e6 is about 500: past classical
    refinement, and GMRES-IR's steps cost more than the exact path at this
    N); at 1e12 the fallback, the exact path's answer."""
    rng = np.random.default_rng(41)
    a = _matrix(rng, TF32_N, kappa, op == "potrs", dtype)
    b = rng.standard_normal((TF32_N, 1)).astype(dtype)
    xe, se = _solve(op, a, b, "exact")
    x, s, line = _traced(capfd, monkeypatch, op, a, b, "mixed")
    assert s == se == 0
    assert "engine cusolverdn" in line, line
    factor = "potrf" if op == "potrs" else "getrf"
    assert f"{factor} tf32" in line, line
    be, be_exact = _berr(a, x, b), _berr(a, xe, b)
    assert be <= 10 * max(be_exact, U), (be, be_exact, line)
    converged = re.search(r"refine \w+ \d+ iterations? backward error", line)
    if kappa < 1e3:
        assert converged, line
        assert "fallback" not in line, line
    elif kappa < 1e10:
        assert converged or ("fallback" in line and re.search(FALLBACK_REASON, line)), line
    else:
        assert "fallback" in line and re.search(FALLBACK_REASON, line), line
        if op == "potrs":  # jaxmg's own fallback: the exact routine itself
            np.testing.assert_array_equal(x, xe)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_tf32_cholesky_past_its_reach_falls_back_at_once(capfd, monkeypatch, dtype):
    """kappa 1e12, N = 2048: the TF32 Cholesky fails, and with GMRES-IR's
    budget (1 step at this N) below the 30 a shifted factor needs, the exact
    path runs at once: no second factorization, no refinement step."""
    rng = np.random.default_rng(45)
    a = _matrix(rng, TF32_N, 1e12, True, dtype)
    b = rng.standard_normal((TF32_N, 1)).astype(dtype)
    x, s, line = _traced(capfd, monkeypatch, "potrs", a, b, "mixed")
    assert s == 0
    assert re.search(r"potrf tf32 failed at column \d+ \(not positive definite in tf32; "
                     r"no diagonal shift: gmres-ir budget 1 < 30\)", line), line
    assert "refine" not in line and "shifted" not in line and "fallback" in line, line
    np.testing.assert_array_equal(x, _solve("potrs", a, b, "exact")[0])


@pytest.mark.parametrize("kappa", [1e4, 1e5], ids=["1e4", "1e5"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_tf32_cholesky_converges_without_a_step_budget(capfd, monkeypatch, dtype, kappa):
    """JAXMG_REFINE_MAX_STEPS=0 (no budget) and JAXMG_GMRES_MAX_INNER=120: the
    TF32 Cholesky's refinement converges without falling back at 1e4
    (classical refinement, about 11 corrections) and 1e5 (GMRES-IR, about 60
    Arnoldi steps): what an emulated TF32 Cholesky (float32, the trailing
    updates' operands rounded to 10 bits) did at N = 2048 on the CPU."""
    monkeypatch.setenv("JAXMG_REFINE_MAX_STEPS", "0")
    monkeypatch.setenv("JAXMG_GMRES_MAX_INNER", "120")
    rng = np.random.default_rng(46)
    a = _matrix(rng, TF32_N, kappa, True, dtype)
    b = rng.standard_normal((TF32_N, 1)).astype(dtype)
    xe, _ = _solve("potrs", a, b, "exact")
    x, s, line = _traced(capfd, monkeypatch, "potrs", a, b, "mixed")
    assert s == 0 and "potrf tf32" in line and "fallback" not in line, line
    assert re.search(r"refine \w+ \d+ iterations? backward error", line), line
    assert _berr(a, x, b) <= 10 * max(_berr(a, xe, b), U), line


@pytest.mark.parametrize("op", ["potrs", "lu_solve"])
def test_tf32_paths_with_several_right_hand_sides(capfd, monkeypatch, op):
    """lu_solve with 2 right-hand sides runs cuSOLVER's float32 getrf and
    jaxmg's refinement (cusolverDnIRSXgesv's GMRES takes one b); potrs with
    2 the TF32 Cholesky. kappa 1e4, without a step budget (the routes, not the
    fail-fast policy, under test)."""
    monkeypatch.setenv("JAXMG_REFINE_MAX_STEPS", "0")
    rng = np.random.default_rng(42)
    a = _matrix(rng, TF32_N, 1e4, op == "potrs", np.float64)
    b = rng.standard_normal((TF32_N, 2))
    x, s, line = _traced(capfd, monkeypatch, op, a, b, "mixed")
    assert s == 0 and "fallback" not in line, line
    assert ("potrf tf32" if op == "potrs" else "getrf float32") in line, line
    assert _berr(a, x, b) <= 10 * max(_berr(a, _solve(op, a, b, "exact")[0], b), U)


def test_tf32_lu_solve_derivative_solves_both_transposes():
    """The reverse derivative's solve is the engine's untransposed one (the
    forward solve its transposed one, ops/lu_solve.c): both through
    cusolverDnIRSXgesv with one right-hand side, against jnp."""
    rng = np.random.default_rng(44)
    a = jnp.asarray(_matrix(rng, TF32_N, 1e3, False, np.float64))
    b = jnp.asarray(rng.standard_normal((TF32_N, 1)))
    mesh = _one_gpu()

    def loss(solve):
        return lambda a, b: jnp.sum(jnp.sin(solve(a, b)))

    g = jax.grad(loss(lambda a, b: jaxmg.lu_solve(a, b, 128, mesh, SPECS,
                                                  precision="mixed")), (0, 1))(a, b)
    with jax.default_matmul_precision("highest"):
        g_ref = jax.grad(loss(jnp.linalg.solve), (0, 1))(a, b)
    for got, want in zip(g, g_ref):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-8,
                                   atol=1e-10 * float(jnp.max(jnp.abs(want))))


def test_mixed_low_float32_forces_cusolver_s_float32_routines(capfd, monkeypatch):
    """JAXMG_MIXED_LOW=float32: cuSOLVER's float32 potrf and getrf, for
    comparison with the TF32 routes."""
    monkeypatch.setenv("JAXMG_MIXED_LOW", "float32")
    rng = np.random.default_rng(43)
    for op in ("potrs", "lu_solve"):
        a = _matrix(rng, TF32_N, 1e4, op == "potrs", np.float64)
        b = rng.standard_normal((TF32_N, 1))
        x, s, line = _traced(capfd, monkeypatch, op, a, b, "mixed")
        factor = "potrf" if op == "potrs" else "getrf"
        assert s == 0 and f"{factor} float32" in line and "tf32" not in line, line


@pytest.mark.parametrize("nb", [256, 512])
@pytest.mark.parametrize("kappa", [1e2, 1e12], ids=["1e2", "1e12"])
def test_tf32_cholesky_look_ahead_gives_the_same_factor(capfd, monkeypatch, kappa, nb):
    """JAXMG_TF32_LOOKAHEAD=1 (the diagonal blocks' potrf on a second stream
    while the trailing update runs): at 1e2 refinement converges in as many
    corrections as without it (the same factor, up to the order of the
    float32 sums), at 1e12 both fail and fall back at once; the
    exact path's accuracy, status 0."""
    monkeypatch.setenv("JAXMG_TF32_NB", str(nb))
    rng = np.random.default_rng(48)
    a = _matrix(rng, TF32_N, kappa, True, np.float64)
    b = rng.standard_normal((TF32_N, 1))
    x0, s0, line0 = _traced(capfd, monkeypatch, "potrs", a, b, "mixed")
    monkeypatch.setenv("JAXMG_TF32_LOOKAHEAD", "1")
    x, s, line = _traced(capfd, monkeypatch, "potrs", a, b, "mixed")
    assert s == s0 == 0 and f"(nb {nb}, look-ahead)" in line, line
    assert _berr(a, x, b) <= 10 * max(_berr(a, _solve("potrs", a, b, "exact")[0], b), U)
    if kappa < 1e10:
        its = [re.search(r"refine \w+ (\d+) iterations?", ln) for ln in (line0, line)]
        assert all(its) and abs(int(its[0][1]) - int(its[1][1])) <= 1, (line0, line)
    else:
        # Both fail (where may differ: cuBLAS may sum the next block column's
        # update, a gemm of its own here, in another order).
        assert "failed at column" in line0 and "failed at column" in line, (line0, line)
        assert "fallback" in line, line


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
@pytest.mark.parametrize("setting", [("JAXMG_REFINE_NB", "0"), ("JAXMG_REFINE_NB", "64"),
                                     ("JAXMG_REFINE_NB", "700"),
                                     ("JAXMG_REFINE_RESIDUAL", "symm"),
                                     ("JAXMG_REFINE_RESIDUAL", "gemv"),
                                     ("JAXMG_TF32_TRSM", "1")],
                         ids=["potrs-solves", "nb64", "nb700", "symm", "gemv", "trsm-panels"])
def test_refinement_steps_variants_converge_alike(capfd, monkeypatch, dtype, setting):
    """The TF32 Cholesky's refinement of one right-hand side with its default
    steps (panels by the inverted diagonal blocks, the refinement's solves
    by gemv over the factor's blocks of 512 with those inverses, the
    residual by symv/hemv) and with each variant (cuSOLVER's potrs for the
    solves, blocks of 64 or of 700, the last one partial, inverted apart;
    the residual by symm or by gemv on the whole A; the panels by trsm):
    converged, no fallback, corrections within one of the default's, the
    exact path's accuracy; the trace names the inversion where the solves
    are blocked and splits the steps' time."""
    monkeypatch.setenv("JAXMG_REFINE_MAX_STEPS", "0")
    rng = np.random.default_rng(49)
    a = _matrix(rng, TF32_N, 1e2, True, dtype)
    b = rng.standard_normal((TF32_N, 1)).astype(dtype)
    xe = _solve("potrs", a, b, "exact")[0]
    x0, s0, line0 = _traced(capfd, monkeypatch, "potrs", a, b, "mixed")
    monkeypatch.setenv(*setting)
    x, s, line = _traced(capfd, monkeypatch, "potrs", a, b, "mixed")
    for xi, si, li in ((x0, s0, line0), (x, s, line)):
        assert si == 0 and "fallback" not in li, li
        assert _berr(a, xi, b) <= 10 * max(_berr(a, xe, b), U), li
        assert re.search(r"products with A [0-9.]+ ms\]", li), li
    assert "diagonal blocks inverted (solves by blocks of 512; by the factorization)" in line0
    assert "inverse panels" in line0, line0
    blocked = setting != ("JAXMG_REFINE_NB", "0")
    assert ("diagonal blocks inverted" in line) == blocked, line
    its = [re.search(r"refine \w+ (\d+) iterations?", ln) for ln in (line0, line)]
    assert all(its) and abs(int(its[0][1]) - int(its[1][1])) <= 1, (line0, line)


@pytest.mark.parametrize("op", ["potrs", "lu_solve"])
def test_mixed_low_bf16x9_emulates_float32_on_tensor_cores(capfd, monkeypatch, op):
    """JAXMG_MIXED_LOW=bf16x9: cuSOLVER's float32 potrf / getrf in its FP32
    emulation on BF16 tensor cores (CUDA 13), float32's accuracy: at kappa
    1e6 classical refinement converges (TF32's would not), status 0, the
    exact path's accuracy (without the step budget: the precision, not the
    fail-fast policy, under test)."""
    monkeypatch.setenv("JAXMG_MIXED_LOW", "bf16x9")
    monkeypatch.setenv("JAXMG_REFINE_MAX_STEPS", "0")
    rng = np.random.default_rng(47)
    a = _matrix(rng, TF32_N, 1e6, op == "potrs", np.float64)
    b = rng.standard_normal((TF32_N, 1))
    x, s, line = _traced(capfd, monkeypatch, op, a, b, "mixed")
    factor = "potrf" if op == "potrs" else "getrf"
    assert s == 0 and f"{factor} float32 (bf16x9 emulated)" in line, line
    assert "fallback" not in line, line
    assert _berr(a, x, b) <= 10 * max(_berr(a, _solve(op, a, b, "exact")[0], b), U)


def test_memory_estimate_of_the_tf32_lu_counts_cusolver_s_irs_workspace():
    """One right-hand side: cusolverDnIRSXgesv's workspace (its TF32 copy of
    A, at least N x N float32) beside b kept and the residual."""
    mesh = _one_gpu()
    n = 4096
    exact = jaxmg.memory_estimate("lu_solve", (n, n), np.float64, mesh, nrhs=1)
    mixed = jaxmg.memory_estimate("lu_solve", (n, n), np.float64, mesh, nrhs=1,
                                  precision="mixed")
    assert mixed.engine == "cusolverdn"
    assert mixed.workspace >= n * n * 4 + 2 * n * 8


@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=["f32", "c64"])
def test_single_precision_input_runs_the_exact_path(dtype):
    rng = np.random.default_rng(1)
    a = _matrix(rng, N, 1e2, True, dtype)
    b = rng.standard_normal((N, 1)).astype(dtype)
    np.testing.assert_array_equal(_solve("potrs", a, b, "mixed")[0],
                                  _solve("potrs", a, b, "exact")[0])


def test_statuses_are_the_exact_path_s():
    rng = np.random.default_rng(2)
    a = _matrix(rng, N, 1e2, True, np.float64)
    a[9, 9] = -1e3
    b = rng.standard_normal((N, 1))
    x, s = _solve("potrs", a, b, "mixed")
    assert s == _solve("potrs", a, b, "exact")[1] > 0 and np.isnan(x).all()


def test_lu_solve_derivative_uses_the_mixed_solve():
    rng = np.random.default_rng(3)
    a = jnp.asarray(_matrix(rng, 128, 10.0, False, np.float64))
    b = jnp.asarray(rng.standard_normal((128, 2)))
    mesh = _one_gpu()

    def loss(solve):
        return lambda a, b: jnp.sum(jnp.sin(solve(a, b)))

    g = jax.grad(loss(lambda a, b: jaxmg.lu_solve(a, b, 32, mesh, SPECS,
                                                  precision="mixed")), (0, 1))(a, b)
    with jax.default_matmul_precision("highest"):
        g_ref = jax.grad(loss(jnp.linalg.solve), (0, 1))(a, b)
    for got, want in zip(g, g_ref):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-11)


def test_memory_estimate_counts_the_float32_copy():
    mesh = _one_gpu()
    exact = jaxmg.memory_estimate("potrs", (4096, 4096), np.float64, mesh, nrhs=1)
    mixed = jaxmg.memory_estimate("potrs", (4096, 4096), np.float64, mesh, nrhs=1,
                                  precision="mixed")
    assert mixed.engine == "cusolverdn"
    assert mixed.workspace >= exact.workspace + 4096 * 4096 * 4


TWO = pytest.mark.skipif(len(GPUS) < 2, reason="needs 2 GPUs")
GATHER = "cusolverdn-gather"


def _two_gpus() -> Mesh:
    return Mesh(np.array(GPUS[:2]), ("x",))


@TWO
@pytest.mark.parametrize("kappa", [1e2, 1e13], ids=["1e2", "1e13"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
@pytest.mark.parametrize("op", ["potrs", "lu_solve"])
def test_mixed_on_two_gpus_runs_on_the_gathered_copy(capfd, monkeypatch, op, dtype, kappa):
    """A row-sharded A of N = 640 (T_A 64: 5 tiles per GPU) gathered onto
    GPU 0: refinement (or, at 1e13, the fallback) there, the exact path's
    accuracy and status, the gather engine's trace."""
    rng = np.random.default_rng(40)
    n = 640
    a = _matrix(rng, n, kappa, op == "potrs", dtype)
    b = rng.standard_normal((n, 2)).astype(dtype)
    mesh = _two_gpus()

    def solve(precision):
        x, s = getattr(jaxmg, op)(jnp.asarray(a), jnp.asarray(b), 64, mesh, SPECS,
                                  return_status=True, precision=precision)
        return np.asarray(x), int(s)

    xe, se = solve("exact")
    monkeypatch.setenv("JAXMG_TRACE", "1")
    capfd.readouterr()
    x, s = solve("mixed")
    line = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("jaxmg trace")]
    assert s == se == 0
    assert _berr(a, x, b) <= 10 * max(_berr(a, xe, b), U)
    assert f"engine {GATHER}," in line[-1], line
    if kappa < 1e10:
        assert re.search(r"refine \w+ \d+ iterations? backward error", line[-1]), line
    else:
        assert "fallback" in line[-1], line


@TWO
def test_mixed_on_two_gpus_above_the_gather_table_still_gathers(capfd, monkeypatch):
    """No distributed engine has a mixed routine: the gather engine takes a
    mixed potrs at every size (the exact one goes to cuSOLVERMg from the
    table's size on; engine/gather/thresholds.c)."""
    from jaxmg._src import _native
    assert _native.engine_check("CUDA", "potrs", 2, "float64", 65536, 1024,
                                precision="mixed") == (True, GATHER)


@TWO
def test_memory_estimate_on_two_gpus_counts_the_gathered_and_float32_copies():
    mesh = _two_gpus()
    n = 4096
    exact = jaxmg.memory_estimate("potrs", (n, n), np.float64, mesh, nrhs=1)
    mixed = jaxmg.memory_estimate("potrs", (n, n), np.float64, mesh, nrhs=1,
                                  precision="mixed")
    assert exact.engine == mixed.engine == GATHER
    assert exact.workspace >= n * n * 8  # the gathered copy
    assert mixed.workspace >= exact.workspace + n * n * 4  # and its float32 copy


@TWO
@pytest.mark.parametrize("engine", ["cusolvermg", "cusolvermp"])
def test_distributed_engines_forced_refuse_mixed_naming_what_to_pass(monkeypatch, engine):
    monkeypatch.setenv("JAXMG_ENGINE", engine)
    mesh = _two_gpus()
    with pytest.raises(ValueError, match=r'precision="mixed".*pass precision="exact"'):
        jaxmg.potrs(jnp.asarray(np.eye(64)), jnp.ones((64, 1)), 32, mesh, SPECS,
                    precision="mixed")


@TWO
@pytest.mark.timeout(400)
def test_gathered_copy_that_does_not_fit_runs_cusolvermg_s_exact_potrs():
    """The gather engine forced under a capped allocator (test_gpu_gather's
    child, precision "mixed"): the gathered copy does not fit, and
    cuSOLVERMg's exact potrs solves the distributed A (it has no mixed
    routine), status 0, the trace saying so."""
    from test_gpu_errors import _child, _run_capped, _traces
    child = _child(0.45, """
        solve = jax.jit(lambda b: jaxmg.potrs(
            jax.lax.with_sharding_constraint(make(n), rows), b, 256, mesh,
            (P("x", None), P(None, None)), return_status=True, precision="mixed"))
        x, s = solve(jnp.ones((n, 1)))
        res = host_residual(np.asarray(x)[:, 0], lambda i: 1.0)
        print(f"SOLVED: status {int(s)} residual {res:.2e}", flush=True)
        sys.exit(0 if int(s) == 0 and res < 1e-14 else 4)
        """)
    out = _run_capped(child, JAXMG_TRACE="1", JAXMG_ENGINE=GATHER)
    assert "SOLVED: status 0" in out.stdout, out.stdout
    traces = _traces(out, "potrs")
    assert traces, out.stderr[-3000:]
    for t in traces:
        assert "no memory to gather: cusolvermg" in t, t
        assert "exact float64 on cusolvermg (it has no mixed routine)" in t, t

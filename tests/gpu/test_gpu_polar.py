"""polar (A = Up H) on GPUs by both methods (QDWH over jaxmg's QR, the
default, and gesvd's SVD): every dtype, tall and square, through cuSOLVERDn
on one GPU (its QR; both of its SVD routines: Jacobi up to 1024 rows and
columns, Xgesvd above) and through the gather engine on every GPU (>= 2),
QDWH beside JAX's own ``jax.scipy.linalg.polar`` (QDWH) on the same GPU
(both judged against SciPy's in float64; nothing is timed here:
bench/one_gpu.py times them); graded spectra to 1/eps and a singular A
(QDWH falling back on the SVD); the status and NaN of an A that is not
finite; grad against the SVD formula differentiated by JAX; and QDWH on
cuSOLVERMp (the local model: its QRs are cuSOLVERMp's; a singular A gives
status 1; the SVD method is refused; skipped where cuSOLVERMp cannot be
loaded). Skipped without GPUs."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg  # noqa: E402
import scipy.linalg  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

import jaxmg  # noqa: E402

ROWS = P("x", None)
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
IDS = ["f32", "f64", "c64", "c128"]
METHODS = ("qdwh", "svd")


def _mesh(k: int) -> Mesh:
    return Mesh(np.array(GPUS[:k]), ("x",))


def _ref(a: np.ndarray) -> np.ndarray:
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def _random(rng, shape, dtype) -> np.ndarray:
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _with_spectrum(rng, shape, s, dtype) -> np.ndarray:
    m, n = shape
    u, _ = np.linalg.qr(_ref(_random(rng, (m, n), dtype)))
    v, _ = np.linalg.qr(_ref(_random(rng, (n, n), dtype)))
    return ((u * np.asarray(s, np.float64)) @ v.conj().T).astype(dtype)


def _errors(a, up, h) -> dict[str, float]:
    """Backward error, orthogonality, H's distance from SciPy's (all over
    ||A||), Up's distance from SciPy's, H's departure from Hermitian and
    its most negative eigenvalue over ||A||."""
    ref = _ref(a)
    up, h = _ref(np.asarray(up)), _ref(np.asarray(h))
    norm = np.linalg.norm(ref)
    up_ref, h_ref = scipy.linalg.polar(ref)
    return {
        "backward": np.linalg.norm(ref - up @ h) / norm,
        "orthogonality": np.linalg.norm(up.conj().T @ up - np.eye(up.shape[1])),
        "h": np.linalg.norm(h - h_ref) / norm,
        "up": np.linalg.norm(up - up_ref),
        "hermitian": np.linalg.norm(h - h.conj().T) / norm,
        "negative": max(0.0, -np.linalg.eigvalsh((h + h.conj().T) / 2)[0]) / norm,
    }


def _check(a, up, h, cond: float = 1.0, floor: dict[str, float] | None = None) -> None:
    """30 m eps on every figure, or (``floor``) 3x what JAX's own routine
    gives for the same A where that is more."""
    m, n = a.shape
    tol = 30 * m * float(np.finfo(a.dtype).eps)
    e = _errors(a, up, h)
    bound = {k: max(tol, 3 * (floor or {}).get(k, 0.0)) for k in ("backward", "orthogonality", "h")}
    assert up.shape == (m, n) and h.shape == (n, n)
    assert all(e[k] < bound[k] for k in bound), (e, bound)
    assert e["hermitian"] == 0.0 and e["negative"] < tol, e
    if tol * cond < 0.1:
        assert e["up"] < tol * cond, e


@pytest.fixture
def rng(request):
    import zlib

    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _shapes(k: int) -> list[tuple[int, int]]:
    """Tall and square, rows and columns divisible by k; then one above
    1024 rows (cuSOLVERDn's Xgesvd rather than its Jacobi routine, which
    one side above 1024 selects): 1056 x 200 rather than 1088 x 1032, at
    which test_cusolverdn_on_one_gpu_beside_jax[f32-qdwh] took 36-45 s on
    one H100 alone (f64 12-14 s, complex 7 s, the SVD method 3-4 s:
    docs/gpu-runs/2026-11-25-s12-qdwh) and 112 s beside another pytest
    process on an H200 (2026-11-27-s17-h200x4): float32 QDWH at that size
    is a slow spot of jaxmg's QDWH or of JAX's beside it, to look at
    (bench/one_gpu.py times them), not this test's to pay for."""
    return [(64 * k, 24 * k), (40 * k, 40 * k), (1056, 200)]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_cusolverdn_on_one_gpu_beside_jax(monkeypatch, rng, dtype, method):
    """Both methods against SciPy's factors; the SVD method on every shape
    (the one past 1024 rows takes cuSOLVERDn's Xgesvd, the others Jacobi),
    QDWH on the tall and the square one beside JAX's own QDWH. (QDWH on
    1056 x 200 is the same iteration over the same QR, whose multi-panel
    shapes are test_gpu_qr.py's, 1056 x 264 in every dtype; with it, and
    JAX's QDWH beside it, the float32 QDWH case took 30 s on an H200,
    docs/gpu-runs/2026-11-28-s19 call3, against 9 s for float64 and 4 s
    for complex: not measured apart, the large shape the likely part, as
    _shapes says. Beside the SVD method JAX's QDWH was the same call again,
    on a matrix of its own.)"""
    monkeypatch.setenv("JAXMG_ENGINE", "cusolverdn")
    mesh = _mesh(1)
    for shape in _shapes(1) if method == "svd" else _shapes(1)[:2]:
        a = _random(rng, shape, dtype)
        A = jax.device_put(a, NamedSharding(mesh, ROWS))
        up, h, status = jaxmg.polar(A, return_status=True, method=method)
        assert int(status) == 0
        _check(a, up, h, cond=float(np.linalg.cond(_ref(a))))
        if method == "svd":
            continue
        # JAX's own on the same GPU, judged by the same tolerance, and the
        # two Up's the same where A's condition number makes that telling;
        # its products at full precision, as jaxmg's (core/_precision.py:
        # XLA's default computes float32 products in TF32 on GPUs).
        with jax.default_matmul_precision("highest"):
            up_j, h_j = jax.scipy.linalg.polar(jax.device_put(a, GPUS[0]))
        ours, theirs = _errors(a, up, h), _errors(a, up_j, h_j)
        tol = 30 * shape[0] * float(np.finfo(dtype).eps)
        for key in ("backward", "orthogonality", "h"):
            assert theirs[key] < tol, (key, ours, theirs)
        cond = float(np.linalg.cond(_ref(a)))
        if tol * cond < 0.1:
            diff = np.linalg.norm(_ref(np.asarray(up)) - _ref(np.asarray(up_j)))
            assert diff < tol * cond, (diff, ours, theirs)


@pytest.mark.skipif(len(GPUS) < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_gather_on_every_gpu(monkeypatch, rng, dtype, method):
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)  # the default: gather
    k = len(GPUS)
    mesh = _mesh(k)
    for shape in _shapes(k)[:2]:
        a = _random(rng, shape, dtype)
        A = jax.device_put(a, NamedSharding(mesh, ROWS))
        up, h = jaxmg.polar(A, method=method)
        # The SVD method's single-precision U Vh from cuSOLVER's Jacobi SVD
        # (below 1024 rows) was 1.07x past 30 m eps on orthogonality for an
        # 80 x 80 complex64 A on 2 H200 (11-27): bounded by 3x JAX's own
        # polar of the same A on one GPU where that is more, as gesvd's test.
        with jax.default_matmul_precision("highest"):
            up_j, h_j = jax.scipy.linalg.polar(jax.device_put(a, GPUS[0]), method=method)
        _check(a, up, h, cond=float(np.linalg.cond(_ref(a))), floor=_errors(a, up_j, h_j))
        assert up.sharding.is_equivalent_to(NamedSharding(mesh, ROWS), 2)
        assert h.sharding.is_equivalent_to(NamedSharding(mesh, ROWS), 2)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("k", sorted({1, len(GPUS)}))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_graded_spectra(rng, dtype, k, method):
    """Singular values 1 ... eps (κ = 1/eps), numerically singular (three
    zero singular values, rounded to about eps ‖A‖) and exactly singular
    (three zero columns: QDWH's fallback on the SVD): still backward
    stable. In the local model (JAXMG_ENGINE=cusolvermp: no SVD) the SVD
    method is refused before tracing and QDWH's exactly singular case gives
    status 1 with NaN outputs, as docs/guides/statuses.md says."""
    import os
    local_model = os.environ.get("JAXMG_ENGINE") == "cusolvermp"
    mesh = _mesh(k)
    n = 32 * k
    eps = float(np.finfo(dtype).eps)
    singular = np.logspace(0, -3, n)
    singular[-3:] = 0
    zero_columns = _random(rng, (2 * n, n), dtype)
    zero_columns[:, -3:] = 0
    cases = {"graded to eps": _with_spectrum(rng, (2 * n, n), np.logspace(0, np.log10(eps), n),
                                             dtype),
             "numerically singular": _with_spectrum(rng, (2 * n, n), singular, dtype),
             "zero columns": zero_columns}
    for name, a in cases.items():
        x = jax.device_put(a, NamedSharding(mesh, ROWS))
        if local_model and method == "svd":
            with pytest.raises(ValueError, match="it has no gesvd"):
                jaxmg.polar(x, return_status=True, method=method)
            continue
        up, h, status = jaxmg.polar(x, return_status=True, method=method)
        if local_model and name == "zero columns":
            assert int(status) == 1, name
            assert np.all(np.isnan(np.asarray(up))) and np.all(np.isnan(np.asarray(h))), name
            continue
        assert int(status) == 0, name
        _check(a, up, h, cond=np.inf)


@pytest.mark.parametrize("k", sorted({1, len(GPUS)}))
def test_nan_gives_status_and_nan(rng, k):
    mesh = _mesh(k)
    a = _random(rng, (16 * k, 8 * k), np.float64)
    a[3, 2] = np.nan
    up, h, status = jaxmg.polar(jax.device_put(a, NamedSharding(mesh, ROWS)),
                                return_status=True)
    assert int(status) == -1
    assert np.all(np.isnan(np.asarray(up))) and np.all(np.isnan(np.asarray(h)))


@pytest.mark.parametrize("k", sorted({1, len(GPUS)}))
def test_grad_matches_the_svd_formula(rng, k):
    mesh = _mesh(k)
    a = _random(rng, (24 * k, 16 * k), np.complex128)
    c = _random(rng, a.shape, np.complex128)
    d = _random(rng, (a.shape[1],) * 2, np.complex128)

    def loss(polar):
        def run(x):
            up, h = polar(x)
            return jnp.real(jnp.sum(jnp.conj(c) * up) + jnp.sum(jnp.conj(d) * h))
        return run

    def by_svd(x):
        u, s, vh = jnp.linalg.svd(x, full_matrices=False)
        return u @ vh, (jnp.conj(vh).T * s) @ vh

    ours = jax.jit(jax.grad(loss(lambda x: jaxmg.polar(x, mesh=mesh, matrix_specs=ROWS))))
    g = ours(jax.device_put(a, NamedSharding(mesh, ROWS)))
    g_ref = jax.grad(loss(by_svd))(jax.device_put(a, GPUS[0]))
    err = np.linalg.norm(np.asarray(g) - np.asarray(g_ref)) / np.linalg.norm(np.asarray(g_ref))
    assert err < 1e-8


@pytest.mark.parametrize("k", sorted({1, len(GPUS)}))
def test_qdwh_on_cusolvermp(monkeypatch, rng, k):
    """The local model on k GPUs: QDWH's QRs by cuSOLVERMp (geqrf + orgqr),
    float64 and complex64, against SciPy's factors; an exactly singular A
    gives status 1 and NaN (cuSOLVERMp has no SVD to fall back on), and
    method="svd" is refused before tracing."""
    ok, why = jaxmg.cusolvermp_available()
    if not ok:
        pytest.skip(f"cuSOLVERMp not available: {why}")
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermp")
    mesh = _mesh(k)
    for dtype, shape in ((np.float64, (64 * k, 24 * k)), (np.complex64, (40 * k, 40 * k))):
        a = _random(rng, shape, dtype)
        up, h, status = jaxmg.polar(jax.device_put(a, NamedSharding(mesh, ROWS)),
                                    return_status=True)
        assert int(status) == 0
        _check(a, up, h, cond=float(np.linalg.cond(_ref(a))))
    a = _random(rng, (16 * k, 8 * k), np.float64)
    a[:, :2] = 0
    A = jax.device_put(a, NamedSharding(mesh, ROWS))
    up, h, status = jaxmg.polar(A, return_status=True)
    assert int(status) == 1
    assert np.all(np.isnan(np.asarray(up))) and np.all(np.isnan(np.asarray(h)))
    with pytest.raises(ValueError, match=r"jaxmg.polar: no engine runs .*SVD.*cusolvermp"):
        jaxmg.polar(A, method="svd")

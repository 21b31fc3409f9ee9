"""qr and least_squares on GPUs: every dtype, tall and square, through
cuSOLVERDn on one GPU (csrc/engine/cusolverdn/qr.c: geqrf on a transposed
copy of A, orgqr/ungqr) and through the gather engine on every GPU (>= 2);
beside jnp.linalg.qr and jnp.linalg.lstsq on the same GPU (values only,
nothing timed); NaN and rank deficiency as statuses; grad against JAX's;
and cuSOLVERMp (csrc/engine/cusolvermp/qr.c: geqrf + orgqr on the ranks' own
rows, in the local model) on one GPU and on every GPU, skipped where
cuSOLVERMp cannot be loaded. Residual-based. Skipped without GPUs."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

import jaxmg  # noqa: E402

ROWS = P("x", None)
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
IDS = ["f32", "f64", "c64", "c128"]


def _mesh(k: int) -> Mesh:
    return Mesh(np.array(GPUS[:k]), ("x",))


def _random(rng, shape, dtype) -> np.ndarray:
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _ref(x) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def _check_qr(a, q, r) -> None:
    ref, q, r = _ref(a), _ref(q), _ref(r)
    m, n = ref.shape
    tol = 30 * m * float(np.finfo(a.dtype).eps)
    assert q.shape == (m, n) and r.shape == (n, n)
    assert np.all(np.tril(r, -1) == 0)
    assert np.linalg.norm(ref - q @ r) / np.linalg.norm(ref) < tol
    assert np.linalg.norm(q.conj().T @ q - np.eye(n)) < tol
    np.testing.assert_allclose(np.abs(np.diagonal(r)),
                               np.abs(np.diagonal(np.linalg.qr(ref, mode="r"))),
                               rtol=0, atol=tol * np.linalg.norm(ref))


def _check_x(a, b, x, x_jax) -> None:
    ref, b, x = _ref(a), _ref(b), _ref(x)
    tol = 30 * ref.shape[0] * float(np.finfo(a.dtype).eps)
    normal = ref.conj().T @ (ref @ x - b)
    scale = np.linalg.norm(ref) * (np.linalg.norm(ref) * np.linalg.norm(x) + np.linalg.norm(b))
    assert np.linalg.norm(normal) / scale < tol
    kappa = np.linalg.cond(ref)
    x_jax = _ref(x_jax)
    assert np.linalg.norm(x - x_jax) / np.linalg.norm(x_jax) < tol * kappa ** 2


def _shapes(k: int) -> list[tuple[int, int]]:
    """Tall and square, rows and columns divisible by k; one past 1024
    rows, the same for every k (1056 x 264, divisible by 1 to 4): at
    1088 k x 256 k the 2-GPU cases took 8-14 s each on 2 H200, most of it
    JAX's SVD-based lstsq beside ours and the float64 references
    (docs/gpu-runs/2026-11-27-s17-h200x4/call3)."""
    return [(64 * k, 24 * k), (40 * k, 40 * k), (1056, 264)]


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _run_ops(mesh, rng, dtype) -> None:
    for shape in _shapes(mesh.size):
        a = _random(rng, shape, dtype)
        A = jax.device_put(a, NamedSharding(mesh, ROWS))
        q, r, status = jaxmg.qr(A, return_status=True)
        assert int(status) == 0
        _check_qr(a, q, r)
        assert q.sharding.is_equivalent_to(NamedSharding(mesh, ROWS), 2)
        q_jax, r_jax = jnp.linalg.qr(jnp.asarray(a))
        _check_qr(a, q_jax, r_jax)  # JAX's own, on the same GPU, to the same bound
        b = _random(rng, (shape[0], 3), dtype)
        x, status = jaxmg.least_squares(A, b, return_status=True)
        assert int(status) == 0
        _check_x(a, b, x, jnp.linalg.lstsq(jnp.asarray(a), jnp.asarray(b))[0])


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_cusolverdn_on_one_gpu(monkeypatch, capfd, rng, dtype):
    monkeypatch.setenv("JAXMG_ENGINE", "cusolverdn")
    monkeypatch.setenv("JAXMG_TRACE", "1")
    _run_ops(_mesh(1), rng, dtype)
    lines = [line for line in capfd.readouterr().err.splitlines()
             if line.startswith("jaxmg trace qr")]
    assert lines and all("cusolverdn" in line and "orgqr" in line for line in lines), lines[:2]


@pytest.mark.skipif(len(GPUS) < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_gather_on_every_gpu(monkeypatch, rng, dtype):
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)  # the default: gather
    _run_ops(_mesh(len(GPUS)), rng, dtype)


@pytest.mark.parametrize("k", sorted({1, len(GPUS)}))
def test_nan_and_rank_deficiency_give_statuses(rng, k):
    mesh = _mesh(k)
    a = _random(rng, (16 * k, 8 * k), np.float64)
    b = _random(rng, (16 * k,), np.float64)
    a[:, 5] = a[:, 0] + a[:, 1]
    x, status = jaxmg.least_squares(jax.device_put(a, NamedSharding(mesh, ROWS)), b,
                                    return_status=True)
    assert int(status) == 6 and np.all(np.isnan(np.asarray(x)))
    a[3, 2] = np.nan
    q, r, status = jaxmg.qr(jax.device_put(a, NamedSharding(mesh, ROWS)),
                            return_status=True)
    assert int(status) == -1
    assert np.all(np.isnan(np.asarray(q))) and np.all(np.isnan(np.asarray(r)))


@pytest.mark.parametrize("k", sorted({1, len(GPUS)}))
def test_grads_match_jax(rng, k):
    mesh = _mesh(k)
    a = _random(rng, (24 * k, 8 * k), np.complex128)
    b = _random(rng, (24 * k,), np.complex128)
    c = _random(rng, a.shape, np.complex128)

    def loss(qr, lstsq):
        def run(x):
            q, r = qr(x)
            return (jnp.real(jnp.sum(jnp.conj(c) * (q @ r @ r)))
                    + jnp.real(jnp.sum(jnp.sin(lstsq(x, b)))))
        return run

    ours = jax.jit(jax.grad(loss(lambda x: jaxmg.qr(x, mesh=mesh, matrix_specs=ROWS),
                                 lambda x, b: jaxmg.least_squares(x, b, mesh=mesh,
                                                                  matrix_specs=ROWS))))
    g = ours(jax.device_put(a, NamedSharding(mesh, ROWS)))
    g_ref = jax.grad(loss(jnp.linalg.qr, lambda x, b: jnp.linalg.lstsq(x, b)[0]))(
        jnp.asarray(a))
    err = np.linalg.norm(np.asarray(g) - np.asarray(g_ref)) / np.linalg.norm(np.asarray(g_ref))
    assert err < 1e-8


@pytest.mark.parametrize("k", sorted({1, len(GPUS)}))
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_cusolvermp(monkeypatch, capfd, rng, dtype, k):
    """The local model: every GPU factors its own rows (never run on a GPU
    before this test was written: csrc/engine/cusolvermp/qr.c)."""
    ok, why = jaxmg.cusolvermp_available()
    if not ok:
        pytest.skip(f"cuSOLVERMp not available: {why}")
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermp")
    monkeypatch.setenv("JAXMG_TRACE", "1")
    mesh = _mesh(k)
    _run_ops(mesh, rng, dtype)
    # R's rows past a group's share (N not divisible by the GPUs) in
    # least_squares, whose R stays inside the call.
    a = _random(rng, (48 * k, 3), dtype)
    b = _random(rng, (48 * k,), dtype)
    x = jaxmg.least_squares(jax.device_put(a, NamedSharding(mesh, ROWS)), b)
    _check_x(a, b, x, jnp.linalg.lstsq(jnp.asarray(a), jnp.asarray(b))[0])
    lines = [line for line in capfd.readouterr().err.splitlines()
             if line.startswith("jaxmg trace qr")]
    assert lines and all("cusolvermp" in line and "orgqr" in line for line in lines), lines[:2]

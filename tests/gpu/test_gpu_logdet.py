"""potrs's log-determinant on one GPU (issue 16, item 2), through both
engines that read it from the factor (cuSOLVERDn, the default on one GPU,
and cuSOLVERMg's tiled factor, JAXMG_ENGINE=cusolvermg), every dtype,
against numpy.linalg.slogdet; NaN and the status on a matrix that is not
positive definite; its gradient against jnp.linalg.slogdet's. Skipped
without GPUs."""

from __future__ import annotations

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
import jaxmg_testing as jt  # noqa: E402

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SPECS = (P("x", None), P(None, None))


def _mesh() -> Mesh:
    return Mesh(np.array(GPUS[:1]), ("x",))


def _on(mesh: Mesh, a: np.ndarray) -> jax.Array:
    return jax.device_put(a, NamedSharding(mesh, P("x", None)))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("engine", ["default", "cusolvermg"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_logdet_on_one_gpu_against_numpy(engine, dtype, monkeypatch):
    if engine == "default":
        monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    else:
        monkeypatch.setenv("JAXMG_ENGINE", engine)
    mesh = _mesh()
    rng = np.random.default_rng(16)
    rtol = 1e-4 if np.finfo(dtype).bits <= 32 else 1e-11
    for n, tile in ((777, 128), (1024, None)):  # 128: several tiles, padded
        a = jt.make_hpd(rng, n, dtype)
        b = rng.standard_normal((n, 2)).astype(dtype)
        want = np.linalg.slogdet(a.astype(np.complex128))[1]
        x, logdet, status = jaxmg.potrs(_on(mesh, a), b, tile, mesh, SPECS,
                                        return_status=True, return_logdet=True)
        assert int(status) == 0 and logdet.dtype == np.finfo(dtype).dtype
        np.testing.assert_allclose(float(logdet), want, rtol=rtol)
        # Not positive definite: NaN and the status.
        bad = a.copy()
        bad[5, 5] = -bad[5, 5]
        _, logdet, status = jaxmg.potrs(_on(mesh, bad), b, tile, mesh, SPECS,
                                        return_status=True, return_logdet=True)
        assert int(status) > 0 and np.isnan(float(logdet))


@pytest.mark.timeout(300)
def test_logdet_gradient_on_one_gpu(monkeypatch):
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    mesh = _mesh()
    rng = np.random.default_rng(17)
    a = jt.make_hpd(rng, 256, np.complex128)
    b = np.ones((256, 1), np.complex128)
    ours = jax.grad(lambda a: jaxmg.potrs(a, b, 64, mesh, SPECS, return_logdet=True)[1])(
        _on(mesh, a))

    def herm(a):
        strict = jnp.triu(a, 1)
        return strict + jnp.conj(strict).T + jnp.diag(jnp.real(jnp.diagonal(a))).astype(a.dtype)

    ref = jax.grad(lambda a: jnp.linalg.slogdet(herm(a))[1])(jnp.asarray(a))
    err = np.linalg.norm(np.asarray(ours) - np.asarray(ref)) / np.linalg.norm(np.asarray(ref))
    assert err < 1e-10, err

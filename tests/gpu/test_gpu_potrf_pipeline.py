"""The tiled Cholesky (engine/cusolvermg/cuda_potrf.c) with JAXMG_POTRF_PIPELINE
off (the default) and on (panel copies on a copy stream of each GPU into two
buffers, diagonal tiles by herk): potrs and potri on the cuSOLVERMg engine
(JAXMG_ENGINE=cusolvermg: the default engine gathers at these sizes) for
every dtype, N a multiple of T_A times the GPUs and not (padded), a matrix
that is not positive definite, and JAXMG_TRACE's per-GPU split (with the
pipeline no panel copy on the compute streams). Residuals in float64 /
complex128 on the host."""

from __future__ import annotations

import re

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

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
EPS = {np.float32: 1.2e-7, np.float64: 2.2e-16, np.complex64: 1.2e-7, np.complex128: 2.2e-16}
CASES = [(1024, 128), (1000, 100), (2048, 256)]


@pytest.fixture(params=["0", "1"], ids=["pipeline0", "pipeline1"])
def pipeline(request, monkeypatch):
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermg")
    monkeypatch.setenv("JAXMG_POTRF_PIPELINE", request.param)
    return request.param


def _hpd(rng, n, dtype):
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    return (x @ x.conj().T / n + np.eye(n)).astype(dtype)  # condition number about 5


@pytest.mark.parametrize("n,T_A", CASES, ids=[f"{n}-{t}" for n, t in CASES])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_potrs_and_potri(pipeline, dtype, n, T_A):
    n = n - n % len(GPUS)
    mesh = Mesh(np.array(GPUS), ("x",))
    rng = np.random.default_rng(n + T_A)
    a = _hpd(rng, n, dtype)
    b = rng.standard_normal((n, 3)).astype(dtype)
    a_s = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    x, s1 = jaxmg.potrs(a_s, jnp.asarray(b), T_A, mesh, (P("x", None), P(None, None)),
                        return_status=True)
    inv, s2 = jaxmg.potri(a_s, T_A, mesh, (P("x", None),), return_status=True)
    assert (int(s1), int(s2)) == (0, 0)
    wide = np.complex128 if np.issubdtype(dtype, np.complexfloating) else np.float64
    aw, x, inv = a.astype(wide), np.asarray(x).astype(wide), np.asarray(inv).astype(wide)
    tol = 50 * EPS[dtype] * np.sqrt(n)
    res = np.linalg.norm(aw @ x - b) / (np.linalg.norm(aw) * np.linalg.norm(x))
    assert res < tol, res
    res = np.linalg.norm(aw @ inv - np.eye(n)) / (np.linalg.norm(aw) * np.linalg.norm(inv))
    assert res < tol, res


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_not_positive_definite_gives_status(pipeline, dtype):
    mesh = Mesh(np.array(GPUS), ("x",))
    n = 64 * len(GPUS)
    k = n // 2 + 3
    a = np.eye(n, dtype=dtype)
    a[k, k] = -1
    a = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    for T_A in (16, 20):
        x, s = jaxmg.potrs(a, jnp.ones((n, 1), dtype), T_A, mesh, (P("x", None),),
                           return_status=True)
        assert int(s) == k + 1 and bool(jnp.all(jnp.isnan(x)))


def test_trace_split_and_workspace(capfd, monkeypatch):
    """The per-GPU split: panel copies on the compute streams without the
    pipeline (on 2 or more GPUs), none with it; the pipeline's workspace is
    no smaller (its second panel buffer, unless cuSOLVERMg's potrs workspace,
    taken in the same buffer, is larger)."""
    mesh = Mesh(np.array(GPUS), ("x",))
    n, T_A = 4096 - 4096 % len(GPUS), 256
    a = _hpd(np.random.default_rng(7), n, np.float64)
    a_s = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    b = jnp.ones((n, 1))
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermg")
    monkeypatch.setenv("JAXMG_TRACE", "1")
    work = {}
    for on in ("0", "1"):
        monkeypatch.setenv("JAXMG_POTRF_PIPELINE", on)
        capfd.readouterr()
        jaxmg.potrs(a_s, b, T_A, mesh, (P("x", None), P(None, None))).block_until_ready()
        err = capfd.readouterr().err
        line = [ln for ln in err.splitlines() if "tiled potrf [" in ln]
        assert len(line) == 1, err
        split = line[0].split("tiled potrf [", 1)[1].split("]", 1)[0]
        assert "not measured" not in split, split
        if len(GPUS) > 1:
            assert (" copy " in split) == (on == "0"), split
        work[on] = int(re.search(r", workspace (\d+) bytes", line[0]).group(1))
        print(f"pipeline {on}: workspace {work[on]} bytes; {split}")
    assert work["1"] >= work["0"], work

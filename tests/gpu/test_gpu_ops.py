"""jaxmg on GPUs: every op and dtype, large N, permuted and partial meshes,
the seeds' examples unchanged, N = 65536 on 4 GPUs, repeated calls.

Run on a GPU machine with scripts/device-test.sh; skipped without GPUs.
Residuals are computed on the GPUs in float64 (complex128).
"""

from __future__ import annotations

import gc
import os
import pathlib
import subprocess
import sys
import time

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

ROOT = pathlib.Path(__file__).resolve().parents[2]
DTYPES = [jnp.float32, jnp.float64, jnp.complex64, jnp.complex128]
EPS = {jnp.float32: 1.2e-7, jnp.float64: 2.2e-16, jnp.complex64: 1.2e-7, jnp.complex128: 2.2e-16}


def _mesh(devices) -> Mesh:
    return Mesh(np.array(devices), ("x",))


def _wide(dtype):
    return jnp.complex128 if jnp.issubdtype(dtype, jnp.complexfloating) else jnp.float64


def _random_hpd(key, n: int, dtype, mesh: Mesh) -> jax.Array:
    """A well-conditioned random Hermitian positive definite matrix, generated
    row-sharded on the GPUs: (R + R^H)/2 shifted by 3 sigma sqrt(n) (a random
    symmetric matrix's spectral norm is about 2 sigma sqrt(n)). Not
    jaxmg_testing.make_hpd: these matrices reach N = 65536 (32 GiB), made on
    the GPUs where a host-made one would take minutes and the host's memory."""
    sharding = NamedSharding(mesh, P("x", None))

    @jax.jit
    def make(key):
        k1, k2 = jax.random.split(key)
        r = jax.random.normal(k1, (n, n), _wide(dtype))
        if jnp.issubdtype(dtype, jnp.complexfloating):
            r = r + 1j * jax.random.normal(k2, (n, n), jnp.float64)
        h = (r + jnp.conj(r.T)) / 2
        a = h + 3.0 * np.sqrt(n) * jnp.eye(n, dtype=h.dtype)
        return jax.lax.with_sharding_constraint(a.astype(dtype), sharding)

    return make(key)


def _tol(dtype, n: int) -> float:
    return 50 * EPS[dtype] * np.sqrt(n)


# Each check's figures in one jitted float64 program: op by op, every new
# size and dtype compiled a dozen small programs (the first dtype of each
# size took 3-6 s more than the next on 2 H200, docs/gpu-runs/
# 2026-11-27-s17-h200x4/call2).
@jax.jit
def _potrs_figures(a, b, x):
    aw, bw, xw = (v.astype(_wide(a.dtype)) for v in (a, b, x))
    res = jnp.linalg.norm(aw @ xw - bw) / (jnp.linalg.norm(aw) * jnp.linalg.norm(xw))
    return res, jnp.all(jnp.isfinite(x))


@jax.jit
def _potri_figures(a, inv):
    aw, iw = a.astype(_wide(a.dtype)), inv.astype(_wide(a.dtype))
    n = a.shape[0]
    res = jnp.linalg.norm(aw @ iw - jnp.eye(n)) / (jnp.linalg.norm(aw) * jnp.linalg.norm(iw))
    herm = jnp.linalg.norm(iw - jnp.conj(iw.T)) / jnp.linalg.norm(iw)
    return res, herm, jnp.all(jnp.isfinite(inv))


@jax.jit
def _syevd_figures(a, w, v):
    aw, vw = a.astype(_wide(a.dtype)), v.astype(_wide(a.dtype))
    n = a.shape[0]
    res = jnp.linalg.norm(aw @ vw - vw * w.astype(jnp.float64)) / jnp.linalg.norm(aw)
    orth = jnp.linalg.norm(jnp.conj(vw.T) @ vw - jnp.eye(n)) / np.sqrt(n)
    ref = jnp.linalg.eigvalsh(aw)
    werr = jnp.max(jnp.abs(w - ref)) / jnp.max(jnp.abs(ref))
    return res, orth, werr, jnp.all(jnp.diff(w) >= 0)


def _check_potrs(a, b, x, dtype):
    res, finite = _potrs_figures(a, b, x)
    assert bool(finite)
    assert float(res) < _tol(dtype, a.shape[0]), float(res)


def _check_potri(a, inv, dtype):
    n = a.shape[0]
    res, herm, finite = _potri_figures(a, inv)
    assert bool(finite)
    assert float(res) < _tol(dtype, n), float(res)
    assert float(herm) < _tol(dtype, n), float(herm)


def _check_syevd(a, w, v, dtype):
    n = a.shape[0]
    res, orth, werr, ascending = _syevd_figures(a, w, v)
    assert bool(ascending), "eigenvalues not ascending"
    assert float(res) < _tol(dtype, n), float(res)
    assert float(orth) < _tol(dtype, n), float(orth)
    assert float(werr) < _tol(dtype, n), float(werr)


@pytest.mark.skipif(len(GPUS) < 4, reason="needs 4 GPUs")
def test_potrs_n65536_float64_on_4_gpus():
    n = 65536
    mesh = _mesh(GPUS[:4])
    a = _random_hpd(jax.random.PRNGKey(11), n, jnp.float64, mesh)
    b = jax.random.normal(jax.random.PRNGKey(12), (n, 1), jnp.float64)
    solve = jax.jit(lambda a, b: jaxmg.potrs(a, b, 1024, mesh, (P("x", None), P(None, None))))
    x = solve(a, b).block_until_ready()
    t0 = time.perf_counter()
    x = solve(a, b).block_until_ready()
    print(f"\npotrs float64 N=65536 on 4 GPUs, T_A=1024: {time.perf_counter() - t0:.3f} s")
    res = jnp.linalg.norm(a @ x - b) / (jnp.linalg.norm(a) * jnp.linalg.norm(x))
    assert float(res) < 1e-13, float(res)


@pytest.mark.parametrize("T_A", [128, 256, 1000])
def test_potrs_n8192(T_A):
    n = 8192
    mesh = _mesh(GPUS)
    a = _random_hpd(jax.random.PRNGKey(T_A), n, jnp.float64, mesh)
    b = jax.random.normal(jax.random.PRNGKey(2), (n, 4), jnp.float64)
    x = jaxmg.potrs(a, b, T_A, mesh, (P("x", None), P(None, None)))
    _check_potrs(a, b, x, jnp.float64)
    inv = jaxmg.potri(a, T_A, mesh, (P("x", None),))
    _check_potri(a, inv, jnp.float64)


def test_potrs_more_right_hand_sides_than_one_chunk():
    """NRHS is unlimited: cuSOLVERMg is called in chunks of 2048 (it is wrong
    past that many in one tile), so 5000 exercises two full chunks and a rest."""
    n = 4096
    mesh = _mesh(GPUS)
    a = _random_hpd(jax.random.PRNGKey(9), n, jnp.float64, mesh)
    b = jax.random.normal(jax.random.PRNGKey(10), (n, 5000), jnp.float64)
    x = jaxmg.potrs(a, b, 256, mesh, (P("x", None), P(None, None)))
    _check_potrs(a, b, x, jnp.float64)
    col_res = jnp.linalg.norm(a @ x - b, axis=0) / jnp.linalg.norm(b, axis=0)
    assert float(jnp.max(col_res)) < 1e-12, float(jnp.max(col_res))


def test_syevd_n8192():
    n = 8192
    mesh = _mesh(GPUS)
    a = _random_hpd(jax.random.PRNGKey(7), n, jnp.float64, mesh)
    w, v = jaxmg.syevd(a, 256, mesh, (P("x", None),))
    _check_syevd(a, w, v, jnp.float64)


@pytest.mark.skipif(len(GPUS) < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("order", ["reversed", "partial"])
def test_permuted_and_partial_mesh(order):
    devices = GPUS[::-1] if order == "reversed" else GPUS[-2:]
    if order == "reversed" and len(GPUS) >= 4:
        devices = [GPUS[i] for i in (2, 0, 3, 1)]
    mesh = _mesh(devices)
    n = 2048
    a = _random_hpd(jax.random.PRNGKey(3), n, jnp.float64, mesh)
    b = jax.random.normal(jax.random.PRNGKey(4), (n, 2), jnp.float64)
    x = jaxmg.potrs(a, b, 256, mesh, (P("x", None), P(None, None)))
    _check_potrs(a, b, x, jnp.float64)
    inv = jaxmg.potri(a, 256, mesh, (P("x", None),))
    _check_potri(a, inv, jnp.float64)
    w, v = jaxmg.syevd(a, 256, mesh, (P("x", None),))
    _check_syevd(a, w, v, jnp.float64)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: jnp.dtype(d).name)
def test_not_positive_definite_gives_status_and_nan(dtype):
    mesh = _mesh(GPUS)
    n = 64 * len(GPUS)
    k = n // 2 + 3
    a = np.eye(n, dtype=dtype)
    a[k, k] = -1
    a = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    for T_A in (16, 20):
        x, s = jaxmg.potrs(a, jnp.ones((n, 1), dtype), T_A, mesh, (P("x", None),), return_status=True)
        assert int(s) == k + 1 and bool(jnp.all(jnp.isnan(x)))
        inv, s = jaxmg.potri(a, T_A, mesh, (P("x", None),), return_status=True)
        assert int(s) == k + 1 and bool(jnp.all(jnp.isnan(inv)))


def _run_example(path: pathlib.Path, timeout: float = 600) -> str:
    env = dict(os.environ)
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=timeout, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_seed_readme_example_unchanged():
    out = _run_example(ROOT / "examples" / "seeds" / "readme_minimal.py")
    assert out.strip().endswith("True"), out
    assert "0.08333333" in out


def test_seed_tutorial_complete_example_unchanged():
    out = _run_example(ROOT / "examples" / "seeds" / "tutorial_6_complete_example.py")
    assert "Update shape: (100000, 1)" in out, out


@pytest.mark.skipif(len(GPUS) != 4, reason="the tutorial's mesh has 4 devices")
@pytest.mark.parametrize("name", ["tutorial_3_1_basic_usage.py", "tutorial_4_3_shardmap_ctx.py"])
def test_seed_tutorial_four_device_examples(name):
    out = _run_example(ROOT / "examples" / "seeds" / name)
    assert out.strip().endswith("True"), out


def test_repeated_calls_keep_gpu_memory_flat():
    mesh = _mesh(GPUS)
    n = 1024
    a = _random_hpd(jax.random.PRNGKey(5), n, jnp.float64, mesh)
    b = jnp.ones((n, 1), jnp.float64)
    solve = jax.jit(lambda a, b: jaxmg.potrs(a, b, 128, mesh, (P("x", None),)))
    inv = jax.jit(lambda a: jaxmg.potri(a, 128, mesh, (P("x", None),)))
    for _ in range(5):
        solve(a, b).block_until_ready()
        inv(a).block_until_ready()
    gc.collect()
    before = [d.memory_stats()["bytes_in_use"] for d in mesh.devices.flat]
    for i in range(200):
        x = solve(a, b * (i + 1))
        y = inv(a)
    x.block_until_ready()
    y.block_until_ready()
    _check_potrs(a, b * 200, x, jnp.float64)
    del x, y
    gc.collect()
    after = [d.memory_stats()["bytes_in_use"] for d in mesh.devices.flat]
    assert after == before, (before, after)


# Every dtype at (1024, 128); two each at the edge sizes (1000 / 100;
# 1536 / 1000, a tile wider than a shard), together every dtype once more
# (the 12 cases of the full grid took 54 s on 2 H200, docs/gpu-runs/
# 2026-11-27-s17-h200x4/call2).
_EVERY_OP_CASES = ([(1024, 128, d) for d in DTYPES]
                   + [(1000, 100, np.float64), (1000, 100, np.complex64),
                      (1536, 1000, np.float32), (1536, 1000, np.complex128)])


@pytest.mark.parametrize("n,T_A,dtype", _EVERY_OP_CASES,
                         ids=[f"{n}-{t}-{jnp.dtype(d).name}" for n, t, d in _EVERY_OP_CASES])
def test_every_op_and_dtype_on_all_gpus(dtype, n, T_A):
    n = n - n % len(GPUS)
    mesh = _mesh(GPUS)
    key = jax.random.PRNGKey(n + T_A)
    a = _random_hpd(key, n, dtype, mesh)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, 3)).astype(dtype)
    x, s1 = jaxmg.potrs(a, b, T_A, mesh, (P("x", None), P(None, None)), return_status=True)
    _check_potrs(a, b, x, dtype)
    inv, s2 = jaxmg.potri(a, T_A, mesh, (P("x", None),), return_status=True)
    _check_potri(a, inv, dtype)
    w, v, s3 = jaxmg.syevd(a, T_A, mesh, (P("x", None),), return_status=True)
    _check_syevd(a, w, v, dtype)
    assert (int(s1), int(s2), int(s3)) == (0, 0, 0)
    assert x.sharding.is_fully_replicated and w.sharding.is_fully_replicated

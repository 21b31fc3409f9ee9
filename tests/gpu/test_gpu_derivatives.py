"""Derivatives, vmap and array-only calls on GPUs (the CPU suite's
tests/python/test_derivatives.py, test_ctx_derivatives.py and
test_inferred_layout.py, smaller). Skipped without GPUs."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

import jaxmg  # noqa: E402

import jaxmg_testing as jt  # noqa: E402

SPEC = (P("x", None),)


def _hpd(n, dtype, seed=0):
    """jt.make_hpd with its own generator."""
    return jt.make_hpd(np.random.default_rng(seed), n, dtype)


def _separated(n, dtype, seed=0):
    """jt.make_separated with its own generator (eigenvalues 1, ..., n)."""
    return jt.make_separated(np.random.default_rng(seed), n, dtype)


def _herm(a):
    strict = jnp.triu(a, 1)
    return strict + jnp.conj(strict).T + jnp.diag(jnp.real(jnp.diagonal(a))).astype(a.dtype)


@pytest.fixture(scope="module")
def auto_mesh():
    return Mesh(np.array(GPUS), ("x",), axis_types=(AxisType.Auto,))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_check_grads_all_ops(auto_mesh, dtype):
    n = 16 * len(GPUS)
    a = _hpd(n, dtype)
    b = np.random.default_rng(1).standard_normal((n, 2)).astype(dtype)
    tol = 2e-5
    check_grads(lambda a, b: jaxmg.potrs(a, b, 8, auto_mesh, SPEC), (a, b), order=2,
                modes=("fwd", "rev"), atol=tol, rtol=tol)
    check_grads(lambda a: jaxmg.potri(a, 8, auto_mesh, SPEC), (a,), order=1,
                modes=("fwd", "rev"), atol=tol, rtol=tol)
    check_grads(lambda a: jaxmg.syevd(a, 8, auto_mesh, SPEC, return_eigenvectors=False),
                (_separated(n, dtype),), order=1, modes=("fwd", "rev"), atol=tol, rtol=tol)


def test_grad_matches_jnp_on_gpus(auto_mesh):
    n = 128 * len(GPUS)
    a = _hpd(n, np.float64)
    b = np.random.default_rng(2).standard_normal((n, 1))
    ours = jax.grad(lambda a, b: jnp.sum(jaxmg.potrs(a, b, 64, auto_mesh, SPEC) ** 2),
                    argnums=(0, 1))(a, b)
    ref = jax.grad(lambda a, b: jnp.sum(jnp.linalg.solve(_herm(a), b) ** 2), argnums=(0, 1))(a, b)
    for g, r in zip(ours, ref):
        assert float(jnp.linalg.norm(g - r) / jnp.linalg.norm(r)) < 1e-10


def test_vmap_and_array_only_calls():
    n = 64 * len(GPUS)
    mesh = Mesh(np.array(GPUS), ("x",))
    a = np.stack([_hpd(n, np.float64, s) for s in range(3)])
    b = np.ones((3, n, 1))
    xs = jax.vmap(lambda a, b: jaxmg.potrs(a, b, 32, mesh, SPEC))(a, b)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(xs[i]), np.linalg.solve(a[i], b[i]), rtol=1e-10)
    placed = jax.device_put(a[0], NamedSharding(mesh, P("x", None)))
    x = jaxmg.potrs(placed, b[0])
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a[0], b[0]), rtol=1e-10)


# --- the shard_map forms (tests/python/test_ctx_derivatives.py, smaller) ------------


def _in_shard_map(mesh, body, in_specs, out_specs, check_vma):
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_vma=check_vma))


# Each dtype once and each check_vma once (9-23 s a case on 2 H200,
# docs/gpu-runs/2026-11-27-s17-h200x4): the grid of the two is the CPU
# suite's (tests/python/test_ctx_derivatives.py), the GPU's own part (the
# FFI calls in both dtypes, padded and not) is in each pair.
@pytest.mark.parametrize("dtype,check_vma", [(np.float64, True), (np.complex128, False)],
                         ids=["f64-check_vma", "c128-no_check_vma"])
def test_ctx_check_grads_on_gpus(auto_mesh, check_vma, dtype):
    """Shards of 16 rows: T_A=8 divides them, T_A=6 pads them to 18."""
    n = 16 * len(GPUS)
    a = _hpd(n, dtype)
    b = np.random.default_rng(1).standard_normal((n, 2)).astype(dtype)
    tol = 2e-5
    rows = P("x", None)
    for tile in (8, 6):
        potrs = _in_shard_map(auto_mesh, lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, T_A=tile)[0],
                              (rows, P(None, None)), P(None, None), check_vma)
        check_grads(potrs, (a, b), order=2, modes=("fwd", "rev"), atol=tol, rtol=tol)
        potri = _in_shard_map(auto_mesh, lambda a: jaxmg.potri_shardmap_ctx(a, T_A=tile)[0],
                              (rows,), rows, check_vma)
        check_grads(potri, (a,), order=1, modes=("fwd", "rev"), atol=tol, rtol=tol)
        w_only = _in_shard_map(auto_mesh, lambda a: jaxmg.syevd_shardmap_ctx(
            a, T_A=tile, return_eigenvectors=False)[0], (rows,), P(None), check_vma)
        check_grads(w_only, (_separated(n, dtype),), order=1, modes=("fwd", "rev"), atol=tol,
                    rtol=tol)


@pytest.mark.parametrize("check_vma", [True, False], ids=["check_vma", "no_check_vma"])
def test_ctx_grads_match_jnp_on_gpus(auto_mesh, check_vma):
    """Every device's copy of x an output with its own weight (with
    check_vma=False the cotangents then differ from device to device), and
    eigenvectors through V sin(w) V^H summed over the devices' columns."""
    n = 128 * len(GPUS)
    a, h = _hpd(n, np.float64), _separated(n, np.float64)
    b = np.random.default_rng(2).standard_normal((n, 1))
    scale = jnp.arange(1.0, len(GPUS) + 1.0)[:, None, None]

    def body(a, h, b):
        x, _ = jaxmg.potrs_shardmap_ctx(a, b, T_A=64)
        w, v, _ = jaxmg.syevd_shardmap_ctx(h, T_A=64)
        c = v.shape[1]
        w_mine = jax.lax.dynamic_slice_in_dim(w, jax.lax.axis_index("x") * c, c)
        return x[None], jax.lax.psum((v * jnp.sin(w_mine)) @ v.T, "x")

    f = _in_shard_map(auto_mesh, body, (P("x", None), P("x", None), P(None, None)),
                      (P("x", None, None), P(None, None)), check_vma)

    def loss(x, eig_function):
        return jnp.sum(scale * x ** 2) / jnp.sum(scale) + jnp.sum(jnp.arange(n) * eig_function)

    ours = jax.jit(jax.grad(lambda a, h, b: loss(*f(a, h, b)), argnums=(0, 1, 2)))(a, h, b)

    def reference(a, h, b):
        w, v = jnp.linalg.eigh(_herm(h))
        return loss(jnp.linalg.solve(_herm(a), b)[None], (v * jnp.sin(w)) @ v.T)

    ref = jax.grad(reference, argnums=(0, 1, 2))(a, h, b)
    for g, r in zip(ours, ref):
        assert float(jnp.linalg.norm(g - r) / jnp.linalg.norm(r)) < 1e-10


# --- every kind of mesh (tests/python/test_mesh_derivatives.py, smaller) ------------


def _laid_out(mesh, x, spec):
    sharding = NamedSharding(mesh, spec)
    if AxisType.Explicit in mesh.axis_types:
        return jax.sharding.reshard(x, sharding)
    return jax.lax.with_sharding_constraint(x, sharding)


# 6 of the (kind, set_mesh, jit) grid's 8 cases (4-8 s each on 2 H200,
# docs/gpu-runs/2026-11-27-s17-h200x4), the dtype as before (complex128
# where set_mesh != jit): each kind with and without set_mesh, eager and
# jit, in both dtypes, and every (set_mesh, jit) pair. The grid is the CPU
# suite's (tests/python/test_mesh_derivatives.py; its set_mesh eager path in
# test_cotangents_are_typed_like_their_primals there).
@pytest.mark.parametrize("kind,set_mesh,jit", [
    ("explicit", False, False), ("explicit", True, True), ("explicit", False, True),
    ("auto", False, True), ("auto", True, False), ("auto", True, True)],
    ids=["explicit-no_set_mesh-eager", "explicit-set_mesh-jit", "explicit-no_set_mesh-jit",
         "auto-no_set_mesh-jit", "auto-set_mesh-eager", "auto-set_mesh-jit"])
def test_check_grads_on_every_kind_of_mesh_on_gpus(kind, set_mesh, jit):
    """potrs, potri, eigenvalues and V sin(w) V^H, plain forms (and the ctx
    forms under jit) on meshes of Explicit and Auto axes, without and inside
    jax.set_mesh (issue 15)."""
    import contextlib

    types = {"explicit": AxisType.Explicit, "auto": AxisType.Auto}
    mesh = jax.make_mesh((len(GPUS),), ("x",), devices=GPUS, axis_types=(types[kind],))
    dtype = np.complex128 if set_mesh != jit else np.float64
    n, tile, tol = 16 * len(GPUS), 8, 2e-5
    a, h = _hpd(n, dtype), _separated(n, dtype)
    b = np.random.default_rng(1).standard_normal((n, 2)).astype(dtype)
    rows = P("x", None)

    def vectors(h):
        w, v = jaxmg.syevd(h, tile, mesh, SPEC)
        v = _laid_out(mesh, v, P())
        return (v * jnp.sin(w)) @ jnp.conj(v).T

    cases = [(lambda a, b: jaxmg.potrs(a, b, tile, mesh, SPEC), (a, b)),
             (lambda a: jaxmg.potri(a, tile, mesh, SPEC), (a,)),
             (lambda h: jaxmg.syevd(h, tile, mesh, SPEC, return_eigenvectors=False), (h,)),
             (vectors, (h,))]
    if jit:
        def ctx(body, in_specs, out_specs):
            f = jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
            return lambda *xs: _laid_out(mesh, f(*(_laid_out(mesh, x, s)
                                                 for x, s in zip(xs, in_specs))), out_specs)

        cases += [
            (ctx(lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, T_A=tile)[0],
                 (rows, P(None, None)), P(None, None)), (a, b)),
            (ctx(lambda a: jaxmg.potri_shardmap_ctx(a, T_A=tile)[0], (rows,), rows), (a,)),
            (ctx(lambda h: jaxmg.syevd_shardmap_ctx(h, T_A=tile, return_eigenvectors=False)[0],
                 (rows,), P(None)), (h,)),
        ]
    for f, args in cases:
        with jax.set_mesh(mesh) if set_mesh else contextlib.nullcontext():
            check_grads(jax.jit(f) if jit else f, args, order=1, modes=("fwd", "rev"),
                        atol=tol, rtol=tol)

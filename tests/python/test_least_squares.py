"""least_squares (JAXMg 1.x's) on 4 CPU devices: every dtype, tall and
square A, b 1-D and 2-D, N not divisible by the devices, rank deficiency
and NaN as statuses, jit, vmap, donation, derivatives (check_grads on Auto
and Explicit meshes, real and complex, and jnp.linalg.lstsq's own
derivative), the ctx form at the global level and inside shard_map, and
misuse refused before tracing.

x is compared with numpy.linalg.lstsq's in the reference precision, with
a bound scaled by A's condition number (the problem's own sensitivity),
and by the normal equations' residual ||Aᴴ (A x - b)|| / (||A||² ||x||)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
import jaxmg_testing as jt

ROWS = P("x", None)
GRAD_TOL = 2e-5


def _matrix(rng, shape, dtype):
    return jt.random_matrix(rng, shape, dtype).astype(dtype)


def _place(a, mesh, spec=ROWS):
    return jax.device_put(a, NamedSharding(mesh, spec))


def _check(a, b, x, dtype):
    a_ref, b_ref, x_ref = jt.to_ref(a), jt.to_ref(b), jt.to_ref(x)
    m, n = a_ref.shape
    assert x.shape == (n,) + b.shape[1:] and x.dtype == dtype
    tol = jt.tol(dtype, m)
    # Normal equations: Aᴴ (A x - b) = 0, relative to ||A||² ||x|| (+ ||A|| ||b||).
    normal = a_ref.conj().T @ (a_ref @ x_ref - b_ref)
    scale = jt.fro(a_ref) * (jt.fro(a_ref) * jt.fro(x_ref) + jt.fro(b_ref))
    assert jt.fro(normal) / scale < tol
    x_np = np.linalg.lstsq(a_ref, b_ref, rcond=None)[0]
    kappa = np.linalg.cond(a_ref)
    assert jt.fro(x_ref - x_np) / jt.fro(x_np) < tol * kappa ** 2


@pytest.mark.parametrize("nrhs", (None, 3), ids=("b1d", "b2d"))
@pytest.mark.parametrize("shape", ((16, 8), (8, 8), (12, 3)), ids=("tall", "square", "n3"))
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_least_squares_solves_every_dtype_and_shape(mesh, rng, dtype, shape, nrhs):
    a = _matrix(rng, shape, dtype)
    b = _matrix(rng, (shape[0],) if nrhs is None else (shape[0], nrhs), dtype)
    A = _place(a, mesh)
    x, status = jaxmg.least_squares(A, b, return_status=True)
    jt.assert_status_ok(status)
    jt.assert_replicated(x, mesh)
    _check(a, b, x, dtype)
    np.testing.assert_array_equal(np.asarray(A), a)  # A is kept
    np.testing.assert_array_equal(np.asarray(jaxmg.least_squares(A, b)), np.asarray(x))


def test_least_squares_of_an_ill_conditioned_matrix_by_its_residual(mesh, rng):
    """cond(A) = 1e6 (singular values graded 1 ... 1e-6): x has the
    accuracy the problem allows; the normal equations' residual stays at
    the working precision."""
    m, n = 16, 8
    u, _ = np.linalg.qr(_matrix(rng, (m, n), np.float64))
    v, _ = np.linalg.qr(_matrix(rng, (n, n), np.float64))
    a = (u * np.logspace(0, -6, n)) @ v.T
    b = _matrix(rng, (m,), np.float64)
    x, status = jaxmg.least_squares(_place(a, mesh), b, return_status=True)
    jt.assert_status_ok(status)
    _check(a, b, x, np.float64)


@pytest.mark.parametrize("dtype", (np.float64, np.complex64), ids=("f64", "c64"))
def test_least_squares_of_a_rank_deficient_matrix_gives_status_and_nan(mesh, rng, dtype):
    a = _matrix(rng, (16, 6), dtype)
    a[:, 4] = a[:, 1] + 2 * a[:, 2]  # column 5 (1-based) in the span of 2 and 3
    b = _matrix(rng, (16, 2), dtype)
    x, status = jaxmg.least_squares(_place(a, mesh), b, return_status=True)
    assert int(status) == 5
    assert np.all(np.isnan(np.asarray(x)))
    a[:, 0] = 0  # a zero column: the first
    x, status = jaxmg.least_squares(_place(a, mesh), b, return_status=True)
    assert int(status) == 1 and np.all(np.isnan(np.asarray(x)))
    x, status = jaxmg.least_squares(_place(np.zeros_like(a), mesh), b, return_status=True)
    assert int(status) == 1 and np.all(np.isnan(np.asarray(x)))


def test_least_squares_of_a_matrix_with_nan_gives_status_and_nan(mesh, rng):
    a = _matrix(rng, (8, 4), np.float32)
    a[6, 1] = np.nan
    x, status = jaxmg.least_squares(_place(a, mesh), _matrix(rng, (8,), np.float32),
                                    return_status=True)
    assert int(status) == -1 and np.all(np.isnan(np.asarray(x)))


def test_least_squares_under_jit_and_vmap(mesh, rng):
    a = _matrix(rng, (16, 8), np.complex128)
    b = _matrix(rng, (16, 2), np.complex128)
    f = jax.jit(lambda A, b: jaxmg.least_squares(A, b, 2, mesh, ROWS, return_status=True))
    x, status = f(_place(a, mesh), b)
    jt.assert_status_ok(status)
    _check(a, b, x, np.complex128)
    batch = np.stack([_matrix(rng, (8, 4), np.float64) for _ in range(3)])
    bs = np.stack([_matrix(rng, (8,), np.float64) for _ in range(3)])
    g = jax.vmap(lambda a, b: jaxmg.least_squares(a, b, mesh=mesh, matrix_specs=ROWS))
    x = g(jnp.asarray(batch), jnp.asarray(bs))
    assert x.shape == (3, 4)
    for i in range(3):
        _check(batch[i], bs[i], x[i], np.float64)


def test_least_squares_donate_deletes_a_and_b(mesh, rng):
    a = _matrix(rng, (8, 4), np.float64)
    b = _matrix(rng, (8,), np.float64)
    A, B = _place(a, mesh), _place(b, mesh, P())
    x = jaxmg.least_squares(A, B, donate=True)
    assert A.is_deleted() and B.is_deleted()
    _check(a, b, x, np.float64)


# --- derivatives ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ("auto", "explicit"))
@pytest.mark.parametrize("dtype", (np.float64, np.complex128), ids=("f64", "c128"))
def test_least_squares_check_grads_on_auto_and_explicit_meshes(cpu_devices, rng, kind, dtype):
    axis = {"auto": AxisType.Auto, "explicit": AxisType.Explicit}[kind]
    mesh = jax.make_mesh((4,), ("x",), devices=cpu_devices, axis_types=(axis,))
    a = _place(_matrix(rng, (8, 3), dtype), mesh)
    b = _place(_matrix(rng, (8, 2), dtype), mesh, P())
    f = jax.jit(lambda a, b: jaxmg.least_squares(a, b, mesh=mesh, matrix_specs=ROWS))
    check_grads(f, (a, b), order=1, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)


@pytest.mark.parametrize("dtype", (np.float64, np.complex128), ids=("f64", "c128"))
def test_least_squares_grad_matches_jax(auto_mesh, rng, dtype):
    a, b = _matrix(rng, (12, 4), dtype), _matrix(rng, (12,), dtype)
    c = _matrix(rng, (4,), dtype)

    def loss(solve):
        return lambda a, b: jnp.real(jnp.sum(jnp.conj(c) * jnp.sin(solve(a, b))))

    mine = lambda a, b: jaxmg.least_squares(a, b, mesh=auto_mesh, matrix_specs=ROWS)
    theirs = lambda a, b: jnp.linalg.lstsq(a, b)[0]
    g = jax.grad(loss(mine), argnums=(0, 1))(_place(a, auto_mesh), jnp.asarray(b))
    g_ref = jax.grad(loss(theirs), argnums=(0, 1))(jnp.asarray(a), jnp.asarray(b))
    for x, y in zip(g, g_ref):
        assert jt.fro(np.asarray(x) - np.asarray(y)) / jt.fro(np.asarray(y)) < 1e-10


# --- the ctx form --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", (np.float32, np.complex128), ids=("f32", "c128"))
def test_least_squares_ctx_at_the_global_level(cpu_devices, rng, dtype):
    s_mesh = jax.make_mesh((4,), ("S",), devices=cpu_devices, axis_types=(AxisType.Auto,))
    a, b = _matrix(rng, (16, 6), dtype), _matrix(rng, (16, 2), dtype)
    A = _place(a, s_mesh, P("S", None))
    a_work, b_work, x, status = jaxmg.least_squares_shardmap_ctx(A, b)
    jt.assert_status_ok(status)
    _check(a, b, x, dtype)
    assert a_work.shape == a.shape and b_work.shape == b.shape
    jt.assert_sharded_like(a_work, s_mesh, P("S", None))
    np.testing.assert_array_equal(np.asarray(b_work)[:6], np.asarray(x))
    assert jt.orthogonality(a_work) < jt.tol(dtype, 16)  # a_work holds Q
    with jax.sharding.set_mesh(s_mesh):  # under jit: the context mesh
        out = jax.jit(lambda A, b: jaxmg.least_squares_shardmap_ctx(A, b[:, 0], T_A=2))(A, b)
    assert len(out) == 4 and out[1].shape == (16,) and out[2].shape == (6,)
    jt.assert_status_ok(out[3])
    _check(a, b[:, 0], out[2], dtype)
    x3 = jaxmg.least_squares_shardmap_ctx(A, b, 2, s_mesh, P("S", None))[2]  # positional
    np.testing.assert_array_equal(np.asarray(x3), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(A), a)


def test_least_squares_ctx_inside_shard_map_and_its_grad(mesh, rng):
    a, b = _matrix(rng, (16, 5), np.complex128), _matrix(rng, (16, 2), np.complex128)

    def body(a_local, b):
        return jaxmg.least_squares_shardmap_ctx(a_local, b)

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(ROWS, P()),
                              out_specs=(P(), P("x"))))
    x, status = f(_place(a, mesh), b)
    assert status.shape == (4,) and np.all(np.asarray(status) == 0)
    _check(a, b, x, np.complex128)
    loss = lambda solve: lambda a: jnp.real(jnp.sum(jnp.cos(solve(a))))
    g = jax.jit(jax.grad(loss(lambda a: f(a, b)[0])))(_place(a, mesh))
    g_ref = jax.grad(loss(lambda a: jnp.linalg.lstsq(a, b)[0]))(jnp.asarray(a))
    assert jt.fro(np.asarray(g) - np.asarray(g_ref)) / jt.fro(np.asarray(g_ref)) < 1e-10


# --- misuse ---------------------------------------------------------------------------


def test_least_squares_misuse_is_refused_before_tracing(mesh, rng):
    a = _place(_matrix(rng, (8, 4), np.float64), mesh)
    b = _matrix(rng, (8,), np.float64)
    with pytest.raises(ValueError, match="least_squares: a is 4 x 8, wider than tall"):
        jaxmg.least_squares(_place(_matrix(rng, (4, 8), np.float64), mesh), b[:4])
    with pytest.raises(ValueError, match=r"b must be \(M,\) or \(M, K\) with M=8"):
        jaxmg.least_squares(a, b[:6])
    with pytest.raises(ValueError, match=r"b must be \(M,\) or \(M, K\)"):
        jaxmg.least_squares(a, np.ones((8, 2, 2)))
    with pytest.raises(TypeError, match="b has dtype float32 but a has dtype float64"):
        jaxmg.least_squares(a, b.astype(np.float32))
    with pytest.raises(ValueError, match="M=10 rows, not divisible by the 4 devices"):
        jaxmg.least_squares(_matrix(rng, (10, 4), np.float64), _matrix(rng, (10,), np.float64))
    with pytest.raises(ValueError, match="mesh is required under jax.jit"):
        jax.jit(jaxmg.least_squares)(a, b)
    with pytest.raises(ValueError, match="axis_name is the seeds' form's"):
        jaxmg.least_squares_shardmap_ctx(a, b, axis_name="x")
    with pytest.raises(ValueError, match="in_specs\\[1\\] must replicate b"):
        jaxmg.least_squares(a, b, matrix_specs=(ROWS, P("x")))

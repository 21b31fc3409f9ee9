"""qr (JAXMg 1.x's QR) on 4 CPU devices: every dtype, tall and square,
the status and NaN, jit, vmap, donation, derivatives (check_grads on Auto
and Explicit meshes, real and complex, and jnp.linalg.qr's own derivative),
the ctx form at the global level and inside shard_map, a 2D grid, and
misuse refused before tracing.

Q and R are checked by residuals in the reference precision (||A - QR||,
||QᴴQ - I||, R upper triangular) and R's diagonal against NumPy's in
magnitude (its signs, or phases, are LAPACK's choice)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
import jaxmg_testing as jt

ROWS = P("x", None)
SHAPES = ((16, 8), (8, 8))
SHAPE_IDS = ("tall", "square")
GRAD_TOL = 2e-5


def _matrix(rng, shape, dtype):
    return jt.random_matrix(rng, shape, dtype).astype(dtype)


def _place(a, mesh, spec=ROWS):
    return jax.device_put(a, NamedSharding(mesh, spec))


def _check(a, q, r, dtype):
    a_ref, q_ref, r_ref = jt.to_ref(a), jt.to_ref(q), jt.to_ref(r)
    m, n = a_ref.shape
    tol = jt.tol(dtype, m)
    assert q.shape == (m, n) and r.shape == (n, n)
    assert q.dtype == dtype and r.dtype == dtype
    assert np.all(np.tril(r_ref, -1) == 0), "R has entries below its diagonal"
    assert jt.fro(a_ref - q_ref @ r_ref) / jt.fro(a_ref) < tol
    assert jt.orthogonality(q_ref) < tol
    r_np = np.linalg.qr(a_ref, mode="r")
    np.testing.assert_allclose(np.abs(np.diagonal(r_ref)), np.abs(np.diagonal(r_np)),
                               rtol=0, atol=tol * jt.fro(a_ref))


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_qr_decomposes_every_dtype_and_shape(mesh, rng, dtype, shape):
    a = _matrix(rng, shape, dtype)
    A = _place(a, mesh)
    q, r, status = jaxmg.qr(A, return_status=True)
    jt.assert_status_ok(status)
    jt.assert_sharded_like(q, mesh, ROWS)
    jt.assert_sharded_like(r, mesh, ROWS)
    _check(a, q, r, dtype)
    np.testing.assert_array_equal(np.asarray(A), a)  # A is kept
    q2, r2 = jaxmg.qr(A)  # without the status
    np.testing.assert_array_equal(np.asarray(q2), np.asarray(q))
    np.testing.assert_array_equal(np.asarray(r2), np.asarray(r))


def test_qr_matches_jax(mesh, rng):
    """The same Householder QR as jnp.linalg.qr's on CPU (LAPACK's geqrf):
    Q and R agree, signs included."""
    a = _matrix(rng, (12, 4), np.float64)
    q, r = jaxmg.qr(_place(a, mesh), T_A=2)
    q_ref, r_ref = jnp.linalg.qr(jnp.asarray(a))
    np.testing.assert_allclose(np.asarray(q), np.asarray(q_ref), rtol=0, atol=1e-13)
    np.testing.assert_allclose(np.asarray(r), np.asarray(r_ref), rtol=0, atol=1e-13)


@pytest.mark.parametrize("bad", (np.nan, np.inf), ids=("nan", "inf"))
def test_qr_of_a_matrix_with_nan_gives_status_and_nan(mesh, rng, bad):
    a = _matrix(rng, (8, 4), np.complex64)
    a[5, 2] = bad
    q, r, status = jaxmg.qr(_place(a, mesh), return_status=True)
    assert int(status) == -1  # no solver ran (JMG_INFO_NONFINITE)
    assert np.all(np.isnan(np.asarray(q))) and np.all(np.isnan(np.asarray(r)))
    a[5, 2] = 1.0  # the same matrix made finite decomposes
    q, r, status = jaxmg.qr(_place(a, mesh), return_status=True)
    jt.assert_status_ok(status)
    _check(a, q, r, np.complex64)


def test_qr_of_a_rank_deficient_matrix_still_decomposes(mesh, rng):
    a = _matrix(rng, (8, 4), np.float64)
    a[:, 3] = a[:, 0] - 2 * a[:, 1]
    q, r, status = jaxmg.qr(_place(a, mesh), return_status=True)
    jt.assert_status_ok(status)  # no failure: R has a (near) zero on its diagonal
    _check(a, q, r, np.float64)
    assert abs(float(np.asarray(r)[3, 3])) < 1e-12 * jt.fro(a)


def test_qr_under_jit_and_vmap(mesh, rng):
    a = _matrix(rng, (16, 8), np.complex128)
    f = jax.jit(lambda A: jaxmg.qr(A, 2, mesh, ROWS, return_status=True))
    q, r, status = f(_place(a, mesh))
    jt.assert_status_ok(status)
    _check(a, q, r, np.complex128)
    batch = np.stack([_matrix(rng, (8, 4), np.float64) for _ in range(3)])
    q, r = jax.vmap(lambda x: jaxmg.qr(x, mesh=mesh, matrix_specs=ROWS))(jnp.asarray(batch))
    assert q.shape == (3, 8, 4) and r.shape == (3, 4, 4)
    for i in range(3):
        _check(batch[i], q[i], r[i], np.float64)


def test_qr_donate_deletes_a(mesh, rng):
    a = _matrix(rng, (8, 4), np.float64)
    A = _place(a, mesh)
    q, r = jaxmg.qr(A, donate=True)
    assert A.is_deleted()
    _check(a, q, r, np.float64)


# --- derivatives ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ("auto", "explicit"))
@pytest.mark.parametrize("dtype", (np.float64, np.complex128), ids=("f64", "c128"))
def test_qr_check_grads_on_auto_and_explicit_meshes(cpu_devices, rng, kind, dtype):
    """Forward and reverse mode against central differences, jitted, Q and
    R both (the QR of a generic A is smooth: LAPACK's sign choice does not
    flip under a small step)."""
    axis = {"auto": AxisType.Auto, "explicit": AxisType.Explicit}[kind]
    mesh = jax.make_mesh((4,), ("x",), devices=cpu_devices, axis_types=(axis,))
    a = _place(_matrix(rng, (8, 4), dtype), mesh)
    f = jax.jit(lambda x: jaxmg.qr(x, mesh=mesh, matrix_specs=ROWS))
    check_grads(f, (a,), order=1, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)


@pytest.mark.parametrize("dtype", (np.float64, np.complex128), ids=("f64", "c128"))
def test_qr_grad_matches_jax(auto_mesh, rng, dtype):
    a = _matrix(rng, (12, 4), dtype)
    c = _matrix(rng, (12, 4), dtype)
    cr = _matrix(rng, (4, 4), dtype)

    def loss(qr_fn):
        def run(x):
            q, r = qr_fn(x)
            return (jnp.real(jnp.sum(jnp.conj(c) * jnp.sin(q)))
                    + jnp.real(jnp.sum(jnp.conj(cr) * r ** 2)))
        return run

    g = jax.grad(loss(lambda x: jaxmg.qr(x, mesh=auto_mesh, matrix_specs=ROWS)))(
        _place(a, auto_mesh))
    g_ref = jax.grad(loss(jnp.linalg.qr))(jnp.asarray(a))
    assert jt.fro(np.asarray(g) - np.asarray(g_ref)) / jt.fro(np.asarray(g_ref)) < 1e-10


# --- the ctx form --------------------------------------------------------------------


def _s_mesh(cpu_devices):
    return jax.make_mesh((4,), ("S",), devices=cpu_devices, axis_types=(AxisType.Auto,))


@pytest.mark.parametrize("dtype", (np.float32, np.complex128), ids=("f32", "c128"))
def test_qr_ctx_at_the_global_level(cpu_devices, rng, dtype):
    s_mesh = _s_mesh(cpu_devices)
    a = _matrix(rng, (16, 8), dtype)
    A = _place(a, s_mesh, P("S", None))
    q, r, status = jaxmg.qr_shardmap_ctx(A)  # eager: the layout read from A
    jt.assert_status_ok(status)
    _check(a, q, r, dtype)
    with jax.sharding.set_mesh(s_mesh):  # under jit: the context mesh
        q2, r2, status2 = jax.jit(lambda A: jaxmg.qr_shardmap_ctx(A, T_A=2))(A)
    jt.assert_status_ok(status2)
    _check(a, q2, r2, dtype)
    jt.assert_sharded_like(q2, s_mesh, P("S", None))
    q3, r3, _ = jaxmg.qr_shardmap_ctx(A, 2, s_mesh, P("S", None))  # 1.x's positional form
    np.testing.assert_array_equal(np.asarray(q3), np.asarray(q))
    np.testing.assert_array_equal(np.asarray(r3), np.asarray(r))
    np.testing.assert_array_equal(np.asarray(A), a)


def test_qr_ctx_inside_shard_map_and_its_grad(mesh, rng):
    a = _matrix(rng, (16, 8), np.complex128)
    c = _matrix(rng, (16, 8), np.complex128)

    def body(a_local):
        q, r, status = jaxmg.qr_shardmap_ctx(a_local)
        return q, r, status

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(ROWS,),
                              out_specs=(ROWS, ROWS, P("x"))))
    q, r, status = f(_place(a, mesh))
    assert status.shape == (4,) and np.all(np.asarray(status) == 0)
    _check(a, q, r, np.complex128)

    def loss(qr_fn):
        def run(x):
            q, r = qr_fn(x)[:2]
            return jnp.real(jnp.sum(jnp.conj(c) * (q @ r @ r)))
        return run

    g = jax.jit(jax.grad(loss(f)))(_place(a, mesh))
    g_ref = jax.grad(loss(jnp.linalg.qr))(jnp.asarray(a))
    assert jt.fro(np.asarray(g) - np.asarray(g_ref)) / jt.fro(np.asarray(g_ref)) < 1e-10


def test_qr_on_a_2d_grid_of_devices(cpu_devices, rng):
    grid = jax.make_mesh((2, 2), ("r", "c"), devices=cpu_devices,
                         axis_types=(AxisType.Auto, AxisType.Auto))
    a = _matrix(rng, (8, 4), np.float64)
    q, r = jaxmg.qr(_place(a, grid, P("r", "c")), matrix_specs=P("r", "c"))
    _check(a, q, r, np.float64)
    jt.assert_sharded_like(q, grid, P(("r", "c"), None))


# --- misuse ---------------------------------------------------------------------------


def test_qr_misuse_is_refused_before_tracing(mesh, rng):
    c = _place(_matrix(rng, (8, 4), np.float64), mesh)
    with pytest.raises(ValueError, match=r"qr: a is 4 x 8, wider than tall; qr needs M >= N"):
        jaxmg.qr(_place(_matrix(rng, (4, 8), np.float64), mesh))
    with pytest.raises(ValueError, match="M=10 rows, not divisible by the 4 devices"):
        jaxmg.qr(_matrix(rng, (10, 4), np.float64))
    with pytest.raises(ValueError, match="R has N=6 rows, not divisible by the 4 devices"):
        jaxmg.qr(_place(_matrix(rng, (8, 6), np.float64), mesh))
    with pytest.raises(TypeError, match="supported are float32"):
        jaxmg.qr(np.ones((8, 4), np.int32))
    with pytest.raises(ValueError, match="T_A"):
        jaxmg.qr(c, T_A=0)
    with pytest.raises(TypeError, match="return_status must be a bool"):
        jaxmg.qr(c, return_status=1)
    with pytest.raises(ValueError, match="mesh is required under jax.jit"):
        jax.jit(jaxmg.qr)(c)
    with pytest.raises(ValueError, match="axis_name is the seeds' form's"):
        jaxmg.qr_shardmap_ctx(c, axis_name="x")
    with pytest.raises(ValueError, match="wider than tall"):
        jaxmg.qr_shardmap_ctx(_place(_matrix(rng, (4, 8), np.float64), mesh))
    f = jax.shard_map(lambda x: jaxmg.qr_shardmap_ctx(x, mesh=mesh)[1], mesh=mesh,
                      in_specs=(ROWS,), out_specs=ROWS)
    with pytest.raises(ValueError, match="inside a shard_map body"):
        f(c)


@pytest.mark.parametrize("shape", ((16, 8), (12, 3)), ids=("tall", "n3"))
def test_qr_and_least_squares_in_the_local_model(mesh, rng, monkeypatch, shape):
    """lapack-local (the local model on CPU devices, cuSOLVERMp's stand-in):
    every rank hands its rows of A to the engine as they lie (no Π, no
    grid), and gets its rows of Q and R back; the results are the leader
    model's."""
    a = _matrix(rng, shape, np.complex128)
    b = _matrix(rng, (shape[0], 2), np.complex128)
    A = _place(a, mesh)
    x_ref = jaxmg.least_squares(A, b)
    monkeypatch.setenv("JAXMG_ENGINE", "lapack-local")
    if shape[1] % 4 == 0:
        q, r, status = jaxmg.qr(A, return_status=True)
        jt.assert_status_ok(status)
        _check(a, q, r, np.complex128)
        q2, r2, _ = jax.jit(lambda A: jaxmg.qr_shardmap_ctx(A, mesh=mesh))(A)
        _check(a, q2, r2, np.complex128)
    x, status = jaxmg.least_squares(A, b, return_status=True)
    jt.assert_status_ok(status)
    np.testing.assert_allclose(np.asarray(x), np.asarray(x_ref), rtol=0, atol=1e-12)
    a[1, 1] = np.nan
    x, status = jaxmg.least_squares(_place(a, mesh), b, return_status=True)
    assert int(status) == -1 and np.all(np.isnan(np.asarray(x)))


def test_qr_misuse_of_the_engine_is_refused_before_tracing(mesh, rng, monkeypatch):
    """An engine that has no qr (cuSOLVERMg's, named on CPU devices: not an
    engine there) is refused before anything is traced."""
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermg")
    a = _place(_matrix(rng, (8, 4), np.float64), mesh)
    with pytest.raises(ValueError, match=r"qr: no engine runs the QR .*cusolvermg"):
        jaxmg.qr(a)

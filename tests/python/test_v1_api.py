"""JAXMg 1.x's call forms beside the seeds' (issue 16): the version, the
ctx forms (potrs, syevd, lu_solve) at the global level (eagerly, under jit
on the context mesh, Auto and Explicit axes), matrix_specs, donate=,
2D-sharded inputs, and the calls that fit neither generation, refused
before tracing. Against NumPy, every dtype; the seeds' forms are the other
test files'."""

import importlib.metadata

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

N = 16


def test_version_is_2_and_agrees_with_the_metadata():
    assert jaxmg.__version__ == importlib.metadata.version("jaxmg")
    major, minor, patch = (int(p) for p in jaxmg.__version__.split(".")[:3])
    assert (major, minor, patch) >= (2, 0, 0) > (1, 4, 1)


@pytest.fixture(scope="module")
def s_mesh(cpu_devices):
    """NetKet's mesh: one axis "S", Auto."""
    return jax.make_mesh((4,), ("S",), devices=cpu_devices, axis_types=(AxisType.Auto,))


@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_potrs_ctx_at_the_global_level(s_mesh, rng, dtype):
    a = jt.make_hpd(rng, N, dtype)
    b = jt.make_rhs(rng, N, None, dtype)
    A = jax.device_put(a, NamedSharding(s_mesh, P("S", None)))
    B = jax.device_put(b, NamedSharding(s_mesh, P()))
    work, x, status = jaxmg.potrs_shardmap_ctx(A, B, 4)  # eager: read from A
    jt.assert_status_ok(status)
    assert work.shape == (N, N) and x.shape == (N,)
    assert jt.solve_backward_error(a, x, b) < jt.tol(dtype, N)
    with jax.sharding.set_mesh(s_mesh):  # under jit: the context mesh
        _, x2, status2 = jax.jit(lambda A, B: jaxmg.potrs_shardmap_ctx(A, B, T_A=4))(A, B)
    jt.assert_status_ok(status2)
    np.testing.assert_allclose(np.asarray(x2), np.asarray(x), rtol=0, atol=10 * jt.tol(dtype, N))
    np.testing.assert_array_equal(np.asarray(A), a)  # A is kept


@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_syevd_ctx_at_the_global_level(s_mesh, rng, dtype):
    a = jt.make_hermitian(rng, N, dtype)
    A = jax.device_put(a, NamedSharding(s_mesh, P("S", None)))
    with jax.sharding.set_mesh(s_mesh):
        work, w, v, status = jax.jit(lambda A: jaxmg.syevd_shardmap_ctx(A, T_A=4))(A)
    jt.assert_status_ok(status)
    assert work.shape == (N, N)
    jt.assert_sharded_like(v, s_mesh, P("S", None))  # 1.x: V sharded like A
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(jt.to_ref(a)),
                               atol=jt.tol(dtype, N) * np.abs(a).sum())
    assert jt.eig_residual(a, w, v) < jt.tol(dtype, N)
    _, w2, status2 = jaxmg.syevd_shardmap_ctx(A, 4, return_eigenvectors=False)
    jt.assert_status_ok(status2)
    np.testing.assert_allclose(np.asarray(w2), np.asarray(w), atol=jt.tol(dtype, N) * 10)


def test_ctx_forms_on_an_explicit_mesh_under_jit(mesh, rng):
    """Explicit axes: the sharding is read from A's type; NetKet's
    contraction U^H b with out_sharding=P() works on what comes back."""
    a = jt.make_hpd(rng, N, np.float64)
    b = jt.make_rhs(rng, N, None, np.float64)
    A = jt.shard_rows(a, mesh)
    B = jt.replicate(b, mesh)

    def solve(A, B):
        _, x, _ = jaxmg.potrs_shardmap_ctx(A, B, T_A=4)
        _, w, u, _ = jaxmg.syevd_shardmap_ctx(A, T_A=4)
        y = jnp.matmul(u.conj().T, B, out_sharding=P())
        return x, jnp.matmul(u, y / w, out_sharding=P())

    with jax.sharding.set_mesh(mesh):
        x, x_eig = jax.jit(solve)(A, B)
    ref = np.linalg.solve(a, b)
    np.testing.assert_allclose(np.asarray(x), ref, atol=1e-12)
    np.testing.assert_allclose(np.asarray(x_eig), ref, atol=1e-12)


def test_failure_gives_nan_and_status(s_mesh):
    a = -np.eye(N)
    A = jax.device_put(a, NamedSharding(s_mesh, P("S", None)))
    _, x, status = jaxmg.potrs_shardmap_ctx(A, jnp.ones(N), 4)
    assert int(status) > 0 and np.isnan(np.asarray(x)).all()


def test_plain_forms_take_matrix_specs_and_donate(mesh, rng):
    a = jt.make_hpd(rng, N, np.float32)
    b = jt.make_rhs(rng, N, 2, np.float32)
    A = jt.shard_rows(a, mesh)
    x = jaxmg.potrs(A, b, 4, mesh, matrix_specs=(P("x", None), P(None, None)))
    assert jt.solve_backward_error(a, x, b) < jt.tol(np.float32, N)
    w, v = jaxmg.syevd(A, 4, mesh, matrix_specs=P("x", None))
    assert jt.eig_residual(a, w, v) < jt.tol(np.float32, N)
    assert not A.is_deleted()  # kept unless donated
    B = jt.replicate(b, mesh)
    x2, status = jaxmg.potrs(A, B, 4, return_status=True, donate=True)
    jt.assert_status_ok(status)
    assert A.is_deleted() and B.is_deleted()
    np.testing.assert_allclose(np.asarray(x2), np.asarray(x), atol=jt.tol(np.float32, N))


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_two_axis_sharding_is_accepted_by_every_op(cpu_devices, rng, dtype):
    """A over a 2D process grid, P(r, c), as NetKet's process_grid makes it."""
    grid = jax.make_mesh((2, 2), ("r", "c"), devices=cpu_devices,
                         axis_types=(AxisType.Explicit,) * 2)
    a = jt.make_hpd(rng, N, dtype)
    b = jt.make_rhs(rng, N, 1, dtype)
    A = jax.device_put(a, NamedSharding(grid, P("r", "c")))
    assert jt.solve_backward_error(a, jaxmg.potrs(A, b, 2), b) < jt.tol(dtype, N)
    x = jaxmg.potrs(A, b, 2, grid, matrix_specs=(P("r", "c"), P(None, None)))
    assert jt.solve_backward_error(a, x, b) < jt.tol(dtype, N)
    assert jt.inverse_residual(a, jaxmg.potri(A, 2)) < jt.tol(dtype, N)
    w, v = jaxmg.syevd(A, 2)
    assert jt.eig_residual(a, w, v) < jt.tol(dtype, N)
    _, x, _ = jaxmg.potrs_shardmap_ctx(A, b, 2)
    assert jt.solve_backward_error(a, x, b) < jt.tol(dtype, N)
    with jax.sharding.set_mesh(grid):
        _, w2, v2, _ = jax.jit(lambda A: jaxmg.syevd_shardmap_ctx(A, T_A=2))(A)
    assert jt.eig_residual(a, w2, v2) < jt.tol(dtype, N)


def test_seeds_ctx_form_inside_shard_map_is_unchanged(mesh, rng):
    a = jt.make_hpd(rng, N, np.float64)
    b = jt.make_rhs(rng, N, None, np.float64)
    f = jax.shard_map(lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, 4, True), mesh=mesh,
                      in_specs=(P("x", None), P()), out_specs=(P(), P()))
    x, status = jax.jit(f)(jt.shard_rows(a, mesh), jt.replicate(b, mesh))
    assert status.shape == (1,) and int(status[0]) == 0
    assert jt.solve_backward_error(a, x, b) < 1e-13


# --- calls that fit neither generation ------------------------------------------------


def _inputs(mesh):
    return jt.shard_rows(np.eye(N), mesh), jt.replicate(np.ones(N), mesh)


def _in_shard_map(mesh, fn):
    return jax.shard_map(fn, mesh=mesh, in_specs=(P("x", None), P()), out_specs=P(),
                         check_vma=False)


@pytest.mark.parametrize("kw", [{"mesh": "m"}, {"matrix_specs": P("x", None)},
                                {"in_specs": P("x", None)}, {"return_logdet": True}])
def test_1x_keywords_inside_shard_map_are_refused(mesh, kw):
    kw = {k: (mesh if v == "m" else v) for k, v in kw.items()}
    f = _in_shard_map(mesh, lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, 4, **kw)[0])
    with pytest.raises(ValueError, match="inside a shard_map body"):
        jax.jit(f).trace(*_inputs(mesh))


def test_a_mesh_in_the_seeds_pad_place_inside_shard_map_is_refused(mesh):
    f = _in_shard_map(mesh, lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, 4, mesh)[0])
    with pytest.raises(TypeError, match="argument after T_A is pad"):
        jax.jit(f).trace(*_inputs(mesh))
    g = _in_shard_map(mesh, lambda a, b: jaxmg.syevd_shardmap_ctx(a, 4, mesh)[0])
    with pytest.raises(TypeError, match="argument after T_A is return_eigenvectors"):
        jax.jit(g).trace(*_inputs(mesh))


def test_seeds_arguments_at_the_global_level_are_refused(mesh):
    A = jt.shard_rows(np.eye(N), mesh)
    with pytest.raises(ValueError, match="axis_name is the seeds' form's"):
        jaxmg.potrs_shardmap_ctx(A, jnp.ones(N), 4, axis_name="x")
    with pytest.raises(TypeError, match="argument after T_A is the mesh"):
        jaxmg.potrs_shardmap_ctx(A, jnp.ones(N), 4, True)
    with pytest.raises(TypeError, match="argument after T_A is the mesh"):
        jaxmg.syevd_shardmap_ctx(A, 4, False)


def test_other_misuse_is_refused(mesh):
    A = jt.shard_rows(np.eye(N), mesh)
    with pytest.raises(TypeError, match="not both"):
        jaxmg.potrs(A, jnp.ones(N), 4, mesh, in_specs=P("x", None), matrix_specs=P("x", None))
    with pytest.raises(TypeError, match="return_logdet must be a bool"):
        jaxmg.potrs(A, jnp.ones(N), 4, return_logdet="yes")
    with pytest.raises(TypeError, match="donate must be a bool"):
        jaxmg.syevd(A, 4, donate="yes")
    with pytest.raises(ValueError, match="names no mesh"):
        jax.jit(lambda A: jaxmg.potrs_shardmap_ctx(A, jnp.ones(N), 4)).trace(np.eye(N))


def test_ctx_forms_at_the_global_level_differentiate_and_vmap(s_mesh, rng):
    """grad through x and w (against jnp's, on the Hermitian matrix of a's
    upper triangle), and vmap over a batch of matrices, under jit on the
    context mesh."""
    n = 8
    a = jt.make_hpd(rng, n, np.float64)
    b = jt.make_rhs(rng, n, None, np.float64)
    A = jax.device_put(a, NamedSharding(s_mesh, P("S", None)))

    def solve_norm(A, b):
        return jnp.sum(jaxmg.potrs_shardmap_ctx(A, b, T_A=2)[1] ** 2)

    def eig_cubes(A):
        return jnp.sum(jaxmg.syevd_shardmap_ctx(A, T_A=2)[1] ** 3)

    with jax.sharding.set_mesh(s_mesh):
        ga, gb = jax.jit(jax.grad(solve_norm, argnums=(0, 1)))(A, b)
        gw = jax.jit(jax.grad(eig_cubes))(A)
        xs = jax.jit(jax.vmap(lambda A: jaxmg.potrs_shardmap_ctx(A, b, T_A=2)[1]))(
            jnp.stack([A, 2 * A]))
    ra, rb = jax.grad(lambda a, b: jnp.sum(jnp.linalg.solve(jt.herm(a), b) ** 2),
                      argnums=(0, 1))(a, b)
    rw = jax.grad(lambda a: jnp.sum(jnp.linalg.eigvalsh(jt.herm(a)) ** 3))(a)
    np.testing.assert_allclose(np.asarray(ga), ra, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gb), rb, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gw), rw, atol=1e-11)
    np.testing.assert_allclose(np.asarray(xs), [np.linalg.solve(a, b), np.linalg.solve(2 * a, b)],
                               atol=1e-12)


@pytest.mark.parametrize("op", ["potrs", "syevd", "lu_solve"])
def test_ctx_forms_outside_shard_map_are_the_1x_forms(op):
    """What the seeds refused ("must be called inside jax.shard_map") is
    1.x's global-level form now: a host matrix on all devices."""
    a = np.eye(8) * 2
    if op in ("potrs", "lu_solve"):
        ctx = getattr(jaxmg, f"{op}_shardmap_ctx")
        work, x, status = ctx(a, np.ones((8, 1)), T_A=2)
        np.testing.assert_allclose(np.asarray(x), 0.5)
    else:
        work, w, v, status = jaxmg.syevd_shardmap_ctx(a, T_A=2)
        np.testing.assert_allclose(np.asarray(w), 2.0)
    assert work.shape == (8, 8) and int(status) == 0


# --- lu_solve ----------------------------------------------------------------------------


def _check_lu(a, b, x, dtype):
    """x solves A x = b: small backward error, and NumPy's solution within
    what A's condition number allows."""
    assert x.shape == b.shape and np.dtype(x.dtype) == np.dtype(dtype)
    assert jt.solve_backward_error(a, x, b) < jt.tol(dtype, N)
    ref = np.linalg.solve(jt.to_ref(a), jt.to_ref(b))
    cond = np.linalg.cond(jt.to_ref(a))
    assert jt.fro(jt.to_ref(x) - ref) / jt.fro(ref) < cond * jt.tol(dtype, N)


@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_lu_solve_ctx_and_plain_at_the_global_level(s_mesh, rng, dtype):
    """A strongly non-symmetric A on NetKet's Auto mesh: the ctx form
    eagerly (layout read from A) and under jit (the context mesh), the
    plain form with matrix_specs, all against numpy.linalg.solve."""
    a = jt.make_general(rng, N, dtype)
    b = jt.make_rhs(rng, N, None, dtype)
    A = jax.device_put(a, NamedSharding(s_mesh, P("S", None)))
    B = jax.device_put(b, NamedSharding(s_mesh, P()))
    work, x, status = jaxmg.lu_solve_shardmap_ctx(A, B, 4)
    jt.assert_status_ok(status)
    assert work.shape == (N, N)
    jt.assert_sharded_like(work, s_mesh, P("S", None))
    _check_lu(a, b, x, dtype)
    with jax.sharding.set_mesh(s_mesh):
        _, x2, status2 = jax.jit(lambda A, B: jaxmg.lu_solve_shardmap_ctx(A, B, T_A=4))(A, B)
        x3 = jax.jit(lambda A, B: jaxmg.lu_solve(A, B, 4, s_mesh, P("S", None)))(A, B)
    jt.assert_status_ok(status2)
    _check_lu(a, b, x2, dtype)
    _check_lu(a, b, x3, dtype)
    x4, status4 = jaxmg.lu_solve(A, B, 4, s_mesh, matrix_specs=(P("S", None), P(None, None)),
                                 return_status=True)
    jt.assert_status_ok(status4)
    _check_lu(a, b, x4, dtype)
    np.testing.assert_array_equal(np.asarray(A), a)  # A is kept


def test_lu_solve_on_an_explicit_mesh_under_jit(mesh, rng):
    a = jt.make_general(rng, N, np.float64, scale_upper=10.0)
    b = jt.make_rhs(rng, N, 2, np.float64)
    A, B = jt.shard_rows(a, mesh), jt.replicate(b, mesh)
    with jax.sharding.set_mesh(mesh):
        _, x, status = jax.jit(lambda A, B: jaxmg.lu_solve_shardmap_ctx(A, B, T_A=4))(A, B)
        x2 = jax.jit(lambda A, B: jaxmg.lu_solve(A, B, 4, mesh, matrix_specs=P("x", None)))(A, B)
    jt.assert_status_ok(status)
    _check_lu(a, b, x, np.float64)
    _check_lu(a, b, x2, np.float64)
    assert jt.solve_backward_error(a.T, x, b) > 1e-3  # A itself, not Aᵀ


def test_lu_solve_singular_gives_nan_and_status(s_mesh, rng):
    a = jt.make_general(rng, N, np.float64)
    a[5, :] = 0
    A = jax.device_put(a, NamedSharding(s_mesh, P("S", None)))
    _, x, status = jaxmg.lu_solve_shardmap_ctx(A, jnp.ones(N), 4)
    assert int(status) > 0 and np.isnan(np.asarray(x)).all()
    x2, status2 = jaxmg.lu_solve(A, jnp.ones(N), 4, return_status=True)
    assert int(status2) == int(status) and np.isnan(np.asarray(x2)).all()


def test_lu_solve_donate(mesh, rng):
    a = jt.make_general(rng, N, np.float32)
    b = jt.make_rhs(rng, N, 2, np.float32)
    A, B = jt.shard_rows(a, mesh), jt.replicate(b, mesh)
    x = jaxmg.lu_solve(A, B, 4)
    assert not A.is_deleted() and not B.is_deleted()  # kept unless donated
    x2, status = jaxmg.lu_solve(A, B, 4, return_status=True, donate=True)
    jt.assert_status_ok(status)
    assert A.is_deleted() and B.is_deleted()
    np.testing.assert_allclose(np.asarray(x2), np.asarray(x), atol=jt.tol(np.float32, N))


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_lu_solve_two_axis_sharding(cpu_devices, rng, dtype):
    """A over a 2D process grid, P(r, c): the plain form and the ctx form,
    eagerly and under jit."""
    grid = jax.make_mesh((2, 2), ("r", "c"), devices=cpu_devices,
                         axis_types=(AxisType.Explicit,) * 2)
    a = jt.make_general(rng, N, dtype)
    b = jt.make_rhs(rng, N, 1, dtype)
    A = jax.device_put(a, NamedSharding(grid, P("r", "c")))
    _check_lu(a, b, jaxmg.lu_solve(A, b, 2), dtype)
    _check_lu(a, b, jaxmg.lu_solve(A, b, 2, grid, matrix_specs=(P("r", "c"), P(None, None))),
              dtype)
    _, x, status = jaxmg.lu_solve_shardmap_ctx(A, b, 2)
    jt.assert_status_ok(status)
    _check_lu(a, b, x, dtype)
    with jax.sharding.set_mesh(grid):
        _, x2, _ = jax.jit(lambda A, b: jaxmg.lu_solve_shardmap_ctx(A, b, T_A=2))(A, b)
    _check_lu(a, b, x2, dtype)


def test_check_grads_lu_solve_ctx_at_the_global_level(auto_mesh, rng):
    from jax.test_util import check_grads

    n = 8
    a = jt.make_general(rng, n, np.float64) + 3 * np.eye(n)
    b = jt.make_rhs(rng, n, 2, np.float64)
    f = lambda a, b: jaxmg.lu_solve_shardmap_ctx(a, b, 2, auto_mesh, P("x", None))[1]  # noqa: E731
    check_grads(f, (a, b), order=1, modes=("fwd", "rev"), atol=2e-5, rtol=2e-5)


def test_lu_solve_seeds_ctx_form_inside_shard_map_is_unchanged(mesh, rng):
    a = jt.make_general(rng, N, np.float64)
    b = jt.make_rhs(rng, N, None, np.float64)
    f = jax.shard_map(lambda a, b: jaxmg.lu_solve_shardmap_ctx(a, b, 4, True), mesh=mesh,
                      in_specs=(P("x", None), P()), out_specs=(P(), P()))
    x, status = jax.jit(f)(jt.shard_rows(a, mesh), jt.replicate(b, mesh))
    assert status.shape == (1,) and int(status[0]) == 0
    _check_lu(a, b, x, np.float64)


def test_lu_solve_misuse_is_refused(mesh):
    A, B = _inputs(mesh)
    for kw in ({"mesh": mesh}, {"matrix_specs": P("x", None)}, {"in_specs": P("x", None)}):
        f = _in_shard_map(mesh, lambda a, b: jaxmg.lu_solve_shardmap_ctx(a, b, 4, **kw)[0])
        with pytest.raises(ValueError, match="inside a shard_map body"):
            jax.jit(f).trace(A, B)
    f = _in_shard_map(mesh, lambda a, b: jaxmg.lu_solve_shardmap_ctx(a, b, 4, mesh)[0])
    with pytest.raises(TypeError, match="argument after T_A is pad"):
        jax.jit(f).trace(A, B)
    with pytest.raises(ValueError, match="axis_name is the seeds' form's"):
        jaxmg.lu_solve_shardmap_ctx(A, B, 4, axis_name="x")
    with pytest.raises(TypeError, match="argument after T_A is the mesh"):
        jaxmg.lu_solve_shardmap_ctx(A, B, 4, True)
    with pytest.raises(TypeError, match="not both"):
        jaxmg.lu_solve(A, B, 4, mesh, in_specs=P("x", None), matrix_specs=P("x", None))
    with pytest.raises(TypeError, match="donate must be a bool"):
        jaxmg.lu_solve(A, B, 4, donate="yes")
    with pytest.raises(ValueError, match="names no mesh"):
        jax.jit(lambda A: jaxmg.lu_solve_shardmap_ctx(A, jnp.ones(N), 4)).trace(np.eye(N))

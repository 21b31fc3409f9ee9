"""gesvd (JAXMg 1.x's SVD) on 4 CPU devices: every dtype, tall, wide and
square, reduced and full, every output selection, the status and NaN,
jit, vmap, grad (against jnp.linalg.svd's own derivatives on
gauge-invariant losses), the ctx form at the global level and inside
shard_map, 2D specs, and misuse refused before tracing.

Singular vectors are never compared element by element (their signs and
phases are free): U and Vh must be orthonormal, A Vhᴴ = U S, and s must be
NumPy's singular values, in the reference precision, fresh random inputs
every test."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

ROWS = P("x", None)
SHAPES = ((16, 8), (8, 16), (12, 12))
SHAPE_IDS = ("tall", "wide", "square")


def _matrix(rng, shape, dtype):
    return jt.random_matrix(rng, shape, dtype).astype(dtype)


def _place(a, mesh, spec=ROWS):
    return jax.device_put(a, NamedSharding(mesh, spec))


def _check(a, u, s, vh, full, dtype):
    """s against NumPy's; U and Vh orthonormal, of the contract's shapes, and
    A Vhᴴ = U S / ||Aᴴ u_l|| = s_l / ||A vh_lᴴ|| = s_l for what was returned."""
    a_ref = jt.to_ref(a)
    m, n = a_ref.shape
    k = min(m, n)
    tol = jt.tol(dtype, max(m, n))
    s_ref = np.linalg.svd(a_ref, compute_uv=False)
    s = np.asarray(s, np.float64)
    assert s.shape == (k,)
    assert np.all(np.diff(s) <= 0), "singular values not descending"
    np.testing.assert_allclose(s, s_ref, rtol=0, atol=tol * s_ref[0])
    if u is not None:
        assert u.shape == (m, m if full else k)
        assert jt.orthogonality(u) < tol
    if vh is not None:
        assert vh.shape == (n if full else k, n)
        assert jt.orthogonality(jt.to_ref(vh).conj().T) < tol
    if u is not None and vh is not None:
        u_k, vh_k = jt.to_ref(u)[:, :k], jt.to_ref(vh)[:k, :]
        assert jt.fro(a_ref - (u_k * s) @ vh_k) / jt.fro(a_ref) < tol
        assert jt.fro(a_ref @ vh_k.conj().T - u_k * s) / jt.fro(a_ref) < tol
    elif u is not None:
        norms = np.linalg.norm(a_ref.conj().T @ jt.to_ref(u)[:, :k], axis=0)
        np.testing.assert_allclose(norms, s_ref, rtol=0, atol=tol * s_ref[0])
    elif vh is not None:
        norms = np.linalg.norm(a_ref @ jt.to_ref(vh)[:k, :].conj().T, axis=0)
        np.testing.assert_allclose(norms, s_ref, rtol=0, atol=tol * s_ref[0])


@pytest.mark.parametrize("full", (False, True), ids=("reduced", "full"))
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_gesvd_decomposes_every_dtype_and_shape(mesh, rng, dtype, shape, full):
    a = _matrix(rng, shape, dtype)
    A = _place(a, mesh)
    u, s, vh, status = jaxmg.gesvd(A, full_matrices=full, return_status=True)
    jt.assert_status_ok(status)
    assert u.dtype == dtype and vh.dtype == dtype
    assert s.dtype == np.finfo(dtype).dtype
    jt.assert_replicated(s, mesh)
    jt.assert_sharded_like(u, mesh, ROWS)
    jt.assert_sharded_like(vh, mesh, ROWS)
    _check(a, u, s, vh, full, dtype)
    np.testing.assert_array_equal(np.asarray(A), a)  # A is kept


@pytest.mark.parametrize("selection", ("u_s_vh", "u_s", "s_vh", "s"))
@pytest.mark.parametrize("shape", ((8, 12), (12, 8)), ids=("wide", "tall"))
@pytest.mark.parametrize("dtype", (np.float32, np.complex128), ids=("f32", "c128"))
def test_gesvd_returns_what_is_asked_in_numpy_order(mesh, rng, dtype, shape, selection):
    want_u, want_vh = "u" in selection.split("_"), "vh" in selection.split("_")
    a = _matrix(rng, shape, dtype)
    out = jaxmg.gesvd(_place(a, mesh), compute_u=want_u, compute_vh=want_vh)
    out = out if isinstance(out, tuple) else (out,)
    assert len(out) == 1 + want_u + want_vh
    u = out[0] if want_u else None
    s = out[int(want_u)]
    vh = out[-1] if want_vh else None
    _check(a, u, s, vh, False, dtype)
    with_status = jaxmg.gesvd(_place(a, mesh), compute_u=want_u, compute_vh=want_vh,
                              return_status=True)
    assert len(with_status) == len(out) + 1
    jt.assert_status_ok(with_status[-1])
    np.testing.assert_allclose(np.asarray(with_status[int(want_u)]), np.asarray(s),
                               rtol=0, atol=0)


@pytest.mark.parametrize("dtype", (np.float64, np.complex64), ids=("f64", "c64"))
def test_gesvd_of_a_matrix_with_nan_gives_status_and_nan(mesh, rng, dtype):
    a = _matrix(rng, (8, 4), dtype)
    a[5, 2] = np.nan
    u, s, vh, status = jaxmg.gesvd(_place(a, mesh), return_status=True)
    assert int(status) == -1  # A has a NaN entry: no solver ran (JMG_INFO_NONFINITE)
    for x in (u, s, vh):
        assert np.all(np.isnan(np.asarray(x)))
    # The same matrix without the NaN decomposes, on the same devices.
    a[5, 2] = 1.0
    _, status = jaxmg.gesvd(_place(a, mesh), compute_u=False, compute_vh=False,
                            return_status=True)
    jt.assert_status_ok(status)


def test_gesvd_of_a_rank_deficient_matrix_decomposes_the_logical_matrix(mesh, rng):
    """Rank 3 of 8 x 6: the zero singular values are zero and U, Vh still
    orthonormal (nothing is padded)."""
    a = jt.random_matrix(rng, (8, 3), np.float64) @ jt.random_matrix(rng, (3, 6), np.float64)
    u, s = jaxmg.gesvd(_place(a, mesh), compute_vh=False)
    _check(a, u, s, None, False, np.float64)
    assert np.all(np.asarray(s)[3:] < 1e-12 * float(s[0]))


def test_gesvd_under_jit(mesh, rng):
    a = _matrix(rng, (16, 8), np.complex128)
    f = jax.jit(lambda A: jaxmg.gesvd(A, 2, mesh, ROWS, return_status=True))
    u, s, vh, status = f(_place(a, mesh))
    jt.assert_status_ok(status)
    _check(a, u, s, vh, False, np.complex128)


def test_gesvd_vmaps(mesh, rng):
    batch = np.stack([_matrix(rng, (8, 12), np.float64) for _ in range(3)])
    f = jax.vmap(lambda a: jaxmg.gesvd(a, mesh=mesh, matrix_specs=ROWS))
    u, s, vh = f(jnp.asarray(batch))
    assert u.shape == (3, 8, 8) and s.shape == (3, 8) and vh.shape == (3, 8, 12)
    for i in range(3):
        _check(batch[i], u[i], s[i], vh[i], False, np.float64)


def test_gesvd_donate_deletes_a(mesh, rng):
    a = _matrix(rng, (8, 8), np.float64)
    A = _place(a, mesh)
    s = jaxmg.gesvd(A, compute_u=False, compute_vh=False, donate=True)
    assert A.is_deleted()
    _check(a, None, s, None, False, np.float64)


# --- derivatives ---------------------------------------------------------------------


def _losses(c, k):
    """Gauge-invariant functions of (U, s, Vh) and which outputs each needs:
    sum of s; Re<C, U sin(S) Vh>; Re<C, U diag(s²) Uᴴ>; Re<C, Vhᴴ diag(s) Vh>."""
    cu, cv = c[0], c[1]
    return {
        "s": ((False, False), lambda u, s, vh: jnp.sum(s)),
        "u_s_vh": ((True, True),
                   lambda u, s, vh: jnp.real(jnp.sum(jnp.conj(c[2]) * ((u[:, :k] * jnp.sin(s)) @ vh[:k])))),
        "u_s": ((True, False),
                lambda u, s, vh: jnp.real(jnp.sum(jnp.conj(cu) * ((u[:, :k] * s ** 2) @ jnp.conj(u[:, :k]).T)))),
        "s_vh": ((False, True),
                 lambda u, s, vh: jnp.real(jnp.sum(jnp.conj(cv) * ((jnp.conj(vh[:k]).T * s) @ vh[:k])))),
    }


def _unpack(out, want_u, want_vh):
    out = out if isinstance(out, tuple) else (out,)
    u = out[0] if want_u else None
    s = out[int(want_u)]
    vh = out[-1] if want_vh else None
    return u, s, vh


@pytest.mark.parametrize("loss", ("s", "u_s_vh", "u_s", "s_vh"))
@pytest.mark.parametrize("shape", ((12, 8), (8, 12), (8, 8)), ids=("tall", "wide", "square"))
@pytest.mark.parametrize("dtype", (np.float64, np.complex128), ids=("f64", "c128"))
def test_gesvd_grad_matches_jax_on_gauge_invariant_losses(auto_mesh, rng, dtype, shape, loss):
    m, n = shape
    k = min(m, n)
    a = _matrix(rng, shape, dtype)
    c = [_matrix(rng, (m, m), dtype), _matrix(rng, (n, n), dtype), _matrix(rng, (m, n), dtype)]
    (want_u, want_vh), fn = _losses(c, k)[loss]

    def ours(x):
        out = jaxmg.gesvd(x, mesh=auto_mesh, matrix_specs=ROWS, compute_u=want_u,
                          compute_vh=want_vh)
        return fn(*_unpack(out, want_u, want_vh))

    def theirs(x):
        u, s, vh = jnp.linalg.svd(x, full_matrices=False)
        return fn(u, s, vh)

    A = _place(a, auto_mesh)
    value, grad = jax.jit(jax.value_and_grad(ours))(A)
    value_ref, grad_ref = jax.value_and_grad(theirs)(jnp.asarray(jt.to_ref(a)))
    np.testing.assert_allclose(float(value), float(value_ref), rtol=1e-10)
    err = jt.fro(jt.to_ref(grad) - np.asarray(grad_ref)) / jt.fro(np.asarray(grad_ref))
    assert err < 1e-9, f"relative gradient error {err}"


def test_gesvd_jvp_of_full_matrices_of_a_non_square_a_is_not_implemented(auto_mesh, rng):
    a = _place(_matrix(rng, (12, 8), np.float64), auto_mesh)
    f = lambda x: jnp.sum(jaxmg.gesvd(x, mesh=auto_mesh, matrix_specs=ROWS,
                                      full_matrices=True)[0])
    with pytest.raises(NotImplementedError, match="full_matrices"):
        jax.grad(f)(a)
    # The singular values alone have their derivative there too.
    g = jax.grad(lambda x: jnp.sum(jaxmg.gesvd(x, mesh=auto_mesh, matrix_specs=ROWS,
                                               compute_u=False, compute_vh=False,
                                               full_matrices=True)))(a)
    g_ref = jax.grad(lambda x: jnp.sum(jnp.linalg.svd(x, compute_uv=False)))(
        jnp.asarray(np.asarray(a)))
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), rtol=0, atol=1e-10)


# --- the ctx form ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def s_mesh(cpu_devices):
    """NetKet's mesh: one axis "S", Auto."""
    return jax.make_mesh((4,), ("S",), devices=cpu_devices, axis_types=(AxisType.Auto,))


@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_gesvd_ctx_at_the_global_level(s_mesh, rng, dtype):
    a = _matrix(rng, (16, 8), dtype)
    A = _place(a, s_mesh, P("S", None))
    work, u, s, vh, status = jaxmg.gesvd_shardmap_ctx(A)  # eager: read from A
    jt.assert_status_ok(status)
    assert work.shape == a.shape
    _check(a, u, s, vh, False, dtype)
    with jax.sharding.set_mesh(s_mesh):  # under jit: the context mesh
        out = jax.jit(lambda A: jaxmg.gesvd_shardmap_ctx(A, T_A=2, compute_u=False))(A)
    assert len(out) == 4
    _, s2, vh2, status2 = out
    jt.assert_status_ok(status2)
    _check(a, None, s2, vh2, False, dtype)
    jt.assert_sharded_like(vh2, s_mesh, P("S", None))
    np.testing.assert_array_equal(np.asarray(A), a)


def test_gesvd_ctx_shorter_forms(s_mesh, rng):
    a = _matrix(rng, (8, 12), np.float64)
    A = _place(a, s_mesh, P("S", None))
    _, u, s, status = jaxmg.gesvd_shardmap_ctx(A, compute_vh=False)
    jt.assert_status_ok(status)
    _check(a, u, s, None, False, np.float64)
    _, s, status = jaxmg.gesvd_shardmap_ctx(A, compute_u=False, compute_vh=False)
    jt.assert_status_ok(status)
    _check(a, None, s, None, False, np.float64)


@pytest.mark.parametrize("dtype", (np.float32, np.complex128), ids=("f32", "c128"))
def test_gesvd_ctx_inside_shard_map(mesh, rng, dtype):
    a = _matrix(rng, (16, 8), dtype)

    def body(a_local):
        work, u, s, vh, status = jaxmg.gesvd_shardmap_ctx(a_local, full_matrices=True)
        return u, s, vh, status

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(ROWS,),
                              out_specs=(ROWS, P(), ROWS, P("x"))))
    u, s, vh, status = f(_place(a, mesh))
    assert status.shape == (4,) and np.all(np.asarray(status) == 0)
    _check(a, u, s, vh, True, dtype)


def test_gesvd_ctx_grad_inside_shard_map(mesh, rng):
    a = _matrix(rng, (8, 12), np.complex128)
    c = _matrix(rng, (8, 12), np.complex128)

    def body(a_local):
        _, u, s, vh, _ = jaxmg.gesvd_shardmap_ctx(a_local)
        return u, s, vh

    f = jax.shard_map(body, mesh=mesh, in_specs=(ROWS,), out_specs=(ROWS, P(), ROWS))

    def loss(svd):
        def run(x):
            u, s, vh = svd(x)
            return jnp.real(jnp.sum(jnp.conj(c) * ((u * jnp.tanh(s)) @ vh)))
        return run

    g = jax.jit(jax.grad(loss(f)))(_place(a, mesh))
    g_ref = jax.grad(loss(lambda x: jnp.linalg.svd(x, full_matrices=False)))(jnp.asarray(a))
    err = jt.fro(np.asarray(g) - np.asarray(g_ref)) / jt.fro(np.asarray(g_ref))
    assert err < 1e-9


def test_gesvd_on_a_2d_grid_of_devices(cpu_devices, rng):
    grid = jax.make_mesh((2, 2), ("r", "c"), devices=cpu_devices,
                         axis_types=(AxisType.Auto, AxisType.Auto))
    a = _matrix(rng, (8, 12), np.complex64)
    A = _place(a, grid, P("r", "c"))
    u, s, vh = jaxmg.gesvd(A, matrix_specs=P("r", "c"))
    _check(a, u, s, vh, False, np.complex64)
    jt.assert_sharded_like(u, grid, P(("r", "c"), None))
    with jax.sharding.set_mesh(grid):
        _, u2, s2, vh2, status = jax.jit(jaxmg.gesvd_shardmap_ctx)(A)
    jt.assert_status_ok(status)
    _check(a, u2, s2, vh2, False, np.complex64)


# --- misuse ---------------------------------------------------------------------------


def test_gesvd_misuse_is_refused_before_tracing(mesh, rng):
    a = _matrix(rng, (10, 8), np.float64)
    with pytest.raises(ValueError, match="M=10 rows, not divisible by the 4 devices"):
        jaxmg.gesvd(a)  # a NumPy A: placed on all 4 devices, rows sharded
    b = _place(_matrix(rng, (8, 6), np.float64), mesh)
    with pytest.raises(ValueError, match=r"Vh has min\(M, N\)=6 rows .* compute_vh=False"):
        jaxmg.gesvd(b)
    u, s = jaxmg.gesvd(b, compute_vh=False)  # U (8 x 6) is row-sharded fine
    _check(np.asarray(b), u, s, None, False, np.float64)
    c = _place(_matrix(rng, (8, 4), np.float64), mesh)
    with pytest.raises(ValueError, match=r"Vh has N=6 rows .* with full_matrices=True"):
        jaxmg.gesvd(_place(_matrix(rng, (12, 6), np.float64), mesh), full_matrices=True)
    with pytest.raises(TypeError, match="compute_u must be a bool"):
        jaxmg.gesvd(c, compute_u="yes")
    with pytest.raises(TypeError, match="full_matrices must be a bool"):
        jaxmg.gesvd(c, full_matrices=1)
    with pytest.raises(TypeError, match="supported are float32"):
        jaxmg.gesvd(np.ones((8, 4), np.int32))
    with pytest.raises(ValueError, match=r"2-D \(M x N\)"):
        jaxmg.gesvd(np.ones(8))
    with pytest.raises(ValueError, match="T_A"):
        jaxmg.gesvd(c, T_A=0)
    with pytest.raises(ValueError, match="mesh is required under jax.jit"):
        jax.jit(jaxmg.gesvd)(c)
    with pytest.raises(ValueError, match="axis_name is the seeds' form's"):
        jaxmg.gesvd_shardmap_ctx(c, axis_name="x")


def test_gesvd_ctx_misuse_inside_shard_map(mesh, rng):
    a = _place(_matrix(rng, (8, 4), np.float64), mesh)
    f = jax.shard_map(lambda x: jaxmg.gesvd_shardmap_ctx(x, mesh=mesh)[2], mesh=mesh,
                      in_specs=(ROWS,), out_specs=P())
    with pytest.raises(ValueError, match="inside a shard_map body"):
        f(a)
    g = jax.shard_map(lambda x: jaxmg.gesvd_shardmap_ctx(x, full_matrices=True)[2],
                      mesh=mesh, in_specs=(ROWS,), out_specs=P())
    b = _place(_matrix(rng, (8, 6), np.float64), mesh)
    with pytest.raises(ValueError, match="Vh has N=6 rows"):
        g(b)

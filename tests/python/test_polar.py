"""polar (JAXMg 1.x's polar decomposition A = Up H) on 4 CPU devices, by
both methods (QDWH over jaxmg's QR, the default, and gesvd's SVD): every
dtype, square and tall, against SciPy's ``scipy.linalg.polar`` in float64;
graded spectra up to 1/eps and exactly singular A (QDWH falling back on the
SVD); the status and NaN; both forms (plain, ctx at the global level and
inside shard_map); jit, vmap, donation; derivatives (check_grads, jvp and
vjp, on Auto and Explicit meshes, real and complex, repeated singular
values); misuse refused before tracing; the local model (lapack-local, as
cuSOLVERMp): QDWH runs there, a rank-deficient A gives status 1 and NaN,
and the SVD method is refused.

Accuracy: ||A - Up H|| / ||A||, ||UpᴴUp - I||, H exactly Hermitian and
positive semidefinite, all in the reference precision; H against SciPy's
(H is unique for every A and well conditioned: ||dH|| <= √2 ||dA||), Up
against SciPy's with a tolerance scaled by A's condition number (Up is
unique for full column rank, with ||dUp|| up to ||dA|| / σ_min)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
import jaxmg_testing as jt

ROWS = P("x", None)


def _place(a, mesh, spec=ROWS):
    return jax.device_put(a, NamedSharding(mesh, spec))


def _with_spectrum(rng, shape, s, dtype):
    """An m x n matrix with singular values s (float64/complex128, then cast
    to dtype): random orthonormal U and V."""
    m, n = shape
    u, _ = np.linalg.qr(jt.random_matrix(rng, (m, n), dtype))
    v, _ = np.linalg.qr(jt.random_matrix(rng, (n, n), dtype))
    return ((u * np.asarray(s, np.float64)) @ v.conj().T).astype(dtype)


def _check(a, up, h, dtype, compare_up=True):
    """The polar factors of a (the matrix as handed to jaxmg, in dtype)."""
    a_ref = jt.to_ref(a)
    m, n = a_ref.shape
    tol = jt.tol(dtype, m)
    up, h = jt.to_ref(up), jt.to_ref(h)
    assert up.shape == (m, n) and h.shape == (n, n)
    norm = jt.fro(a_ref)
    assert jt.fro(a_ref - up @ h) / norm < tol, "A != Up H"
    assert jt.orthogonality(up) < tol, "Up's columns not orthonormal"
    np.testing.assert_array_equal(h, h.conj().T)  # exactly Hermitian
    w = np.linalg.eigvalsh(h)
    assert w[0] >= -tol * norm, f"H not positive semidefinite: {w[0]}"
    up_ref, h_ref = scipy.linalg.polar(a_ref)
    assert jt.fro(h - h_ref) / norm < tol, "H differs from SciPy's"
    if compare_up:
        s = np.linalg.svd(a_ref, compute_uv=False)
        cond = s[0] / s[-1] if s[-1] > 0 else np.inf
        err = jt.fro(up - up_ref)
        bound = tol * cond
        if bound < 0.1:  # informative only while eps * cond is small
            assert err < bound, f"Up differs from SciPy's by {err} (cond {cond:.2e})"


# --- values ---------------------------------------------------------------------------


METHODS = ("qdwh", "svd")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape", ((8, 8), (16, 8), (64, 16)), ids=("square", "tall", "tall4"))
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_polar_matches_scipy(mesh, rng, dtype, shape, method):
    """(64, 16): each device holds N rows of A, so that QDWH's QRs take the
    stacked matrix in the devices' order; (8, 8), (16, 8): in its own."""
    a = jt.random_matrix(rng, shape, dtype).astype(dtype)
    A = _place(a, mesh)
    up, h, status = jaxmg.polar(A, return_status=True, method=method)
    jt.assert_status_ok(status)
    assert up.dtype == dtype and h.dtype == dtype
    jt.assert_sharded_like(up, mesh, ROWS)
    jt.assert_sharded_like(h, mesh, ROWS)
    _check(a, up, h, dtype)
    np.testing.assert_array_equal(np.asarray(A), a)  # A is kept


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape", ((8, 8), (12, 8), (32, 8)), ids=("square", "tall", "tall4"))
@pytest.mark.parametrize("dtype", (np.float32, np.float64, np.complex128),
                         ids=("f32", "f64", "c128"))
def test_polar_of_graded_spectra_is_accurate(mesh, rng, dtype, shape, method):
    """Singular values 1 ... 10^-k, down to 1/eps of the dtype, and exactly
    singular (two zero singular values): backward stable every time, by
    either method (QDWH's schedule covers κ = 1/eps; the singular A is
    decomposed by the SVD, QDWH's fallback, Up still with orthonormal
    columns)."""
    n = shape[1]
    smallest = jt.eps(dtype)
    cases = [np.logspace(0, -k, n) for k in (2, 6, 10) if 10.0 ** -k > smallest]
    cases.append(np.logspace(0, np.log10(smallest), n))  # κ = 1/eps
    singular = np.logspace(0, -2, n)
    singular[-2:] = 0
    cases.append(singular)
    for s in cases:
        a = _with_spectrum(rng, shape, s, dtype)
        up, h, status = jaxmg.polar(_place(a, mesh), return_status=True, method=method)
        jt.assert_status_ok(status)
        _check(a, up, h, dtype)


@pytest.mark.parametrize("method", METHODS)
def test_polar_of_an_exactly_singular_matrix(mesh, rng, method):
    """Rank 3 of 12 x 8 (float64), and the zero matrix: Up still has
    orthonormal columns (one of the polar factors; QDWH alone would leave
    five zero columns' worth of it at zero: the SVD takes over), H is
    (AᴴA)^½, rank 3, and A = Up H; the status 0."""
    a = jt.random_matrix(rng, (12, 3), np.float64) @ jt.random_matrix(rng, (3, 8), np.float64)
    up, h, status = jaxmg.polar(_place(a, mesh), return_status=True, method=method)
    jt.assert_status_ok(status)
    _check(a, up, h, np.float64, compare_up=False)
    w = np.linalg.eigvalsh(np.asarray(h))
    assert np.all(np.abs(w[:5]) < 1e-12 * w[-1])
    up, h, status = jaxmg.polar(_place(np.zeros((12, 8)), mesh), return_status=True,
                                method=method)
    jt.assert_status_ok(status)
    assert jt.orthogonality(up) < jt.tol(np.float64, 12)
    np.testing.assert_array_equal(np.asarray(h), 0)
    # Two exactly zero columns: QDWH's X keeps them at zero (the local
    # model's test sees its status 1 there); the SVD decomposes it.
    a = jt.random_matrix(rng, (12, 8), np.complex128)
    a[:, 3:5] = 0
    up, h, status = jaxmg.polar(_place(a, mesh), return_status=True, method=method)
    jt.assert_status_ok(status)
    _check(a, up, h, np.complex128, compare_up=False)


def test_polar_methods_agree_under_jit_and_in_the_ctx_form(mesh, rng):
    """QDWH and the SVD give the same Up and H (unique for full column
    rank), in one jitted program and inside shard_map."""
    a = jt.random_matrix(rng, (16, 8), np.complex128)
    A = _place(a, mesh)
    both = jax.jit(lambda A: [jaxmg.polar(A, mesh=mesh, matrix_specs=ROWS, method=m)
                              for m in METHODS])(A)
    for x, y in zip(*both):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=1e-12)
    f = jax.jit(jax.shard_map(lambda x: jaxmg.polar_shardmap_ctx(x, method="svd"),
                              mesh=mesh, in_specs=(ROWS,), out_specs=(ROWS, ROWS, P("x"))))
    up, h, status = f(A)
    assert np.all(np.asarray(status) == 0)
    np.testing.assert_allclose(np.asarray(up), np.asarray(both[0][0]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(h), np.asarray(both[0][1]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", (np.float64, np.complex64), ids=("f64", "c64"))
def test_polar_of_a_matrix_with_nan_gives_status_and_nan(mesh, rng, dtype, method):
    a = jt.random_matrix(rng, (8, 4), dtype).astype(dtype)
    a[5, 2] = np.nan
    up, h, status = jaxmg.polar(_place(a, mesh), return_status=True, method=method)
    assert int(status) == -1  # A has a NaN entry: no solver ran (JMG_INFO_NONFINITE)
    assert np.all(np.isnan(np.asarray(up))) and np.all(np.isnan(np.asarray(h)))
    up, status = jaxmg.polar_shardmap_ctx(_place(a, mesh), compute_h=False, method=method)
    assert int(status) == -1 and np.all(np.isnan(np.asarray(up)))
    a[5, 2] = np.inf
    up, h, status = jaxmg.polar_shardmap_ctx(_place(a, mesh), method=method)
    assert int(status) == -1 and np.all(np.isnan(np.asarray(h)))


def test_polar_returns_what_is_asked(mesh, rng):
    a = jt.random_matrix(rng, (12, 8), np.complex128)
    A = _place(a, mesh)
    up = jaxmg.polar(A, compute_h=False)
    assert isinstance(up, jax.Array) and up.shape == (12, 8)
    up2, status = jaxmg.polar(A, compute_h=False, return_status=True)
    jt.assert_status_ok(status)
    up3, h = jaxmg.polar(A)
    np.testing.assert_array_equal(np.asarray(up), np.asarray(up2))
    np.testing.assert_array_equal(np.asarray(up), np.asarray(up3))
    _check(a, up3, h, np.complex128)


def test_polar_under_jit_and_vmap(mesh, rng):
    a = jt.random_matrix(rng, (16, 8), np.float64)
    f = jax.jit(lambda A: jaxmg.polar(A, 2, mesh, ROWS, return_status=True))
    up, h, status = f(_place(a, mesh))
    jt.assert_status_ok(status)
    _check(a, up, h, np.float64)
    batch = np.stack([jt.random_matrix(rng, (8, 4), np.complex128) for _ in range(3)])
    ups, hs = jax.vmap(lambda x: jaxmg.polar(x, mesh=mesh, matrix_specs=ROWS))(
        jnp.asarray(batch))
    assert ups.shape == (3, 8, 4) and hs.shape == (3, 4, 4)
    for i in range(3):
        _check(batch[i], ups[i], hs[i], np.complex128)


# --- the ctx form ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def s_mesh(cpu_devices):
    """NetKet's mesh: one axis "S", Auto."""
    return jax.make_mesh((4,), ("S",), devices=cpu_devices, axis_types=(AxisType.Auto,))


@pytest.mark.parametrize("dtype", (np.float32, np.complex128), ids=("f32", "c128"))
def test_polar_ctx_at_the_global_level(s_mesh, rng, dtype):
    a = jt.random_matrix(rng, (16, 8), dtype).astype(dtype)
    A = _place(a, s_mesh, P("S", None))
    up, h, status = jaxmg.polar_shardmap_ctx(A)  # eager: read from A
    jt.assert_status_ok(status)
    _check(a, up, h, dtype)
    with jax.sharding.set_mesh(s_mesh):  # under jit: the context mesh
        out = jax.jit(lambda A: jaxmg.polar_shardmap_ctx(A, T_A=2, compute_h=False))(A)
    assert len(out) == 2
    jt.assert_status_ok(out[1])
    np.testing.assert_allclose(np.asarray(out[0]), np.asarray(up), rtol=0,
                               atol=jt.tol(dtype, 16))
    jt.assert_sharded_like(out[0], s_mesh, P("S", None))
    np.testing.assert_array_equal(np.asarray(A), a)


def test_polar_ctx_inside_shard_map(mesh, rng):
    a = jt.random_matrix(rng, (16, 8), np.complex64).astype(np.complex64)

    def body(a_local):
        return jaxmg.polar_shardmap_ctx(a_local)

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(ROWS,),
                              out_specs=(ROWS, ROWS, P("x"))))
    up, h, status = f(_place(a, mesh))
    assert status.shape == (4,) and np.all(np.asarray(status) == 0)
    _check(a, up, h, np.complex64)


@pytest.mark.parametrize("check_vma", (True, False), ids=("vma", "no_vma"))
def test_polar_ctx_grad_inside_shard_map_matches_the_plain_form(mesh, rng, check_vma):
    a = jt.random_matrix(rng, (12, 8), np.complex128)
    c = jt.random_matrix(rng, (12, 8), np.complex128)
    d = jt.random_matrix(rng, (8, 8), np.complex128)

    def loss(polar):
        def run(x):
            up, h = polar(x)
            return jnp.real(jnp.sum(jnp.conj(c) * up) + jnp.sum(jnp.conj(d) * h))
        return run

    ctx = jax.shard_map(lambda x: jaxmg.polar_shardmap_ctx(x)[:2], mesh=mesh,
                        in_specs=(ROWS,), out_specs=(ROWS, ROWS), check_vma=check_vma)
    A = _place(a, mesh)
    g = jax.jit(jax.grad(loss(ctx)))(A)
    g_ref = jax.jit(jax.grad(loss(lambda x: jaxmg.polar(x, mesh=mesh, matrix_specs=ROWS))))(A)
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), rtol=0, atol=1e-12)


# --- derivatives ------------------------------------------------------------------------


def _repeated(rng, dtype):
    """12 x 8 with singular values 2, 2, 2, 1, 1, 3, 3, 3 (the SVD's rule
    is not defined there; polar's is)."""
    return _with_spectrum(rng, (12, 8), [3, 3, 3, 2, 2, 2, 1, 1], dtype)


# Polar's derivative rule is one for both methods (core/polar.py's _rule,
# from Up and H whatever computed them), so QDWH takes every case and the
# SVD method the one where its primal differs most (repeated singular
# values, where the SVD's own rule is undefined), on both kinds of mesh;
# both methods' primals are checked on every case by test_polar_matches_scipy.
GRAD_CASES = [(case, "qdwh") for case in ("f64_tall", "c128_square", "c128_repeated")] + [
    ("c128_repeated", "svd")]


@pytest.mark.parametrize("case,method", GRAD_CASES, ids=[f"{c}-{m}" for c, m in GRAD_CASES])
@pytest.mark.parametrize("axis_type", ("auto", "explicit"))
def test_polar_check_grads(cpu_devices, rng, axis_type, case, method):
    types = {"auto": AxisType.Auto, "explicit": AxisType.Explicit}
    mesh = jax.make_mesh((4,), ("x",), devices=cpu_devices, axis_types=(types[axis_type],))
    a = {"f64_tall": lambda: jt.random_matrix(rng, (12, 8), np.float64),
         "c128_square": lambda: jt.random_matrix(rng, (8, 8), np.complex128),
         "c128_repeated": lambda: _repeated(rng, np.complex128)}[case]()
    f = jax.jit(lambda x: jaxmg.polar(x, mesh=mesh, matrix_specs=ROWS, method=method))
    check_grads(f, (_place(a, mesh),), order=1, modes=("fwd", "rev"))


def test_polar_check_grads_of_up_alone(auto_mesh, rng):
    a = jt.random_matrix(rng, (12, 8), np.complex128)
    f = jax.jit(lambda x: jaxmg.polar(x, mesh=auto_mesh, matrix_specs=ROWS, compute_h=False))
    check_grads(f, (_place(a, auto_mesh),), order=1, modes=("fwd", "rev"))


def test_polar_jvp_matches_the_svd_formula(auto_mesh, rng):
    """Against JAX's own: Up = U Vh and H = Vhᴴ S Vh of jnp.linalg.svd,
    differentiated by JAX (distinct singular values, where its rule holds)."""
    a = jt.random_matrix(rng, (12, 8), np.complex128)
    da = jt.random_matrix(rng, (12, 8), np.complex128)

    def ref(x):
        u, s, vh = jnp.linalg.svd(x, full_matrices=False)
        return u @ vh, (jnp.conj(vh).T * s) @ vh

    _, (dup_ref, dh_ref) = jax.jvp(ref, (jnp.asarray(a),), (jnp.asarray(da),))
    f = lambda x: jaxmg.polar(x, mesh=auto_mesh, matrix_specs=ROWS)  # noqa: E731
    _, (dup, dh) = jax.jit(lambda x, t: jax.jvp(f, (x,), (t,)))(
        _place(a, auto_mesh), _place(da, auto_mesh))
    np.testing.assert_allclose(np.asarray(dup), np.asarray(dup_ref), rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.asarray(dh), np.asarray(dh_ref), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(np.asarray(dh), np.asarray(dh).conj().T)


# --- donation ---------------------------------------------------------------------------


def test_polar_donated_a_gives_up_its_buffer(mesh, rng):
    """A donated A's buffer goes to Up (A's shape): under the caller's
    donating jit (the ctx form, as 1.x's callers do) and in the program an
    eager donate=True runs, by either method; the eager call deletes A. By
    the SVD, A's buffer is the solver's scratch first (gesvd's operand is
    the parameter itself); by QDWH, A is read until H = Upᴴ A and the
    fallback's SVD, and its buffer then takes Up."""
    a = jt.random_matrix(rng, (64, 16), np.float64)
    shard = 16 * 16 * 8
    for method in METHODS:
        for fn in (lambda x: jaxmg.polar_shardmap_ctx(x, mesh=mesh, matrix_specs=ROWS,
                                                      method=method),
                   lambda x: jaxmg.polar(x, mesh=mesh, matrix_specs=ROWS, method=method)):
            compiled = jax.jit(fn, donate_argnums=0).lower(_place(a, mesh)).compile()
            assert compiled.memory_analysis().alias_size_in_bytes >= shard
            if method == "qdwh":
                continue
            text = compiled.as_text()
            call = next(ln for ln in text.splitlines()
                        if 'custom_call_target="jaxmg_gesvd' in ln)
            operand = call.split("custom-call(")[1].split(")")[0].split(",")[0].strip()
            producer = [ln for ln in text.splitlines() if ln.strip().startswith(operand + " =")]
            assert len(producer) == 1 and " parameter(" in producer[0], producer
        A = _place(a, mesh)
        up, h = jaxmg.polar(A, donate=True, method=method)
        assert A.is_deleted()
        _check(a, up, h, np.float64)


# --- misuse and engines ---------------------------------------------------------------------


def test_polar_misuse_is_refused_before_tracing(mesh, rng):
    tall = _place(jt.random_matrix(rng, (8, 4), np.float64), mesh)
    with pytest.raises(ValueError, match=r"jaxmg.polar: a is 8 x 12, wider than tall"):
        jaxmg.polar(_place(jt.random_matrix(rng, (8, 12), np.float64), mesh))
    with pytest.raises(ValueError, match=r"jaxmg.polar_shardmap_ctx: a is 4 x 8, wider"):
        jaxmg.polar_shardmap_ctx(_place(jt.random_matrix(rng, (4, 8), np.float64), mesh))
    with pytest.raises(ValueError, match="M=10 rows, not divisible by the 4 devices"):
        jaxmg.polar(jt.random_matrix(rng, (10, 8), np.float64))
    with pytest.raises(ValueError, match="H has N=6 rows .* not divisible by the 4"):
        jaxmg.polar(_place(jt.random_matrix(rng, (8, 6), np.float64), mesh))
    with pytest.raises(TypeError, match="compute_h must be a bool"):
        jaxmg.polar(tall, compute_h=1)
    with pytest.raises(TypeError, match="donate must be a bool"):
        jaxmg.polar(tall, donate="yes")
    for method in ("QDWH", "qr", None):
        with pytest.raises(ValueError, match="polar: method must be one of 'qdwh', 'svd'"):
            jaxmg.polar(tall, method=method)
        with pytest.raises(ValueError, match="polar_shardmap_ctx: method must be one of"):
            jax.jit(lambda x: jaxmg.polar_shardmap_ctx(x, mesh=mesh, method=method))(tall)
    with pytest.raises(TypeError, match="supported are float32"):
        jaxmg.polar(np.ones((8, 4), np.int32))
    with pytest.raises(ValueError, match=r"2-D \(M x N\)"):
        jaxmg.polar(np.ones(8))
    with pytest.raises(ValueError, match="T_A"):
        jaxmg.polar(tall, T_A=0)
    with pytest.raises(ValueError, match="mesh is required under jax.jit"):
        jax.jit(jaxmg.polar)(tall)
    with pytest.raises(ValueError, match="axis_name is the seeds' form's"):
        jaxmg.polar_shardmap_ctx(tall, axis_name="x")
    f = jax.shard_map(lambda x: jaxmg.polar_shardmap_ctx(x, mesh=mesh)[0], mesh=mesh,
                      in_specs=(ROWS,), out_specs=ROWS)
    with pytest.raises(ValueError, match="inside a shard_map body"):
        f(tall)
    g = jax.shard_map(lambda x: jaxmg.polar_shardmap_ctx(x)[0], mesh=mesh,
                      in_specs=(ROWS,), out_specs=ROWS)
    with pytest.raises(ValueError, match=r"polar_shardmap_ctx: a is 8 x 12, wider than tall"):
        g(_place(jt.random_matrix(rng, (8, 12), np.float64), mesh))


@pytest.mark.parametrize("shape", ((16, 8), (64, 16)), ids=("square_shards", "tall4"))
def test_polar_in_the_local_model(mesh, rng, monkeypatch, shape):
    """lapack-local (the local model on CPU devices, cuSOLVERMp's stand-in):
    QDWH runs there (its QRs are lapack-local's), the plain form, the ctx
    form under jit and inside shard_map; a NaN gives -1 and NaN. It has no
    SVD: a rank-deficient A gives status 1 (RANK_DEFICIENT) and NaN
    outputs, and method="svd" is refused before tracing."""
    monkeypatch.setenv("JAXMG_ENGINE", "lapack-local")
    a = jt.random_matrix(rng, shape, np.complex128)
    A = _place(a, mesh)
    up, h, status = jaxmg.polar(A, return_status=True)
    jt.assert_status_ok(status)
    _check(a, up, h, np.complex128)
    up2, h2, status = jax.jit(lambda A: jaxmg.polar_shardmap_ctx(A, mesh=mesh))(A)
    jt.assert_status_ok(status)
    _check(a, up2, h2, np.complex128)
    f = jax.jit(jax.shard_map(lambda x: jaxmg.polar_shardmap_ctx(x, compute_h=False),
                              mesh=mesh, in_specs=(ROWS,), out_specs=(ROWS, P("x"))))
    up3, status = f(A)
    assert np.all(np.asarray(status) == 0)
    np.testing.assert_allclose(np.asarray(up3), np.asarray(up), rtol=0, atol=1e-13)
    graded = _with_spectrum(rng, shape, np.logspace(0, -15, shape[1]), np.float64)
    up, h, status = jaxmg.polar(_place(graded, mesh), return_status=True)
    jt.assert_status_ok(status)
    _check(graded, up, h, np.float64)
    # Rank 3 in exact arithmetic, its other singular values rounding's (about
    # eps ‖A‖, within the schedule's bound): QDWH brings them to 1 as well,
    # a polar decomposition to working precision with status 0.
    low = jt.random_matrix(rng, (shape[0], 3), np.float64) @ jt.random_matrix(
        rng, (3, shape[1]), np.float64)
    up, h, status = jaxmg.polar(_place(low, mesh), return_status=True)
    jt.assert_status_ok(status)
    _check(low, up, h, np.float64, compare_up=False)
    # Exactly singular (two zero columns; the zero matrix): QDWH leaves
    # singular values at zero, and no engine here has an SVD to fall back on.
    singular = jt.random_matrix(rng, shape, np.float64)
    singular[:, -2:] = 0
    for x in (singular, np.zeros(shape)):
        up, h, status = jaxmg.polar(_place(x, mesh), return_status=True)
        assert int(status) == 1
        assert np.all(np.isnan(np.asarray(up))) and np.all(np.isnan(np.asarray(h)))
    a[1, 1] = np.nan
    up, status = jaxmg.polar(_place(a, mesh), compute_h=False, return_status=True)
    assert int(status) == -1 and np.all(np.isnan(np.asarray(up)))
    with pytest.raises(ValueError, match=r"jaxmg.polar: no engine runs a \d+ x \d+ float64 SVD"):
        jaxmg.polar(_place(singular, mesh), method="svd")
    with pytest.raises(ValueError, match=r"jaxmg.polar_shardmap_ctx: no engine runs"):
        jax.jit(lambda x: jaxmg.polar_shardmap_ctx(x, mesh=mesh, matrix_specs=ROWS,
                                                   method="svd"))(A)


def test_polar_check_grads_in_the_local_model(mesh, rng, monkeypatch):
    monkeypatch.setenv("JAXMG_ENGINE", "lapack-local")
    a = jt.random_matrix(rng, (12, 8), np.complex128)
    f = jax.jit(lambda x: jaxmg.polar(x, mesh=mesh, matrix_specs=ROWS))
    check_grads(f, (_place(a, mesh),), order=1, modes=("fwd", "rev"))


def test_polar_memory_estimate(mesh):
    """jaxmg.memory_estimate("polar", ...): XLA's buffers of the very program
    a call runs (QDWH's, the default); a donated A aliased to Up. QDWH holds
    N x N matrices whole on every device (Z, Q's lower block, H) and, where
    a device holds fewer than N rows of A, X and the stacked [√c X; I] and
    its Q whole too (their rows in their own order: core/polar.py,
    _qr_step); beside them the fallback SVD's temporaries. Measured with
    XLA:CPU on 4 devices, 2026-11-25: 24.7 shards for a square A, 6.4 for
    one four times taller than wide (docs/guides/memory.md's table)."""
    for (m, n), most in (((64, 64), 26), ((256, 64), 7)):
        shard = m * n // 4 * 8
        e = jaxmg.memory_estimate("polar", (m, n), np.float64, mesh)
        assert (e.op, e.engine, e.donated) == ("polar", "lapack", True)
        assert e.arguments == shard and e.aliased >= shard
        assert e.outputs >= shard + n * n // 4 * 8  # Up's and H's rows
        assert shard <= e.temporaries < most * shard, e
        assert e.workspace is None and "polar" in e.workspace_note
    kept = jaxmg.memory_estimate("polar", (m, n), np.float64, mesh, donate=False)
    assert kept.aliased == 0
    with pytest.raises(ValueError, match="wider than tall"):
        jaxmg.memory_estimate("polar", (8, 16), np.float64, mesh)


def test_polar_on_a_2d_grid_and_over_one_axis_of_two(cpu_devices, rng):
    """A sharded P(r, c) (resharded to rows over both axes, as for every op),
    and A's rows over one axis of a 2 x 2 mesh (each group of the other axis
    decomposes its own copy)."""
    grid = jax.make_mesh((2, 2), ("r", "c"), devices=cpu_devices,
                         axis_types=(AxisType.Auto, AxisType.Auto))
    a = jt.random_matrix(rng, (16, 8), np.complex64).astype(np.complex64)
    up, h = jaxmg.polar(_place(a, grid, P("r", "c")), matrix_specs=P("r", "c"))
    jt.assert_sharded_like(up, grid, P(("r", "c"), None))
    jt.assert_sharded_like(h, grid, P(("r", "c"), None))
    _check(a, up, h, np.complex64)
    with jax.sharding.set_mesh(grid):
        up2, h2, status = jax.jit(jaxmg.polar_shardmap_ctx)(_place(a, grid, P("r", "c")))
    jt.assert_status_ok(status)
    _check(a, up2, h2, np.complex64)
    up3, h3 = jaxmg.polar(_place(a, grid, P("r", None)), matrix_specs=P("r", None))
    _check(a, up3, h3, np.complex64)

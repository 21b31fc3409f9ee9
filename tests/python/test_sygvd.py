"""jaxmg.eigh_generalized (the C library's sygvd): A v = λ B v with B
Hermitian positive definite, on 4 CPU devices, against scipy.linalg.eigh(a, b)
in float64.

Eigenvectors are checked through ||A V - B V diag(w)|| / (||A|| ||V||) and
||V^H B V - I||, never element by element. Statuses and NaN on the leader
model's lapack engine and on lapack-local (the local model, JAXMG_ENGINE).
"""

from __future__ import annotations

import ctypes

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
from jaxmg._src import _native
import jaxmg_testing as jt

SPECS = (P("x", None),)
ROWS = P("x", None)


def _real(dtype):
    return np.float32 if np.dtype(dtype) in (np.float32, np.complex64) else np.float64


def _pencil(rng, n, dtype, shift=1.0):
    """A random indefinite Hermitian A and a well-conditioned HPD B."""
    return jt.make_hermitian(rng, n, dtype), jt.make_hpd(rng, n, dtype, shift)


def _check(mesh, a, b, w, v, dtype, vspec=P(None, "x")):
    n = a.shape[0]
    t = jt.tol(dtype, n)
    assert w.shape == (n,)
    assert np.dtype(w.dtype) == np.dtype(_real(dtype)), f"w has dtype {w.dtype}"
    jt.assert_finite(w)
    wn = np.asarray(w, np.float64)
    assert np.all(np.diff(wn) >= 0), "eigenvalues are not in ascending order"
    ar, br = jt.to_ref(a), jt.to_ref(b)
    ref = scipy.linalg.eigh(ar, br, eigvals_only=True)
    err = np.max(np.abs(wn - ref)) / np.max(np.abs(ref))
    assert err < t, f"max |w - eigh(A, B)| / max |w| = {err:.3e}"
    if v is None:
        return
    assert v.shape == (n, n)
    assert np.dtype(v.dtype) == np.dtype(dtype)
    jt.assert_finite(v)
    if mesh is not None and vspec is not None:
        jt.assert_sharded_like(v, mesh, vspec)
    vr = jt.to_ref(v)
    res = jt.fro(ar @ vr - (br @ vr) * wn[None, :]) / (np.linalg.norm(ar, 2)
                                                       * np.linalg.norm(vr, 2))
    assert res < t, f"||A V - B V diag(w)|| / (||A|| ||V||) = {res:.3e}"
    orth = jt.fro(vr.conj().T @ br @ vr - np.eye(n))
    assert orth < t, f"||V^H B V - I|| = {orth:.3e}"


# (N, T_A): T_A None (the default), dividing the shard, and not dividing it
# (narrowed: sygvd never pads).
SIZES = [(8, None), (24, 3), (20, 3), (36, 4)]


@pytest.mark.parametrize("n,T_A", SIZES, ids=[f"N{n}-T{t}" for n, t in SIZES])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_eigh_generalized_matches_scipy(mesh, rng, dtype, n, T_A):
    a, b = _pencil(rng, n, dtype)
    w, v, status = jaxmg.eigh_generalized(jt.shard_rows(a, mesh), jt.shard_rows(b, mesh), T_A,
                                          mesh, SPECS, return_status=True)
    jt.assert_status_ok(status)
    jt.assert_replicated(w, mesh)
    _check(mesh, a, b, w, v, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=["f32", "c128"])
def test_values_only_jit_and_host_inputs(mesh, rng, dtype):
    n = 16
    a, b = _pencil(rng, n, dtype)
    w = jaxmg.eigh_generalized(a, b, return_eigenvectors=False)  # host arrays, inferred mesh
    _check(None, a, b, w, None, dtype)
    f = jax.jit(lambda a, b: jaxmg.eigh_generalized(a, b, 2, mesh, (ROWS, ROWS),
                                                    return_status=True))
    w, v, status = f(jt.shard_rows(a, mesh), jt.shard_rows(b, mesh))
    jt.assert_status_ok(status)
    _check(mesh, a, b, w, v, dtype)
    w2 = jaxmg.eigh_generalized(jt.shard_rows(a, mesh), jt.shard_rows(b, mesh),
                                matrix_specs=SPECS, return_eigenvectors=False)
    np.testing.assert_allclose(np.asarray(w2), np.asarray(w), rtol=jt.tol(dtype, n) * 10,
                               atol=jt.tol(dtype, n) * 10)


@pytest.mark.parametrize("n,T_A,vectors", [(16, 2, True), (20, None, True), (20, 3, False)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_shardmap_ctx(mesh, rng, dtype, n, T_A, vectors):
    a, b = _pencil(rng, n, dtype)

    def body(a, b):
        out = jaxmg.eigh_generalized_shardmap_ctx(a, b, T_A, return_eigenvectors=vectors)
        return out

    out_specs = (P(None), P(None, "x"), P(None)) if vectors else (P(None), P(None))
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(ROWS, ROWS), out_specs=out_specs))
    out = f(jt.shard_rows(a, mesh), jt.shard_rows(b, mesh))
    status = out[-1]
    assert status.shape == (1,) and int(status[0]) == 0
    _check(mesh, a, b, out[0], out[1] if vectors else None, dtype, vspec=None)


def _not_positive_definite(b, k):
    """b with its k-th diagonal entry (1-based) made very negative: its
    leading minors of order < k stay positive definite, those of order >= k
    are not."""
    b = np.array(b)
    b[k - 1, k - 1] = -100
    return b


@pytest.mark.parametrize("engine", ["lapack", "lapack-local"])
def test_b_not_positive_definite_gives_n_plus_k_and_nan(mesh, rng, monkeypatch, engine):
    monkeypatch.setenv("JAXMG_ENGINE", engine)
    n, k = 16, 11
    a, b = _pencil(rng, n, np.float64)
    bad = _not_positive_definite(b, k)
    for vectors in (True, False):
        out = jaxmg.eigh_generalized(jt.shard_rows(a, mesh), jt.shard_rows(bad, mesh), 2, mesh,
                                     SPECS, return_eigenvectors=vectors, return_status=True)
        assert int(out[-1]) == n + k, f"status {int(out[-1])}, want {n + k}"
        for x in out[:-1]:
            assert np.all(np.isnan(np.asarray(x))), "outputs must be NaN"
    # and a good pencil still runs on the engine
    w, v, status = jaxmg.eigh_generalized(jt.shard_rows(a, mesh), jt.shard_rows(b, mesh), 2,
                                          mesh, SPECS, return_status=True)
    jt.assert_status_ok(status)
    _check(mesh, a, b, w, v, np.float64)


@pytest.mark.parametrize("engine", ["lapack", "lapack-local"])
@pytest.mark.parametrize("which", ["a", "b"])
def test_non_finite_input_gives_minus_one_and_nan(mesh, rng, monkeypatch, engine, which):
    monkeypatch.setenv("JAXMG_ENGINE", engine)
    n = 12
    a, b = _pencil(rng, n, np.complex128)
    if which == "a":
        a[7, 2] = np.nan
    else:
        b[3, 9] = np.inf
    w, v, status = jaxmg.eigh_generalized(jt.shard_rows(a, mesh), jt.shard_rows(b, mesh), 3,
                                          mesh, SPECS, return_status=True)
    assert int(status) == -1
    assert np.all(np.isnan(np.asarray(w))) and np.all(np.isnan(np.asarray(v)))


def test_lapack_local_on_a_grid(cpu_devices, rng, monkeypatch):
    """The local model with A's and B's rows over two mesh axes: both moved
    onto a 2 x 2 grid."""
    monkeypatch.setenv("JAXMG_ENGINE", "lapack-local")
    mesh = jax.make_mesh((2, 2), ("r", "c"), devices=cpu_devices)
    n, dtype = 16, np.complex128
    a, b = _pencil(rng, n, dtype)
    spec = P(("r", "c"), None)
    put = lambda x: jax.device_put(x, NamedSharding(mesh, spec))  # noqa: E731
    w, v, status = jaxmg.eigh_generalized(put(a), put(b), 2, mesh, (spec,), return_status=True)
    jt.assert_status_ok(status)
    _check(mesh, a, b, w, v, dtype, vspec=None)
    # P(r, c), a 2D process grid's spec, is read as the rows over both axes.
    grid = lambda x: jax.device_put(x, NamedSharding(mesh, P("r", "c")))  # noqa: E731
    w, v = jaxmg.eigh_generalized(grid(a), grid(b), 2, mesh, matrix_specs=P("r", "c"))
    _check(mesh, a, b, w, v, dtype, vspec=None)


def test_vmap_over_a_batch(mesh, rng):
    n, batch, dtype = 12, 3, np.float64
    pairs = [_pencil(rng, n, dtype) for _ in range(batch)]
    a = np.stack([p[0] for p in pairs])
    b = np.stack([p[1] for p in pairs])
    b[1] = _not_positive_definite(b[1], 5)
    ws, vs, st = jax.vmap(lambda a, b: jaxmg.eigh_generalized(a, b, 3, mesh, SPECS,
                                                              return_status=True))(a, b)
    assert np.asarray(st).tolist() == [0, n + 5, 0]
    for i in (0, 2):
        _check(None, a[i], b[i], ws[i], vs[i], dtype)
    assert np.all(np.isnan(np.asarray(ws[1])))


def test_donation_deletes_a_and_b(mesh, rng):
    n, dtype = 16, np.float64
    a, b = _pencil(rng, n, dtype)
    ad, bd = jt.shard_rows(a, mesh), jt.shard_rows(b, mesh)
    w, v = jaxmg.eigh_generalized(ad, bd, 2, mesh, SPECS, donate=True)
    assert ad.is_deleted() and bd.is_deleted()
    _check(mesh, a, b, w, v, dtype)
    a2, b2 = jt.shard_rows(a, mesh), jt.shard_rows(b, mesh)
    w2 = jaxmg.eigh_generalized(a2, b2, 2, mesh, SPECS, return_eigenvectors=False)
    assert not a2.is_deleted() and not b2.is_deleted()
    np.testing.assert_allclose(np.asarray(w2), np.asarray(w), rtol=1e-12, atol=1e-12)


def test_misuse_is_refused_before_tracing(mesh, rng):
    n = 8
    a, b = _pencil(rng, n, np.float64)
    op = "eigh_generalized"
    with pytest.raises(ValueError, match=f"{op}.*b has shape"):
        jaxmg.eigh_generalized(a, b[:4, :4])
    with pytest.raises(ValueError, match=f"{op}.*square"):
        jaxmg.eigh_generalized(a[:4], b)
    with pytest.raises(TypeError, match=f"{op}.*dtype"):
        jaxmg.eigh_generalized(a, b.astype(np.float32))
    with pytest.raises(TypeError, match=f"{op}.*dtype"):
        jaxmg.eigh_generalized(a.astype(np.int32), b.astype(np.int32))
    with pytest.raises(TypeError, match=f"{op}.*b must be an array"):
        jaxmg.eigh_generalized(a, "b")
    with pytest.raises(ValueError, match=f"{op}.*sharded the same way"):
        jaxmg.eigh_generalized(jt.shard_rows(a, mesh), jt.replicate(b, mesh))
    with pytest.raises(ValueError, match=f"{op}.*sharded the same way"):
        jaxmg.eigh_generalized(a, b, None, mesh, (ROWS, P(None, None)))
    with pytest.raises(ValueError, match=f"{op}.*divisible"):
        jaxmg.eigh_generalized(a[:6, :6], b[:6, :6], None, mesh, SPECS)
    a16, b16 = _pencil(rng, 16, np.float64)  # shards of 4 rows
    with pytest.raises(ValueError, match=f"{op}.*not a multiple of T_A"):
        jaxmg.eigh_generalized(a16, b16, 3, mesh, SPECS, pad=False)
    with pytest.raises(TypeError, match=f"{op}: donate must be a bool"):
        jaxmg.eigh_generalized(a, b, donate="yes")
    with pytest.raises(TypeError, match=f"{op}.*not both"):
        jaxmg.eigh_generalized(a, b, in_specs=SPECS, matrix_specs=SPECS)


def test_ctx_misuse(mesh, rng):
    a, b = _pencil(rng, 8, np.float64)

    def body(a, b):
        return jaxmg.eigh_generalized_shardmap_ctx(a, b[:, :4])

    f = jax.shard_map(body, mesh=mesh, in_specs=(ROWS, ROWS), out_specs=P())
    with pytest.raises(ValueError, match="eigh_generalized_shardmap_ctx.*b's shard"):
        f(jt.shard_rows(a, mesh), jt.shard_rows(b, mesh))
    with pytest.raises(ValueError, match="eigh_generalized_shardmap_ctx.*inside jax.shard_map"):
        jaxmg.eigh_generalized_shardmap_ctx(a, b)


# --- derivatives ------------------------------------------------------------------------

N_GRAD = 8
GRAD_TOL = 2e-5


def _grad_pencil(rng, dtype):
    """A Hermitian A with eigenvalues 1 ... N and B = I + a small HPD
    part: the pencil's eigenvalues stay well separated against
    check_grads' step."""
    q, _ = np.linalg.qr(jt.random_matrix(rng, (N_GRAD, N_GRAD), dtype))
    a = (q * np.arange(1, N_GRAD + 1)) @ q.conj().T
    x = jt.random_matrix(rng, (N_GRAD, N_GRAD), dtype)
    b = np.eye(N_GRAD) + 0.1 * x @ x.conj().T / N_GRAD
    fix = lambda m: ((m + m.conj().T) / 2).astype(dtype)  # noqa: E731
    return fix(a), fix(b)


def _gauge_free(w, v):
    """V sin(w) V^H: independent of the eigenvectors' phases."""
    return (v * jnp.sin(w)) @ jnp.conj(v).T


def _laid_out(mesh, x, spec):
    sharding = NamedSharding(mesh, spec)
    if AxisType.Explicit in mesh.axis_types:
        return jax.sharding.reshard(x, sharding)
    return jax.lax.with_sharding_constraint(x, sharding)


@pytest.mark.parametrize("form", ["plain", "ctx"])
@pytest.mark.parametrize("kind", ["explicit", "auto"])
def test_check_grads(cpu_devices, rng, kind, form):
    types = {"explicit": AxisType.Explicit, "auto": AxisType.Auto}
    mesh = jax.make_mesh((4,), ("x",), devices=cpu_devices, axis_types=(types[kind],))
    dtype = np.complex128 if (kind == "auto") == (form == "plain") else np.float64
    a, b = _grad_pencil(rng, dtype)
    if form == "plain":
        def values(a, b):
            return jaxmg.eigh_generalized(a, b, 2, mesh, SPECS, return_eigenvectors=False)

        def vectors(a, b):
            w, v = jaxmg.eigh_generalized(a, b, 2, mesh, SPECS)
            return _gauge_free(w, _laid_out(mesh, v, P()))
    else:
        pairs = jax.shard_map(lambda a, b: jaxmg.eigh_generalized_shardmap_ctx(a, b, 2)[:2],
                              mesh=mesh, in_specs=(ROWS, ROWS),
                              out_specs=(P(None), P(None, "x")))
        only = jax.shard_map(lambda a, b: jaxmg.eigh_generalized_shardmap_ctx(
            a, b, 2, return_eigenvectors=False)[0], mesh=mesh, in_specs=(ROWS, ROWS),
            out_specs=P(None))

        def values(a, b):
            return only(_laid_out(mesh, a, ROWS), _laid_out(mesh, b, ROWS))

        def vectors(a, b):
            w, v = pairs(_laid_out(mesh, a, ROWS), _laid_out(mesh, b, ROWS))
            return _gauge_free(w, _laid_out(mesh, v, P()))

    args = (jt.shard_rows(a, mesh), jt.shard_rows(b, mesh))
    for fn in (values, vectors):
        check_grads(jax.jit(fn), args, order=1, modes=("fwd", "rev"), atol=GRAD_TOL,
                    rtol=GRAD_TOL)


def test_tangents_match_the_cholesky_reduction(mesh, rng):
    """jvp of (w, gauge-free V function) against JAX's own differentiation
    of the same pencil reduced by hand: L = chol(B), C = L^-1 A L^-H,
    eigh(C), V = L^-H Y (on the Hermitian matrices of the upper triangles,
    which jaxmg reads)."""
    dtype = np.complex128
    a, b = _grad_pencil(rng, dtype)
    da = jt.random_matrix(rng, a.shape, dtype)
    db = jt.random_matrix(rng, b.shape, dtype)

    def upper(m):
        u = jnp.triu(m)
        return u + jnp.conj(jnp.triu(m, 1)).T

    def reference(a, b):
        a, b = upper(a), upper(b)
        chol = jnp.linalg.cholesky(b)
        li = jax.scipy.linalg.solve_triangular(chol, jnp.eye(a.shape[0], dtype=a.dtype),
                                               lower=True)
        w, y = jnp.linalg.eigh(li @ a @ jnp.conj(li).T)
        v = jnp.conj(li).T @ y
        return w, _gauge_free(w, v)

    def mine(a, b):
        w, v = jaxmg.eigh_generalized(a, b, 2, mesh, SPECS)
        return w, _gauge_free(w, _laid_out(mesh, v, P()))

    (w1, f1), (dw1, df1) = jax.jvp(mine, (a, b), (da, db))
    (w2, f2), (dw2, df2) = jax.jvp(reference, (a, b), (da, db))
    np.testing.assert_allclose(np.asarray(w1), np.asarray(w2), atol=1e-10)
    np.testing.assert_allclose(np.asarray(dw1), np.asarray(dw2), atol=1e-9)
    np.testing.assert_allclose(np.asarray(df1), np.asarray(df2), atol=1e-9)


# --- engine choice (the CUDA library's selection, asked without a GPU) ----------------------


@pytest.fixture
def cuda(monkeypatch):
    _native.load()
    path = _native._find_library("jaxmg_cuda")
    if path is None:
        pytest.skip("jaxmg was built without CUDA")
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        pytest.skip(f"libjaxmg_cuda.so does not load here: {e}")
    monkeypatch.setitem(_native._LIBS, "CUDA", lib)
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    return lib


def test_cuda_engine_choice_skips_cusolvermg(cuda, monkeypatch):
    ok, name = _native.engine_check("CUDA", "sygvd", 1, "float64", 4096, 1024)
    assert ok and name == "cusolverdn", name
    # Several GPUs: the gather engine at every size it supports (cuSOLVERMg
    # has no sygvd), past cuSOLVERDn's 32-bit limit none of the leader
    # engines.
    ok, name = _native.engine_check("CUDA", "sygvd", 4, "float64", 32768, 1024)
    assert ok and name == "cusolverdn-gather", name
    ok, why = _native.engine_check("CUDA", "sygvd", 4, "float64", 65536, 1024)
    assert (ok and why == "cusolvermp") or (not ok and "cusolvermg: it has no sygvd" in why
                                             and "32-bit" in why), why
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermg")
    ok, why = _native.engine_check("CUDA", "sygvd", 4, "float64", 1024, 256)
    assert not ok and "JAXMG_ENGINE" in why and "it has no sygvd" in why, why


# --- JAXMG_TRACE and memory_estimate ----------------------------------------------------------


def test_trace_names_the_op_and_the_engine(mesh, rng, capfd, monkeypatch):
    monkeypatch.setenv("JAXMG_TRACE", "1")
    a, b = _pencil(rng, 16, np.float64)
    jaxmg.eigh_generalized(jt.shard_rows(a, mesh), jt.shard_rows(b, mesh), 2, mesh, SPECS)
    err = capfd.readouterr().err
    line = next((l for l in err.splitlines() if "jaxmg trace" in l and "sygvd" in l), "")
    assert "sygvd float64 N=16 T_A=2" in line and "engine lapack" in line, err


def test_memory_estimate_counts_b_and_aliases_both_when_donated(mesh):
    n = 64
    shard = n * (n // 4) * 8  # bytes of one device's rows of A (float64)
    donated = jaxmg.memory_estimate("sygvd", (n, n), np.float64, mesh, T_A=5)
    kept = jaxmg.memory_estimate("sygvd", (n, n), np.float64, mesh, T_A=5, donate=False)
    assert donated.engine == "lapack" and donated.T_A == 4 and not donated.padded
    assert donated.arguments == 2 * shard  # A and B
    assert donated.aliased == 2 * shard    # both handed to the solver
    assert kept.aliased == 0


# --- one device (issue 25): V in A's buffer ------------------------------------------------
# On a group of one device the C library conjugate-transposes the eigenvectors
# in place after the solver, as syevd's (csrc/ops/vectors.c): A's buffer holds
# V itself and no second N x N buffer is made for it. N = 37: no tile of the
# host's in-place transpose (64) divides it.


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("donate", [False, True], ids=["kept", "donated"])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_one_device_every_dtype(one_device_mesh, rng, dtype, donate, jitted, monkeypatch):
    """Every dtype, eagerly (A and B donated, or kept) and inside the
    caller's jit (A donated, or kept), on the leader model's lapack and on
    lapack-local."""
    mesh, n = one_device_mesh, 37
    a, b = _pencil(rng, n, dtype)
    for engine in ("lapack", "lapack-local"):
        monkeypatch.setenv("JAXMG_ENGINE", engine)
        ad, bd = jt.shard_rows(a, mesh), jt.shard_rows(b, mesh)
        if jitted:
            fn = jax.jit(lambda a, b: jaxmg.eigh_generalized(a, b, None, mesh, SPECS,
                                                             return_status=True),
                         donate_argnums=(0,) if donate else ())
            w, v, status = fn(ad, bd)
            assert ad.is_deleted() == donate and not bd.is_deleted(), engine
        else:
            w, v, status = jaxmg.eigh_generalized(ad, bd, None, mesh, SPECS,
                                                  return_status=True, donate=donate)
            assert ad.is_deleted() == donate and bd.is_deleted() == donate, engine
        jt.assert_status_ok(status)
        _check(mesh, a, b, w, v, dtype)
        w2 = jaxmg.eigh_generalized(jt.shard_rows(a, mesh), jt.shard_rows(b, mesh), None, mesh,
                                    SPECS, return_eigenvectors=False, donate=donate)
        np.testing.assert_allclose(np.asarray(w2), np.asarray(w), rtol=0,
                                   atol=jt.tol(dtype, n) * float(np.abs(np.asarray(w)).max()))


def test_one_device_ctx_and_check_grads(one_device_auto_mesh, rng):
    """The ctx form inside shard_map, and derivatives, where V is A's buffer."""
    mesh, n, dtype = one_device_auto_mesh, 10, np.complex128
    a, b = _pencil(rng, n, dtype)

    def body(a, b):  # one device: its columns of V are all of V
        w, v, _ = jaxmg.eigh_generalized_shardmap_ctx(a, b)
        return w, v

    w, v = jax.shard_map(body, mesh=mesh, in_specs=(ROWS, ROWS),
                         out_specs=(P(), P(None, "x")))(jnp.asarray(a), jnp.asarray(b))
    _check(None, a, b, w, v, dtype)

    def f(a, b):
        w, v = jaxmg.eigh_generalized(a, b, None, mesh, SPECS)
        return _gauge_free(w, v)

    check_grads(f, (jnp.asarray(a), jnp.asarray(b)), order=1, modes=("fwd", "rev"),
                atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_one_device_program_holds_no_second_matrix(one_device_mesh, dtype):
    """XLA's buffer assignment of the program a donating call runs on one
    device (compiled.memory_analysis(), B handed first as the call does):
    A and B are arguments, both aliased to outputs (V takes A's buffer,
    B's work buffer B's), and beside them less than one more N x N buffer;
    the solver's custom call takes both parameters themselves, no copy.
    Before V was made in A's buffer, V was an output of its own: one more
    A. And jaxmg.memory_estimate says the same."""
    from jaxmg._src.api import generalized

    mesh, n = one_device_mesh, 37
    spec_a = jax.ShapeDtypeStruct((n, n), dtype, sharding=NamedSharding(mesh, ROWS))
    spec_b = jax.ShapeDtypeStruct((n, n), dtype, sharding=NamedSharding(mesh, ROWS))
    a_bytes = n * n * np.dtype(dtype).itemsize
    assert generalized._b_first(mesh, SPECS, True)

    def worked(b, a):
        return generalized._run_worked_b_first(b, a, T_A=None, mesh=mesh, in_specs=SPECS,
                                               return_eigenvectors=True, return_status=False,
                                               pad=True)

    compiled = jax.jit(worked, donate_argnums=(0, 1)).lower(spec_b, spec_a).compile()
    mem = compiled.memory_analysis()
    beside = mem.output_size_in_bytes - mem.alias_size_in_bytes + mem.temp_size_in_bytes
    assert mem.argument_size_in_bytes == 2 * a_bytes
    assert mem.alias_size_in_bytes == 2 * a_bytes, mem
    assert beside < a_bytes, mem
    assert " copy(" not in compiled.as_text(), "a parameter was copied for the solver"
    est = jaxmg.memory_estimate("sygvd", (n, n), dtype, mesh)
    assert est.aliased == 2 * a_bytes and est.outputs - est.aliased + est.temporaries < a_bytes

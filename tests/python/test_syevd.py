"""jaxmg.syevd: eigenvalues and eigenvectors of a Hermitian A, on 4 CPU devices.

Eigenvectors are checked through ||A V - V diag(w)|| and ||V^H V - I||, never
element by element (they are unique only up to phase, and not at all within a
degenerate eigenspace).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
import jaxmg_testing as jt
from jaxmg._src.api.v1 import syevd_forms as v1_syevd

SPECS = (P("x", None),)

SIZES = [(n, t) for n in (8, 20, 36, 64) for t in (1, 2, 3, 5, 1000)]


def _real(dtype):
    return np.float32 if np.dtype(dtype) in (np.float32, np.complex64) else np.float64


def _check_eigenvalues(mesh, a, w, dtype):
    n = a.shape[0]
    assert w.shape == (n,)
    assert np.dtype(w.dtype) == np.dtype(_real(dtype)), f"w has dtype {w.dtype}"
    jt.assert_finite(w)
    jt.assert_replicated(w, mesh)
    wn = np.asarray(w, np.float64)
    assert np.all(np.diff(wn) >= 0), "eigenvalues are not in ascending order"
    ref = np.linalg.eigvalsh(jt.to_ref(a))
    scale = np.linalg.norm(jt.to_ref(a), 2)
    err = np.max(np.abs(wn - ref)) / scale
    assert err < jt.tol(dtype, n), f"max |w - eigvalsh(A)| / ||A|| = {err:.3e}"


def _check_eigenvectors(mesh, a, w, v, dtype):
    n = a.shape[0]
    assert v.shape == (n, n)
    assert np.dtype(v.dtype) == np.dtype(dtype)
    jt.assert_finite(v)
    jt.assert_sharded_like(v, mesh, P(None, "x"))
    t = jt.tol(dtype, n)
    res = jt.eig_residual(a, w, v)
    assert res < t, f"||A V - V diag(w)|| / ||A|| = {res:.3e}"
    orth = jt.orthogonality(v)
    assert orth < t, f"||V^H V - I|| = {orth:.3e}"


@pytest.mark.parametrize("n,T_A", SIZES, ids=[f"N{n}-T{t}" for n, t in SIZES])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_syevd_grid(mesh, hermitian, dtype, n, T_A):
    a = hermitian(n, dtype)  # indefinite: eigenvalues of both signs
    w, v, status = jaxmg.syevd(jt.shard_rows(a, mesh), T_A, mesh, SPECS, return_status=True)
    jt.assert_status_ok(status)
    _check_eigenvalues(mesh, a, w, dtype)
    _check_eigenvectors(mesh, a, w, v, dtype)


@pytest.mark.parametrize("n,T_A", [(20, 3), (24, 6), (36, 5)])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_syevd_positive_definite(mesh, hpd, dtype, n, T_A):
    a = hpd(n, dtype)
    w, v = jaxmg.syevd(jt.shard_rows(a, mesh), T_A, mesh, SPECS)
    _check_eigenvalues(mesh, a, w, dtype)
    _check_eigenvectors(mesh, a, w, v, dtype)
    assert float(w[0]) > 0


@pytest.mark.parametrize("n,T_A", [(200, 7), (200, 25), (192, 1000)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_syevd_larger(mesh, hermitian, dtype, n, T_A):
    a = hermitian(n, dtype)
    w, v = jaxmg.syevd(jt.shard_rows(a, mesh), T_A, mesh, SPECS)
    _check_eigenvalues(mesh, a, w, dtype)
    _check_eigenvectors(mesh, a, w, v, dtype)


@pytest.mark.parametrize("n,T_A", [(20, 3), (24, 5), (16, 4)])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_syevd_eigenvalues_only(mesh, hermitian, dtype, n, T_A):
    a = jt.shard_rows(hermitian(n, dtype), mesh)
    w = jaxmg.syevd(a, T_A, mesh, SPECS, return_eigenvectors=False)
    assert not isinstance(w, tuple)
    _check_eigenvalues(mesh, np.asarray(a), w, dtype)
    out = jaxmg.syevd(a, T_A, mesh, SPECS, return_eigenvectors=False, return_status=True)
    assert isinstance(out, tuple) and len(out) == 2
    w2, status = out
    jt.assert_status_ok(status)
    _check_eigenvalues(mesh, np.asarray(a), w2, dtype)


def test_syevd_return_forms(mesh, hermitian):
    a = jt.shard_rows(hermitian(24, np.float64), mesh)
    out = jaxmg.syevd(a, 5, mesh, SPECS)
    assert isinstance(out, tuple) and len(out) == 2
    out = jaxmg.syevd(a, 5, mesh, SPECS, return_status=True)
    assert isinstance(out, tuple) and len(out) == 3
    w, v, status = out
    assert w.shape == (24,) and v.shape == (24, 24) and status.shape == ()


@pytest.mark.parametrize("specs", [(P("x", None),), P("x", None), (P("x"),)],
                         ids=["tuple", "bare-spec", "short-spec"])
def test_syevd_in_specs_forms(mesh, hermitian, specs):
    a = hermitian(20, np.complex128)
    w, v = jaxmg.syevd(jt.shard_rows(a, mesh), 2, mesh, specs)
    _check_eigenvectors(mesh, a, w, v, np.complex128)


def test_syevd_pad_false_when_no_padding_needed(mesh, hermitian):
    a = jt.shard_rows(hermitian(24, np.float64), mesh)
    w0, v0 = jaxmg.syevd(a, 3, mesh, SPECS, pad=False)
    w1, _ = jaxmg.syevd(a, 3, mesh, SPECS, pad=True)
    _check_eigenvectors(mesh, np.asarray(a), w0, v0, np.float64)
    np.testing.assert_allclose(np.asarray(w0), np.asarray(w1), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
@pytest.mark.parametrize("kind", ["identity", "repeated", "zero"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=["f32", "c128"])
def test_syevd_degenerate(mesh, rng, dtype, kind, T_A):
    """Degenerate spectra: the eigenvectors must still be orthonormal."""
    n = 24
    if kind == "identity":
        a = 3 * np.eye(n)
    elif kind == "zero":
        a = np.zeros((n, n))
    else:  # a random unitary similarity of diag(-1 x 8, 2 x 8, 5 x 8)
        q, _ = np.linalg.qr(jt.random_matrix(rng, (n, n), dtype))
        a = (q * np.repeat([-1.0, 2.0, 5.0], 8)) @ q.conj().T
    a = jt._exactly_hermitian(a, dtype)
    w, v = jaxmg.syevd(jt.shard_rows(a, mesh), T_A, mesh, SPECS)
    if kind == "zero":  # no scale to be relative to: exact zeros, orthonormal V
        assert np.all(np.asarray(w) == 0)
        jt.assert_finite(v)
        assert jt.orthogonality(v) < jt.tol(dtype, n)
    else:
        _check_eigenvalues(mesh, a, w, dtype)
        _check_eigenvectors(mesh, a, w, v, dtype)


@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
def test_syevd_spectrum_far_from_zero(mesh, hermitian, T_A):
    """Padding's eigenpairs must sort after A's for any spectrum: all
    eigenvalues large and negative, and all large and positive."""
    n = 24
    for shift in (-1e4, 1e4):
        a = hermitian(n, np.float64) + shift * np.eye(n)
        w, v = jaxmg.syevd(jt.shard_rows(a, mesh), T_A, mesh, SPECS)
        _check_eigenvalues(mesh, a, w, np.float64)
        _check_eigenvectors(mesh, a, w, v, np.float64)


@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_syevd_reads_only_upper_triangle(mesh, hermitian, rng, dtype, T_A):
    """Documented: only A's upper triangle is read. Garbage in the strictly
    lower triangle must not change the result. (The garbage is of A's own
    magnitude: syevd's padding value is derived from whole rows, lower triangle
    included, and the eigensolver's errors scale with the padded matrix's norm,
    so much larger garbage costs accuracy when padding; see the arrow test.)"""
    n = 24
    a = hermitian(n, dtype)
    garbage = jt.random_matrix(rng, (n, n), dtype)
    a_upper = (np.triu(a) + np.tril(garbage, -1)).astype(dtype)
    w, v = jaxmg.syevd(jt.shard_rows(a_upper, mesh), T_A, mesh, SPECS)
    _check_eigenvalues(mesh, a, w, dtype)
    _check_eigenvectors(mesh, a, w, v, dtype)


@pytest.mark.parametrize("T_A", [6, 5], ids=["unpadded", "padded"])
def test_syevd_upper_triangle_only_arrow(mesh, T_A):
    """An "arrow" matrix (last row and column all ones, zero elsewhere) given by
    its upper triangle only, the lower one left zero, as the docs allow.
    Eigenvalues +-sqrt(N-1) and zeros; every upper-triangle row sums to 1, so
    a padding value derived from the rows of the given array (3) lies below
    sqrt(23) ~ 4.8."""
    n = 24
    arrow = np.zeros((n, n))
    arrow[-1, :] = arrow[:, -1] = 1.0
    arrow[-1, -1] = 0.0
    w, v = jaxmg.syevd(jt.shard_rows(np.triu(arrow), mesh), T_A, mesh, SPECS)
    _check_eigenvalues(mesh, arrow, w, np.float64)
    _check_eigenvectors(mesh, arrow, w, v, np.float64)


# --- one device (issue 25) ------------------------------------------------------------
# On a group of one device, unpadded, the C library conjugate-transposes the
# solver's eigenvectors in place, so that A's buffer holds V itself and no
# second N x N buffer is made for it; padded (T_A not dividing N), V is made
# from the solver's V^H as on several devices. N = 37: no tile of the C
# library's (64 on the host) divides it.
ONE_N = 37


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("donate", [False, True], ids=["kept", "donated"])
@pytest.mark.parametrize("T_A", [None, 5], ids=["in-a", "padded"])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_syevd_on_one_device(one_device_mesh, hermitian, dtype, T_A, donate, jitted):
    """Every dtype, A donated and kept, eagerly and inside the caller's jit:
    ||A V - V diag(w)|| and ||V^H V - I|| in float64 against the input."""
    mesh, n = one_device_mesh, ONE_N
    a = hermitian(n, dtype)
    a_dev = jt.shard_rows(a, mesh)
    if jitted:
        fn = jax.jit(lambda a: jaxmg.syevd(a, T_A, mesh, SPECS, return_status=True),
                     donate_argnums=(0,) if donate else ())
        with warnings.catch_warnings():  # a padded call cannot use the donated A
            warnings.filterwarnings("ignore", message=".*donated buffers were not usable.*")
            w, v, status = fn(a_dev)
    else:
        w, v, status = jaxmg.syevd(a_dev, T_A, mesh, SPECS, return_status=True,
                                   donate=donate)
    assert a_dev.is_deleted() == donate
    jt.assert_status_ok(status)
    _check_eigenvalues(mesh, a, w, dtype)
    _check_eigenvectors(mesh, a, w, v, dtype)


@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_syevd_ctx_on_one_device(one_device_mesh, hermitian, dtype):
    """JAXMg 1.x's ctx form at the global level on one device: a_work is A's
    buffer, which holds V itself there (the same values as the V returned,
    sharded like A)."""
    mesh, n = one_device_mesh, ONE_N
    a = hermitian(n, dtype)
    with jax.sharding.set_mesh(mesh):
        work, w, v, status = jax.jit(lambda a: jaxmg.syevd_shardmap_ctx(a))(
            jt.shard_rows(a, mesh))
    jt.assert_status_ok(status)
    jt.assert_sharded_like(v, mesh, P("x", None))
    _check_eigenvalues(mesh, a, w, dtype)
    assert jt.eig_residual(a, w, v) < jt.tol(dtype, n)
    assert jt.orthogonality(v) < jt.tol(dtype, n)
    np.testing.assert_array_equal(np.asarray(work), np.asarray(v))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_syevd_check_grads_on_one_device(one_device_auto_mesh, hermitian, dtype):
    """Derivatives where V is A's buffer: eigenvalues to second order,
    eigenvectors through V sin(w) V^H (phase-free), the seeds' form inside
    shard_map and the 1.x ctx form at the global level too. The two forms
    beside the plain one in complex128 only: the rules are the same code
    for both dtypes (real is complex without the conjugations, which only
    complex tests); the real cases of those two took about 20 CPU-seconds
    of this test's 26 in float64."""
    mesh, n, tol = one_device_auto_mesh, 12, 2e-5  # check_grads' differences set tol
    a = hermitian(n, dtype)
    values = lambda a: jaxmg.syevd(a, None, mesh, SPECS, return_eigenvectors=False)  # noqa: E731
    check_grads(values, (a,), order=2, modes=("fwd", "rev"), atol=tol, rtol=tol)

    def plain(a):
        w, v = jaxmg.syevd(a, None, mesh, SPECS)
        return (v * jnp.sin(w)) @ jnp.conj(v).T

    def in_shard_map(a):
        def body(a):  # one device: its columns of V are all of V
            w, v, _ = jaxmg.syevd_shardmap_ctx(a)
            return jax.lax.psum((v * jnp.sin(w)) @ jnp.conj(v).T, "x")
        return jax.shard_map(body, mesh=mesh, in_specs=P("x", None), out_specs=P())(a)

    def ctx(a):
        _, w, v, _ = jaxmg.syevd_shardmap_ctx(a, None, mesh, matrix_specs=P("x", None))
        return (v * jnp.sin(w)) @ jnp.conj(v).T

    for f in (plain, in_shard_map, ctx) if jt.is_complex(dtype) else (plain,):
        check_grads(f, (a,), order=1, modes=("fwd", "rev"), atol=tol, rtol=tol)


def _a_bytes(dtype) -> int:
    return ONE_N * ONE_N * np.dtype(dtype).itemsize


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_one_device_program_holds_no_second_matrix(one_device_mesh, dtype):
    """XLA's buffer assignment of the program a call runs on one device
    (compiled.memory_analysis()): beside A (an argument), the program holds
    less than one more N x N buffer, donated (the call ``donate=True``
    runs: V is the output aliased to A) or kept (the solver's copy of A is
    V's output). Before V was made in A's buffer, V was a second output (or
    a temporary copy of A): one more A."""
    mesh = one_device_mesh
    a = jax.ShapeDtypeStruct((ONE_N, ONE_N), dtype, sharding=NamedSharding(mesh, P("x", None)))
    kw = dict(T_A=None, mesh=mesh, in_specs=SPECS)

    def worked(a):
        return v1_syevd._syevd_worked(a, **kw)

    def kept(a):
        return jaxmg.syevd(a, **kw)

    for fn, donated in ((worked, (0,)), (kept, ())):
        mem = jax.jit(fn, donate_argnums=donated).lower(a).compile().memory_analysis()
        beside_a = (mem.output_size_in_bytes - mem.alias_size_in_bytes
                    + mem.temp_size_in_bytes)
        assert mem.argument_size_in_bytes == _a_bytes(dtype)
        assert mem.alias_size_in_bytes == (_a_bytes(dtype) if donated else 0)
        assert beside_a < (1 if donated else 2) * _a_bytes(dtype), (fn.__name__, mem)

"""jaxmg inside larger JAX programs: under jit, repeated, several calls in one
program, other meshes (2-D, permuted, sub-meshes), the shard_map forms, input
buffers left intact, donation."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

SPECS = (P("x", None), P(None, None))
SPEC_A = (P("x", None),)


def _assert_solves(a, x, b, dtype=np.float64):
    jt.assert_finite(x)
    be = jt.solve_backward_error(a, x, b)
    assert be < jt.tol(dtype, a.shape[0]), f"backward error {be:.3e}"


def _assert_inverts(a, ainv, dtype=np.float64):
    jt.assert_finite(ainv)
    res = jt.inverse_residual(a, ainv)
    assert res < jt.tol(dtype, a.shape[0]), f"inverse residual {res:.3e}"
    np.testing.assert_allclose(np.asarray(ainv), np.linalg.inv(jt.to_ref(a)), rtol=0,
                               atol=jt.tol(dtype, a.shape[0]) * 10 * jt.fro(ainv))


def _assert_eigh(a, w, v, dtype=np.float64):
    n = a.shape[0]
    jt.assert_finite(w, v)
    t = jt.tol(dtype, n)
    assert jt.eig_residual(a, w, v) < t
    assert jt.orthogonality(v) < t
    ref = np.linalg.eigvalsh(jt.to_ref(a))
    assert np.max(np.abs(np.asarray(w) - ref)) < t * np.linalg.norm(jt.to_ref(a), 2)


# --- jit ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_potrs_inside_user_jit(mesh, hpd, rhs, dtype):
    """The op inside the user's jitted function, a and b as jit arguments,
    with computation before and after it."""
    n = 20
    a, b = hpd(n, dtype), rhs(n, 2, dtype)

    @jax.jit
    def f(a, b):
        x = jaxmg.potrs(2 * a, b + 1, 3, mesh, SPECS)
        return x * 2 - 1

    out = f(jt.shard_rows(a, mesh), jt.replicate(b, mesh))
    assert out.shape == (n, 2) and np.dtype(out.dtype) == np.dtype(dtype)
    _assert_solves(2 * a, (jt.to_ref(out) + 1) / 2, b + 1, dtype)


def test_potri_and_syevd_inside_user_jit(mesh, hpd):
    a = hpd(24, np.complex128)
    f = jax.jit(lambda a: (jaxmg.potri(a, 5, mesh, SPEC_A),
                           jaxmg.syevd(a + 0, 5, mesh, SPEC_A, return_status=True)))
    ainv, (w, v, status) = f(jt.shard_rows(a, mesh))
    assert int(status) == 0
    _assert_inverts(a, ainv, np.complex128)
    _assert_eigh(a, w, v, np.complex128)
    jt.assert_sharded_like(ainv, mesh, P("x", None))
    jt.assert_sharded_like(v, mesh, P(None, "x"))


def test_repeated_calls_with_new_inputs(mesh, hpd, rhs):
    """20 calls of one jitted program, each with fresh inputs: all correct
    (the rendezvous of one call never meets another's)."""
    n = 24
    f = jax.jit(lambda a, b: jaxmg.potrs(a, b, 5, mesh, SPECS, return_status=True))
    for i in range(20):
        a, b = hpd(n, np.float64, shift=0.5 + i), rhs(n, 2, np.float64)
        x, status = f(jt.shard_rows(a, mesh), jt.replicate(b, mesh))
        assert int(status) == 0, f"call {i}"
        _assert_solves(a, x, b)


def test_repeated_calls_eager(mesh, hpd, rhs):
    n = 16
    for i in range(10):
        a, b = hpd(n, np.complex64), rhs(n, None, np.complex64)
        _assert_solves(a, jaxmg.potrs(a, b, 3, mesh, SPECS), b, np.complex64)


def test_two_sizes_in_one_jit(mesh, hpd, rhs):
    a1, b1 = hpd(24, np.float64), rhs(24, 1, np.float64)
    a2, b2 = hpd(8, np.float64), rhs(8, 3, np.float64)

    @jax.jit
    def f(a1, b1, a2, b2):
        return (jaxmg.potrs(a1, b1, 5, mesh, SPECS), jaxmg.potrs(a2, b2, 1, mesh, SPECS))

    x1, x2 = f(a1, b1, a2, b2)
    _assert_solves(a1, x1, b1)
    _assert_solves(a2, x2, b2)


def test_two_same_size_solves_in_one_jit(mesh, hpd, rhs):
    """Two independent calls of the same op, shape and T_A in one program: they
    share a run id, and must still not mix their matrices."""
    a1, a2 = hpd(24, np.float64), hpd(24, np.float64, shift=3.0)
    b1, b2 = rhs(24, 2, np.float64), rhs(24, 2, np.float64)
    f = jax.jit(lambda a1, b1, a2, b2: (jaxmg.potrs(a1, b1, 3, mesh, SPECS),
                                        jaxmg.potrs(a2, b2, 3, mesh, SPECS)))
    x1, x2 = f(a1, b1, a2, b2)
    _assert_solves(a1, x1, b1)
    _assert_solves(a2, x2, b2)


def test_all_three_ops_in_one_jit(mesh, hpd, rhs):
    n = 20
    a, b = hpd(n, np.float64), rhs(n, 2, np.float64)

    @jax.jit
    def f(a, b):
        x = jaxmg.potrs(a, b, 3, mesh, SPECS)
        ainv = jaxmg.potri(a, 2, mesh, SPEC_A)
        w, v = jaxmg.syevd(a, 5, mesh, SPEC_A)
        return x, ainv, w, v, ainv @ b  # the inverse used downstream

    x, ainv, w, v, y = f(jt.shard_rows(a, mesh), b)
    _assert_solves(a, x, b)
    _assert_inverts(a, ainv)
    _assert_eigh(a, w, v)
    np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=1e-10, atol=1e-12)


def test_chained_ops(mesh, hpd, rhs):
    """The output of one op feeds the next: potri(potri(A)) = A, and
    potrs(A^-1, b) = A b."""
    a, b = hpd(24, np.float64), rhs(24, 2, np.float64)

    @jax.jit
    def f(a, b):
        ainv = jaxmg.potri(a, 5, mesh, SPEC_A)
        return jaxmg.potri(ainv, 3, mesh, SPEC_A), jaxmg.potrs(ainv, b, 2, mesh, SPECS)

    aa, ab = f(jt.shard_rows(a, mesh), b)
    np.testing.assert_allclose(np.asarray(aa), a, rtol=0, atol=1e-12 * jt.fro(a))
    np.testing.assert_allclose(np.asarray(ab), a @ b, rtol=0, atol=1e-12 * jt.fro(a @ b))


# --- other meshes ---------------------------------------------------------------------


@pytest.mark.parametrize("spec", [P("T", None), P("S", None), P(("S", "T"), None),
                                  P(("T", "S"), None)],
                         ids=["T", "S", "S,T", "T,S"])
def test_2d_mesh(cpu_devices, hpd, rhs, spec):
    """A 2 x 2 mesh. Sharded over one axis, each group along the other solves
    its own copy (the tutorial's minSR snippet); over both, one solve on 4."""
    mesh2 = jax.make_mesh((2, 2), ("S", "T"), devices=cpu_devices)
    n = 24
    a, b = hpd(n, np.float64), rhs(n, 1, np.float64)
    a_s = jax.device_put(a, NamedSharding(mesh2, spec))
    b_r = jax.device_put(b, NamedSharding(mesh2, P(None, None)))
    x, status = jaxmg.potrs(a_s, b_r, 5, mesh2, (spec, P(None, None)), return_status=True)
    assert int(status) == 0
    _assert_solves(a, x, b)
    jt.assert_replicated(x, mesh2)
    ainv = jaxmg.potri(a_s, 5, mesh2, (spec,))
    _assert_inverts(a, ainv)
    jt.assert_sharded_like(ainv, mesh2, spec)
    w, v = jaxmg.syevd(a_s, 3, mesh2, (spec,))
    _assert_eigh(a, w, v)
    jt.assert_sharded_like(v, mesh2, P(None, spec[0]))
    jt.assert_replicated(w, mesh2)


def test_2d_mesh_groups_solve_different_matrices(cpu_devices, hpd, rhs):
    """Sharded over "T" inside a shard_map, the two "S" groups hold different
    matrices (A and 2A + I): each must get its own answer, not the other's."""
    mesh2 = jax.make_mesh((2, 2), ("S", "T"), devices=cpu_devices)
    n = 16
    a, b = hpd(n, np.float64), rhs(n, 2, np.float64)

    def body(a_local, b):
        a_local = jt.second_group_shifted(a_local, n)
        x, status = jaxmg.potrs_shardmap_ctx(a_local, b, T_A=3, axis_name="T")
        return x[None], status

    f = jax.jit(jax.shard_map(body, mesh=mesh2, in_specs=(P("T", None), P(None, None)),
                              out_specs=(P("S", None, None), P("S")), check_vma=False))
    x, status = f(jax.device_put(a, NamedSharding(mesh2, P("T", None))),
                  jax.device_put(b, NamedSharding(mesh2, P(None, None))))
    assert np.asarray(status).tolist() == [0, 0]
    _assert_solves(a, np.asarray(x)[0], b)
    _assert_solves(2 * a + np.eye(n), np.asarray(x)[1], b)


def test_permuted_device_order(cpu_devices, hpd, rhs):
    """A mesh whose device order is not the devices' ids' order."""
    pm = Mesh(np.array(cpu_devices)[[2, 0, 3, 1]], ("x",))
    n = 20
    a, b = hpd(n, np.complex128), rhs(n, 2, np.complex128)
    a_s = jt.shard_rows(a, pm)
    x = jaxmg.potrs(a_s, b, 2, pm, SPECS)
    _assert_solves(a, x, b, np.complex128)
    jt.assert_replicated(x, pm)
    ainv = jaxmg.potri(a_s, 3, pm, SPEC_A)
    _assert_inverts(a, ainv, np.complex128)
    jt.assert_sharded_like(ainv, pm, P("x", None))
    w, v = jaxmg.syevd(a_s, 2, pm, SPEC_A)
    _assert_eigh(a, w, v, np.complex128)
    jt.assert_sharded_like(v, pm, P(None, "x"))


@pytest.mark.parametrize("which", [slice(0, 2), slice(2, 4), [3, 1]],
                         ids=["first-two", "last-two", "3,1"])
def test_two_device_sub_mesh(cpu_devices, hpd, rhs, which):
    sub = Mesh(np.array(cpu_devices)[which], ("x",))
    n = 18  # shards of 9 rows: T_A=4 pads
    a, b = hpd(n, np.float32), rhs(n, 3, np.float32)
    a_s = jt.shard_rows(a, sub)
    x = jaxmg.potrs(a_s, b, 4, sub, SPECS)
    _assert_solves(a, x, b, np.float32)
    jt.assert_replicated(x, sub)
    _assert_inverts(a, jaxmg.potri(a_s, 4, sub, SPEC_A), np.float32)
    w, v = jaxmg.syevd(a_s, 4, sub, SPEC_A)
    _assert_eigh(a, w, v, np.float32)


def test_meshes_back_to_back(cpu_devices, mesh, hpd, rhs):
    """Calls on the full mesh and on two disjoint sub-meshes, interleaved."""
    subs = [Mesh(np.array(cpu_devices[:2]), ("x",)), Mesh(np.array(cpu_devices[2:]), ("x",))]
    for m in (mesh, subs[0], subs[1], mesh, subs[1], subs[0]):
        a, b = hpd(16, np.float64), rhs(16, 1, np.float64)
        _assert_solves(a, jaxmg.potrs(jt.shard_rows(a, m), b, 3, m, SPECS), b)


def test_auto_axis_mesh(cpu_devices, hpd, rhs):
    """A Mesh built directly (axis types Auto, unlike make_mesh's Explicit)."""
    m = Mesh(np.array(cpu_devices), ("x",))
    a, b = hpd(24, np.float64), rhs(24, 2, np.float64)
    x = jax.jit(lambda a, b: jaxmg.potrs(a, b, 5, m, SPECS))(jt.shard_rows(a, m), b)
    _assert_solves(a, x, b)
    jt.assert_replicated(x, m)


# --- the shard_map forms ----------------------------------------------------------------


# Each case: the per-shard body (after the user's own pre-processing, a * 2),
# its out_specs, and the plain form it must agree with (on 2a).
CTX_CASES = {
    "potrs-padded": (lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, T_A=5),
                     (P(None, None), P("x")),
                     lambda a, b, mesh: jaxmg.potrs(a, b, 5, mesh, SPECS)),
    "potrs-1d-b": (lambda a, b: jaxmg.potrs_shardmap_ctx(a, b[:, 0], T_A=3),
                   (P(None), P("x")),
                   lambda a, b, mesh: jaxmg.potrs(a, b[:, 0], 3, mesh, SPECS)),
    "potri-padded": (lambda a, b: jaxmg.potri_shardmap_ctx(a, T_A=4),
                     (P("x", None), P("x")),
                     lambda a, b, mesh: jaxmg.potri(a, 4, mesh, SPEC_A)),
    "syevd": (lambda a, b: jaxmg.syevd_shardmap_ctx(a, T_A=3),
              (P(None), P(None, "x"), P("x")),
              lambda a, b, mesh: jaxmg.syevd(a, 3, mesh, SPEC_A)),
    "syevd-values-padded": (
        lambda a, b: jaxmg.syevd_shardmap_ctx(a, T_A=5, return_eigenvectors=False),
        (P(None), P("x")),
        lambda a, b, mesh: (jaxmg.syevd(a, 5, mesh, SPEC_A, return_eigenvectors=False),)),
}


@pytest.mark.parametrize("case", list(CTX_CASES))
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_shardmap_ctx_matches_plain_form(mesh, hpd, rhs, dtype, case):
    """potrs/potri/syevd_shardmap_ctx inside a user's jitted shard_map, after
    the user's own per-shard work, agree with the plain forms."""
    n = 24
    a, b = hpd(n, dtype), rhs(n, 2, dtype)
    ctx, out_specs, plain = CTX_CASES[case]

    f = jax.jit(jax.shard_map(lambda a, b: ctx(a * 2, b), mesh=mesh,
                              in_specs=(P("x", None), P(None, None)),
                              out_specs=out_specs, check_vma=False))
    *outs, status = f(jt.shard_rows(a, mesh), jt.replicate(b, mesh))
    # status has shape (1,) on every device: out_specs P("x") gathers all 4.
    assert np.asarray(status).tolist() == [0] * 4
    a2 = 2 * a
    want = plain(jt.shard_rows(a2, mesh), b, mesh)
    want = want if isinstance(want, tuple) else (want,)
    assert len(outs) == len(want)
    t = jt.tol(dtype, n)
    for got, ref in zip(outs, want):
        assert got.shape == ref.shape and got.dtype == ref.dtype
        jt.assert_finite(got)
        assert jt.fro(jt.to_ref(got) - jt.to_ref(ref)) <= 10 * t * jt.fro(jt.to_ref(ref)) + t
    if case.startswith("potrs"):
        _assert_solves(a2, outs[0], b if case == "potrs-padded" else b[:, 0], dtype)
    elif case.startswith("potri"):
        _assert_inverts(a2, outs[0], dtype)
        jt.assert_sharded_like(outs[0], mesh, P("x", None))
    elif case == "syevd":
        _assert_eigh(a2, outs[0], outs[1], dtype)
        jt.assert_sharded_like(outs[1], mesh, P(None, "x"))


def test_shardmap_ctx_three_ops_in_one_shard_map(mesh, hpd, rhs):
    """One call of each op in one user shard_map (different ops: different
    rendezvous keys)."""
    n = 24
    a, b = hpd(n, np.complex128), rhs(n, 2, np.complex128)

    def body(a_local, b):
        x, s1 = jaxmg.potrs_shardmap_ctx(a_local, b, T_A=5)
        inv, s2 = jaxmg.potri_shardmap_ctx(a_local, T_A=3)
        w, v, s3 = jaxmg.syevd_shardmap_ctx(a_local, T_A=2)
        return x, inv, w, v, jnp.concatenate([s1, s2, s3])

    f = jax.jit(jax.shard_map(
        body, mesh=mesh, in_specs=(P("x", None), P(None, None)),
        out_specs=(P(None, None), P("x", None), P(None), P(None, "x"), P("x")), check_vma=False))
    x, inv, w, v, status = f(jt.shard_rows(a, mesh), jt.replicate(b, mesh))
    assert np.asarray(status).tolist() == [0] * 12
    _assert_solves(a, x, b, np.complex128)
    _assert_inverts(a, inv, np.complex128)
    _assert_eigh(a, w, v, np.complex128)


def test_two_calls_of_one_op_in_one_shard_map(mesh, hpd, rhs, monkeypatch):
    """Several jaxmg calls in one user shard_map, two of them of the same op
    (potrs with T_A=5 and T_A=3) and no data dependency between them: every
    call must pair with its own counterparts on the other devices."""
    monkeypatch.setenv("JAXMG_RENDEZVOUS_TIMEOUT", "5")  # fail fast, not after minutes
    n, dtype = 24, np.float32

    def body(a_local, b):
        a_local = a_local * 2
        x, s1 = jaxmg.potrs_shardmap_ctx(a_local, b, T_A=5)
        x1, s2 = jaxmg.potrs_shardmap_ctx(a_local, b[:, 0], T_A=3)
        inv, s3 = jaxmg.potri_shardmap_ctx(a_local, T_A=4)
        w, v, s4 = jaxmg.syevd_shardmap_ctx(a_local, T_A=3)
        w_only, s5 = jaxmg.syevd_shardmap_ctx(a_local, T_A=5, return_eigenvectors=False)
        return x, x1, inv, w, v, w_only, jnp.concatenate([s1, s2, s3, s4, s5])

    f = jax.jit(jax.shard_map(
        body, mesh=mesh, in_specs=(P("x", None), P(None, None)),
        out_specs=(P(None, None), P(None), P("x", None), P(None), P(None, "x"), P(None),
                   P("x")),
        check_vma=False))
    for _ in range(12):
        a, b = hpd(n, dtype), rhs(n, 2, dtype)
        x, x1, inv, w, v, w_only, status = f(jt.shard_rows(a, mesh), jt.replicate(b, mesh))
        assert np.asarray(status).tolist() == [0] * 20
        _assert_solves(2 * a, x, b, dtype)
        _assert_solves(2 * a, x1, b[:, 0], dtype)
        _assert_inverts(2 * a, inv, dtype)
        _assert_eigh(2 * a, w, v, dtype)


def test_shardmap_ctx_not_positive_definite(mesh):
    n, k = 24, 13
    a = np.eye(n)
    a[k, k] = -1

    def body(a_local):
        x, s1 = jaxmg.potrs_shardmap_ctx(a_local, jnp.ones((n, 1)), T_A=5)
        inv, s2 = jaxmg.potri_shardmap_ctx(a_local, T_A=6)
        return x, inv, jnp.concatenate([s1, s2])

    x, inv, status = jax.shard_map(
        body, mesh=mesh, in_specs=(P("x", None),),
        out_specs=(P(None, None), P("x", None), P("x")), check_vma=False)(jt.shard_rows(a, mesh))
    assert np.asarray(status).tolist() == [k + 1] * 8
    assert np.isnan(np.asarray(x)).all() and np.isnan(np.asarray(inv)).all()


# --- buffers ------------------------------------------------------------------------------


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
def test_inputs_not_modified(mesh, hpd, rhs, jit, T_A):
    """The solver works in place on A; the user's arrays must be left intact."""
    n = 24
    a_np, b_np = hpd(n, np.complex128), rhs(n, 2, np.complex128)
    a, b = jt.shard_rows(a_np, mesh), jt.replicate(b_np, mesh)
    ops = [
        lambda a, b: jaxmg.potrs(a, b, T_A, mesh, SPECS),
        lambda a, b: jaxmg.potri(a, T_A, mesh, SPEC_A),
        lambda a, b: jaxmg.syevd(a, T_A, mesh, SPEC_A),
    ]
    for op in ops:
        out = (jax.jit(op) if jit else op)(a, b)
        jax.block_until_ready(out)
        assert not a.is_deleted() and not b.is_deleted()
        np.testing.assert_array_equal(np.asarray(a), a_np)
        np.testing.assert_array_equal(np.asarray(b), b_np)
    # And still usable as input afterwards.
    _assert_solves(a_np, jaxmg.potrs(a, b, T_A, mesh, SPECS), b_np, np.complex128)


def test_donation_potrs(mesh, hpd, rhs):
    """Donating A is allowed and gives the right answer. (JAX may warn that
    the donated buffer was not usable: potrs has no output of A's shape.)"""
    n = 24
    a_np, b_np = hpd(n, np.float64), rhs(n, 2, np.float64)
    f = jax.jit(lambda a, b: jaxmg.potrs(a, b, 5, mesh, SPECS), donate_argnums=0)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
            x = f(jt.shard_rows(a_np, mesh), jt.replicate(b_np, mesh))
        _assert_solves(a_np, x, b_np)


@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
def test_donation_potri_reuses_a(mesh, hpd, T_A):
    """potri's inverse has A's shape and sharding: a donated A is consumed
    (its buffer reused) and the answer is right."""
    n = 24
    a_np = hpd(n, np.complex64)
    f = jax.jit(lambda a: jaxmg.potri(a, T_A, mesh, SPEC_A), donate_argnums=0)
    a = jt.shard_rows(a_np, mesh)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "donated buffers were not usable" would fail
        ainv = f(a)
        jax.block_until_ready(ainv)
    assert a.is_deleted()
    _assert_inverts(a_np, ainv, np.complex64)


def test_potrs_on_an_a_built_inside_jit_is_not_copied(mesh, rhs):
    """The memory guide's advice (docs/guides/memory.md): when A is computed inside the jitted
    function (as minSR's T = X X^H), XLA hands its buffer to the solver: no
    copy instruction makes the solver's A operand. (A jit argument is copied,
    since the solver works in place and potrs returns nothing of A's shape.)"""
    n = 32

    def step(x, b):
        return jaxmg.potrs(x @ x.T + n * jnp.eye(n), b, 4, mesh, SPECS)

    x_np = np.random.default_rng(0).standard_normal((n, n))
    b_np = rhs(n, 1, np.float64)
    hlo = jax.jit(step).lower(x_np, b_np).compile().as_text()
    calls = [line for line in hlo.splitlines() if 'custom_call_target="jaxmg_potrs"' in line]
    assert len(calls) == 1, calls
    operand = re.search(r"custom-call\((%[\w.\-]+)", calls[0]).group(1)
    producer = [line for line in hlo.splitlines() if line.strip().startswith(operand + " =")]
    assert producer and " copy(" not in producer[0], producer
    x = jax.jit(step)(x_np, b_np)
    a_np = x_np @ x_np.T + n * np.eye(n)
    np.testing.assert_allclose(a_np @ np.asarray(x), b_np, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
def test_donation_syevd_reuses_a(mesh, hermitian, T_A):
    """V has A's shape: a donated A is consumed and the answer is right."""
    n = 24
    a_np = hermitian(n, np.float64)
    f = jax.jit(lambda a: jaxmg.syevd(a, T_A, mesh, SPEC_A), donate_argnums=0)
    a = jt.shard_rows(a_np, mesh)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w, v = f(a)
        jax.block_until_ready((w, v))
    assert a.is_deleted()
    _assert_eigh(a_np, w, v)


def test_many_eager_calls_in_a_row_do_not_hang(mesh, hpd, rhs, monkeypatch):
    """Eager calls of different programs, one after the other without waiting:
    on CPU devices jaxmg waits for each (see _placement.settle_on_cpu); without that
    XLA:CPU hung after about 50 in flight on 2 cores."""
    monkeypatch.setenv("JAXMG_RENDEZVOUS_TIMEOUT", "30")
    n = 16
    a, b = hpd(n, np.float64), rhs(n, 2, np.float64)
    outs = []
    for _ in range(80):
        outs.append((jaxmg.potrs(a, b, 4, mesh, SPECS), jaxmg.potri(a, 3, mesh, SPEC_A)))
    assert jt.solve_backward_error(a, outs[-1][0], b) < jt.tol(np.float64, n)
    assert jt.inverse_residual(a, outs[-1][1]) < jt.tol(np.float64, n)

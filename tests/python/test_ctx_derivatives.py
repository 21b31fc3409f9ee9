"""Derivatives of the shard_map forms (potrs/potri/syevd_shardmap_ctx) on 4
CPU devices, under both settings of shard_map's check_vma.

The two settings read a value that is the same on every device differently
(python/jaxmg/_src/_manual.py says how): with check_vma=False the cotangent
of such a value arrives split over the devices, and how it is split depends
on the caller's out_specs, which the ops cannot see. So besides check_grads
(finite differences against forward and reverse mode, to second order where
the math allows), the gradients are compared with jnp.linalg on the matrix
the ops read (the Hermitian matrix of a's upper triangle) and with the plain
forms, for outputs taken out of the shard_map in several ways: replicated,
one copy per device with different weights, reduced inside the body; for b
gathered inside the body from row shards; on 2-D meshes.

check_grads runs on a mesh with Auto axes, as in test_derivatives.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
import jaxmg_testing as jt
from jaxmg_testing import herm

VMA = [True, False]
VMA_IDS = ["check_vma", "no_check_vma"]
DTYPES = [np.float64, np.complex128]
DTYPE_IDS = ["f64", "c128"]
# check_grads' central differences (step 1e-4 for float64) set this.
GRAD_TOL = 2e-5
# Gradients against jnp.linalg and the plain forms, relative (float64).
MATCH_TOL = 1e-10
N = 16  # shards of 4 rows: T_A=2 divides them, T_A=3 pads them to 6
T_A = [2, 3]
T_A_IDS = ["exact", "padded"]
# check_grads' (dtype, T_A) pairs: each dtype once, each tiling once (real
# exact, complex padded), under both check_vma settings: the rules do not
# depend on the pairing, and check_grads is this file's slowest part.
GRAD_CASES = [(np.float64, 2), (np.complex128, 3)]
GRAD_CASE_IDS = ["f64-exact", "c128-padded"]




def separated(rng, n, dtype):
    """A Hermitian matrix with eigenvalues 1 ... n: central differences of
    eigenvectors are accurate only when eigenvalue gaps are large against
    the step."""
    q, _ = np.linalg.qr(jt.random_matrix(rng, (n, n), dtype))
    return jt._exactly_hermitian((q * np.arange(1, n + 1)) @ q.conj().T, dtype)


def weights(shape, dtype):
    w = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) / np.prod(shape)
    return (w + 1j * w[::-1]).astype(dtype) if jt.is_complex(dtype) else w.astype(dtype)


def mapped(mesh, body, in_specs, out_specs, check_vma):
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_vma=check_vma))


def rel_err(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300))


def eigh_function(w, v):
    """A gauge-invariant function of eigenpairs (eigenvector phases are
    arbitrary): V sin(w) V^H."""
    return (v * jnp.sin(w)) @ jnp.conj(v).T


# --- check_grads ---------------------------------------------------------------------


@pytest.mark.parametrize("check_vma", VMA, ids=VMA_IDS)
@pytest.mark.parametrize("dtype,tile", GRAD_CASES, ids=GRAD_CASE_IDS)
def test_check_grads_potrs_ctx(auto_mesh, hpd, rhs, check_vma, dtype, tile):
    a, b = hpd(N, dtype), rhs(N, 2, dtype)
    f = mapped(auto_mesh, lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, T_A=tile)[0],
               (P("x", None), P(None, None)), P(None, None), check_vma)
    check_grads(f, (a, b), order=2, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)
    # A 1-D b.
    f1 = mapped(auto_mesh, lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, T_A=tile)[0],
                (P("x", None), P(None)), P(None), check_vma)
    check_grads(f1, (a, b[:, 0]), order=1, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)


@pytest.mark.parametrize("check_vma", VMA, ids=VMA_IDS)
@pytest.mark.parametrize("dtype,tile", GRAD_CASES, ids=GRAD_CASE_IDS)
def test_check_grads_potri_ctx(auto_mesh, hpd, check_vma, dtype, tile):
    f = mapped(auto_mesh, lambda a: jaxmg.potri_shardmap_ctx(a, T_A=tile)[0],
               (P("x", None),), P("x", None), check_vma)
    check_grads(f, (hpd(N, dtype),), order=2, modes=("fwd", "rev"), atol=GRAD_TOL,
                rtol=GRAD_TOL)


@pytest.mark.parametrize("check_vma", VMA, ids=VMA_IDS)
@pytest.mark.parametrize("dtype,tile", GRAD_CASES, ids=GRAD_CASE_IDS)
def test_check_grads_syevd_ctx(auto_mesh, rng, check_vma, dtype, tile):
    """Eigenvalues to second order (padded too: the derivative computes the
    padded problem's eigenvectors); eigenvectors, which cannot be padded
    inside shard_map, through a gauge-invariant function."""
    a = separated(rng, N, dtype)
    w_only = mapped(auto_mesh, lambda a: jaxmg.syevd_shardmap_ctx(
        a, T_A=tile, return_eigenvectors=False)[0], (P("x", None),), P(None), check_vma)
    check_grads(w_only, (a,), order=2, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)
    if tile == 3:
        return
    pairs = mapped(auto_mesh, lambda a: jaxmg.syevd_shardmap_ctx(a, T_A=tile)[:2],
                   (P("x", None),), (P(None), P(None, "x")), check_vma)
    check_grads(lambda a: eigh_function(*pairs(a)), (a,), order=1, modes=("fwd", "rev"),
                atol=GRAD_TOL, rtol=GRAD_TOL)


# --- against jnp.linalg and the plain forms ---------------------------------------------


def _eigh_function_in_body(a):
    """eigh_function inside the shard_map: V sin(w) V^H is the sum over the
    devices of their columns' V_d sin(w_d) V_d^H."""
    w, v, _ = jaxmg.syevd_shardmap_ctx(a, T_A=2)
    c = v.shape[1]
    w_mine = jax.lax.dynamic_slice_in_dim(w, jax.lax.axis_index("x") * c, c)
    return jax.lax.psum((v * jnp.sin(w_mine)) @ jnp.conj(v).T, "x")


@pytest.mark.parametrize("check_vma,dtype", [(True, np.complex128), (False, np.float64)],
                         ids=["check_vma-c128", "no_check_vma-f64"])
def test_ctx_jvp_vjp_grad_match_jnp(auto_mesh, hpd, rhs, rng, check_vma, dtype):
    """jax.jvp, jax.vjp and jax.grad through each ctx form equal the same
    through jnp.linalg. (The plain forms' derivatives, padded and not, on
    Auto meshes: check_grads in test_derivatives.py, and against jnp.linalg
    in test_user_inputs_derivatives.py and test_derivatives.py's
    test_grads_match_jnp_linalg_under_explicit_axes.)"""
    a, b, h = hpd(N, dtype), rhs(N, 3, dtype), separated(rng, N, dtype)
    da, db, dh = hpd(N, dtype), rhs(N, 3, dtype), jt.make_hermitian(rng, N, dtype)
    ctx = {
        "potrs": mapped(auto_mesh, lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, T_A=3)[0],
                        (P("x", None), P(None, None)), P(None, None), check_vma),
        "potri": mapped(auto_mesh, lambda a, b: jaxmg.potri_shardmap_ctx(a, T_A=3)[0],
                        (P("x", None), P(None, None)), P("x", None), check_vma),
        "syevd": mapped(auto_mesh, lambda a, b: _eigh_function_in_body(a), (P("x", None), P(None, None)),
            P(None, None), check_vma),
    }
    reference = {
        "potrs": lambda a, b: jnp.linalg.solve(herm(a), b),
        "potri": lambda a, b: jnp.linalg.inv(herm(a)),
        "syevd": lambda a, b: eigh_function(*jnp.linalg.eigh(herm(a))),
    }
    for name in ctx:
        primals = (h, b) if name == "syevd" else (a, b)
        tangents = (dh, db) if name == "syevd" else (da, db)
        out = jax.eval_shape(reference[name], *primals)
        ct = weights(out.shape, dtype)
        results = {}
        for form, f in (("ctx", ctx[name]), ("jnp", reference[name])):
            _, jvp = jax.jvp(f, primals, tangents)
            _, pullback = jax.vjp(f, *primals)
            vjp = pullback(ct)
            grad = jax.grad(lambda *p: jnp.real(jnp.sum(ct * f(*p))), argnums=(0, 1))(*primals)
            results[form] = (jvp, *vjp, *grad)
        for got, want in zip(results["ctx"], results["jnp"]):
            assert rel_err(got, want) < MATCH_TOL, name


def _solve_with_out(mesh, check_vma, how, tile=3):
    """potrs_shardmap_ctx, its x taken out of the shard_map as ``how`` says,
    and the scalar loss that makes the gradient comparable."""
    n_dev = 4

    if how == "replicated":
        f = mapped(mesh, lambda a, b, w: jaxmg.potrs_shardmap_ctx(a, b, T_A=tile)[0],
                   (P("x", None), P(None, None), P(None, None)), P(None, None), check_vma)
        return lambda a, b, w: jnp.real(jnp.sum(w * f(a, b, w)))
    if how == "one-copy-per-device":
        # Every device's copy is an output: each gets its own weight, so the
        # cotangents differ from device to device.
        f = mapped(mesh, lambda a, b, w: jaxmg.potrs_shardmap_ctx(a, b, T_A=tile)[0][None],
                   (P("x", None), P(None, None), P(None, None)), P("x", None, None), check_vma)
        scale = jnp.arange(1.0, n_dev + 1.0)[:, None, None]
        return lambda a, b, w: jnp.real(jnp.sum(scale * w * f(a, b, w))) / jnp.sum(scale)
    if how == "reduced-in-body":
        # Each device weighs its own rows of x; one psum adds the parts.
        def body(a, b, w):
            x, _ = jaxmg.potrs_shardmap_ctx(a, b, T_A=tile)
            r = a.shape[0]
            d = jax.lax.axis_index("x")
            mine = jax.lax.dynamic_slice_in_dim(w * x, d * r, r, axis=0)
            return jax.lax.psum(jnp.real(jnp.sum(mine)), "x")
        return mapped(mesh, body, (P("x", None), P(None, None), P(None, None)), P(), check_vma)
    raise ValueError(how)


@pytest.mark.parametrize("check_vma", VMA, ids=VMA_IDS)
@pytest.mark.parametrize("how", ["replicated", "one-copy-per-device", "reduced-in-body"])
def test_potrs_ctx_gradient_whatever_the_out_specs(auto_mesh, hpd, rhs, check_vma, how):
    """With check_vma=False shard_map splits an unmapped output's cotangent
    over the devices (dividing it by their number) or, for an output per
    device, hands each its own; the gradient must not depend on it."""
    dtype = np.complex128
    a, b, w = hpd(N, dtype), rhs(N, 2, dtype), weights((N, 2), dtype)
    loss = _solve_with_out(auto_mesh, check_vma, how)
    got = jax.jit(jax.grad(loss, argnums=(0, 1)))(a, b, w)
    want = jax.grad(lambda a, b: jnp.real(jnp.sum(w * jnp.linalg.solve(herm(a), b))),
                    argnums=(0, 1))(a, b)
    for g, r in zip(got, want):
        assert rel_err(g, r) < MATCH_TOL


@pytest.mark.parametrize("check_vma", VMA, ids=VMA_IDS)
def test_potrs_ctx_gradient_of_b_gathered_in_the_body(auto_mesh, hpd, rhs, check_vma):
    """b arrives row-sharded and is gathered inside the body (with
    check_vma=True it is then typed as varying): the gradient reaches every
    device's rows of b."""
    dtype = np.float64
    a, b, w = hpd(N, dtype), rhs(N, 2, dtype), weights((N, 2), dtype)

    def body(a, b_rows):
        b = jax.lax.all_gather(b_rows, "x", tiled=True)
        return jaxmg.potrs_shardmap_ctx(a, b, T_A=2)[0]

    f = mapped(auto_mesh, body, (P("x", None), P("x", None)), P(None, None), check_vma)
    got = jax.jit(jax.grad(lambda a, b: jnp.sum(w * f(a, b)), argnums=(0, 1)))(a, b)
    want = jax.grad(lambda a, b: jnp.sum(w * jnp.linalg.solve(herm(a), b)), argnums=(0, 1))(a, b)
    for g, r in zip(got, want):
        assert rel_err(g, r) < MATCH_TOL


@pytest.mark.parametrize("check_vma", VMA, ids=VMA_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_potri_syevd_ctx_gradients_reduced_in_body(auto_mesh, hpd, rng, check_vma, dtype):
    """potri's rows and syevd's columns weighed on their own device, the
    eigenvalues once per device (divided by 4), all added by one psum."""
    a, h = hpd(N, dtype), separated(rng, N, dtype)
    wa, ww = weights((N, N), dtype), np.linspace(1.0, 2.0, N)

    def body(a, h, wa_rows):
        inv, _ = jaxmg.potri_shardmap_ctx(a, T_A=3)
        w, v, _ = jaxmg.syevd_shardmap_ctx(h, T_A=2)
        d = jax.lax.axis_index("x")
        # |V|^2 is gauge invariant; weigh this device's columns.
        cols = jax.lax.dynamic_slice_in_dim(jnp.asarray(wa.real), d * 4, 4, axis=1)
        part = (jnp.real(jnp.sum(wa_rows * inv)) + jnp.sum(ww * jnp.sin(w)) / 4
                + jnp.sum(cols * jnp.abs(v) ** 2))
        return jax.lax.psum(part, "x")

    f = mapped(auto_mesh, body, (P("x", None), P("x", None), P("x", None)), P(), check_vma)
    got = jax.jit(jax.grad(f, argnums=(0, 1)))(a, h, wa)

    def reference(a, h):
        w, v = jnp.linalg.eigh(herm(h))
        return (jnp.real(jnp.sum(wa * jnp.linalg.inv(herm(a)))) + jnp.sum(ww * jnp.sin(w))
                + jnp.sum(wa.real * jnp.abs(v) ** 2))

    want = jax.grad(reference, argnums=(0, 1))(a, h)
    for g, r in zip(got, want):
        assert rel_err(g, r) < MATCH_TOL


@pytest.mark.parametrize("check_vma", VMA, ids=VMA_IDS)
def test_ctx_gradients_on_a_2d_mesh_with_groups(cpu_devices, hpd, rhs, check_vma):
    """Rows sharded over "T"; the two "S" groups solve different matrices (A
    and 2A + I): the rings and sums run within each group, and A's gradient
    adds both groups' parts."""
    mesh2 = jax.make_mesh((2, 2), ("S", "T"), devices=cpu_devices,
                          axis_types=(AxisType.Auto,) * 2)
    dtype = np.complex128
    n = 8
    a, b = hpd(n, dtype), rhs(n, 2, dtype)
    wx, wi = weights((n, 2), dtype), weights((n, n), dtype)

    def body(a_local, b):
        a_local = jt.second_group_shifted(a_local, n)
        x, _ = jaxmg.potrs_shardmap_ctx(a_local, b, T_A=2, axis_name="T")
        inv, _ = jaxmg.potri_shardmap_ctx(a_local, T_A=3, axis_name="T")
        w, _ = jaxmg.syevd_shardmap_ctx(a_local, T_A=3, return_eigenvectors=False,
                                        axis_name="T")
        return x[None], inv[None], w[None]

    f = mapped(mesh2, body, (P("T", None), P(None, None)),
               (P("S", None, None), P("S", "T", None), P("S", None)), check_vma)

    def loss(x, inv, w):
        scale = jnp.array([1.0, 3.0])
        return (jnp.sum(scale[:, None, None] * jnp.real(wx * x))
                + jnp.sum(scale[:, None, None] * jnp.real(wi * inv))
                + jnp.sum(scale[:, None] * jnp.sin(w)))

    got = jax.jit(jax.grad(lambda a, b: loss(*f(a, b)), argnums=(0, 1)))(a, b)

    def reference(a, b):
        outs = []
        for m in (herm(a), 2 * herm(a) + jnp.eye(n)):
            outs.append((jnp.linalg.solve(m, b), jnp.linalg.inv(m), jnp.linalg.eigvalsh(m)))
        return loss(*(jnp.stack(z) for z in zip(*outs)))

    want = jax.grad(reference, argnums=(0, 1))(a, b)
    for g, r in zip(got, want):
        assert rel_err(g, r) < MATCH_TOL


@pytest.mark.parametrize("check_vma", VMA, ids=VMA_IDS)
def test_ctx_gradients_rows_over_two_axes(cpu_devices, hpd, rhs, rng, check_vma):
    """Rows sharded over both axes of a 2 x 2 mesh, P(("S", "T"), None): the
    collectives run over the pair of axes."""
    mesh2 = jax.make_mesh((2, 2), ("S", "T"), devices=cpu_devices,
                          axis_types=(AxisType.Auto,) * 2)
    dtype = np.float64
    a, b, h = hpd(N, dtype), rhs(N, 2, dtype), separated(rng, N, dtype)
    wx, wi = weights((N, 2), dtype), weights((N, N), dtype)
    axes = ("S", "T")

    def body(a, h, b):
        x, _ = jaxmg.potrs_shardmap_ctx(a, b, T_A=3, axis_name=axes)
        inv, _ = jaxmg.potri_shardmap_ctx(a, T_A=2, axis_name=axes)
        w, v, _ = jaxmg.syevd_shardmap_ctx(h, T_A=2, axis_name=axes)
        return x, inv, w, v

    f = mapped(mesh2, body, (P(axes, None), P(axes, None), P(None, None)),
               (P(None, None), P(axes, None), P(None), P(None, axes)), check_vma)

    def loss(x, inv, w, v):
        return jnp.sum(wx * x) + jnp.sum(wi * inv) + jnp.sum(wi * eigh_function(w, v))

    got = jax.jit(jax.grad(lambda a, h, b: loss(*f(a, h, b)), argnums=(0, 1, 2)))(a, h, b)
    want = jax.grad(lambda a, h, b: loss(jnp.linalg.solve(herm(a), b), jnp.linalg.inv(herm(a)),
                                          *jnp.linalg.eigh(herm(h))), argnums=(0, 1, 2))(a, h, b)
    for g, r in zip(got, want):
        assert rel_err(g, r) < MATCH_TOL


@pytest.mark.parametrize("check_vma", VMA, ids=VMA_IDS)
def test_ctx_gradient_in_a_shard_map_over_some_axes(cpu_devices, hpd, rhs, check_vma):
    """A shard_map manual over "T" only (axis_names), "S" left to XLA."""
    mesh2 = jax.make_mesh((2, 2), ("S", "T"), devices=cpu_devices,
                          axis_types=(AxisType.Auto,) * 2)
    dtype = np.complex128
    n = 8
    a, b, w = hpd(n, dtype), rhs(n, 2, dtype), weights((n, 2), dtype)
    f = jax.jit(jax.shard_map(lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, T_A=3, axis_name="T")[0],
                              mesh=mesh2, in_specs=(P("T", None), P(None, None)),
                              out_specs=P(None, None), axis_names={"T"}, check_vma=check_vma))
    loss = lambda a, b: jnp.real(jnp.sum(w * f(a, b)))  # noqa: E731
    got = jax.jit(jax.grad(loss, argnums=(0, 1)))(a, b)
    want = jax.grad(lambda a, b: jnp.real(jnp.sum(w * jnp.linalg.solve(herm(a), b))),
                    argnums=(0, 1))(a, b)
    for g, r in zip(got, want):
        assert rel_err(g, r) < MATCH_TOL


# --- typing under check_vma=True, and misuse ----------------------------------------------


@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_ctx_forms_under_check_vma_match_plain_forms(mesh, hpd, rhs, dtype):
    """Under shard_map's default check_vma=True the results are typed: x, w
    and the status as the same on every device (so out_specs may leave them
    unmapped, which shard_map refuses for values typed as varying)."""
    a, b = hpd(N, dtype), rhs(N, 2, dtype)

    def body(a, b):
        x, s1 = jaxmg.potrs_shardmap_ctx(a, b, T_A=3)
        inv, s2 = jaxmg.potri_shardmap_ctx(a, T_A=3)
        w, v, s3 = jaxmg.syevd_shardmap_ctx(a, T_A=2)
        w_only, s4 = jaxmg.syevd_shardmap_ctx(a, T_A=3, return_eigenvectors=False)
        return x, inv, w, v, w_only, jnp.concatenate([s1, s2, s3, s4])

    f = mapped(mesh, body, (P("x", None), P(None, None)),
               (P(None, None), P("x", None), P(None), P(None, "x"), P(None), P(None)), True)
    x, inv, w, v, w_only, status = f(jt.shard_rows(a, mesh), jt.replicate(b, mesh))
    assert np.asarray(status).tolist() == [0] * 4
    tol = jt.tol(dtype, N)
    assert jt.solve_backward_error(a, x, b) < tol
    assert jt.inverse_residual(a, inv) < tol
    assert jt.eig_residual(a, w, v) < tol
    assert jt.orthogonality(v) < tol
    w_plain = jaxmg.syevd(jt.shard_rows(a, mesh), 3, mesh, (P("x", None),),
                          return_eigenvectors=False)
    np.testing.assert_allclose(np.asarray(w_only), np.asarray(w_plain), rtol=tol, atol=tol)


def test_ctx_rejects_a_typed_as_the_same_on_every_device(mesh):
    """Under check_vma=True, a shard typed as invariant along the rows' axes
    cannot be this device's rows: refused before anything is traced."""
    a_rows = np.eye(N)[:4] * 2

    for op, call in (
        ("potrs", lambda a: jaxmg.potrs_shardmap_ctx(a, jnp.ones((N, 1)), T_A=2)[0]),
        ("potri", lambda a: jaxmg.potri_shardmap_ctx(a, T_A=2)[0]),
        ("syevd", lambda a: jaxmg.syevd_shardmap_ctx(a, T_A=2)[0]),
    ):
        f = jax.shard_map(call, mesh=mesh, in_specs=(P(None, None),), out_specs=P(),
                          check_vma=True)
        with pytest.raises(ValueError, match=rf"{op}_shardmap_ctx: a is typed as the same "
                                             r"on every device along \('x',\)"):
            jax.jit(f).trace(a_rows)


def test_ctx_gradient_under_explicit_axes(mesh, hpd, rhs):
    """jax.make_mesh's default (Explicit) axes, as a user would have them:
    a jitted gradient through the ctx form equals jnp.linalg's."""
    dtype = np.float64
    a, b = hpd(N, dtype), rhs(N, 2, dtype)
    w = weights((N, 2), dtype)
    f = jax.shard_map(lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, T_A=2)[0], mesh=mesh,
                      in_specs=(P("x", None), P(None, None)), out_specs=P(None, None))
    a_s = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    b_r = jax.device_put(b, NamedSharding(mesh, P(None, None)))
    with jax.set_mesh(mesh):
        got = jax.jit(jax.grad(lambda a, b: jnp.sum(w * f(a, b)), argnums=(0, 1)))(a_s, b_r)
    want = jax.grad(lambda a, b: jnp.sum(w * jnp.linalg.solve(herm(a), b)), argnums=(0, 1))(a, b)
    for g, r in zip(got, want):
        assert rel_err(g, r) < MATCH_TOL


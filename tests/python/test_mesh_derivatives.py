"""Derivatives on every kind of mesh (issue 15): check_grads (finite
differences against forward and reverse mode) for potrs, potri, syevd's
eigenvalues and a gauge-invariant function of its eigenvectors, lu_solve (on
a non-symmetric matrix), in the plain
and the shard_map (ctx) forms, on meshes with Explicit axes (jax.make_mesh's
default, as the seeds build them) and Auto axes (as NetKet builds them),
without and inside jax.set_mesh, eagerly (outside set_mesh) and under
jax.jit, real and complex.

Lean, so that the suite stays fast on two cores: N = 8; each case checks one
dtype, complex in the jitted cases outside set_mesh (so every kind of mesh
meets both dtypes); second order (where the
rules allow it: potrs, potri, eigenvalues, lu_solve) in the jitted cases
inside jax.set_mesh on Explicit meshes, first order elsewhere and for the
eigenvectors, whose central differences are too coarse beyond. On Auto
meshes test_derivatives.py (potrs, potri, eigenvalues), test_lu_solve.py
(lu_solve) and test_ctx_derivatives.py (the ctx forms of potrs, potri and
the eigenvalues) take the ops to second order already, so the jitted
set_mesh cases on Auto meshes do so only for ctx lu_solve, which no other
file takes there (SECOND_ORDER_ON_AUTO).

test_cotangents_are_typed_like_their_primals (issue 29) checks that the
cotangents jaxmg hands back for A and b are typed (and, eagerly, placed) like
A and b, unsharded, row-sharded or replicated, through the user's own
(A + A^H) / 2, for every op and both API forms.

What a user does on an Explicit mesh is what JAX asks of any code there, and
the tests do it the same way: contract V's sharded columns only after laying
V out (jax.sharding.reshard), and, around their own shard_map, lay its inputs
and outputs out as in_specs and out_specs say.
"""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
import jaxmg_testing as jt

N = 8          # shards of 2 rows on 4 devices
TILE = 2
SPEC = (P("x", None),)
ROWS = P("x", None)
# check_grads' central differences (step 1e-4 for float64) set this.
GRAD_TOL = 2e-5
# An eager shard_map traces its body at every call, and every trace of a
# jaxmg call is a new program (its call id): eager ctx cases cost about 10 s
# per check here, so they check potri, whose row-sharded output is the one
# whose cotangent needs laying out, and leave the others to the jitted cases;
# and they check one eager jvp and one eager vjp against the same under
# jax.jit (eager_matches_jit), whose check_grads the jitted ctx cases run in
# this dtype (float64: set_mesh-jit on both kinds of mesh), rather than
# check_grads' eight or so eager calls (57 CPU-s a case).
EAGER_CTX = ("potri",)
AXIS_TYPES = {"explicit": AxisType.Explicit, "auto": AxisType.Auto}
# (form, op) taken to second order on Auto meshes here: the others are in
# test_derivatives.py, test_lu_solve.py and test_ctx_derivatives.py (the
# two Auto set_mesh-jit cases took 35 and 41 CPU-seconds to second order,
# 8 and 14 so).
SECOND_ORDER_ON_AUTO = {("ctx", "lu_solve")}


def separated(rng, n, dtype):
    """A Hermitian matrix with eigenvalues 1 ... n (eigenvector differences
    need gaps large against the step)."""
    q, _ = np.linalg.qr(jt.random_matrix(rng, (n, n), dtype))
    return jt._exactly_hermitian((q * np.arange(1, n + 1)) @ q.conj().T, dtype)


def eigh_function(w, v):
    """V sin(w) V^H: independent of the eigenvectors' phases."""
    return (v * jnp.sin(w)) @ jnp.conj(v).T


def laid_out(mesh, x, spec):
    """x laid out as spec says on mesh: what an Explicit mesh needs before
    a shard_map or a product over a sharded dimension (jax.sharding.reshard,
    a no-op on values); on an Auto mesh a sharding constraint."""
    sharding = NamedSharding(mesh, spec)
    if AxisType.Explicit in mesh.axis_types:
        return jax.sharding.reshard(x, sharding)
    return jax.lax.with_sharding_constraint(x, sharding)


def in_shard_map(mesh, body, in_specs, out_specs):
    f = jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs)

    def run(*args):
        out = f(*(laid_out(mesh, x, s) for x, s in zip(args, in_specs)))
        if isinstance(out, tuple):
            return tuple(laid_out(mesh, o, s) for o, s in zip(out, out_specs))
        return laid_out(mesh, out, out_specs)

    return run


def general(a):
    """A non-symmetric, well-conditioned matrix from the HPD a (for
    lu_solve)."""
    return (a + 0.5 * np.triu(np.ones_like(a), 1)).astype(a.dtype)


def plain_cases(mesh, a, b, h):
    def vectors(h):
        w, v = jaxmg.syevd(h, TILE, mesh, SPEC)
        return eigh_function(w, laid_out(mesh, v, P()))

    return [
        ("potrs", lambda a, b: jaxmg.potrs(a, b, TILE, mesh, SPEC), (a, b), 2),
        ("potri", lambda a: jaxmg.potri(a, TILE, mesh, SPEC), (a,), 2),
        ("eigenvalues", lambda h: jaxmg.syevd(h, TILE, mesh, SPEC, return_eigenvectors=False),
         (h,), 2),
        ("eigenvectors", vectors, (h,), 1),
        ("lu_solve", lambda a, b: jaxmg.lu_solve(a, b, TILE, mesh, SPEC), (general(a), b), 2),
    ]


def ctx_cases(mesh, a, b, h):
    potrs = in_shard_map(mesh, lambda a, b: jaxmg.potrs_shardmap_ctx(a, b, T_A=TILE)[0],
                         (ROWS, P(None, None)), P(None, None))
    potri = in_shard_map(mesh, lambda a: jaxmg.potri_shardmap_ctx(a, T_A=TILE)[0],
                         (ROWS,), ROWS)
    values = in_shard_map(mesh, lambda h: jaxmg.syevd_shardmap_ctx(
        h, T_A=TILE, return_eigenvectors=False)[0], (ROWS,), P(None))
    pairs = in_shard_map(mesh, lambda h: jaxmg.syevd_shardmap_ctx(h, T_A=TILE)[:2],
                         (ROWS,), (P(None), P(None, "x")))

    lu = in_shard_map(mesh, lambda a, b: jaxmg.lu_solve_shardmap_ctx(a, b, T_A=TILE)[0],
                      (ROWS, P(None, None)), P(None, None))

    def vectors(h):
        w, v = pairs(h)
        return eigh_function(w, laid_out(mesh, v, P()))

    return [
        ("potrs", potrs, (a, b), 2),
        ("potri", potri, (a,), 2),
        ("eigenvalues", values, (h,), 2),
        ("eigenvectors", vectors, (h,), 1),
        ("lu_solve", lu, (general(a), b), 2),
    ]


# (set_mesh, jit): eagerly only outside jax.set_mesh. An eager call inside
# set_mesh runs the same rules as outside it (the context mesh is read the
# same way under jit), and eager check_grads is this file's slowest part
# (40 to 50 s a case on two cores); set_mesh's eager path is still taken by
# test_cotangents_are_typed_like_their_primals.
MODES = ((False, False), (False, True), (True, True))


def eager_matches_jit(f, args, rng):
    """One jvp and one vjp of f called eagerly equal the same under jax.jit."""
    tangents = tuple(jt.random_matrix(rng, x.shape, x.dtype) for x in args)
    out, pullback = jax.vjp(f, *args)
    ct = jt.random_matrix(rng, out.shape, out.dtype)
    eager = (jax.jvp(f, args, tangents), pullback(ct))
    jitted = jax.jit(lambda x, t, c: (jax.jvp(f, x, t), jax.vjp(f, *x)[1](c)))(
        args, tangents, ct)
    for got, want in zip(jax.tree_util.tree_leaves(eager), jax.tree_util.tree_leaves(jitted)):
        err = jt.fro(jt.to_ref(got) - jt.to_ref(want)) / jt.fro(want)
        assert err < 1e-12, f"eager against jit: relative error {err:.2e}"


@pytest.mark.parametrize(
    "set_mesh,jit", MODES,
    ids=[f"{'set_mesh' if m else 'no_set_mesh'}-{'jit' if j else 'eager'}" for m, j in MODES])
@pytest.mark.parametrize("kind", ["explicit", "auto"])
@pytest.mark.parametrize("form", ["plain", "ctx"])
def test_check_grads_on_every_kind_of_mesh(cpu_devices, rng, form, kind, set_mesh, jit):
    mesh = jax.make_mesh((len(cpu_devices),), ("x",), devices=cpu_devices,
                         axis_types=(AXIS_TYPES[kind],))
    cases = plain_cases if form == "plain" else ctx_cases
    dtype = np.complex128 if set_mesh != jit else np.float64
    second = set_mesh and jit
    a, b, h = jt.make_hpd(rng, N, dtype), jt.make_rhs(rng, N, 2, dtype), separated(rng, N, dtype)
    for name, f, args, order in cases(mesh, a, b, h):
        if form == "ctx" and not jit and name not in EAGER_CTX:
            continue
        if kind == "auto" and (form, name) not in SECOND_ORDER_ON_AUTO:
            order = 1
        g = jax.jit(f) if jit else f
        with jax.set_mesh(mesh) if set_mesh else contextlib.nullcontext():
            try:
                if form == "ctx" and not jit:
                    eager_matches_jit(f, args, rng)
                    continue
                check_grads(g, args, order=order if second else 1, modes=("fwd", "rev"),
                            atol=GRAD_TOL, rtol=GRAD_TOL)
            except Exception as e:
                raise AssertionError(f"{name}: {e}") from e


# --- cotangents typed like their primals (issue 29) -------------------------------
#
# A user's code around jaxmg differentiates only if the cotangent jaxmg hands
# back for A (and b) is laid out, and on a mesh of Explicit axes typed, as A
# itself: the Hermitian part (A + A^H) / 2 of an unsharded A adds jaxmg's
# cotangent to its transpose, which JAX refuses when one is typed P('x', None)
# and the other P(None, 'x'). Each case takes one reverse-mode derivative of
# half the ops (both API forms) through the user's own code, checks the
# cotangents' types against the inputs' (and, eagerly, their placement) and
# their values against jnp.linalg's in float64/complex128.

LAYOUTS = ("unsharded", "rows", "replicated")


def laid_out_as(mesh, x, layout, device):
    """x as the layout says: on one device (uncommitted, as jnp.asarray
    leaves it: jax.jit refuses arguments committed to other devices than
    its mesh's), rows sharded, or replicated."""
    if layout == "unsharded":
        with jax.default_device(device):
            return jnp.asarray(x)
    return jax.device_put(x, NamedSharding(mesh, ROWS if layout == "rows" else P()))


def hermitian_part(mesh, a, layout):
    """(A + A^H) / 2, the user's code; on an Explicit mesh a row-sharded A^H
    is laid out like A first, as JAX asks of any code there."""
    ah = jnp.conj(a).T
    if layout == "rows":
        ah = laid_out(mesh, ah, ROWS)
    return (a + ah) / 2


def nonsymmetric_part(mesh, a, layout):
    """3/4 A + 1/4 A^H: non-symmetric, and it uses A^H too (for lu_solve and
    gesvd)."""
    ah = jnp.conj(a).T
    if layout == "rows":
        ah = laid_out(mesh, ah, ROWS)
    return 0.75 * a + 0.25 * ah


def svd_function(u, s, vh):
    """U sin(S) Vh: independent of the singular vectors' phases."""
    return (u * jnp.sin(s)) @ vh


def cotangent_cases(mesh, layout):
    """(name, f(a, b) through jaxmg, the same through jnp.linalg)."""
    sym = functools.partial(hermitian_part, mesh, layout=layout)
    gen = functools.partial(nonsymmetric_part, mesh, layout=layout)
    full = functools.partial(laid_out, mesh, spec=P())

    def ref_vectors(a):
        w, v = jnp.linalg.eigh(a)
        return eigh_function(w, v)

    def ref_svd(a):
        return svd_function(*jnp.linalg.svd(a, full_matrices=False))

    def ref_polar(a):
        u, s, vh = jnp.linalg.svd(a, full_matrices=False)
        return u @ vh, (jnp.conj(vh).T * s) @ vh

    def svd_of(u, s, vh):
        return svd_function(u, s, full(vh))

    def ctx_vectors(a):
        _, w, v, _ = jaxmg.syevd_shardmap_ctx(sym(a), TILE, mesh, matrix_specs=SPEC)
        return eigh_function(w, full(v))

    return [
        ("potrs", lambda a, b: jaxmg.potrs(sym(a), b, TILE, mesh, SPEC),
         lambda a, b: jnp.linalg.solve((a + jnp.conj(a).T) / 2, b)),
        ("potrs 1.x, logdet", lambda a, b: jaxmg.potrs(
            sym(a), b, TILE, mesh, matrix_specs=SPEC, return_logdet=True),
         lambda a, b: (jnp.linalg.solve((a + jnp.conj(a).T) / 2, b),
                       jnp.linalg.slogdet((a + jnp.conj(a).T) / 2)[1])),
        ("potrs_shardmap_ctx 1.x", lambda a, b: jaxmg.potrs_shardmap_ctx(
            sym(a), b, TILE, mesh, matrix_specs=SPEC)[1],
         lambda a, b: jnp.linalg.solve((a + jnp.conj(a).T) / 2, b)),
        ("lu_solve", lambda a, b: jaxmg.lu_solve(gen(a), b, TILE, mesh, SPEC),
         lambda a, b: jnp.linalg.solve(0.75 * a + 0.25 * jnp.conj(a).T, b)),
        ("lu_solve_shardmap_ctx 1.x", lambda a, b: jaxmg.lu_solve_shardmap_ctx(
            gen(a), b, TILE, mesh, matrix_specs=SPEC)[1],
         lambda a, b: jnp.linalg.solve(0.75 * a + 0.25 * jnp.conj(a).T, b)),
        ("potri", lambda a, b: jaxmg.potri(sym(a), TILE, mesh, SPEC),
         lambda a, b: jnp.linalg.inv((a + jnp.conj(a).T) / 2)),
        ("eigenvalues", lambda a, b: jaxmg.syevd(sym(a), TILE, mesh, SPEC,
                                                 return_eigenvectors=False),
         lambda a, b: jnp.linalg.eigvalsh((a + jnp.conj(a).T) / 2)),
        ("eigenvectors", lambda a, b: eigh_function(
            *(lambda w, v: (w, full(v)))(*jaxmg.syevd(sym(a), TILE, mesh, SPEC))),
         lambda a, b: ref_vectors((a + jnp.conj(a).T) / 2)),
        ("syevd_shardmap_ctx 1.x", lambda a, b: ctx_vectors(a),
         lambda a, b: ref_vectors((a + jnp.conj(a).T) / 2)),
        ("gesvd", lambda a, b: svd_of(*jaxmg.gesvd(gen(a), TILE, mesh, matrix_specs=SPEC)),
         lambda a, b: ref_svd(0.75 * a + 0.25 * jnp.conj(a).T)),
        ("polar", lambda a, b: jaxmg.polar(gen(a), TILE, mesh, matrix_specs=SPEC),
         lambda a, b: ref_polar(0.75 * a + 0.25 * jnp.conj(a).T)),
    ]


def layout_type(x):
    """What x's type says of its layout: shape, dtype, spec, and the mesh
    where the spec shards x over Explicit axes. Auto axes put nothing in
    types, and an unsharded value is unsharded on any mesh: JAX types the
    cotangents of its own with_sharding_constraint and shard_map with their
    mesh whatever the primal's, and jax 0.8.2 so types an unsharded A's
    cotangent through potrs' logdet rule; either adds to the primal's kind
    without a sharding error."""
    t = jax.typeof(x)
    mesh, spec = t.sharding.mesh, tuple(t.sharding.spec)
    spec = spec + (None,) * (len(t.shape) - len(spec))
    sharded = AxisType.Explicit in tuple(mesh.axis_types) and any(e is not None for e in spec)
    return t.shape, t.dtype, spec, (mesh if sharded else None)


def weighted(f, weights):
    """sum(Re(conj(W) * f(a, b))) over f's outputs: a real scalar whose
    cotangent 1 is every output's cotangent W."""
    def loss(*args):
        outs = jax.tree_util.tree_leaves(f(*args))
        return sum(jnp.sum(jnp.real(jnp.conj(w) * o)) for w, o in zip(weights, outs))
    return loss


# (set_mesh, jit): every mode, eagerly and jitted, inside jax.set_mesh and not.
COTANGENT_MODES = ((False, False), (False, True), (True, False), (True, True))


def cotangent_ops(layout: str, kind: str, mode: int) -> slice:
    """Which of cotangent_cases' ops a (layout, kind, mode) case runs: op i
    runs in mode (i + j) % 4 of the j-th (kind, layout), so that every op
    meets every layout on both kinds of mesh (six cases), three modes on
    each kind and every mode across them, in both dtypes (complex where
    set_mesh != jit); every (layout, kind, mode) checks two or three ops, a
    quarter of them (it was half: every op in every layout, kind and jit,
    either with set_mesh or without)."""
    j = ["explicit", "auto"].index(kind) * 3 + LAYOUTS.index(layout)
    return slice((mode - j) % 4, None, 4)


@pytest.mark.parametrize(
    "set_mesh,jit", COTANGENT_MODES,
    ids=[f"{'set_mesh' if m else 'no_set_mesh'}-{'jit' if j else 'eager'}"
         for m, j in COTANGENT_MODES])
@pytest.mark.parametrize("kind", ["explicit", "auto"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cotangents_are_typed_like_their_primals(cpu_devices, rng, layout, kind, set_mesh,
                                                 jit):
    mesh = jax.make_mesh((len(cpu_devices),), ("x",), devices=cpu_devices,
                         axis_types=(AXIS_TYPES[kind],))
    dtype = np.complex128 if set_mesh != jit else np.float64
    a0 = general(jt.make_hpd(rng, N, dtype))
    b0 = jt.make_rhs(rng, N, 2, dtype)
    context = jax.set_mesh(mesh) if set_mesh else contextlib.nullcontext()
    mode = COTANGENT_MODES.index((set_mesh, jit))
    for name, f, ref in cotangent_cases(mesh, layout)[cotangent_ops(layout, kind, mode)]:
        # Derivatives in b only where the op takes b: JAX itself cannot make
        # the zero cotangent of an unused input typed on an Explicit mesh
        # eagerly outside jax.set_mesh.
        takes_b = name.startswith(("potrs", "lu_solve"))
        args0 = (a0, b0) if takes_b else (a0,)
        if not takes_b:
            f, ref = (lambda g: lambda a: g(a, None))(f), (lambda g: lambda a: g(a, None))(ref)
        outs = jax.tree_util.tree_leaves(jax.eval_shape(ref, *args0))
        weights = [jt.random_matrix(rng, o.shape, o.dtype).astype(o.dtype) for o in outs]
        args = tuple(laid_out_as(mesh, x, layout, cpu_devices[0]) for x in args0)
        typed = []

        def grads(*args):
            loss, pullback = jax.vjp(weighted(f, weights), *args)
            cts = pullback(jnp.ones_like(loss))
            typed.append(tuple(layout_type(c) == layout_type(x) for c, x in zip(cts, args)))
            return cts

        with context:
            cts = (jax.jit(grads) if jit else grads)(*args)
        wants = jax.grad(weighted(ref, weights), argnums=tuple(range(len(args0))))(*args0)
        assert typed == [(True,) * len(args)], f"{name}: {typed}"
        for c, x, want in zip(cts, args, wants):
            if not jit:  # placed where the inputs are
                assert c.sharding.is_equivalent_to(x.sharding, 2), \
                    f"{name}: {c.sharding} against {x.sharding}"
            err = jt.fro(jt.to_ref(c) - jt.to_ref(want)) / jt.fro(want)
            assert err < 1e-10, f"{name}: relative error {err:.2e}"

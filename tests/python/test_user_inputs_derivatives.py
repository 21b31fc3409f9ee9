"""Derivatives and batching with inputs as users pass them (issue 36, item 4).

``jax.grad``, ``jax.jvp`` and ``jax.vmap`` of every op and form, called on
NumPy arrays, uncommitted jax arrays or arrays sharded on the mesh; eagerly
and under ``jax.jit``; with and without ``jax.set_mesh``; on meshes of
Explicit and Auto axes: each must work wherever the same program with
``jnp.linalg`` works, and agree with it.

The user's program is the one ``jnp.linalg`` would run, written once for
both (``program``): the Hermitian part (A + A^H) / 2 (or the non-symmetric
3/4 A + 1/4 A^H), the op, and a function of its results that does not
depend on the eigen- or singular vectors' phases. What JAX asks of any code
on a mesh of Explicit axes is done only where a value's type asks for it
(``as_typed``): a row-sharded A's transpose laid out like A, a sharded
result laid out before a product contracts it.

The regression (issue 36): ``jax.grad`` through ``jaxmg.potrs`` of a NumPy A
on a ``jax.make_mesh`` mesh, eagerly, outside ``jax.set_mesh``, raised
"Length of device assignment 1 is not equal to the size of the mesh 4";
``test_every_op_as_the_issue_calls_it`` takes every op there.
``test_inputs_as_users_pass_them`` walks the other cells: each cell (input
kind x eager/jit x set_mesh or not x axis type) runs one transformation of
one op, rotating, so that every op and transformation meets cells of every
kind. N = 8 on 4 devices (shards of 2 rows), so that the file stays fast.

Arrays sharded over Explicit axes are one place where jaxmg goes further
than ``jnp.linalg``, whose factorizations refuse a row-sharded operand:
there the reference is computed from the NumPy arrays.
"""

from __future__ import annotations

import contextlib
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

N = 8
TILE = 2
ROWS = P("x", None)
SPEC = (ROWS,)
KINDS = ("numpy", "uncommitted", "sharded")
TRANSFORMS = ("grad", "jvp", "vmap")
AXES = {"explicit": AxisType.Explicit, "auto": AxisType.Auto}
TOL = 1e-8


def as_typed(mesh, x, like=None, spec=P()):
    """x laid out as ``spec`` says on mesh where a type asks for it (x's, or
    ``like``'s: sharded over Explicit axes); else x as it is (a no-op on
    values typed on no mesh, as jnp.linalg's results are)."""
    t = jax.typeof(x if like is None else like)
    sharding = getattr(t, "sharding", None)
    if sharding is None or AxisType.Explicit not in tuple(sharding.mesh.axis_types):
        return x
    if all(e is None for e in sharding.spec):
        return x
    if like is not None:
        spec = sharding.spec
    return jax.sharding.reshard(x, NamedSharding(mesh, spec))


def hermitian(mesh, a):
    return (a + as_typed(mesh, jnp.conj(a).T, like=a)) / 2


def nonsymmetric(mesh, a):
    return 0.75 * a + 0.25 * as_typed(mesh, jnp.conj(a).T, like=a)


def phase_free(w, v):
    """V sin(w) V^H: the same whatever the vectors' phases."""
    return (v * jnp.sin(w)) @ jnp.conj(v).T


def svd_phase_free(u, s, vh):
    return (u * jnp.sin(s)) @ vh


def ref_generalized(a, b):
    """The eigenvalues of A v = w B v (jax.scipy.linalg.eigh(a, b) is not
    implemented): those of L^-1 A L^-H, L = cholesky(B)."""
    lo = jnp.linalg.cholesky(b)
    c = jax.scipy.linalg.solve_triangular(lo, a, lower=True)
    c = jax.scipy.linalg.solve_triangular(lo, jnp.conj(c).T, lower=True)
    return jnp.linalg.eigvalsh(c)


def programs(mesh):
    """name -> (number of array arguments, jaxmg's program, jnp's)."""
    sym = lambda a: hermitian(mesh, a)  # noqa: E731
    gen = lambda a: nonsymmetric(mesh, a)  # noqa: E731
    full = lambda x: as_typed(mesh, x)  # noqa: E731

    def vectors(w, v):
        return phase_free(w, full(v))

    def svd(u, s, vh):
        return svd_phase_free(u, s, full(vh))

    def qr_free(q, r):
        # Q Q^H and R^H R: the same whatever the signs of R's diagonal.
        r = full(r)
        return full(q) @ jnp.conj(full(q)).T, jnp.conj(r).T @ r

    def ref_qr_free(q, r):
        return q @ jnp.conj(q).T, jnp.conj(r).T @ r

    def ref_polar(a):
        u, s, vh = jnp.linalg.svd(a, full_matrices=False)
        return u @ vh, (jnp.conj(vh).T * s) @ vh

    solve = lambda a, b: jnp.linalg.solve(a, b)  # noqa: E731
    return {
        "potrs": (2, lambda a, b: jaxmg.potrs(sym(a), b, TILE, mesh, (ROWS, P(None, None))),
                  lambda a, b: solve(sym(a), b)),
        "potrs 1.x logdet": (2, lambda a, b: jaxmg.potrs(sym(a), b, TILE, mesh, matrix_specs=SPEC,
                                                         return_logdet=True),
                             lambda a, b: (solve(sym(a), b), jnp.linalg.slogdet(sym(a))[1])),
        "potrs_shardmap_ctx 1.x": (2, lambda a, b: jaxmg.potrs_shardmap_ctx(
            sym(a), b, TILE, mesh, matrix_specs=SPEC)[1], lambda a, b: solve(sym(a), b)),
        "potri": (1, lambda a: jaxmg.potri(sym(a), TILE, mesh, SPEC),
                  lambda a: jnp.linalg.inv(sym(a))),
        "syevd values": (1, lambda a: jaxmg.syevd(sym(a), TILE, mesh, SPEC,
                                                  return_eigenvectors=False),
                         lambda a: jnp.linalg.eigvalsh(sym(a))),
        "syevd vectors": (1, lambda a: vectors(*jaxmg.syevd(sym(a), TILE, mesh, SPEC)),
                          lambda a: phase_free(*jnp.linalg.eigh(sym(a)))),
        "syevd_shardmap_ctx 1.x": (1, lambda a: vectors(*jaxmg.syevd_shardmap_ctx(
            sym(a), TILE, mesh, matrix_specs=SPEC)[1:3]),
            lambda a: phase_free(*jnp.linalg.eigh(sym(a)))),
        "lu_solve": (2, lambda a, b: jaxmg.lu_solve(gen(a), b, TILE, mesh, (ROWS, P(None, None))),
                     lambda a, b: solve(gen(a), b)),
        "lu_solve_shardmap_ctx 1.x": (2, lambda a, b: jaxmg.lu_solve_shardmap_ctx(
            gen(a), b, TILE, mesh, matrix_specs=SPEC)[1], lambda a, b: solve(gen(a), b)),
        "gesvd": (1, lambda a: svd(*jaxmg.gesvd(gen(a), TILE, mesh, matrix_specs=SPEC)),
                  lambda a: svd_phase_free(*jnp.linalg.svd(gen(a), full_matrices=False))),
        "gesvd_shardmap_ctx 1.x": (1, lambda a: svd(*jaxmg.gesvd_shardmap_ctx(
            gen(a), TILE, mesh, matrix_specs=SPEC)[1:4]),
            lambda a: svd_phase_free(*jnp.linalg.svd(gen(a), full_matrices=False))),
        "qr": (1, lambda a: qr_free(*jaxmg.qr(gen(a), TILE, mesh, matrix_specs=SPEC)),
               lambda a: ref_qr_free(*jnp.linalg.qr(gen(a)))),
        "qr_shardmap_ctx 1.x": (1, lambda a: qr_free(*jaxmg.qr_shardmap_ctx(
            gen(a), TILE, mesh, matrix_specs=SPEC)[:2]),
            lambda a: ref_qr_free(*jnp.linalg.qr(gen(a)))),
        "least_squares": (2, lambda a, b: jaxmg.least_squares(gen(a), b, TILE, mesh,
                                                              matrix_specs=SPEC),
                          lambda a, b: jnp.linalg.lstsq(gen(a), b)[0]),
        "least_squares_shardmap_ctx 1.x": (2, lambda a, b: jaxmg.least_squares_shardmap_ctx(
            gen(a), b, TILE, mesh, matrix_specs=SPEC)[2],
            lambda a, b: jnp.linalg.lstsq(gen(a), b)[0]),
        "polar": (1, lambda a: jaxmg.polar(gen(a), TILE, mesh, matrix_specs=SPEC),
                  lambda a: ref_polar(gen(a))),
        "polar_shardmap_ctx 1.x": (1, lambda a: jaxmg.polar_shardmap_ctx(
            gen(a), TILE, mesh, matrix_specs=SPEC)[:2], lambda a: ref_polar(gen(a))),
        "eigh_generalized": (2, lambda a, b: jaxmg.eigh_generalized(
            sym(a), sym(b), TILE, mesh, (ROWS, ROWS), return_eigenvectors=False),
            lambda a, b: ref_generalized(sym(a), sym(b))),
    }


OPS = tuple(programs(None))


def host_inputs(rng, op, dtype, batch):
    """The op's arguments as NumPy arrays (a batch of two for vmap)."""
    def one():
        a = jt.make_hpd(rng, N, dtype)
        second = (jt.make_hpd(rng, N, dtype) + 2 * np.eye(N)) if op == "eigh_generalized" \
            else jt.make_rhs(rng, N, 2, dtype)
        return a, second.astype(dtype)

    if not batch:
        return one()
    pairs = [one() for _ in range(2)]
    return tuple(np.stack(xs) for xs in zip(*pairs))


def as_passed(kind, mesh, x, batch, second):
    """x as a user passes it: a NumPy array, an uncommitted jax array
    (jnp.asarray), or sharded on mesh (A's rows, a right-hand side
    replicated, B of eigh_generalized like A)."""
    if kind == "numpy":
        return x
    if kind == "uncommitted":
        return jnp.asarray(x)
    spec = P(None, None) if second else ROWS
    if batch:
        spec = P(None, *spec)
    return jax.device_put(x, NamedSharding(mesh, spec))


def transformed(transform, f, weights):
    """f under one transformation, as a function of f's arguments."""
    def loss(*args):
        outs = jax.tree_util.tree_leaves(f(*args))
        return sum(jnp.sum(jnp.real(jnp.conj(w) * o)) for w, o in zip(weights, outs))

    if transform == "grad":
        return lambda *args: jax.grad(loss, argnums=tuple(range(len(args))))(*args)
    if transform == "jvp":
        def jvp(*args):
            tangents = tuple(jnp.full(jnp.shape(x), 0.25, jnp.result_type(x)) for x in args)
            return jax.jvp(f, args, tangents)
        return jvp
    return jax.vmap(f)


def run(transform, f, args, weights, jit, mesh, set_mesh):
    g = transformed(transform, f, weights)
    with jax.set_mesh(mesh) if set_mesh else contextlib.nullcontext():
        return (jax.jit(g) if jit else g)(*args)


def check(op, transform, kind, axis, jit, set_mesh, devices, rng, dtype=np.float64):
    mesh = jax.make_mesh((len(devices),), ("x",), devices=devices, axis_types=(AXES[axis],))
    nargs, mg, ref = programs(mesh)[op]
    batch = transform == "vmap"
    host = host_inputs(rng, op, dtype, batch)[:nargs]
    outs = jax.tree_util.tree_leaves(jax.eval_shape(jax.vmap(ref) if batch else ref, *host))
    weights = [jt.random_matrix(rng, o.shape[1:] if batch else o.shape, o.dtype)
               .astype(o.dtype) for o in outs]
    # The reference: jnp.linalg's program on the NumPy arrays, eagerly (on
    # the user's arrays it runs wherever jaxmg must: everywhere but rows
    # sharded over Explicit axes, which jnp.linalg's factorizations refuse).
    want = run(transform, ref, host, weights, False, mesh, False)
    args = tuple(as_passed(kind, mesh, x, batch, i > 0 and op != "eigh_generalized")
                 for i, x in enumerate(host))
    got = run(transform, mg, args, weights, jit, mesh, set_mesh)
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got) == len(want), op
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        err = np.max(np.abs(g - w)) / max(1.0, np.max(np.abs(w)))
        assert err < TOL, f"{op} {transform}: error {err:.1e}"


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("op", OPS)
def test_every_op_as_the_issue_calls_it(cpu_devices, rng, op, transform):
    """NumPy inputs, eagerly, on jax.make_mesh's Explicit axes, no set_mesh."""
    check(op, transform, "numpy", "explicit", False, False, cpu_devices, rng)


CELLS = list(itertools.product(KINDS, (False, True), (False, True), AXES))


@pytest.mark.parametrize(
    "index", range(len(CELLS)),
    ids=[f"{k}-{'jit' if j else 'eager'}-{'set_mesh' if s else 'no_set_mesh'}-{a}"
         for k, j, s, a in CELLS])
def test_inputs_as_users_pass_them(cpu_devices, rng, index):
    kind, jit, set_mesh, axis = CELLS[index]
    # Rotate: cell i runs op i (mod the ops) under transformation i (mod 3),
    # in complex128 every other cell.
    op = OPS[(5 * index) % len(OPS)]
    transform = TRANSFORMS[index % len(TRANSFORMS)]
    dtype = np.complex128 if index % 2 else np.float64
    check(op, transform, kind, axis, jit, set_mesh, cpu_devices, rng, dtype)

"""Derivatives on every kind of mesh (issue 15): check_grads (finite
differences against forward and reverse mode) for potrs, potri, syevd's
eigenvalues and a gauge-invariant function of its eigenvectors, lu_solve (on
a non-symmetric matrix), in the plain
and the shard_map (ctx) forms, on meshes with Explicit axes (jax.make_mesh's
default, as the seeds build them) and Auto axes (as NetKet builds them),
without and inside jax.set_mesh, eagerly and under jax.jit, real and complex.

Lean, so that the suite stays fast on two cores: N = 8; each case checks one
dtype, complex where exactly one of set_mesh and jit is on (so every kind of
mesh meets both dtypes with and without each); second order (where the
rules allow it: potrs, potri, eigenvalues) in the jitted cases inside
jax.set_mesh, first order elsewhere and for the eigenvectors, whose central
differences are too coarse beyond (test_derivatives.py and
test_ctx_derivatives.py take every op to second order on Auto meshes).

What a user does on an Explicit mesh is what JAX asks of any code there, and
the tests do it the same way: contract V's sharded columns only after laying
V out (jax.sharding.reshard), and, around their own shard_map, lay its inputs
and outputs out as in_specs and out_specs say.
"""

from __future__ import annotations

import contextlib

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
# whose cotangent needs laying out, and leave the others to the jitted cases.
EAGER_CTX = ("potri",)
AXIS_TYPES = {"explicit": AxisType.Explicit, "auto": AxisType.Auto}


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


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("set_mesh", [False, True], ids=["no_set_mesh", "set_mesh"])
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
        g = jax.jit(f) if jit else f
        with jax.set_mesh(mesh) if set_mesh else contextlib.nullcontext():
            try:
                check_grads(g, args, order=order if second else 1, modes=("fwd", "rev"),
                            atol=GRAD_TOL, rtol=GRAD_TOL)
            except Exception as e:
                raise AssertionError(f"{name}: {e}") from e

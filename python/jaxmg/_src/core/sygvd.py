"""sygvd's core: the generalized Hermitian-definite eigenproblem
A v = λ B v (type 1: B Hermitian positive definite), A's and B's rows
sharded alike over devices, the eigenvalues the same on every device and
the B-orthonormal eigenvectors' (Vᴴ B V = I) columns sharded.

``shard`` is one shard's FFI program, ``local`` and ``local_values`` the
differentiable local cores (with and without eigenvectors), ``over_mesh``
either over a mesh. No API conventions here (see jaxmg._src.core).

No padding. syevd pads a shard with rows and columns of c * I, c above
A's spectrum (a Gershgorin bound), so that the padding's eigenpairs sort
last. For the pencil (A, B) the padding's eigenvalue c / d (d on B's
padding diagonal) must lie above λ_max(A, B) <= ||A|| / λ_min(B), which
no cheap bound gives, and not far above it either: the solvers' reduction
to tridiagonal form mixes the padding's coordinates into the others, so a
padding eigenvalue much larger than the spectrum costs accuracy. So the
shard is never padded: a T_A that does not divide the shard is narrowed to
the largest divisor of the shard at most T_A (``tile_for``), which every
engine runs.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _ffi_call, _geometry, _manual, _placement
from jaxmg._src.core.syevd import vectors_in_a


def tile_for(n: int, nparts: int, T_A: int | None) -> int | None:
    """The T_A sygvd runs with: None (the default, chosen to divide the
    shard) as it is; else the largest divisor of the shard N / nparts that
    is at most T_A (T_A itself where it divides the shard, the shard where
    T_A is wider). See the module's docstring: sygvd never pads."""
    if T_A is None:
        return None
    r = max(n // nparts, 1)
    t = min(int(T_A), r)
    while t > 1 and r % t != 0:
        t -= 1
    return max(t, 1)


def shard(call: _ffi_call.Call, a: jax.Array, b: jax.Array,
          want_vectors: bool) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """One shard's part: a and b are r x N. Returns what the solver left in
    A's buffer (r x N: with eigenvectors, this shard's rows of Vᴴ, see
    below, or V itself where ``vectors_in_a``, as syevd's; without,
    unspecified), what it left in B's (unspecified), the N eigenvalues
    (ascending), this shard's r columns of the eigenvectors (N x r) and the
    status. Where ``vectors_in_a`` the first and fourth are the same
    array, A's buffer."""
    g = call.g
    in_a = vectors_in_a(g, want_vectors)
    if g.padded:
        raise ValueError("jaxmg.sygvd: the shard must be a multiple of T_A (sygvd never pads)")
    per_shard, same = _ffi_call.result_types(call.axes, a, b)
    pos = _ffi_call.position(call.axes, call.others, g.nparts)
    real = jnp.finfo(a.dtype).dtype
    u, w, bw, info = _ffi_call.ffi_call(
        "sygvd",
        (a, b, pos),
        (
            jax.ShapeDtypeStruct(a.shape, a.dtype),
            jax.ShapeDtypeStruct((g.n,), real),
            jax.ShapeDtypeStruct(b.shape, b.dtype),
            jax.ShapeDtypeStruct((), jnp.int32),
        ),
        call=call,
        varying=(per_shard, same, per_shard, same),
        aliases={0: 0, 1: 2},
        want_vectors=int(want_vectors),
        vectors_in_a=int(in_a),
    )
    if in_a:  # conjugate-transposed in place by the C library: V itself
        return u, bw, w, u, info
    # The solver solved conj(A) y = λ conj(B) y column-major: row i of u is
    # its eigenvector j (this shard's j-th), and A's is conj(u[i]).
    v = jnp.conj(u.T)  # N x r, columns are eigenvectors
    return u, bw, w, v, info


@functools.lru_cache(maxsize=256)
def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: _geometry.Geometry,
              want_vectors: bool, work: bool = False) -> Any:
    """``local`` or ``local_values``, derivative rules included, over the
    whole mesh, jitted, on (A, B) both sharded as ``rows.spec``:
    ``(w, V, status)`` or ``(w, status)``. With ``work``, the solver's work
    buffers in front, sharded like A and B (``local_work``,
    ``local_values_work``): a program that returns them lets XLA hand a
    donated A and B to the solver in place. Where ``vectors_in_a`` (one
    device, eigenvectors) V is A's work buffer: ``work`` puts B's alone in
    front, ``(b_work, w, V, status)``, and V takes a donated A's buffer
    (JAX pairs donated arguments with outputs of their shape in order: the
    donating program takes B first, api/generalized.py)."""
    call = _ffi_call.mesh_call("sygvd", mesh, rows, g)
    if work and vectors_in_a(g, want_vectors):
        def b_work_first(call: _ffi_call.Call, a: jax.Array,
                         b: jax.Array) -> tuple[jax.Array, ...]:
            return local_work(call, a, b)[1:]
        return jax.jit(_placement.mapped(functools.partial(b_work_first, call), mesh,
                                         in_specs=(rows.spec, rows.spec),
                                         out_specs=(rows.spec, P(None), P(None, rows.spec[0]),
                                                P())))
    front = (rows.spec, rows.spec) if work else ()
    specs = (rows.spec, rows.spec)
    if not want_vectors:
        fn = local_values_work if work else local_values
        return jax.jit(_placement.mapped(functools.partial(fn, call), mesh, in_specs=specs,
                                         out_specs=front + (P(None), P())))
    fn = local_work if work else local
    return jax.jit(_placement.mapped(functools.partial(fn, call), mesh, in_specs=specs,
                                     out_specs=front + (P(None), P(None, rows.spec[0]), P())))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local(call: _ffi_call.Call, a: jax.Array,
          b: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Inside any shard_map: all N eigenvalues, this device's r columns of
    the eigenvectors (N x r, eigenvectors d*r ... (d+1)*r - 1), the status;
    differentiable in this device's rows a and b (see _tangents)."""
    return local_work(call, a, b)[2:]


@local.defjvp
def _local_jvp(call: _ffi_call.Call, primals: tuple[jax.Array, jax.Array],
               tangents: tuple[jax.Array, jax.Array]):
    (a, b), (da, db) = primals, tangents
    _, _, w, v, status = local_work(call, a, b)
    dw, dv = _tangents(call, da, db, w, v)
    return (w, v, status), (dw, dv, _compat.zero_tangent(status))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local_work(call: _ffi_call.Call, a: jax.Array,
               b: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """``local`` with what the solver left in A's and B's buffers in front,
    for programs that hand them back (a donated A and B). The work buffers
    are held constant (their tangents are zero); the rest's rule is
    ``local``'s."""
    return shard(call, a, b, want_vectors=True)


@local_work.defjvp
def _local_work_jvp(call: _ffi_call.Call, primals: tuple[jax.Array, jax.Array],
                    tangents: tuple[jax.Array, jax.Array]):
    (a, b), (da, db) = primals, tangents
    u, bw, w, v, status = local_work(call, a, b)
    dw, dv = _tangents(call, da, db, w, v)
    return ((u, bw, w, v, status),
            (jnp.zeros_like(u), jnp.zeros_like(bw), dw, dv, _compat.zero_tangent(status)))


def _tangents(call: _ffi_call.Call, da: jax.Array, db: jax.Array, w: jax.Array,
              v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(dw, dV_d), ``local``'s rule, on this device's columns V_d of V.

    From A V = B V Λ and Vᴴ B V = I: with G_A = Vᴴ dA V, G_B = Vᴴ dB V,
    C = G_A - G_B Λ and F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it,
      dw = real(diag(C)),  dV = V (F * C - diag(G_B) / 2)
    (dV = V Ω: Vᴴ(dA V + A dV - dB V Λ - B dV Λ) = dΛ gives ΛΩ - ΩΛ =
    G_B Λ - G_A + dΛ off and on the diagonal; d(Vᴴ B V) = 0 gives
    Ω + Ωᴴ = -G_B, whose diagonal fixes real(Ω_ii); its imaginary part, a
    phase, is taken 0, as jnp.linalg.eigh does). dA and dB are the
    Hermitian matrices of their upper triangles, the parts the solver reads.

    Distributed as syevd's rule: C[:, C_d] = Vᴴ X_d with X_d = dA V_d -
    (dB V_d) diag(w[C_d]), from rings of dA's and dB's Hermitian rows;
    (F * C)[C_j, C_d] = F * (V_jᴴ X_d) from a ring of V's column blocks."""
    c = v.shape[1]  # r
    d = _manual.shard_index(call)
    w_mine = jax.lax.dynamic_slice_in_dim(w, d * c, c)
    dav = _manual.hermitian_times_columns(call, da, v)  # dA V_d, N x c
    dbv = _manual.hermitian_times_columns(call, db, v)  # dB V_d, N x c
    x = dav - dbv * w_mine[None, :].astype(v.dtype)
    dw_mine = jnp.real(jnp.sum(jnp.conj(v) * x, axis=0))
    gb_mine = jnp.real(jnp.sum(jnp.conj(v) * dbv, axis=0))  # diag(G_B)[C_d]
    dw = _manual.psum(jax.lax.dynamic_update_slice_in_dim(
        jnp.zeros_like(w), dw_mine.astype(w.dtype), d * c, axis=0), call.axes)
    mine = d * c + jnp.arange(c)

    def term(j: jax.Array, v_j: jax.Array) -> jax.Array:
        theirs = j * c + jnp.arange(c)
        w_theirs = jax.lax.dynamic_slice_in_dim(w, j * c, c)
        coupled = theirs[:, None] != mine[None, :]
        gap = jnp.where(coupled, w_mine[None, :] - w_theirs[:, None], 1)
        f = jnp.where(coupled, 1 / gap, 0).astype(v.dtype)  # F[C_j, C_d]
        return v_j @ (f * (jnp.conj(v_j).T @ x))

    dv = _manual.ring_sum(call, v, term) - v * (gb_mine / 2)[None, :].astype(v.dtype)
    return dw, dv


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local_values(call: _ffi_call.Call, a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(w, status) inside any shard_map, without eigenvectors; its
    derivative needs them, and computes them (local_work) only when
    differentiated."""
    return local_values_work(call, a, b)[2:]


@local_values.defjvp
def _local_values_jvp(call: _ffi_call.Call, primals: tuple[jax.Array, jax.Array],
                      tangents: tuple[jax.Array, jax.Array]):
    (_, _, w, status), (_, _, dw, _) = _local_values_work_jvp(call, primals, tangents)
    return (w, status), (dw, _compat.zero_tangent(status))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local_values_work(call: _ffi_call.Call, a: jax.Array,
                      b: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``local_values`` with what the solver left in A's and B's buffers in
    front (unspecified contents), held constant."""
    u, bw, w, _, status = shard(call, a, b, want_vectors=False)
    return u, bw, w, status


@local_values_work.defjvp
def _local_values_work_jvp(call: _ffi_call.Call, primals: tuple[jax.Array, jax.Array],
                           tangents: tuple[jax.Array, jax.Array]):
    """The eigenvalues' rule needs the eigenvectors: differentiated, the
    call computes them (``local_work``), and its work buffers are that
    call's."""
    (a, b), (da, db) = primals, tangents
    u, bw, w, v, status = local_work(call, a, b)
    dw, _ = _tangents(call, da, db, w, v)
    return ((u, bw, w, status),
            (jnp.zeros_like(u), jnp.zeros_like(bw), dw, _compat.zero_tangent(status)))

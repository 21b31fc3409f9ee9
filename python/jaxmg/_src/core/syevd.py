"""syevd's core: eigenvalues and eigenvectors of a Hermitian A, A's rows
sharded over devices, the eigenvalues the same on every device and the
eigenvectors' columns sharded.

``shard`` is one shard's FFI program, ``local`` and ``local_values`` the
differentiable local cores (with and without eigenvectors; padding's
eigenpairs kept, last), ``over_mesh`` either over a mesh with the padding's
eigenpairs dropped. No API conventions here (see jaxmg._src.core).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _ffi_call, _geometry, _manual, _placement


def _pad_value(a: jax.Array, shard: jax.Array, axes: tuple[str, ...]) -> jax.Array:
    """A diagonal value for padding that lies above every eigenvalue of A, so
    that the padding's eigenpairs sort last and are dropped: 1 + 2 * the
    largest absolute row sum (a Gershgorin bound on the spectral radius) of
    the Hermitian matrix that A's upper triangle defines, the one solved.

    Row g of that matrix is a[g, g:] and, left of the diagonal, the conjugate
    of column g above it; the column parts come from every shard (a psum)."""
    axis = axes if len(axes) > 1 else axes[0]
    r, n = a.shape
    rows = shard * r + jnp.arange(r)[:, None]
    cols = jnp.arange(n)[None, :]
    mag = jnp.abs(a)
    upper_rows = jnp.sum(jnp.where(cols >= rows, mag, 0), axis=1)
    above_diag = jax.lax.psum(jnp.sum(jnp.where(cols > rows, mag, 0), axis=0), axis)
    local = jnp.max(upper_rows + jax.lax.dynamic_slice_in_dim(above_diag, shard * r, r))
    return 1 + 2 * jax.lax.pmax(local, axis)


def vectors_in_a(g: _geometry.Geometry, want_vectors: bool) -> bool:
    """Whether a call leaves V itself in A's buffer (the C op's attribute
    ``vectors_in_a``): with eigenvectors, on a group of one device (the
    whole matrix in one buffer), unpadded (the buffer is A's shape). The C
    library conjugate-transposes the solver's eigenvectors in place there,
    so that V needs no second N x N buffer beside A's (issue 25). Elsewhere
    A's buffer holds this shard's rows of V^H and V is computed from them."""
    return bool(want_vectors) and g.nparts == 1 and not g.padded


def shard(call: _ffi_call.Call, a: jax.Array,
          want_vectors: bool) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """One shard's part: a is r x N. Returns what the solver left in A's
    buffer (rp x N', padded like A: with eigenvectors, this shard's rows
    of V^H, see below, or V itself where ``vectors_in_a``; without,
    unspecified), the N' eigenvalues (padded size, ascending, padding's
    last), this shard's rp columns of the eigenvectors with padding rows
    removed (N x rp), and the status. Where ``vectors_in_a`` the first
    and third are the same array, A's buffer: a program that returns both
    makes XLA copy one of them."""
    g = call.g
    in_a = vectors_in_a(g, want_vectors)
    per_shard, same = _ffi_call.result_types(call.axes, a)
    pos = _ffi_call.position(call.axes, call.others, g.nparts)
    index = pos % g.nparts
    diag = _pad_value(a, index, call.axes) if g.padded else 1
    a_p = _geometry.pad_shard(a, g, index, diag)
    real = jnp.finfo(a.dtype).dtype
    u, w, info = _ffi_call.ffi_call(
        "syevd",
        (a_p, pos),
        (
            jax.ShapeDtypeStruct(a_p.shape, a.dtype),
            jax.ShapeDtypeStruct((g.n_padded,), real),
            jax.ShapeDtypeStruct((), jnp.int32),
        ),
        call=call,
        varying=(per_shard, same, same),
        want_vectors=int(want_vectors),
        vectors_in_a=int(in_a),
    )
    if in_a:  # conjugate-transposed in place by the C library: V itself
        return u, w, u, info
    # The solver diagonalized conj(A) column-major: row i of u is its
    # eigenvector j (this shard's j-th), so A's eigenvector is conj(u[i]).
    v = jnp.conj(u.T)  # N' x rp, columns are eigenvectors
    if g.padded:
        v = v.reshape(g.nparts, g.rp, g.rp)[:, : g.r, :].reshape(g.n, g.rp)
    return u, w, v, info


@functools.lru_cache(maxsize=256)
def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: _geometry.Geometry,
              want_vectors: bool, work: bool = False) -> Any:
    """``local`` or ``local_values``, derivative rules included, over the
    whole mesh, jitted; padding's eigenpairs, which come last, dropped:
    ``(w, V, status)`` or ``(w, status)``. With ``work`` (unpadded calls
    only: a padded call's work buffer is not A's shape), the solver's work
    buffer in front, sharded like A (``local_work``, ``local_values_work``):
    a program that returns it lets XLA hand a donated A to the solver in
    place. Where ``vectors_in_a`` V is that buffer: the program without
    ``work`` hands a donated A to the solver by itself (V takes its
    buffer), and one with ``work`` returns the buffer twice (XLA copies
    one)."""
    if work and g.padded:
        raise ValueError("jaxmg.syevd: a padded call's work buffer is not A's shape")
    call = _ffi_call.mesh_call("syevd", mesh, rows, g)
    front = (rows.spec,) if work else ()
    if not want_vectors:
        fn = local_values_work if work else local_values
        return jax.jit(_placement.mapped(functools.partial(fn, call), mesh,
                                         in_specs=(rows.spec,),
                                         out_specs=front + (P(None), P())))
    fn = local_work if work else local
    mapped = _placement.mapped(functools.partial(fn, call), mesh, in_specs=(rows.spec,),
                               out_specs=front + (P(None), P(None, rows.spec[0]), P()))

    def run(a: jax.Array) -> tuple[jax.Array, ...]:
        *u, w, v, status = mapped(a)
        return (*u, w[: g.n], v[:, : g.n], status)

    return jax.jit(run)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local(call: _ffi_call.Call, a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Inside any shard_map, padding kept: all N' eigenvalues (the
    padding's last), this device's rp columns of the eigenvectors (N x rp,
    eigenvectors d*rp ... (d+1)*rp - 1), the status; differentiable in this
    device's rows a (see _tangents)."""
    return shard(call, a, want_vectors=True)[1:]


@local.defjvp
def _local_jvp(call: _ffi_call.Call, primals: tuple[jax.Array], tangents: tuple[jax.Array]):
    (a,), (da,) = primals, tangents
    _, w, v, status = local_work(call, a)
    dw, dv = _tangents(call, da, w, v)
    return (w, v, status), (dw, dv, _compat.zero_tangent(status))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local_work(call: _ffi_call.Call,
               a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``local`` with what the solver left in A's buffer in front (padded
    like A: this shard's rows of V^H when unpadded, or V itself, the same
    array as the V returned, where ``vectors_in_a``), for programs that
    hand it back (JAXMg 1.x's ctx forms; a donated A). The work buffer is
    held constant (its tangent is zero); the rest's rule is ``local``'s."""
    return shard(call, a, want_vectors=True)


@local_work.defjvp
def _local_work_jvp(call: _ffi_call.Call, primals: tuple[jax.Array],
                    tangents: tuple[jax.Array]):
    (a,), (da,) = primals, tangents
    u, w, v, status = local_work(call, a)
    dw, dv = _tangents(call, da, w, v)
    return (u, w, v, status), (jnp.zeros_like(u), dw, dv, _compat.zero_tangent(status))


def _tangents(call: _ffi_call.Call, da: jax.Array, w: jax.Array,
              v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(dw, dV_d), ``local``'s rule: the standard rule, as jnp.linalg.eigh's
    (degenerate eigenvalues give what JAX's own rule gives), on this device's columns V_d of V: with
    G = V^H dA V, F_ij = 1 / (w_j - w_i) off the diagonal and 0 on it,
    dw = real(diag(G)) and dV_d = V (F * G)[:, C_d], C_d this
    device's eigenvector indices. dA V_d comes from a ring of dA's Hermitian
    rows, diag(G) over C_d is local, and (F * G)[C_j, C_d] = F * (V_j^H dA V_d)
    from a ring of V's column blocks V_j.

    The padding's eigenpairs (indices >= N) are held constant: F and dw are
    zero wherever one is involved. That is exact for A's eigenpairs: their
    eigenvectors are zero on the padding's coordinates, where dA is zero too
    (the padding value is treated as a constant), so G couples them with no
    padding eigenpair."""
    g = call.g
    c = v.shape[1]  # rp
    d = _manual.shard_index(call)
    mine = d * c + jnp.arange(c)  # the global indices of this device's eigenpairs
    valid = mine < g.n
    dav = _manual.hermitian_times_columns(call, da, v)  # dA V_d, N x c
    dw_mine = jnp.where(valid, jnp.real(jnp.sum(jnp.conj(v) * dav, axis=0)), 0)
    dw = _manual.psum(jax.lax.dynamic_update_slice_in_dim(
        jnp.zeros_like(w), dw_mine.astype(w.dtype), d * c, axis=0), call.axes)
    w_mine = jax.lax.dynamic_slice_in_dim(w, d * c, c)

    def term(j: jax.Array, v_j: jax.Array) -> jax.Array:
        theirs = j * c + jnp.arange(c)
        w_theirs = jax.lax.dynamic_slice_in_dim(w, j * c, c)
        coupled = ((theirs[:, None] < g.n) & valid[None, :]
                   & (theirs[:, None] != mine[None, :]))
        gap = jnp.where(coupled, w_mine[None, :] - w_theirs[:, None], 1)
        f = jnp.where(coupled, 1 / gap, 0).astype(v.dtype)  # F[C_j, C_d]
        return v_j @ (f * (jnp.conj(v_j).T @ dav))

    dv = _manual.ring_sum(call, v, term)
    return dw, dv


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local_values(call: _ffi_call.Call, a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(w, status) inside any shard_map, without eigenvectors; its
    derivative needs them, and computes them (local) only when
    differentiated."""
    return local_values_work(call, a)[1:]


@local_values.defjvp
def _local_values_jvp(call: _ffi_call.Call, primals: tuple[jax.Array], tangents: tuple[jax.Array]):
    (_, w, status), (_, dw, _) = _local_values_work_jvp(call, primals, tangents)
    return (w, status), (dw, _compat.zero_tangent(status))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local_values_work(call: _ffi_call.Call,
                      a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``local_values`` with what the solver left in A's buffer in front
    (unspecified contents, padded like A), held constant."""
    u, w, _, status = shard(call, a, want_vectors=False)
    return u, w[: call.g.n], status


@local_values_work.defjvp
def _local_values_work_jvp(call: _ffi_call.Call, primals: tuple[jax.Array],
                           tangents: tuple[jax.Array]):
    """The eigenvalues' rule needs the eigenvectors: differentiated, the
    call computes them (``local_work``), and its work buffer is that call's."""
    (a,), (da,) = primals, tangents
    u, w, v, status = local_work(call, a)
    dw, _ = _tangents(call, da, w, v)
    n = call.g.n
    return (u, w[:n], status), (jnp.zeros_like(u), dw[:n], _compat.zero_tangent(status))

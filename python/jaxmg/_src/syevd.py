"""syevd: eigenvalues and eigenvectors of a Hermitian A across devices."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _manual, _native, _shard
from jaxmg._src._compat import current_manual_axes


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


def _syevd_shard(call: _shard.Call, a: jax.Array,
                 want_vectors: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One shard's part: a is r x N. Returns the N' eigenvalues (padded size,
    ascending, padding's last), this shard's rp columns of the eigenvectors
    with padding rows removed (N x rp), and the status."""
    g = call.g
    per_shard, same = _shard.result_types(call.axes, a)
    pos = _shard.position(call.axes, call.others, g.nparts)
    shard = pos % g.nparts
    diag = _pad_value(a, shard, call.axes) if g.padded else 1
    a_p = _shard.pad_shard(a, g, shard, diag)
    real = jnp.finfo(a.dtype).dtype
    u, w, info = _shard.ffi_call(
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
    )
    # The solver diagonalized conj(A) column-major: row i of u is its
    # eigenvector j (this shard's j-th), so A's eigenvector is conj(u[i]).
    v = jnp.conj(u).T  # N' x rp, columns are eigenvectors
    if g.padded:
        v = v.reshape(g.nparts, g.rp, g.rp)[:, : g.r, :].reshape(g.n, g.rp)
    return w, v, info


@functools.lru_cache(maxsize=256)
def _program(mesh: Mesh, rows: _checks.RowSharding, g: _shard.Geometry,
             want_vectors: bool) -> Any:
    """The local core (_ctx_eig or _ctx_eigvals, derivative rules included)
    over the mesh; padding's eigenpairs, which come last, dropped."""
    call = _shard.mesh_call("syevd", mesh, rows, g)
    if not want_vectors:
        return jax.jit(_shard.mapped(functools.partial(_ctx_eigvals, call), mesh,
                                     in_specs=(rows.spec,), out_specs=(P(None), P())))
    mapped = _shard.mapped(functools.partial(_ctx_eig, call), mesh, in_specs=(rows.spec,),
                           out_specs=(P(None), P(None, rows.spec[0]), P()))

    def run(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        w, v, status = mapped(a)
        return w[: g.n], v[:, : g.n], status

    return jax.jit(run)


def syevd(
    a: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    in_specs: Any = None,
    return_eigenvectors: bool = True,
    return_status: bool = False,
    pad: bool = True,
) -> Any:
    """Eigenvalues and eigenvectors of a Hermitian ``a``, computed on all devices.

    Args:
      a: the N x N matrix, rows sharded as ``in_specs[0]`` says (e.g.
        ``P("x", None)``). Only its upper triangle is read. It is not modified.
      T_A: tile size of the 1D block-cyclic layout (see ``potrs``).
      mesh: the device mesh; may be omitted with in_specs when ``a`` carries a
        NamedSharding (they are read from it), or when ``a`` is a host or
        single-device array (it is then placed on a 1-D mesh "x" over all
        devices).
      in_specs: ``(P(axis, None),)``.
      return_eigenvectors: also return the eigenvectors.
      return_status: also return the solver's status.
      pad: pad each shard to a multiple of T_A when needed (else raise).

    Returns:
      ``w``, ``(w, V)``, ``(w, status)`` or ``(w, V, status)``. ``w``: the N
      eigenvalues in ascending order, real, replicated. ``V``: the eigenvectors
      as columns (``a @ V = V * w``, as in ``jnp.linalg.eigh``; JAXMg returns
      them as rows), sharded by columns (``P(None, axis)``), the layout the
      solver leaves them in. ``status``: 0 on success, > 0 if the solver did not
      converge (outputs are then NaN).
    """
    n, _ = _checks.check_matrix("syevd", a)
    a, mesh, rows, g = _shard.prepare("syevd", a, n, T_A, mesh, in_specs, 1, pad)
    if return_eigenvectors:
        w, v, status = _program(mesh, rows, g, True)(a)
    else:
        w, status = _program(mesh, rows, g, False)(a)
    out: tuple[jax.Array, ...] = (w, v) if return_eigenvectors else (w,)
    if return_status:
        out = out + (status,)
    _shard.settle_on_cpu(out, mesh)
    return out[0] if len(out) == 1 else out


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _ctx_eig(call: _manual.Call, a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Inside the user's shard_map, padding kept: all N' eigenvalues (the
    padding's last), this device's rp columns of the eigenvectors (N x rp,
    eigenvectors d*rp ... (d+1)*rp - 1), the status; differentiable in this
    device's rows a (see _ctx_eig_jvp)."""
    return _syevd_shard(call, a, want_vectors=True)


@_ctx_eig.defjvp
def _ctx_eig_jvp(call: _manual.Call, primals: tuple[jax.Array], tangents: tuple[jax.Array]):
    """The rule of _eigh_jvp on this device's columns V_d of V: with
    G = V^H dA V, dw = real(diag(G)) and dV_d = V (F * G)[:, C_d], C_d this
    device's eigenvector indices. dA V_d comes from a ring of dA's Hermitian
    rows, diag(G) over C_d is local, and (F * G)[C_j, C_d] = F * (V_j^H dA V_d)
    from a ring of V's column blocks V_j.

    The padding's eigenpairs (indices >= N) are held constant: F and dw are
    zero wherever one is involved. That is exact for A's eigenpairs: their
    eigenvectors are zero on the padding's coordinates, where dA is zero too
    (the padding value is treated as a constant), so G couples them with no
    padding eigenpair."""
    (a,), (da,) = primals, tangents
    w, v, status = _ctx_eig(call, a)
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
    return (w, v, status), (dw, dv, _compat.zero_tangent(status))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _ctx_eigvals(call: _manual.Call, a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(w, status) inside the user's shard_map, without eigenvectors; its
    derivative needs them, and computes them (_ctx_eig) only when
    differentiated."""
    w, _, status = _syevd_shard(call, a, want_vectors=False)
    return w[: call.g.n], status


@_ctx_eigvals.defjvp
def _ctx_eigvals_jvp(call: _manual.Call, primals: tuple[jax.Array], tangents: tuple[jax.Array]):
    (w, _, status), (dw, _, _) = jax.jvp(functools.partial(_ctx_eig, call), primals, tangents)
    n = call.g.n
    return (w[:n], status), (dw[:n], _compat.zero_tangent(status))


def syevd_shardmap_ctx(
    a: jax.Array,
    T_A: int | None = None,
    return_eigenvectors: bool = True,
    pad: bool = True,
    axis_name: str | tuple[str, ...] | None = None,
) -> Any:
    """``syevd`` on the local shard, from inside your own ``jax.shard_map``.

    Args:
      a: this device's rows of A, (N / devices, N).
      T_A, return_eigenvectors: as in ``syevd``.
      pad: as in ``syevd``; padding is not possible here when eigenvectors are
        wanted (they would not be evenly split), so the shard size must then be
        a multiple of T_A.
      axis_name: the mesh axis (or axes) A's rows are sharded over; may be
        omitted when the shard_map has one axis.

    Returns:
      ``(w, status)`` or ``(w, V_local, status)``: all N eigenvalues (the same
      on every device), this device's N/devices columns of V (eigenvectors
      ``d*N/devices ...``; out_specs ``P(None, "x")``), and the status as an
      int32 array of shape (1,). Works with either ``check_vma`` setting of
      shard_map; with ``check_vma=True`` (its default) w and status are typed
      as the same along the rows' axes. Differentiable in a (``jax.grad``,
      ``jax.jvp``, ``jax.vjp``, to any order; eigenvectors through functions
      that do not depend on their phases, as for ``jnp.linalg.eigh``).
    """
    rows, n, _ = _checks.check_local_shard("syevd_shardmap_ctx", a,
                                           current_manual_axes(), axis_name)
    # Eigenvectors cannot be padded here: a T_A left out then divides the shard.
    call = _manual.make_call("syevd_shardmap_ctx", rows, n, a, T_A, pad,
                             exact=bool(return_eigenvectors))
    if call.g.padded and return_eigenvectors:
        raise ValueError(
            f"jaxmg.syevd_shardmap_ctx: the shard size {call.g.r} is not a multiple of "
            f"T_A={call.g.tile}, and padded eigenvectors cannot be split evenly inside "
            "shard_map; choose a T_A that divides the shard size, or use jaxmg.syevd"
        )
    _native.load()
    if return_eigenvectors:
        w, v, status = _ctx_eig(call, a)
        return w, v, status.reshape(1)
    w, status = _ctx_eigvals(call, a)
    return w, status.reshape(1)

"""gesvd's core: the singular value decomposition A = U S Vh of an m x n A
(any m and n; k = min(m, n)), A's rows sharded over devices; s (k reals,
descending) the same on every device, U (m x k, or m x m with
``full_matrices``) and Vh (k x n, or n x n) row-sharded like A.

``geometry`` is the call's sizes (gesvd never pads), ``shard`` one shard's
FFI program, ``local`` the differentiable local core (the wanted outputs
only; its JVP computes both singular-vector matrices), ``over_mesh`` it over
a mesh. No API conventions here (see jaxmg._src.core).

The C library reads a shard column-major, which is Aᵀ; csrc/ops/gesvd.c
accounts for that transpose, so that what comes back is A's own U (this
shard's rows), s and Vh (this shard's rows), with no conjugation here.

Padding. None: zero rows or columns would change U and Vh of a
rank-deficient A, and the engines that run gesvd (LAPACK, cuSOLVERDn on
one GPU or on a copy gathered onto one) take any shape. So the row counts
of A, U and Vh must divide into the group (the API says so before tracing),
and T_A only has to be a positive integer.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _ffi_call, _geometry, _manual, _placement


def geometry(op: str, m: int, n: int, nparts: int, dtype: np.dtype, T_A: Any,
             platform: str, nodes: int = 1) -> _geometry.Geometry:
    """The call's sizes (_geometry.unpadded_geometry): ``nparts`` shards of
    m / nparts rows, never padded, and the engine the C library's check
    chooses for the M x N A, asked before anything is traced: none is a
    ValueError naming each engine's reason."""
    return _geometry.unpadded_geometry(op, "gesvd", f"a {m} x {n} {dtype.name} SVD", m, n,
                                       nparts, dtype, T_A, platform, nodes)


def shard(call: _ffi_call.Call, a: jax.Array, full: bool, want_u: bool,
          want_vh: bool) -> tuple[Any, ...]:
    """One shard's part: a is this shard's r x n rows of the m x n A.
    Returns (work, s, u, vh, status): work what the solver left in A's
    buffer, s the k singular values, u this shard's r rows of U, vh this
    shard's rows of Vh (None where not wanted), status an int32 scalar, the
    same on every shard."""
    g = call.g
    r, n = a.shape
    m = r * g.nparts
    k = min(m, n)
    per_shard, same = _ffi_call.result_types(call.axes, a)
    pos = _ffi_call.position(call.axes, call.others, g.nparts)
    real = jnp.finfo(a.dtype).dtype
    results = [jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct((k,), real)]
    varying = [per_shard, same]
    if want_u:
        results.append(jax.ShapeDtypeStruct((r, m if full else k), a.dtype))
        varying.append(per_shard)
    if want_vh:
        results.append(jax.ShapeDtypeStruct(((n if full else k) // g.nparts, n), a.dtype))
        varying.append(per_shard)
    results.append(jax.ShapeDtypeStruct((), jnp.int32))
    varying.append(same)
    out = list(_ffi_call.ffi_call("gesvd", (a, pos), results, call=call, varying=varying,
                                  m=m, want_u=int(want_u), want_vh=int(want_vh),
                                  full_matrices=int(full)))
    work, s = out[0], out[1]
    u = out[2] if want_u else None
    vh = out[2 + int(want_u)] if want_vh else None
    return work, s, u, vh, out[-1]


def _picked(s: jax.Array, u: Any, vh: Any, status: jax.Array, want_u: bool,
            want_vh: bool) -> tuple[jax.Array, ...]:
    """(s, [u,] [vh,] status): the outputs a call wants."""
    return (s,) + ((u,) if want_u else ()) + ((vh,) if want_vh else ()) + (status,)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2, 3))
def local(call: _ffi_call.Call, full: bool, want_u: bool, want_vh: bool,
          a: jax.Array) -> tuple[jax.Array, ...]:
    """Inside any shard_map: ``(s, [u,] [vh,] status)`` for this device's rows
    a of A, u and vh this device's rows of U and Vh; differentiable in a
    (see _local_jvp)."""
    _, s, u, vh, status = shard(call, a, full, want_u, want_vh)
    return _picked(s, u, vh, status, want_u, want_vh)


@local.defjvp
def _local_jvp(call: _ffi_call.Call, full: bool, want_u: bool, want_vh: bool,
               primals: tuple[jax.Array], tangents: tuple[jax.Array]):
    _, primal, tangent = _rule(call, full, want_u, want_vh, primals[0], tangents[0])
    return primal, tangent


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2, 3))
def local_work(call: _ffi_call.Call, full: bool, want_u: bool, want_vh: bool,
               a: jax.Array) -> tuple[jax.Array, ...]:
    """``local`` with what the solver left in A's buffer in front (its
    contents unspecified), for programs that hand it back (JAXMg 1.x's ctx
    forms; a donated A). The work buffer is held constant (its tangent is
    zero); the rest's rule is ``local``'s."""
    work, s, u, vh, status = shard(call, a, full, want_u, want_vh)
    return (work,) + _picked(s, u, vh, status, want_u, want_vh)


@local_work.defjvp
def _local_work_jvp(call: _ffi_call.Call, full: bool, want_u: bool, want_vh: bool,
                    primals: tuple[jax.Array], tangents: tuple[jax.Array]):
    work, primal, tangent = _rule(call, full, want_u, want_vh, primals[0], tangents[0])
    return (work,) + primal, (jnp.zeros_like(work),) + tangent


def _rule(call: _ffi_call.Call, full: bool, want_u: bool, want_vh: bool, a: jax.Array,
          da: jax.Array) -> tuple[jax.Array, tuple[jax.Array, ...], tuple[Any, ...]]:
    """(work, primal, tangent) of ``local`` (the work buffer of the call
    the rule makes). The standard rule for the reduced SVD, as jnp.linalg.svd's (the
    singular values distinct and, for the vectors, nonzero), on this
    device's rows. With V = Vhᴴ (n x k, gathered whole on every device),
    dP = Uᴴ dA V (one psum of U_dᴴ dA_d V), F_ij = 1 / (s_j² - s_i²) off the
    diagonal and 0 on it:
      ds = real(diag(dP))
      dU = U (F ∘ (dP S + S dPᴴ) + i Im(diag(dP)) / (2 S))
           + (dA V - U dP) S⁻¹            (m > n: the part outside U's span)
      dV = V (F ∘ (S dP + dPᴴ S))
           + (dAᴴ U - V dPᴴ) S⁻¹          (n > m; dAᴴ U one more psum)
    The imaginary diagonal term is the complex gauge (JAX's choice, so that
    derivatives of gauge-invariant functions agree with jnp.linalg.svd's).
    U's rows and Vh's rows of this device are returned. Full matrices of a
    non-square A have no derivative here (the completed columns are not
    unique), as in JAX."""
    r, n = a.shape
    m = r * call.g.nparts
    if (want_u or want_vh) and full and m != n:
        raise NotImplementedError(
            "jaxmg.gesvd: the derivative of the singular vectors with "
            f"full_matrices=True of a non-square ({m} x {n}) A is not defined (the "
            "completing vectors are not unique); differentiate with "
            "full_matrices=False, as for jnp.linalg.svd")
    work, s, u, vh, status = shard(call, a, False, True, True)
    d = _manual.shard_index(call)
    vh_all = jax.lax.all_gather(vh, call.axis, tiled=True) if call.g.nparts > 1 else vh
    v = jnp.conj(vh_all).T  # n x k
    # dP = Uᴴ dA V = sum over devices of U_dᴴ dA_d V: one psum of k x k,
    # the same on every device (typed so under vma typing).
    dp = _manual.psum((jnp.conj(u).T @ da) @ v, call.axes)
    ds = jnp.real(jnp.diagonal(dp)).astype(s.dtype)
    if not (want_u or want_vh):
        return work, (s, status), (ds, _compat.zero_tangent(status))
    dtype = a.dtype
    s_c = s.astype(dtype)
    # s_j² - s_i² as (s_j + s_i)(s_j - s_i), as jnp.linalg.svd's rule: exactly
    # zero on the diagonal. Written as a difference of squares, XLA may
    # contract it into a fused multiply-add that leaves the rounding error
    # of s_i² there (seen on CPU for complex128), and F's diagonal is then
    # 1 / 1e-16 instead of 0.
    sq = (s[None, :] + s[:, None]) * (s[None, :] - s[:, None])
    zero = sq == 0
    f = jnp.where(zero, 0, 1 / jnp.where(zero, 1, sq)).astype(dtype)
    s_inv = jnp.where(s == 0, 0, 1 / jnp.where(s == 0, 1, s)).astype(dtype)
    dss = dp * s_c[None, :]  # dP S
    sds = s_c[:, None] * dp  # S dP
    gauge = jnp.diag(0.5 * (jnp.diagonal(dp) - jnp.conj(jnp.diagonal(dp))) * s_inv)
    du = u @ (f * (dss + jnp.conj(dss).T) + gauge)
    dv = v @ (f * (sds + jnp.conj(sds).T))
    if m > n:
        du = du + (da @ v - u @ dp) * s_inv[None, :]
    if n > m:
        dah_u = _manual.psum(jnp.conj(da).T @ u, call.axes)  # dAᴴ U, n x k
        dv = dv + (dah_u - v @ jnp.conj(dp).T) * s_inv[None, :]
    rows = vh.shape[0]
    dvh = jax.lax.dynamic_slice_in_dim(jnp.conj(dv).T, d * rows, rows, axis=0)
    primal = _picked(s, u, vh, status, want_u, want_vh)
    tangent = _picked(ds, du, dvh, _compat.zero_tangent(status), want_u, want_vh)
    return work, primal, tangent


@functools.lru_cache(maxsize=256)
def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: _geometry.Geometry, full: bool,
              want_u: bool, want_vh: bool, work: bool = False) -> Any:
    """``local`` over the whole mesh, jitted: A row-sharded as ``rows`` says
    in, ``(s, [U,] [Vh,] status)`` out, s replicated, U and Vh sharded like
    A; with ``work``, ``local_work``'s, the solver's work buffer in front,
    sharded like A (a program that returns it lets XLA hand a donated A to
    the solver in place)."""
    call = _ffi_call.mesh_call("gesvd", mesh, rows, g)
    out_specs = _picked(P(None), rows.spec, rows.spec, P(), want_u, want_vh)
    fn = local_work if work else local
    out_specs = ((rows.spec,) if work else ()) + out_specs
    return jax.jit(_placement.mapped(functools.partial(fn, call, full, want_u, want_vh),
                                     mesh, in_specs=(rows.spec,), out_specs=out_specs))

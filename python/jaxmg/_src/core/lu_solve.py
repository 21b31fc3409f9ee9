"""lu_solve's core: solve A x = b for a general nonsingular A (LU with
partial pivoting), A's rows sharded over devices, b and x the same on every
device.

``shard`` is one shard's FFI program, ``local`` the differentiable local core
(x and the status; its rules: dx = A^-1 (db - dA x), the solve a linear map
whose transpose is one more solve, with Aᵀ), ``local_work`` the same with
A's work buffer in front (JAXMg 1.x's ctx forms hand it back), ``over_mesh``
``local`` over a mesh. No API conventions here (see jaxmg._src.core).

The transpose. The C library reads a row-sharded A column-major, which for a
general A is Aᵀ (not conj(A), as for the Hermitian ops): the engine factors
Aᵀ and solves with its transpose, A itself (csrc/ops/lu_solve.c). The FFI
attribute ``trans`` asks for Aᵀ x = b instead, which is what the reverse
derivative needs: JAX transposes linear maps without conjugating, so the
transpose of r -> A^-1 r is c -> A^-T c, one more solve with trans=1, with
no data moved and no conjugation (the conjugations of Aᴴ y = x̄ for complex
cotangents are JAX's own, around it). Assembling conj(A)ᵀ in Python instead
would move all of A between devices (a distributed transpose) for every
reverse pass.

Padding keeps A nonsingular: the padded matrix is a symmetric permutation of
diag(A, I) (identity rows and columns at the end of every shard), whose
solution holds A's exactly; a zero pivot's index is mapped back to A's
numbering (_shard.unpad_info: the identity's columns never pivot).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _manual, _shard


def shard(call: _shard.Call, a: jax.Array, b: jax.Array,
          trans: int = 0) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One shard's part: a is r x N, b is N x k (replicated). Returns A's
    work buffer (this shard's r x N rows of what the solver left in A: an
    API that hands it back, as JAXMg 1.x's ctx forms do, can; unused, XLA
    drops it), x (N x k) solving A x = b (Aᵀ x = b with trans) and the
    status (int32 scalar), the same on every shard."""
    g = call.g
    per_shard, same = _shard.result_types(call.axes, a, b)
    pos = _shard.position(call.axes, call.others, g.nparts)
    a_p = _shard.pad_shard(a, g, pos % g.nparts, 1)
    # B column-major is Bᵀ row-major; no conjugation (see above).
    b_cm = _shard.pad_rows(b, g).T
    dtype = a.dtype
    work, x_cm, info = _shard.ffi_call(
        "lu_solve",
        (a_p, b_cm, pos),
        (
            jax.ShapeDtypeStruct(a_p.shape, dtype),
            jax.ShapeDtypeStruct(b_cm.shape, dtype),
            jax.ShapeDtypeStruct((), jnp.int32),
        ),
        call=call,
        varying=(per_shard, same, same),
        trans=trans,
    )
    x = _shard.unpad_rows(x_cm.T, g)
    return _shard.unpad_shard(work, g), x, _shard.unpad_info(info, g)


def _matvec(call: _shard.Call, a: jax.Array, v: jax.Array) -> jax.Array:
    """A v (N x k), the same on every device, from this device's rows of A:
    rows R_d of A v in their place, zeros elsewhere, one psum."""
    r = a.shape[0]
    d = _manual.shard_index(call)
    placed = jax.lax.dynamic_update_slice_in_dim(jnp.zeros_like(v), a @ v, d * r, axis=0)
    return _manual.psum(placed, call.axes)


@functools.lru_cache(maxsize=256)
def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: _shard.Geometry) -> Any:
    """``local``, derivative rules included, over the whole mesh, jitted."""
    call = _shard.mesh_call("lu_solve", mesh, rows, g)
    return jax.jit(_shard.mapped(functools.partial(local, call), mesh,
                                 in_specs=(rows.spec, P(None, None)), out_specs=(P(None, None), P())))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local(call: _shard.Call, a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """x = A^-1 b and the status inside any shard_map (b: the leader's),
    differentiable in this device's rows a and in b (see _local_jvp)."""
    return shard(call, a, b)[1:]


@local.defjvp
def _local_jvp(call: _shard.Call, primals: tuple[jax.Array, jax.Array],
               tangents: tuple[jax.Array, jax.Array]):
    """dx = A^-1 (db - dA x): dA x through one psum, A^-1 by one more jaxmg
    solve (_linear_solve), whose transpose JAX takes for reverse mode."""
    (a, b), (da, db) = primals, tangents
    x, status = local(call, a, b)
    dx = _linear_solve(call, a, db - _matvec(call, da, x))
    return (x, status), (dx, _compat.zero_tangent(status))


def _linear_solve(call: _shard.Call, a: jax.Array, r: jax.Array) -> jax.Array:
    """A^-1 r (r: the leader's) as a linear map JAX can differentiate and
    transpose: jax.lax.custom_linear_solve, with matvec A v (one psum), solve
    the FFI solve and transpose_solve the FFI solve with Aᵀ (trans=1) of
    the cotangent's parts summed, to the leader (see _manual). Typed as
    potrs's (core/potrs.py's _linear_solve says why)."""
    checked = _compat.vma_checked()
    if checked:
        r = _compat.pvary(r, _compat.varying_axes(a) | set(call.axes))
    like = _compat.varying_axes(r)

    def matvec(v: jax.Array) -> jax.Array:
        return _compat.pvary(_matvec(call, a, v), like)

    def solve(_: Any, r: jax.Array) -> jax.Array:
        return _compat.pvary(shard(call, a, r)[1], like)

    def transpose_solve(_: Any, c: jax.Array) -> jax.Array:
        summed = _manual.summed_axes(call, c)
        _, x, _ = shard(call, a, _manual.psum(c, summed), trans=1)
        return _compat.pvary(_manual.leader_only(x, summed), like)

    x = jax.lax.custom_linear_solve(matvec, r, solve, transpose_solve)
    if checked:
        x = _manual.psum(_manual.leader_only(x, call.axes), call.axes)
    return x


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local_work(call: _shard.Call, a: jax.Array,
               b: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``local`` with A's work buffer in front, for APIs that hand it back
    (JAXMg 1.x's ctx forms): (work rows, x, status). The work buffer is the
    solver's scratch, whose contents no API promises: it is held constant
    (its tangent is zero); x's rule is ``local``'s."""
    return shard(call, a, b)


@local_work.defjvp
def _local_work_jvp(call: _shard.Call, primals: tuple[jax.Array, jax.Array],
                    tangents: tuple[jax.Array, jax.Array]):
    (a, b), (da, db) = primals, tangents
    work, x, status = local_work(call, a, b)
    dx = _linear_solve(call, a, db - _matvec(call, da, x))
    return (work, x, status), (jnp.zeros_like(work), dx, _compat.zero_tangent(status))

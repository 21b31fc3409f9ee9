"""lu_solve's core: solve A x = b for a general nonsingular A (LU with
partial pivoting), A's rows sharded over devices, b and x the same on every
device.

``shard`` is one shard's FFI program, ``local`` the differentiable local core
(x and the status; its rules: dx = A^-1 (db - dA x), the solve a linear map
whose transpose is one more solve, with Aᵀ), ``local_work`` the same with
A's work buffer in front (JAXMg 1.x's ctx forms hand it back), ``over_mesh``
``local`` over a mesh: these three are the linear solves' (core/_solve.py),
made from ``shard``, A v (one psum) and the solve with Aᵀ. No API
conventions here (see jaxmg._src.core).

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
numbering (_geometry.unpad_info: the identity's columns never pivot).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmg._src import _ffi_call, _geometry, _manual
from jaxmg._src.core import _solve


def shard(call: _ffi_call.Call, a: jax.Array, b: jax.Array,
          trans: int = 0) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One shard's part: a is r x N, b is N x k (replicated). Returns A's
    work buffer (this shard's r x N rows of what the solver left in A: an
    API that hands it back, as JAXMg 1.x's ctx forms do, can; unused, XLA
    drops it), x (N x k) solving A x = b (Aᵀ x = b with trans) and the
    status (int32 scalar), the same on every shard."""
    g = call.g
    per_shard, same = _ffi_call.result_types(call.axes, a, b)
    pos = _ffi_call.position(call.axes, call.others, g.nparts)
    a_p = _geometry.pad_shard(a, g, pos % g.nparts, 1)
    # B column-major is Bᵀ row-major; no conjugation (see above).
    b_cm = _geometry.pad_rows(b, g).T
    dtype = a.dtype
    work, x_cm, info = _ffi_call.ffi_call(
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
        **_solve.precision_attrs(call),
    )
    x = _geometry.unpad_rows(x_cm.T, g)
    return _geometry.unpad_shard(work, g), x, _geometry.unpad_info(info, g)


def _matvec(call: _ffi_call.Call, a: jax.Array, v: jax.Array) -> jax.Array:
    """A v (N x k), the same on every device, from this device's rows of A:
    rows R_d of A v in their place, zeros elsewhere, one psum."""
    r = a.shape[0]
    d = _manual.shard_index(call)
    placed = jax.lax.dynamic_update_slice_in_dim(jnp.zeros_like(v), a @ v, d * r, axis=0)
    return _manual.psum(placed, call.axes)


def _solve_transposed(call: _ffi_call.Call, a: jax.Array, c: jax.Array) -> jax.Array:
    """A^-T c (c: the leader's): the FFI solve with Aᵀ (trans=1), no data
    moved and no conjugation (see above)."""
    _, x, _ = shard(call, a, c, trans=1)
    return x


# local, local_work, over_mesh: the module's docstring says what they are.
_cores = _solve.solve_cores("lu_solve", shard, _matvec, _solve_transposed)
local = _cores.local
local_work = _cores.local_work
over_mesh = _cores.over_mesh

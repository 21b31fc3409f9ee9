"""potrs's core: solve A x = b for Hermitian positive definite A, A's rows
sharded over devices, b and x the same on every device.

``shard`` is one shard's FFI program, ``local`` the differentiable local core
(x and the status; its rules: dx = A^-1 (db - dA x), dA the Hermitian matrix
of da's upper triangle, the solve a linear map whose transpose is one more
solve), ``local_work`` the same with A's work buffer in front (JAXMg 1.x's
ctx forms hand it back), ``over_mesh`` ``local`` over a mesh: these three
are the linear solves' (core/_solve.py), made from ``shard``, A v (one psum)
and the transposed solve.
``local_logdet`` adds log det A, read by the engines from the factor (its
rule: d logdet = tr(A^-1 dA), with jaxmg's distributed inverse, potri). No
API conventions here (see jaxmg._src.core).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxmg._src import _compat, _ffi_call, _geometry, _manual
from jaxmg._src.core import _solve
from jaxmg._src.core import potri as potri_core
from jaxmg._src.core._solve import precision_attrs


def shard(call: _ffi_call.Call, a: jax.Array, b: jax.Array,
          want_logdet: bool = False) -> tuple[jax.Array, ...]:
    """One shard's part: a is r x N, b is N x k (replicated). Returns A's
    work buffer (this shard's r x N rows of what the solver left in A: an
    API that hands it back, as JAXMg 1.x's ctx forms do, can; unused, XLA
    drops it), x (N x k) and the status (int32 scalar), the same on every
    shard; with ``want_logdet``, log det A (a scalar of A's real type, NaN
    when A is not positive definite) before the status. Padding adds
    identity rows, which leave the determinant as it is."""
    g = call.g
    per_shard, same = _ffi_call.result_types(call.axes, a, b)
    pos = _ffi_call.position(call.axes, call.others, g.nparts)
    a_p = _geometry.pad_shard(a, g, pos % g.nparts, 1)
    # The solver sees conj(A) (see _geometry): solve conj(A) y = conj(b), x = conj(y).
    # It wants B column-major, which is B^T row-major.
    b_cm = jnp.conj(_geometry.pad_rows(b, g)).T
    dtype = a.dtype
    logdet = (jax.ShapeDtypeStruct((), jnp.finfo(dtype).dtype),) if want_logdet else ()
    # want_logdet is passed only when wanted: a call without it is the one
    # the library has always taken.
    attrs = {"want_logdet": 1} if want_logdet else {}
    attrs.update(precision_attrs(call))
    work, y_cm, *rest = _ffi_call.ffi_call(
        "potrs",
        (a_p, b_cm, pos),
        (
            jax.ShapeDtypeStruct(a_p.shape, dtype),
            jax.ShapeDtypeStruct(b_cm.shape, dtype),
            *logdet,
            jax.ShapeDtypeStruct((), jnp.int32),
        ),
        call=call,
        varying=(per_shard, same) + (same,) * len(logdet) + (same,),
        **attrs,
    )
    x = _geometry.unpad_rows(jnp.conj(y_cm).T, g)
    return (_geometry.unpad_shard(work, g), x, *rest[:-1], _geometry.unpad_info(rest[-1], g))


def _solve_transposed(call: _ffi_call.Call, a: jax.Array, c: jax.Array) -> jax.Array:
    """A^-T c (c: the leader's) by the FFI solve: A^-T = conj(A^-1 conj(.))
    for Hermitian A."""
    _, x, _ = shard(call, a, jnp.conj(c))
    return jnp.conj(x)


# local, local_work, over_mesh: the module's docstring says what they are.
_cores = _solve.solve_cores("potrs", shard, _manual.hermitian_matvec, _solve_transposed)
local = _cores.local
local_work = _cores.local_work
over_mesh = _cores.over_mesh


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local_logdet(call: _ffi_call.Call, a: jax.Array,
                 b: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``local_work`` with log det A: (work rows, x, logdet, status), logdet
    the same on every device. x's rule is ``local``'s, the work buffer's
    ``local_work``'s; logdet's is _logdet_tangent's."""
    return shard(call, a, b, want_logdet=True)


@local_logdet.defjvp
def _local_logdet_jvp(call: _ffi_call.Call, primals: tuple[jax.Array, jax.Array],
                      tangents: tuple[jax.Array, jax.Array]):
    (a, b), (da, db) = primals, tangents
    work, x, logdet, status = local_logdet(call, a, b)
    dx = _cores.tangent(call, a, x, da, db)
    dlogdet = _logdet_tangent(call, a, da).astype(logdet.dtype)
    return ((work, x, logdet, status),
            (jnp.zeros_like(work), dx, dlogdet, _compat.zero_tangent(status)))


def _logdet_tangent(call: _ffi_call.Call, a: jax.Array, da: jax.Array) -> jax.Array:
    """d logdet = tr(A^-1 dA), dA the Hermitian matrix of da's upper
    triangle: with A^-1 Hermitian, tr(A^-1 dA) = sum(conj(A^-1) * dA), each
    device's rows of A^-1 (jaxmg's potri, differentiable, so that the rule
    has derivatives of its own) against its rows of dA, summed over the
    devices by one psum: no device holds more than its rows. Linear in da,
    so JAX transposes it for reverse mode. Real, as the trace of a product of
    Hermitian matrices is."""
    inv, _ = potri_core.local(call, a)
    da_rows = _manual.hermitian_rows(call, da)
    return _manual.psum(jnp.real(jnp.sum(jnp.conj(inv) * da_rows)), call.axes)

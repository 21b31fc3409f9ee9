"""What the linear solves' cores (potrs, lu_solve) share: solve A x = b, A's
rows sharded over devices, b and x the same on every device, and the same
derivative rule, dx = A^-1 (db - dA x), the solve a linear map whose
transpose is one more solve (_manual.linear_solve).

An op gives its parts (``shard``, its FFI program; ``matvec``, A v from
this device's rows; ``solve_transposed``, A^-T c through its FFI program)
and ``solve_cores`` makes its ``local``, ``local_work`` and ``over_mesh``
from them (see jaxmg._src.core). No API conventions here.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _ffi_call, _geometry, _manual, _native, _placement

def precision_attrs(call: _ffi_call.Call) -> dict[str, int]:
    """The FFI attribute ``precision`` of a solve (csrc/common/op.h,
    jmg_precision) from the call's geometry, which carries the caller's
    ``precision=``: absent for the exact path, so that such a call is the
    one the library has always taken. Every solve of one call, those of its
    derivative rules included, runs in the same precision (the rules' solves
    go through the same ``call``)."""
    if call.g.precision == "exact":
        return {}
    return {"precision": _native.PRECISIONS[call.g.precision]}


# (call, a, b) -> (work rows, x, status): the op's one-shard FFI program.
Shard = Callable[[_ffi_call.Call, jax.Array, jax.Array], tuple[jax.Array, ...]]
# (call, a, v) -> A v (N x k), the same on every device, from this device's rows a.
Matvec = Callable[[_ffi_call.Call, jax.Array, jax.Array], jax.Array]
# (call, a, c) -> A^-T c (N x k), the same on every device, c the leader's.
SolveTransposed = Callable[[_ffi_call.Call, jax.Array, jax.Array], jax.Array]


class SolveCores(NamedTuple):
    """One linear solve's cores (see ``solve_cores``)."""

    local: Any
    local_work: Any
    over_mesh: Callable[[Mesh, _checks.RowSharding, _geometry.Geometry], Any]
    tangent: Callable[..., jax.Array]


def solve_cores(op: str, shard: Shard, matvec: Matvec,
                solve_transposed: SolveTransposed) -> SolveCores:
    """The cores of the solve ``op`` from its parts:

    - ``local(call, a, b)``: x = A^-1 b and the status inside any shard_map
      (b: the leader's), differentiable in this device's rows a and in b;
    - ``local_work(call, a, b)``: ``local`` with A's work buffer in front;
    - ``over_mesh(mesh, rows, g, work=False)``: ``local`` (``local_work``
      with ``work``) over the whole mesh, jitted;
    - ``tangent(call, a, x, da, db)``: dx = A^-1 (db - dA x), the rule of x
      in both (and in any other core of the op that returns x)."""

    def linear_solve(call: _ffi_call.Call, a: jax.Array, r: jax.Array) -> jax.Array:
        return _manual.linear_solve(
            call, a, r,
            matvec=lambda v: matvec(call, a, v),
            solve=lambda r: shard(call, a, r)[1],
            solve_transposed=lambda c: solve_transposed(call, a, c))

    def tangent(call: _ffi_call.Call, a: jax.Array, x: jax.Array, da: jax.Array,
                db: jax.Array) -> jax.Array:
        """dx = A^-1 (db - dA x): dA x through ``matvec``, A^-1 by one more
        jaxmg solve (_manual.linear_solve), whose transpose JAX takes for
        reverse mode."""
        return linear_solve(call, a, db - matvec(call, da, x))

    @functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
    def local(call: _ffi_call.Call, a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
        """x = A^-1 b and the status inside any shard_map (b: the leader's),
        differentiable in this device's rows a and in b (see ``tangent``)."""
        return shard(call, a, b)[1:]

    @local.defjvp
    def _local_jvp(call: _ffi_call.Call, primals: tuple[jax.Array, jax.Array],
                   tangents: tuple[jax.Array, jax.Array]):
        (a, b), (da, db) = primals, tangents
        x, status = local(call, a, b)
        dx = tangent(call, a, x, da, db)
        return (x, status), (dx, _compat.zero_tangent(status))

    @functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
    def local_work(call: _ffi_call.Call, a: jax.Array,
                   b: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``local`` with A's work buffer in front, for APIs that hand it back
        (JAXMg 1.x's ctx forms): (work rows, x, status). The work buffer is the
        solver's scratch, whose contents no API promises: it is held constant
        (its tangent is zero); x's rule is ``local``'s."""
        return shard(call, a, b)

    @local_work.defjvp
    def _local_work_jvp(call: _ffi_call.Call, primals: tuple[jax.Array, jax.Array],
                        tangents: tuple[jax.Array, jax.Array]):
        (a, b), (da, db) = primals, tangents
        work, x, status = local_work(call, a, b)
        dx = tangent(call, a, x, da, db)
        return (work, x, status), (jnp.zeros_like(work), dx, _compat.zero_tangent(status))

    @functools.lru_cache(maxsize=256)
    def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: _geometry.Geometry,
                  work: bool = False) -> Any:
        """``local``, derivative rules included, over the whole mesh, jitted:
        (x, status); with ``work``, ``local_work``'s (work, x, status), the
        work buffer sharded like A. A program that returns the work buffer
        lets XLA hand a donated A to the solver in place (DESIGN.md,
        Buffers): one that returns only x must keep the donated A, and copy it."""
        call = _ffi_call.mesh_call(op, mesh, rows, g)
        fn = local_work if work else local
        front = (rows.spec,) if work else ()
        return jax.jit(_placement.mapped(functools.partial(fn, call), mesh,
                                         in_specs=(rows.spec, P(None, None)),
                                         out_specs=front + (P(None, None), P())))

    return SolveCores(local, local_work, over_mesh, tangent)

"""JAXMg 1.x's ``least_squares`` and ``least_squares_shardmap_ctx`` (the
seeds have none), over qr's op (jaxmg._src.core.least_squares). See
jaxmg._src.api.v1 for how a ctx call is read."""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _placement
from jaxmg._src.api import _donate
from jaxmg._src.api.v1 import qr_forms
from jaxmg._src.api.v1._calls import (
    _UNSET,
    _at_global_level,
    _check_tall,
    _check_flag,
    _global_layout,
    _local_call,
    _local_shard,
    _resolved,
    _specs,
)
from jaxmg._src._compat import current_manual_axes
from jaxmg._src.core import least_squares as ls_core
from jaxmg._src.core import qr as qr_core


def _check_b(op: str, b: Any, m: int, dtype: np.dtype) -> None:
    """b must be (M,) or (M, K), of a's dtype."""
    shape = getattr(b, "shape", None)
    if shape is None or getattr(b, "dtype", None) is None:
        raise TypeError(f"jaxmg.{op}: b must be an array, got {type(b).__name__}")
    if len(shape) not in (1, 2) or shape[0] != m or (len(shape) == 2 and shape[1] < 1):
        raise ValueError(f"jaxmg.{op}: b must be (M,) or (M, K) with M={m}, a's rows; got "
                         f"shape {tuple(shape)}")
    if np.dtype(b.dtype) != dtype:
        raise TypeError(f"jaxmg.{op}: b has dtype {np.dtype(b.dtype)} but a has dtype "
                        f"{dtype}; they must match")


def _columns(b: jax.Array) -> jax.Array:
    return b if b.ndim == 2 else b[:, None]


def _like_b(x: jax.Array, b: jax.Array) -> jax.Array:
    """x (N x K) in b's rank: (N,) for a 1-D b."""
    return x if b.ndim == 2 else x[:, 0]


def _ls_global(a: Any, b: Any, *, op: str, T_A: Any, mesh: Any, specs: Any,
               layout: Callable[[str, Any, Any, Any], tuple[Any, Any]]) -> tuple[Any, ...]:
    """least_squares over a whole mesh: (q, b_work, x, status), q the work
    buffer (Q, sharded like A), b_work, x in b's rank, replicated."""
    m, dtype = _checks.check_matrix(op, a, square=False)
    _check_b(op, b, m, dtype)
    a, mesh, rows, g = qr_forms.prepare(op, a, T_A, mesh, specs, layout, n_specs=2,
                                        r_sharded=False)
    b = _placement.onto(b, mesh, P())
    q, b_work, x, status = ls_core.over_mesh(mesh, rows, g, work=True)(a, _columns(b))
    out = (q, _like_b(b_work, b), _like_b(x, b), status)
    return _placement.hand_back(out, mesh)


def _ls_plain(a: Any, b: Any, *, T_A: Any, mesh: Any, specs: Any, want_status: bool,
              work: bool = False) -> Any:
    q, _, x, status = _ls_global(a, b, op="least_squares", T_A=T_A, mesh=mesh,
                                 specs=specs, layout=_checks.resolve_layout)
    result = (x, status) if want_status else x
    return (q, result) if work else result


def least_squares(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    *,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    """The least-squares solution ``x = argmin ||a @ x - b||`` of a
    full-rank tall or square ``a`` on all devices (JAXMg 1.x's form), as
    ``jnp.linalg.lstsq(a, b)[0]`` for such an ``a``: by the QR decomposition
    of ``a`` (``jaxmg.qr``'s engines), ``Qᴴ b`` summed over the devices and
    the N x N triangular solve with R on every device.

    Args:
      a: the M x N matrix, M >= N (a wide one is a ValueError), rows sharded
        (``P(axis, None)``, or ``P(r, c)``, resharded to rows over both); M
        divisible by the devices the rows are sharded over, N anything.
      b: (M,) or (M, K), a's dtype; replicated (placed so when it is not).
      T_A: accepted for 1.x's signature (qr's engines take no tiles).
      mesh, matrix_specs (or in_specs): as in ``jaxmg.qr``; a second spec,
        b's, must replicate it.
      return_status: also return the status.
      pad: accepted for 1.x's signature; nothing is padded.
      donate: donate ``a`` and ``b`` when called eagerly (both are deleted;
        Q takes A's buffer); by default they are kept (1.x's default was
        True). Under ``jax.jit``, donate through its ``donate_argnums``.

    Returns:
      ``x`` (N,) or (N, K) as b, replicated; with ``return_status`` ``(x,
      status)``, status an int32 scalar: 0; k > 0 when A is rank deficient,
      k the first (1-based) column with ``|R_kk| <= max(M, N) * eps *
      max_j |R_jj|`` (eps the dtype's epsilon: NumPy lstsq's default rcond,
      read on R's diagonal), x then NaN; -1 when ``a`` has a NaN or an Inf
      entry, x NaN. Never a minimum-norm answer to a rank-deficient
      problem (use an SVD, ``jaxmg.gesvd``, for that). Differentiable in
      ``a`` and ``b`` (jit, grad, vmap) through the normal equations with R.

    Memory: A and Q share A's buffer where A is donated (else XLA copies
    A); each device holds R (N x N) whole for the solve, and the engine's
    own (LAPACK on CPU devices, cuSOLVERDn: a transposed copy of A on the
    GPU that runs it: docs/guides/memory.md).
    """
    op = "least_squares"
    specs = _specs(op, in_specs, matrix_specs)
    want_status = _check_flag(op, "return_status", return_status)
    _check_flag(op, "pad", pad)
    donate = _check_flag(op, "donate", donate)
    m, dtype = _checks.check_matrix(op, a, square=False)
    _check_tall(op, m, int(a.shape[1]))
    _check_b(op, b, m, dtype)
    mesh, specs = _resolved(op, a, mesh, specs)

    def bound(work: bool) -> Any:
        return _donate.Hashable(functools.partial(
            _ls_plain, T_A=T_A, mesh=mesh, specs=specs, want_status=want_status, work=work))

    return _donate.run(bound(False), (a, b), donate, bound(True))


def least_squares_shardmap_ctx(
    a: jax.Array,
    b: jax.Array,
    T_A: int | None = None,
    *positional: Any,
    mesh: Mesh | None = None,
    matrix_specs: Any = None,
    in_specs: Any = None,
    pad: bool = _UNSET,
    axis_name: str | tuple[str, ...] | None = _UNSET,
) -> tuple[jax.Array, ...]:
    """``least_squares`` for a caller's own program (see jaxmg._src.api.v1
    for the rule that tells its two forms apart).

    At the global level, eagerly or under jax.jit (JAXMg 1.x's form),
    ``least_squares_shardmap_ctx(a, b, T_A=None, mesh=None,
    matrix_specs=None, *, in_specs=None, pad=True)``: ``a`` the whole M x N
    matrix (M >= N), read as in ``potrs_shardmap_ctx``, b (M,) or (M, K).
    Returns ``(a_work, b_work, x, status)``: a_work A's buffer after the
    solve (it holds Q, sharded like A; A's own buffer when A is donated,
    else a copy: ``a`` itself is never modified), b_work in b's shape,
    replicated, whose first N rows hold x (the rows past N hold zeros here;
    LAPACK's gels leaves residual components there: read none of them), x
    and status as in ``least_squares``.

    Inside a ``jax.shard_map`` body, ``least_squares_shardmap_ctx(a, b,
    T_A=None, pad=True, axis_name=None)``: ``a`` this device's (M/devices,
    N) rows of A, b the whole (M,) or (M, K), the same on every device;
    returns ``(x, status)``, status of shape (1,), as the seeds' solves.
    """
    op = "least_squares_shardmap_ctx"
    if current_manual_axes():
        rows, m, n, dtype, pad, platform, nodes = _local_shard(
            op, a, positional, pad=pad, axis_name=axis_name, mesh=mesh,
            matrix_specs=matrix_specs, in_specs=in_specs,
            check_rows=lambda m, n, nparts: qr_forms.check_rows(op, m, n, nparts,
                                                                r_sharded=False))
        _check_b(op, b, m, dtype)
        g = qr_core.geometry(op, m, n, rows.nparts, dtype, T_A, platform, nodes)
        x, status = ls_core.local(_local_call(op, rows, a, T_A, pad, g), a, _columns(b))
        return _like_b(x, b), status.reshape(1)
    pad, mesh, specs = _at_global_level(op, positional, pad=pad, axis_name=axis_name,
                                        mesh=mesh, matrix_specs=matrix_specs,
                                        in_specs=in_specs)
    return _ls_global(a, b, op=op, T_A=T_A, mesh=mesh, specs=specs, layout=_global_layout)
